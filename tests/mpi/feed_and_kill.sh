#!/bin/sh
# Command mutator for the MPI test: answers each request with a new variant of the colsum seed, and on
# its third call kills evaluation rank 2 (found by the rank number MPI put in its environment) with
# SIGKILL, as a node failure would. Usage: feed_and_kill.sh STATE_FILE SEED_FILE
state=$1
seed=$2
cat >/dev/null
n=$(cat "$state" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$state"
if [ "$n" -eq 3 ]; then
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    [ "$comm" = kernelevolve ] || continue
    if tr '\0' '\n' <"$env" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2'; then
      kill -9 "$pid" && echo "killed rank 2 (pid $pid)" >"$state.killed"
    fi
  done
fi
printf '```c\n'
cat "$seed"
printf 'enum { variant_%s = 1 };  /* new code: a comment alone would be the same kernel */\n```\n' "$n"
