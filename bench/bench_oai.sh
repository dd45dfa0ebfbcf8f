#!/bin/sh
# bench_oai: the chunk scanner's CPU per chunk (bench/bench_oai.c through
# tb_oai_scan_chunk, the engine's hot path for every SSE event), pinned to
# one CPU.  Prints each run's ns per chunk, the median and the range.
# With BENCH_OAI_BASE_LIB=<another build's libtokbench.a> (e.g. an older
# commit's, built in a worktree of its own), both are run alternately, the
# order flipping each pair, and the line ends with the medians' ratio
# (this build / base).
# Env: TB_BIN_DIR (release binaries; the library beside them),
# BENCH_OAI_RUNS (default 11), BENCH_OAI_ITERS (chunks a run, default 2000000).
#
# Figures kept (2026-12-02, this 2-CPU VM, load average 0.8-1.0): the
# scanner of 40571c4 (one object walker, sc_object, calling a member
# function through a pointer) against its parent e1f54bb (a loop per
# object), the parent's library built in a worktree of its own:
#   git worktree add /tmp/old 40571c4^ && make -C /tmp/old MODE=release build-rel/libtokbench.a
#   BENCH_OAI_BASE_LIB=/tmp/old/build-rel/libtokbench.a BENCH_OAI_RUNS=11 sh bench/bench_oai.sh
#   this 503.69 ns/chunk median (442.93-571.34), base 527.99 (489.10-624.39),
#   ratio 0.954: no slowdown (ranges overlap); again with 21 runs at load
#   average 1.6-2.1: this 518.24 (466.10-577.48), base 567.41
#   (488.14-613.34), ratio 0.913.  gcc -O2 keeps the indirect calls
#   (objdump), and they predict well.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_out
RUNS=${BENCH_OAI_RUNS:-11}
ITERS=${BENCH_OAI_ITERS:-2000000}
. bench/pkgs.sh   # LIBS and CFL: the Makefile's packages
gcc -std=c11 -O2 -D_GNU_SOURCE -Ilib -o "$OUT/bench_oai" bench/bench_oai.c \
  "$BUILD/libtokbench.a" $LIBS -lm
BASE=${BENCH_OAI_BASE_LIB:-}
[ -z "$BASE" ] || gcc -std=c11 -O2 -D_GNU_SOURCE -Ilib -o "$OUT/bench_oai_base" \
  bench/bench_oai.c "$BASE" $LIBS -lm
PIN=""
command -v taskset >/dev/null 2>&1 && PIN="taskset -c 0"
HEAD=""; OLD=""
for i in $(seq "$RUNS"); do
  order="head base"; [ $((i % 2)) = 0 ] && order="base head"
  for w in $order; do
    if [ "$w" = head ]; then
      HEAD="$HEAD $($PIN "$OUT/bench_oai" "$ITERS")"
    elif [ -n "$BASE" ]; then
      OLD="$OLD $($PIN "$OUT/bench_oai_base" "$ITERS")"
    fi
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/ab.py "chunk scanner, CPU ns per chunk (tb_oai_scan_chunk):" %.2f this "$HEAD" \
  ${BASE:+base "$OLD"}
