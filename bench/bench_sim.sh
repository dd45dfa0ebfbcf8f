#!/bin/sh
# Load benchmark of tokbench-sim with an independent client (bench/sim_load.c).
# Uses $TB_BIN_DIR/tokbench-sim (default build-rel/bin), pins the simulator to
# CPU 0 and the client to CPU 1 when taskset exists, and prints, per scenario,
# streams, tokens/s, gap error p50/p99 (stamps and arrivals vs the modelled
# step), delivery delay and CPU seconds per million tokens.
# Knobs: SIM_BENCH_SECONDS (default 10), SIM_BENCH_SCENARIOS ("128:20 512:20 2048:40").
set -eu
cd "$(dirname "$0")/.."
bindir=${TB_BIN_DIR:-build-rel/bin}
sim="$bindir/tokbench-sim"
[ -x "$sim" ] || { echo "bench_sim: $sim missing (make MODE=release)" >&2; exit 1; }
secs=${SIM_BENCH_SECONDS:-10}
scenarios=${SIM_BENCH_SCENARIOS:-"128:20 512:20 2048:40"}
tmp=$(mktemp -d)
simpid=""
trap '[ -n "$simpid" ] && kill "$simpid" 2>/dev/null; rm -rf "$tmp"' EXIT
${CC:-cc} -O2 -Wall -Wextra -Werror -std=c11 -o "$tmp/sim_load" bench/sim_load.c
pin0="" pin1=""
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
  pin0="taskset -c 0"; pin1="taskset -c 1"
fi
status=0
for sc in $scenarios; do
  n=${sc%%:*}; step=${sc#*:}
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # bench profile: flat 20 ms steps; the time scale sets the wanted step.
  scale=$(awk "BEGIN{print 20/$step}")
  $pin0 "$sim" --profile bench --port "$port" --time-scale "$scale" --max-conns 20000 --realtime \
    >"$tmp/sim.log" 2>&1 &
  simpid=$!
  i=0
  until grep -q listening "$tmp/sim.log" 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 100 ] && { cat "$tmp/sim.log" >&2; exit 1; }; sleep 0.05
  done
  echo "## tokbench-sim: $n streams, step $step ms, ${secs}s window"
  if ! $pin1 "$tmp/sim_load" --port "$port" --streams "$n" --step-ms "$step" \
      --seconds "$secs" --max-tokens 1000 --sim-pid "$simpid" | sed 's/^/sim_/'; then
    status=1
  fi
  kill "$simpid"; wait "$simpid" 2>/dev/null || true; simpid=""
done
exit $status
