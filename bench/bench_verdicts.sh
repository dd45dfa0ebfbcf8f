#!/bin/sh
# The verdict's false-alarm rate and power over simulated histories
# (bench/bench_verdicts.c, issue 14).  Built against the release library
# beside TB_BIN_DIR; prints verdict_false_alarm_rate and
# verdict_power_5pct_3runs (floors: <= 0.01 and >= 0.95).
set -eu
cd "$(dirname "$0")/.."
BIN=${TB_BIN_DIR:-build-rel/bin}
BUILD=$(dirname "$BIN")
[ "$BUILD" = "." ] && BUILD=build
OUT=$BUILD/bench
mkdir -p "$OUT"
. bench/pkgs.sh   # LIBS and CFL: the Makefile's packages
${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -Ilib -o "$OUT/bench_verdicts" \
  bench/bench_verdicts.c "$BUILD/libtokbench.a" $LIBS -lm -lpthread
"$OUT/bench_verdicts"
