#!/bin/sh
# Load benchmark of tokbench-sim with an independent client (bench/sim_load.c).
# Uses $TB_BIN_DIR/tokbench-sim (default build-rel/bin), pins the simulator to
# CPU 0 and the client to CPU 1 when taskset exists, and prints, per scenario,
# streams, tokens/s, gap error p50/p99 (stamps and arrivals vs the modelled
# step), delivery delay and CPU seconds per million tokens ("sim_" lines).
# Baseline: for scenarios of at most 512 streams (the floors' scenarios), the
# same client then runs against bench/bare_writer.c, the least a writer can
# do to emit such streams (one epoll loop, a timerfd plus a spin to each
# step's deadline, one stamped send() per stream and step, nothing else), with
# the same pinning, --realtime and step; its figures are printed as "bare_"
# lines and a "gap_p99_ms streams=N sim=X bare=Y" line puts the two stamp gap
# error p99s side by side.  What the bare writer gets is what this machine
# (timer ticks, wake-ups, interrupts) allows any writer; the simulator's gap
# error is to be read against it, measured in the same run.
# Exits 1 if a client run fails (lost tokens, errors, streams not started).
# Placements: "split" (simulator on CPU 0, client on CPU 1) and, up to 512
# streams, "shared" (both on CPU 1, the simulator at real-time priority): on
# a VM where a wake-up of the client on the other CPU costs tens of
# microseconds in the middle of a step's sends, the shared figures show the
# simulator's own timing.
# Knobs: SIM_BENCH_SECONDS (default 10), SIM_BENCH_SCENARIOS ("128:20 512:20 2048:40"),
# SIM_BENCH_PLACEMENTS ("split shared").
set -eu
cd "$(dirname "$0")/.."
bindir=${TB_BIN_DIR:-build-rel/bin}
sim="$bindir/tokbench-sim"
[ -x "$sim" ] || { echo "bench_sim: $sim missing (make MODE=release)" >&2; exit 1; }
secs=${SIM_BENCH_SECONDS:-10}
scenarios=${SIM_BENCH_SCENARIOS:-"128:20 512:20 2048:40"}
bare_max=512 # baseline (and shared placement) only up to this many streams
placements=${SIM_BENCH_PLACEMENTS:-"split shared"}
pin_cli=""
tmp=$(mktemp -d)
srvpid=""
cleanup() {
  if [ -n "$srvpid" ]; then kill "$srvpid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
${CC:-cc} -O2 -Wall -Wextra -Werror -std=c11 -o "$tmp/sim_load" bench/sim_load.c
${CC:-cc} -O2 -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -o "$tmp/bare_writer" bench/bare_writer.c
pin0="" pin1=""
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
  pin0="taskset -c 0"; pin1="taskset -c 1"
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_listening LOG: until the server started in the background says so.
wait_listening() {
  i=0
  until grep -q listening "$1" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$srvpid" 2>/dev/null; then cat "$1" >&2; exit 1; fi
    sleep 0.05
  done
}

# run_load PREFIX PORT N STEP: the client against the server $srvpid; its
# figures printed with PREFIX, kept in $tmp/PREFIX.out; then stops the server.
run_load() {
  rc=0
  $pin_cli "$tmp/sim_load" --port "$2" --streams "$3" --step-ms "$4" \
    --seconds "$secs" --max-tokens 1000 --sim-pid "$srvpid" >"$tmp/$1.out" || rc=$?
  sed "s/^/$1/" "$tmp/$1.out"
  [ $rc -eq 0 ] || { echo "bench_sim: ${1}load failed (exit $rc)" >&2; status=1; }
  kill "$srvpid" 2>/dev/null || true; wait "$srvpid" 2>/dev/null || true; srvpid=""
}

p99_of() {
  awk '$1 == "gap_err_stamp_ms_p99" { print $2 }' "$tmp/$1.out"
}

status=0
for sc in $scenarios; do
  n=${sc%%:*}; step=${sc#*:}
  # bench profile: flat 20 ms steps; the time scale sets the wanted step.
  scale=$(awk "BEGIN{print 20/$step}")
  for place in $placements; do
    # split: server on CPU 0, client on CPU 1; shared: both on CPU 1 (the
    # server at real-time priority), so no wake-up of the client crosses
    # CPUs in the middle of a step's sends (on this kind of VM a cross-CPU
    # wake-up costs tens of microseconds).  Shared only up to bare_max.
    if [ "$place" = shared ]; then
      [ "$n" -le "$bare_max" ] || continue
      pin_srv=$pin1; pin_cli=$pin1; pfx=shared_
    else
      pin_srv=$pin0; pin_cli=$pin1; pfx=""
    fi
    port=$(free_port)
    $pin_srv "$sim" --profile bench --port "$port" --time-scale "$scale" --max-conns 20000 \
      --stamps --realtime >"$tmp/sim.log" 2>&1 &
    srvpid=$!
    wait_listening "$tmp/sim.log"
    echo "## tokbench-sim: $n streams, step $step ms, ${secs}s window, $place CPUs"
    run_load "sim_$pfx" "$port" "$n" "$step"
    [ "$n" -le "$bare_max" ] || continue

    port=$(free_port)
    $pin_srv "$tmp/bare_writer" --port "$port" --step-ms "$step" --realtime >"$tmp/bare.log" 2>&1 &
    srvpid=$!
    wait_listening "$tmp/bare.log"
    echo "## bare_writer (baseline): $n streams, step $step ms, ${secs}s window, $place CPUs"
    run_load "bare_$pfx" "$port" "$n" "$step"
    # its own account: timer wake-ups after the deadline, stalls within steps
    grep '^bare_writer: steps' "$tmp/bare.log" | sed 's/^/# /' || true
    echo "gap_p99_ms streams=$n cpus=$place sim=$(p99_of "sim_$pfx") bare=$(p99_of "bare_$pfx")"
  done
done
exit $status
