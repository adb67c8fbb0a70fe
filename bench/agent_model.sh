#!/usr/bin/env bash
# One KernelEvolve run in which an agent (or a person) plays the model, then a summary of what its
# kernels did. For comparing an agent's kernels with a real model's, or a build before a prompt change
# with one after (run the same problem with each CLI).
#
#   bench/agent_model.sh CLI PROBLEM OUTDIR [extra `kernelevolve run` args, e.g. --max-evals 40 --jobs 1]
#
# It starts bench/agent_model.py's server on a free port (prompts and answers in OUTDIR/model), runs
#   CLI run PROBLEM --mutator mix --llm-url http://127.0.0.1:PORT/v1 --llm-model agent --llm-api-key-env "" \
#       --llm-timeout 3600 --db OUTDIR/run.db --json [extra args]
# (stdout OUTDIR/run.json, stderr OUTDIR/run.log), then touches OUTDIR/model/done, stops the server and
# prints (and writes to OUTDIR/summary.tsv) each model-written node with its model-call index, status and
# speedup, the best speedup, and the iterations to 90% of best: the model calls until the first node (the
# model's or a parameter step after it) at 0.9x the run's best speedup or more.
#
# The agent, in another shell, plays the model one call at a time until the run is over:
#   while P=$(python3 bench/agent_model.py next --dir OUTDIR/model); do
#       # read $P (system and user messages), write the reply a model would give: a whole kernel in a
#       # fenced block, or SEARCH/REPLACE edits on the parent; then
#       python3 bench/agent_model.py answer --dir OUTDIR/model --file reply.md
#   done    # `next` prints "done" and exits 3 once this script has finished the run
set -u

if [ $# -lt 3 ]; then
  echo "usage: $0 CLI PROBLEM OUTDIR [extra kernelevolve run args...]" >&2
  exit 2
fi
CLI=$1
PROBLEM=$2
OUT=$3
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}

if [ -e "$OUT/run.db" ]; then
  echo "$0: $OUT/run.db exists already; give a fresh OUTDIR" >&2
  exit 2
fi
mkdir -p "$OUT/model"
rm -f "$OUT/model/done" "$OUT/model/port"

# The server gives up (HTTP 408, a failed call) a little before the client's --llm-timeout would, so that an
# unanswered prompt is not asked again as a new one.
"$PY" "$HERE/agent_model.py" serve --dir "$OUT/model" --port 0 --wait 3590 2>"$OUT/model/server.log" &
SERVER=$!
stop_server() {
  touch "$OUT/model/done"
  if kill -0 "$SERVER" 2>/dev/null; then
    kill "$SERVER" 2>/dev/null
    wait "$SERVER" 2>/dev/null
  fi
}
trap 'stop_server; exit 130' INT TERM

for _ in $(seq 100); do
  [ -s "$OUT/model/port" ] && break
  kill -0 "$SERVER" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$OUT/model/port" ]; then
  echo "$0: the model server did not start; see $OUT/model/server.log" >&2
  cat "$OUT/model/server.log" >&2
  stop_server
  exit 1
fi
PORT=$(cat "$OUT/model/port")
echo "model server on http://127.0.0.1:$PORT/v1; prompts appear in $OUT/model (answer with: $PY $HERE/agent_model.py answer --dir $OUT/model --file F)" >&2

"$CLI" run "$PROBLEM" --mutator mix --llm-url "http://127.0.0.1:$PORT/v1" --llm-model agent \
  --llm-api-key-env "" --llm-timeout 3600 --db "$OUT/run.db" --json "$@" >"$OUT/run.json" 2>"$OUT/run.log"
RC=$?
stop_server
trap - INT TERM
if [ $RC -ne 0 ]; then
  echo "$0: the run exited $RC; see $OUT/run.log:" >&2
  tail -n 20 "$OUT/run.log" >&2
fi
if [ ! -s "$OUT/run.db" ]; then
  exit "$RC"
fi

if ! "$CLI" export "$OUT/run.db" --format json -o "$OUT/export.json" 2>>"$OUT/run.log"; then
  echo "$0: export failed; see $OUT/run.log" >&2
  exit 1
fi
"$PY" "$HERE/agent_model.py" summary --export "$OUT/export.json" --run-json "$OUT/run.json" \
  --calls "$OUT/model/calls.tsv" --out "$OUT/summary.tsv"
exit "$RC"
