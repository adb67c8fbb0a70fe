#!/bin/sh
# MPI on loopback: rank 0 searches, ranks 1 and 2 evaluate CPU candidates in their own workers.
# First a plain run; then a run in which rank 2 is killed mid-search and the run goes on without it.
# Usage: test_mpi.sh KERNELEVOLVE FIXTURES WORK_DIR
set -eu
cli=$1
fixtures=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
mpirun="mpirun --allow-run-as-root --oversubscribe --enable-recovery -np 3"
fail() { echo "test_mpi: $*" >&2; exit 1; }

echo "== three ranks, no failures"
# colsum_passes: every BLOCK above 1 does at most half the seed's passes, so any best beats it by 2x by
# construction, on however slow or busy a machine (the plain e2e colsum's margin was the machine's).
$mpirun "$cli" run "$fixtures/cli/colsum_passes.json" --mpi --max-evals 8 --db "$work/plain.db" --json >"$work/plain.json" 2>"$work/plain.err" ||
  { cat "$work/plain.err" >&2; fail "the plain MPI run failed"; }
cat "$work/plain.json"
evaluations=$(jq .evaluations "$work/plain.json")
[ "$evaluations" -eq 8 ] || fail "expected 8 evaluations, got $evaluations"
speedup=$(jq .best.speedup "$work/plain.json")
jq -e '.best.speedup > 1.5' "$work/plain.json" >/dev/null || fail "expected a speedup over 1.5, got $speedup"
grep -q "2 evaluation ranks" "$work/plain.err" || { cat "$work/plain.err" >&2; fail "rank 0 did not report its 2 evaluation ranks"; }

echo "== rank 2 killed mid-run"
$mpirun "$cli" run "$fixtures/e2e/colsum.json" --mpi --mpi-rank-timeout 3 --max-evals 10 --db "$work/kill.db" \
  --mutator command --command "$fixtures/../mpi/feed_and_kill.sh $work/feed.state $fixtures/e2e/colsum_seed.c" \
  --json >"$work/kill.json" 2>"$work/kill.err" || { cat "$work/kill.err" >&2; fail "the run with a killed rank did not finish cleanly"; }
cat "$work/kill.json"
[ -s "$work/feed.state.killed" ] || { cat "$work/kill.err" >&2; fail "the feeder did not kill rank 2"; }
grep -q "lost rank 2" "$work/kill.err" || { cat "$work/kill.err" >&2; fail "rank 0 did not report losing rank 2"; }
evaluations=$(jq .evaluations "$work/kill.json")
[ "$evaluations" -eq 10 ] || fail "expected 10 evaluations after losing a rank, got $evaluations"
jq -e '.status_counts.ok == 10' "$work/kill.json" >/dev/null || fail "every candidate should be ok (the lost one re-queued)"
echo "test_mpi: passed"
