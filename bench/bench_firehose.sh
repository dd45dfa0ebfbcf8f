#!/bin/sh
# bench_firehose: where one engine process stands (issue 24, item 5).
# tokbench-sim on the firehose profile (sim/profiles/firehose.json: a decode
# step of 1 us at any batch, so no compute stands behind the stream and the
# sim writes as fast as its core allows) on CPU 1, the client on CPU 0.
# Two rows, each beside the bare epoll reader (bench/bare_loop.c) in the
# same run:
#   stream: BENCH_FIREHOSE_STREAMS (256) long streams: SSE data events per
#     CPU-second of the engine process (every event parsed, every token
#     counted, as in a real cell) and of the bare reader (counting "data:"
#     lines only);
#   short:  the same streams with max_output BENCH_FIREHOSE_SHORT (16; each
#     request: send, headers, 16 tokens, the usage chunk, [DONE], replaced at
#     once): CPU microseconds per completed request, and that less its
#     events at the long row's rate: the client's own overhead per request.
# The anchor, MLCommons' endpoints client (docs/ENDPOINT_CLIENT.md §1.2,
# "Performance Requirements", github.com/mlcommons/endpoints at ea33275):
# ~79.7M SSE packets/s at 96 worker processes on 2x Xeon Platinum 8570
# (0.83M per worker process), ~121M at 132 on 2x Grace (0.92M), and "~47us
# pure client overhead per request" (300k QPS / 14 workers, offline, no
# streaming).  Their figure is events per wall-second of a worker process
# on a core of its own, so ours is given per CPU-second of the process.
# Env: TB_BIN_DIR (release binaries), BENCH_SECONDS (default 5).
set -eu
cd "$(dirname "$0")/.."
BIN=${TB_BIN_DIR:-build-rel/bin}
BUILD=$(dirname "$BIN")
[ "$BUILD" = "." ] && BUILD=build
SECS=${BENCH_SECONDS:-5}
N=${BENCH_FIREHOSE_STREAMS:-256}
SHORT=${BENCH_FIREHOSE_SHORT:-16}
OUT=$BUILD/bench
mkdir -p "$OUT"
. bench/pkgs.sh   # LIBS and CFL: the Makefile's packages
gcc -std=c11 -O2 -D_GNU_SOURCE -o "$OUT/bare_loop" bench/bare_loop.c
gcc -std=c11 -O2 -D_GNU_SOURCE -Ilib $CFL -o "$OUT/engine_load" bench/engine_load.c \
  "$BUILD/libtokbench.a" $LIBS -lm -lpthread
PIN0="taskset -c 0"; PIN1="taskset -c 1"
command -v taskset >/dev/null 2>&1 || { PIN0=""; PIN1=""; }
[ "$(nproc)" -ge 2 ] || { PIN0=""; PIN1=""; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sim_pid=""
start_sim() { # [--metrics none]
  [ -n "$sim_pid" ] && { kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; }
  $PIN1 "$BIN/tokbench-sim" --profile firehose --port "$port" --max-conns 20000 "$@" \
    >"$OUT/sim-firehose.log" 2>&1 &
  sim_pid=$!
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/v1/models" && return 0
    sleep 0.1
  done
  echo "bench_firehose: tokbench-sim did not start" >&2; cat "$OUT/sim-firehose.log" >&2; exit 1
}
trap '[ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null' EXIT

start_sim
eng=$($PIN0 "$OUT/engine_load" "http://127.0.0.1:$port" "$N" "$SECS" || echo "$N fail")
start_sim
engep=$(TOKBENCH_IO_URING=0 $PIN0 "$OUT/engine_load" "http://127.0.0.1:$port" "$N" "$SECS" \
  || echo "$N fail")
start_sim
bare=$($PIN0 "$OUT/bare_loop" "$port" "$N" "$SECS" || echo "$N fail")
# short requests: without /metrics, so that readiness is every stream
# having produced a token (running = C is never steady when requests last
# microseconds)
start_sim --metrics none
short=$($PIN0 "$OUT/engine_load" "http://127.0.0.1:$port" "$N" "$SECS" "$SHORT" || echo "$N fail")
start_sim --metrics none
shortep=$(TOKBENCH_IO_URING=0 $PIN0 "$OUT/engine_load" "http://127.0.0.1:$port" "$N" "$SECS" \
  "$SHORT" || echo "$N fail")
python3 - "$SECS" "$eng" "$bare" "$short" "$engep" "$shortep" <<'PY'
import sys
secs = float(sys.argv[1])
eng, bare, short, engep, shortep = (a.split() for a in sys.argv[2:7])
def num(v, i):
    try:
        return float(v[i])
    except (IndexError, ValueError):
        return float("nan")
# engine_load: 3rd = CPU s per million tokens, 11th = data events in the
# cell, 12th = completed requests, 13th = CPU us per completed request;
# tokens = events here (one token a chunk) but for the role and usage chunks
def row(eng, short):
    """events per CPU-s, events/s, CPU us per request and less its events."""
    e_cpu_m, e_ev, e_tok_s = num(eng, 2), num(eng, 10), num(eng, 1)
    e_cpu = e_cpu_m * e_tok_s * secs / 1e6       # CPU s over the window
    e_rate = e_ev / e_cpu if e_cpu > 0 else float("nan")
    s_ev, s_done, s_us, s_cpu = num(short, 10), num(short, 11), num(short, 12), num(short, 13)
    # the request's own cost: its CPU less its events at the long row's rate
    s_own = (s_cpu - s_ev / e_rate) / s_done * 1e6 if s_done > 0 else float("nan")
    via = eng[14] if len(eng) > 14 else "?"
    return e_rate, e_ev / secs, s_us, s_own, s_done / secs, via
u, ep = row(eng, short), row(engep, shortep)
b_ev_s, b_rate = num(bare, 1), num(bare, 3)  # events/s, events per CPU-s
print("%-26s %14s %14s %14s %8s" % ("", "engine " + u[5], "engine " + ep[5], "bare reader",
                                    "ratio"))
print("%-26s %14.0f %14.0f %14.0f %8.2f" % ("SSE events / CPU-second", u[0], ep[0], b_rate,
                                           u[0] / b_rate))
print("%-26s %14.0f %14.0f %14.0f" % ("SSE events / second", u[1], ep[1], b_ev_s))
print("%-26s %14.1f %14.1f %14s" % ("CPU us / request", u[2], ep[2], "-"))
print("%-26s %14.1f %14.1f %14s" % ("  less its events", u[3], ep[3], "-"))
print("%-26s %14.0f %14.0f %14s" % ("requests / second", u[4], ep[4], "-"))
print("ratio: the first engine column (io_uring where the kernel allows) / the bare reader.")
print("MLCommons endpoints client (docs/ENDPOINT_CLIENT.md §1.2): ~830,000 SSE events/s per")
print("worker process (x86; ~920,000 on Grace), ~47 us client overhead per request.")
PY
echo "streams: $N, window: $SECS s, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
