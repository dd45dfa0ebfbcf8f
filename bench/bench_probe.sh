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
. bench/lib.sh
bench_setup bench_probe tokbench-api tokbench
bench_start_api TOKBENCH_RATE_LIMIT=0 TOKBENCH_PROBE_PER_PROJECT=16

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
