#!/bin/sh
# bench_engine: tb_engine against tokbench-sim (bench profile: one step of
# 20 ms / time-scale for any batch, so N streams give N x 50 x scale tokens/s).
# The simulator runs on CPU 1, the client on CPU 0: "on one core".
# Prints, per stream count: tokens/s the engine measured (every token counted)
# beside the modelled rate, CPU per million tokens beside the bare epoll loop's
# (bench/bare_loop.c), added delay (arrival - send stamp) p50/p99 and gap
# error p99, then the server series (tb_sampler) on and off side by side.
# Env: TB_BIN_DIR (release binaries), BENCH_SECONDS (default 5),
# BENCH_ENGINE_BASE_LIB=<another build's libtokbench.a>: after the table,
# engine_load built against it and against this build, run alternately on
# the 128-stream cell (BENCH_BASE_RUNS pairs, default 7, the order flipping
# each pair): CPU per million tokens, medians, ranges and their ratio.
#   Kept (2026-12-02, load average 0.9-1.2): 40571c4's scanner (one object
#   walker) against its parent's, BENCH_ENGINE_CFGS=128:1 BENCH_SERIES_RUNS=0
#   BENCH_ENGINE_BASE_LIB=/tmp/old/build-rel/libtokbench.a: 7 pairs, this
#   10.694 s/M tokens median (9.291-14.072), base 9.478 (8.787-12.830), ratio
#   1.128; 11 pairs, this 10.029 (7.076-12.980), base 9.911 (8.622-13.783),
#   ratio 1.012.  Ranges overlap both times: no measurable change (the
#   scanner is ~0.5 us of the ~10 us a token costs, bench_oai.sh).
#   Kept (2026-12-03, load average 0.2-4, other builds running): tb_stream
#   (one stream consumer for matrix and rate cells) against main b4f2ea0,
#   BENCH_ENGINE_CFGS= BENCH_SERIES_RUNS=0: 11 pairs at load ~1, this 7.933
#   s/M tokens median (7.169-10.226), base 7.724 (6.534-12.432), ratio
#   1.027; earlier rounds 1.007 (7 pairs), 1.171 and 1.295 (11 pairs each,
#   load rising to 4; per-pair ratios' medians ~1.03-1.05).  Ranges overlap
#   every time.  Under callgrind (16 streams, 5 s) a read costs 7,115
#   instructions against 7,046 (+1.0%: the owner's two callbacks).
# BENCH_RT=1: the simulator with --realtime and both clients (engine and bare
# loop alike) under SCHED_FIFO (chrt -f 5), so that other work on a shared
# machine does not preempt them: it measures the code, not the neighbours.
set -eu
cd "$(dirname "$0")/.."
BIN=${TB_BIN_DIR:-build-rel/bin}
BUILD=$(dirname "$BIN")
[ "$BUILD" = "." ] && BUILD=build
SECS=${BENCH_SECONDS:-5}
OUT=$BUILD/bench
mkdir -p "$OUT"
. bench/pkgs.sh   # LIBS and CFL: the Makefile's packages
gcc -std=c11 -O2 -D_GNU_SOURCE -o "$OUT/bare_loop" bench/bare_loop.c
gcc -std=c11 -O2 -D_GNU_SOURCE -Ilib $CFL -o "$OUT/engine_load" bench/engine_load.c \
  "$BUILD/libtokbench.a" $LIBS -lm -lpthread
BASE_LIB=${BENCH_ENGINE_BASE_LIB:-}
[ -z "$BASE_LIB" ] || gcc -std=c11 -O2 -D_GNU_SOURCE -Ilib $CFL -o "$OUT/engine_load_base" \
  bench/engine_load.c "$BASE_LIB" $LIBS -lm -lpthread
PIN0="taskset -c 0"; PIN1="taskset -c 1"
command -v taskset >/dev/null 2>&1 || { PIN0=""; PIN1=""; }
[ "$(nproc)" -ge 2 ] || { PIN0=""; PIN1=""; }
RT_SIM=""
if [ "${BENCH_RT:-0}" = 1 ] && command -v chrt >/dev/null 2>&1; then
  PIN0="chrt -f 5 $PIN0"; RT_SIM="--realtime"
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sim_pid=""
start_sim() { # $1 = time scale
  [ -n "$sim_pid" ] && { kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; }
  $PIN1 "$BIN/tokbench-sim" --profile bench --port "$port" --time-scale "$1" \
    --stamps --max-conns 20000 $RT_SIM >"$OUT/sim.log" 2>&1 &
  sim_pid=$!
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/v1/models" && return 0
    sleep 0.1
  done
  echo "bench_engine: tokbench-sim did not start" >&2; cat "$OUT/sim.log" >&2; exit 1
}
trap '[ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null' EXIT

printf '%-14s %-5s %9s %9s | %9s %9s %6s | %9s %9s %9s %9s %9s | %9s %9s %9s\n' streams scale \
  "model/s" "tok/s" "engCPU" "bareCPU" "ratio" "dly50" "dly99" "gap99" "lag50" "lag99" "bare50" "bare99" "bgap99"
# stream count : time scale (keeps the sim's own load near 50K events/s;
#  8192 at 0.37: the issue's row, 8,192 streams at ~150K tokens/s)
# [: client = the engine stamping with its clock on reading, as the bare loop;
#  : curl = the engine's streams through libcurl, not its own reads]
# BENCH_ENGINE_CFGS: the rows to run (empty: only the side by side below)
#  : epoll = TOKBENCH_IO_URING=0, the engine's own reads by epoll + recvmsg;
#    the rows without it read by io_uring where the kernel allows (the
#    streams column names the transport that ran)]
for cfg in ${BENCH_ENGINE_CFGS-1:1 128:1 128:1:epoll 128:1:client 128:1:curl 512:1 512:1:epoll 2048:0.5 2048:0.5:epoll 2048:0.5:curl 4096:0.25 4096:0.25:epoll 8192:0.37 8192:0.37:epoll}; do
  n=${cfg%%:*}; rest=${cfg#*:}; scale=${rest%%:*}; mode=${rest#"$scale"}; mode=${mode#:}
  start_sim "$scale"
  cs=0; [ "$mode" = client ] && cs=1
  cu=0; [ "$mode" = curl ] && cu=1
  ur=1; [ "$mode" = epoll ] && ur=0
  eng=$(TOKBENCH_IO_URING=$ur TB_ENGINE_CLIENT_STAMPS=$cs TB_ENGINE_CURL_STREAMS=$cu $PIN0 "$OUT/engine_load" "http://127.0.0.1:$port" "$n" "$SECS" \
    || echo "$n fail")
  start_sim "$scale"
  bare=$($PIN0 "$OUT/bare_loop" "$port" "$n" "$SECS" || echo "$n fail")
  model=$(python3 -c "print(round($n*50*$scale))")
  set -- $eng; etps=${2:-?}; ecpu=${3:-?}; d50=${4:-?}; d99=${5:-?}; g99=${6:-?}; l50=${8:-?}; l99=${9:-?}
  via=${15:-?}; [ "$mode" = "" ] && mode=$via
  set -- $bare; bcpu=${3:-?}; b50=${6:-?}; b99=${7:-?}; bg99=${8:-?}
  ratio=$(python3 -c "print('%.2f' % ($ecpu / $bcpu))" 2>/dev/null || echo '?')
  printf '%-14s %-5s %9s %9s | %9s %9s %6s | %9s %9s %9s %9s %9s | %9s %9s %9s\n' "$n${mode:+ $mode}" "$scale" "$model" "$etps" \
    "$ecpu" "$bcpu" "$ratio" "$d50" "$d99" "$g99" "$l50" "$l99" "$b50" "$b99" "$bg99"
done
echo "model/s: tokens/s the sim is set to send; tok/s: what the engine counted in its window."
echo "engCPU/bareCPU: CPU seconds per million tokens (engine process incl. JSON parsing of every"
echo "chunk vs the bare epoll loop counting 'data:' lines); dly: arrival the engine records"
echo "(the kernel's receive stamp, tb_rxts) - sim send stamp (ms); gap99: p99 of |measured gap -"
echo "stamped gap| between a stream's events (ms); lag: when the engine parsed the event - send"
echo "stamp (ms), how far behind its loop reads; bare*: delay and gap of the bare loop, which"
echo "stamps with its clock when it reads (what the machine adds to a client that does that)."
echo "Rows marked client: TB_ENGINE_CLIENT_STAMPS=1, the engine stamps as the bare loop does;"
echo "curl: TB_ENGINE_CURL_STREAMS=1, streams through libcurl (as over TLS) instead of the"
echo "engine's own reads (one recvmsg per read, which also brings the kernel's stamp)."

# The server series (lib/engine/tb_sampler: /metrics read once a second on the
# engine's loop) on and off, side by side on the 128-stream decode cell:
# its gap error p99 over BENCH_SERIES_RUNS alternating pairs (default 5; the
# order flips each pair), medians and their ratio.  With it off
# (TB_ENGINE_SERVER_SERIES=0) the engine still polls /metrics for readiness
# and the average running count, as before: the difference is the series.
RUNS=${BENCH_SERIES_RUNS:-5}
ON=""; OFF=""; SAMPLES=""
for i in $(seq "$RUNS"); do
  order="1 0"; [ $((i % 2)) = 0 ] && order="0 1"
  for on in $order; do
    start_sim 1
    r=$(TB_ENGINE_SERVER_SERIES=$on $PIN0 "$OUT/engine_load" "http://127.0.0.1:$port" 128 "$SECS" \
      || echo "128 fail")
    set -- $r; g=${6:-nan}
    if [ "$on" = 1 ]; then ON="$ON $g"; SAMPLES="$SAMPLES ${10:-0}"; else OFF="$OFF $g"; fi
  done
done
python3 - "$ON" "$OFF" "$SAMPLES" <<'PY'
import statistics, sys
def nums(s):
    out = []
    for x in s.split():
        try:
            out.append(float(x))
        except ValueError:
            pass
    return out
on, off, samples = nums(sys.argv[1]), nums(sys.argv[2]), nums(sys.argv[3])
if not on or not off:
    print("server series side by side: no result (a run failed)")
    sys.exit(0)
mon, moff = statistics.median(on), statistics.median(off)
print("server series on/off, 128 streams, gap99 (ms) per run:")
print("  on : " + " ".join("%.3f" % x for x in on) + "   (samples a cell: %s)" % " ".join("%d" % x for x in samples))
print("  off: " + " ".join("%.3f" % x for x in off))
print("  median on %.3f ms, off %.3f ms, ratio on/off %.2f; range on %.3f-%.3f, off %.3f-%.3f"
      % (mon, moff, mon / moff if moff > 0 else float("nan"), min(on), max(on), min(off), max(off)))
PY

# This build's engine beside another's (BENCH_ENGINE_BASE_LIB): CPU per
# million tokens on the 128-stream cell, alternating.
[ -n "$BASE_LIB" ] || exit 0
THIS=""; BASE=""
for i in $(seq "${BENCH_BASE_RUNS:-7}"); do
  order="this base"; [ $((i % 2)) = 0 ] && order="base this"
  for w in $order; do
    start_sim 1
    el="$OUT/engine_load"; [ "$w" = base ] && el="$OUT/engine_load_base"
    r=$($PIN0 "$el" "http://127.0.0.1:$port" 128 "$SECS" || echo "128 fail")
    set -- $r; c=${3:-nan}
    if [ "$w" = this ]; then THIS="$THIS $c"; else BASE="$BASE $c"; fi
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/ab.py "engine CPU s per million tokens, 128 streams, this build beside the base (BENCH_ENGINE_BASE_LIB):" \
  %.3f this "$THIS" base "$BASE"
