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
# SIM_BENCH_PLACEMENTS ("split shared"), SIM_BENCH_MAX_TOKENS (a request's
# max_tokens, default 1000).
# SIM_BENCH_PROMPT_TOKENS=T: every request carries a prompt of T tokens
# (sim_load --prompt-tokens: one prompt, cached beforehand, and requests
# arriving evenly in the middle of the other streams' decoding, N /
# (max_tokens x step) a second), so that the simulator's work on each prompt
# (parse, count, tokenize, block hashes) shows in the gap error if it stalls
# the loop; the simulator's max_model_len is raised to hold it.
# SIM_BENCH_BASE_SIM=<another tokbench-sim> (e.g. an older commit's, built
# in a worktree of its own): instead of the table, this simulator and that
# one run alternately, SIM_BENCH_RUNS pairs (default 5, the order flipping
# each pair), per scenario and placement; prints each run's stamp gap error
# p99 and the CPU share of the simulator's loop thread (its main thread:
# work on other threads does not hold up its steps), the medians, ranges
# and their ratio (this / base).
#
# Figures kept (2026-12-02, this 2-CPU VM with other work on it, load
# average 1.9-2.7; 128 streams, 20 ms steps, split CPUs, 256K-token prompts,
# 7 alternating pairs of 8 s windows):
#   SIM_BENCH_SECONDS=8 SIM_BENCH_SCENARIOS=128:20 SIM_BENCH_PLACEMENTS=split \
#   SIM_BENCH_PROMPT_TOKENS=262144 SIM_BENCH_RUNS=7 SIM_BENCH_BASE_SIM=<other> sh bench/bench_sim.sh
#                     gap error p99 (ms)         loop thread CPU share (s/s)
#   this (sim_prep)   6.116 (2.649-7.296)        0.109 (0.095-0.131)
#   main 9e4a733      11.906 (3.315-18.534)      0.235 (0.166-0.281)      ratios 0.51, 0.46
#   this (sim_prep)   4.217 (2.445-7.043)        0.097 (0.092-0.144)
#   a180f4a (before   4.135 (2.471-8.996)        0.153 (0.145-0.189)      ratios 1.02, 0.63
#    the prefix cache)
# Before sim_prep, with the prefix cache (6f56fa0) against a180f4a, 5 pairs
# at load 0.9-1.2: gap error p99 14.208 (9.692-17.604) against 6.499
# (3.783-9.789), ratio 2.19.  With no prompt the same runs give 0.3-3.3 ms
# and a loop share of 0.07 whichever the simulator: that is this machine's
# floor under its load.  What the loop still does per 256K prompt: receive
# the 1 MB, and the prefix cache's lookups (16K blocks at admission, at the
# first token, at the end), about 5 ms in three pieces.
set -eu
cd "$(dirname "$0")/.."
bindir=${TB_BIN_DIR:-build-rel/bin}
sim="$bindir/tokbench-sim"
[ -x "$sim" ] || { echo "bench_sim: $sim missing (make MODE=release)" >&2; exit 1; }
secs=${SIM_BENCH_SECONDS:-10}
scenarios=${SIM_BENCH_SCENARIOS:-"128:20 512:20 2048:40"}
bare_max=512 # baseline (and shared placement) only up to this many streams
placements=${SIM_BENCH_PLACEMENTS:-"split shared"}
max_tokens=${SIM_BENCH_MAX_TOKENS:-1000}
prompt_tokens=${SIM_BENCH_PROMPT_TOKENS:-0}
base_sim=${SIM_BENCH_BASE_SIM:-}
sim_extra=""
if [ "$prompt_tokens" -gt 0 ]; then
  sim_extra="--max-model-len $((prompt_tokens + max_tokens + 64))"
  bare_max=0 # the bare writer reads small bodies and streams a fixed count: no baseline
fi
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
    --seconds "$secs" --max-tokens "$max_tokens" --prompt-tokens "$prompt_tokens" \
    --sim-pid "$srvpid" >"$tmp/$1.out" || rc=$?
  sed "s/^/$1/" "$tmp/$1.out"
  [ $rc -eq 0 ] || { echo "bench_sim: ${1}load failed (exit $rc)" >&2; status=1; }
  kill "$srvpid" 2>/dev/null || true; wait "$srvpid" 2>/dev/null || true; srvpid=""
}

p99_of() {
  awk '$1 == "gap_err_stamp_ms_p99" { print $2 }' "$tmp/$1.out"
}
loop_of() {
  awk '$1 == "sim_loop_cpu_share" { print $2 }' "$tmp/$1.out"
}

# start_sim BINARY PIN SCALE: a simulator on a free $port, $srvpid.  Stamps
# asked with --stamps where the binary has the flag (older ones stamp
# without asking).
start_sim() {
  stamps=""
  "$1" --help 2>&1 | grep -q -- '^  --stamps ' && stamps=--stamps
  port=$(free_port)
  $2 "$1" --profile bench --port "$port" --time-scale "$3" --max-conns 20000 \
    $stamps $sim_extra --realtime >"$tmp/sim.log" 2>&1 &
  srvpid=$!
  wait_listening "$tmp/sim.log"
}

status=0
if [ -n "$base_sim" ]; then
  for sc in $scenarios; do
    n=${sc%%:*}; step=${sc#*:}
    scale=$(awk "BEGIN{print 20/$step}")
    for place in $placements; do
      if [ "$place" = shared ]; then
        pin_srv=$pin1; pin_cli=$pin1
      else
        pin_srv=$pin0; pin_cli=$pin1
      fi
      this=""; base=""; thisl=""; basel=""
      for i in $(seq "${SIM_BENCH_RUNS:-5}"); do
        order="this base"; [ $((i % 2)) = 0 ] && order="base this"
        for w in $order; do
          b=$sim; [ "$w" = base ] && b=$base_sim
          start_sim "$b" "$pin_srv" "$scale"
          run_load "${w}_" "$port" "$n" "$step" >/dev/null
          if [ "$w" = this ]; then
            this="$this $(p99_of this_)"; thisl="$thisl $(loop_of this_)"
          else
            base="$base $(p99_of base_)"; basel="$basel $(loop_of base_)"
          fi
        done
      done
      echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
      python3 bench/ab.py "gap error p99 (ms), $n streams, step $step ms, prompt $prompt_tokens tokens, $place CPUs:" \
        %.3f this "$this" base "$base"
      python3 bench/ab.py "the simulator's loop thread, CPU share (s/s):" %.3f this "$thisl" base "$basel"
    done
  done
  exit $status
fi
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
    start_sim "$sim" "$pin_srv" "$scale"
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
