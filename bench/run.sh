#!/bin/sh
# make bench: every benchmark, one after the other, printing figures.
# Each bench/bench_*.sh takes TB_BIN_DIR (release binaries) and prints its
# own table; medians and ratios are measured side by side in one run.
set -u
cd "$(dirname "$0")/.."
export TB_BIN_DIR=${TB_BIN_DIR:-build-rel/bin}
status=0
for b in bench/bench_sim.sh bench/bench_engine.sh bench/bench_firehose.sh bench/bench_oai.sh bench/bench_api.sh bench/bench_queue.sh bench/bench_probe.sh bench/bench_verdicts.sh bench/bench_limits.sh bench/bench_rate.sh; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b" .sh)"
  "$b" || { echo "$(basename "$b"): failed"; status=1; }
  echo
done
exit $status
