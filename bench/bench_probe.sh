#!/bin/sh
# bench_probe: /healthz latency while 16 probes hang (issue 13).  An
# endpoint that accepts connections and never answers (a listening socket
# nobody reads) is probed 16 times at once (TOKBENCH_PROBE_PER_PROJECT=16,
# so all 16 are in flight on the probe pool); meanwhile GET /healthz is
# timed BENCH_PROBE_N times (default 400), one after another.  Prints p50,
# p99 and max; exits 1 when p99 is 100 ms or more (the floor of issue 13).
# A private PostgreSQL (scripts/tb-pg) in a temporary directory.
# Env: TB_BIN_DIR (default build-rel/bin), BENCH_PROBE_N.
set -eu
cd "$(dirname "$0")/.."
BIN=${TB_BIN_DIR:-build-rel/bin}
for b in tokbench-api tokbench; do
  [ -x "$BIN/$b" ] || { echo "bench_probe: $BIN/$b missing (make MODE=release)" >&2; exit 1; }
done
tmp=$(mktemp -d)
chmod 0755 "$tmp"
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  scripts/tb-pg stop "$tmp/pg" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pgport=$(freeport)
scripts/tb-pg init "$tmp/pg" >/dev/null
scripts/tb-pg start "$tmp/pg" "$pgport" >/dev/null
url=$(scripts/tb-pg url "$tmp/pg" "$pgport")
key=$(TOKBENCH_DATABASE_URL=$url "$BIN/tokbench" keys create --admin --project bench)
port=$(freeport)
TOKBENCH_DATABASE_URL=$url TOKBENCH_LISTEN_PORT=$port TOKBENCH_RATE_LIMIT=0 \
  TOKBENCH_LOG_LEVEL=warn TOKBENCH_EGRESS_ALLOW=loopback TOKBENCH_PROBE_PER_PROJECT=16 \
  TOKBENCH_MASTER_KEY=$(openssl rand -hex 32) "$BIN/tokbench-api" >"$tmp/api.log" 2>&1 &
pids="$pids $!"
i=0
until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "bench_probe: api did not start" >&2; cat "$tmp/api.log" >&2; exit 1; }
  sleep 0.1
done

BENCH_BASE="http://127.0.0.1:$port" BENCH_KEY=$key BENCH_N=${BENCH_PROBE_N:-400} python3 - <<'PY'
import http.client, json, os, socket, sys, threading, time
base, key, n = os.environ["BENCH_BASE"], os.environ["BENCH_KEY"], int(os.environ["BENCH_N"])
host, port = base.split("//")[1].split(":")
hang = socket.socket()
hang.bind(("127.0.0.1", 0))
hang.listen(256)  # accepts (the kernel's backlog), never reads, never answers

def call(method, path, body=None, timeout=60):
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    c.request(method, path, json.dumps(body) if body is not None else None, h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data

st, data = call("POST", "/v1/endpoints", {"name": "hang",
                "base_url": "http://127.0.0.1:%d" % hang.getsockname()[1]})
assert st == 201, data
ep = json.loads(data)["id"]
statuses = []
threads = [threading.Thread(target=lambda: statuses.append(call("POST", "/v1/endpoints/%s/probe" % ep)[0]))
           for _ in range(16)]
for t in threads:
    t.start()
time.sleep(0.5)
lat = []
conn = http.client.HTTPConnection(host, int(port), timeout=10)
t_end = time.monotonic()
for _ in range(n):
    t0 = time.monotonic()
    conn.request("GET", "/healthz")
    r = conn.getresponse()
    r.read()
    lat.append((time.monotonic() - t0) * 1000)
    assert r.status == 200
inflight = sum(t.is_alive() for t in threads)
for t in threads:
    t.join(120)
lat.sort()
p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
print("healthz under 16 hanging probes: n=%d p50 %.2f ms  p99 %.2f ms  max %.2f ms  "
      "(probes still in flight at the end: %d; probe answers: %s)"
      % (n, p50, p99, lat[-1], inflight, sorted(set(statuses))))
if p99 >= 100:
    print("bench_probe: p99 %.1f ms, the floor is < 100 ms" % p99)
    sys.exit(1)
PY
