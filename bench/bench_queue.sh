#!/bin/sh
# bench_queue: time from submitting a job to a worker starting it.
# A private PostgreSQL (scripts/tb-pg, or TOKBENCH_DATABASE_URL when set),
# one idle tokbench-worker (polling floor 60 s, so the figure is the
# LISTEN/NOTIFY path) and tokbench-sim (tiny profile).  Each job is submitted
# as the api does it (INSERT a queued job, NOTIFY tb_jobs_queued '<id>') once
# the worker is idle; the latency is jobs.started_at - jobs.created_at, both
# taken by PostgreSQL's clock (the INSERT's and the claim's now()).
# Prints median, p90, p99 and max over BENCH_QUEUE_JOBS jobs (default 50) and
# exits 1 when the median is over the floor (100 ms).
# Env: TB_BIN_DIR (default build-rel/bin), BENCH_QUEUE_JOBS.
set -eu
cd "$(dirname "$0")/.."
BIN=${TB_BIN_DIR:-build-rel/bin}
JOBS=${BENCH_QUEUE_JOBS:-50}
for b in tokbench-worker tokbench-sim tokbench; do
  [ -x "$BIN/$b" ] || { echo "bench_queue: $BIN/$b missing (make MODE=release)" >&2; exit 1; }
done
tmp=$(mktemp -d)
chmod 0755 "$tmp"
pids=""
own_pg=0
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  [ "$own_pg" = 1 ] && scripts/tb-pg stop "$tmp/pg" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

if [ -n "${TOKBENCH_DATABASE_URL:-}" ]; then
  url=$TOKBENCH_DATABASE_URL
else
  pgport=$(freeport)
  scripts/tb-pg init "$tmp/pg" >/dev/null
  scripts/tb-pg start "$tmp/pg" "$pgport" >/dev/null
  own_pg=1
  url=$(scripts/tb-pg url "$tmp/pg" "$pgport")
fi
TOKBENCH_DATABASE_URL=$url "$BIN/tokbench" migrate >/dev/null

simport=$(freeport)
"$BIN/tokbench-sim" --profile tiny --port "$simport" >"$tmp/sim.log" 2>&1 &
pids="$pids $!"
TOKBENCH_DATABASE_URL=$url TOKBENCH_WORKER_ID=bench-queue TOKBENCH_POLL_S=60 \
  TOKBENCH_LOG_LEVEL=warn "$BIN/tokbench-worker" >"$tmp/worker.log" 2>&1 &
pids="$pids $!"

BENCH_URL=$url BENCH_SIM="http://127.0.0.1:$simport" BENCH_JOBS=$JOBS python3 - <<'PY'
import json, os, subprocess, sys, time
url, sim, n = os.environ["BENCH_URL"], os.environ["BENCH_SIM"], int(os.environ["BENCH_JOBS"])

def q(sql):
    return subprocess.check_output(["psql", "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-d", url,
                                    "-c", sql]).decode().strip()

project = q("INSERT INTO projects (name) VALUES ('bench-queue-' || gen_random_uuid()) RETURNING id")
ep = q("INSERT INTO endpoints (project_id, name, base_url) VALUES ('%s', 'sim', '%s') RETURNING id"
       % (project, sim))
spec = json.dumps({"contexts": [512], "concurrency": [1], "prefill_contexts": [],
                   "duration_s": 0.05, "settle_s": 0, "max_output": 32})

def done(jid):
    return q("SELECT state FROM jobs WHERE id = '%s'" % jid) in ("succeeded", "failed", "cancelled")

def run(sync):
    lat = []
    for i in range(n + 2):  # two warm-up jobs, not counted
        pre = "" if sync else "SET synchronous_commit = off; "
        jid = q(pre + "WITH j AS (INSERT INTO jobs (project_id, endpoint_id, spec, busy_key) "
                "VALUES ('%s', '%s', '%s', '%s') RETURNING id) "
                "SELECT id FROM j, pg_notify('tb_jobs_queued', (SELECT id::text FROM j))"
                % (project, ep, spec, ep))
        deadline = time.monotonic() + 30
        while not done(jid):
            if time.monotonic() > deadline:
                sys.exit("bench_queue: job %s did not finish" % jid)
            time.sleep(0.02)
        ms = float(q("SELECT extract(epoch FROM started_at - created_at) * 1000 FROM jobs "
                     "WHERE id = '%s'" % jid))
        if i >= 2:
            lat.append(ms)
        time.sleep(float(os.environ.get("BENCH_GAP", "0.05")))  # the worker waits again
    lat.sort()
    return lat

def pct(lat, p):
    return lat[min(len(lat) - 1, int(round(p / 100.0 * (len(lat) - 1))))]

print("%-34s %5s %8s %8s %8s %8s" % ("submit -> worker start", "jobs", "p50 ms", "p90 ms",
                                     "p99 ms", "max ms"))
rows = [("INSERT+NOTIFY, durable commit", run(True)),
        ("INSERT+NOTIFY, async commit", run(False))]
for name, lat in rows:
    print("%-34s %5d %8.2f %8.2f %8.2f %8.2f" % (name, len(lat), pct(lat, 50), pct(lat, 90),
                                                pct(lat, 99), lat[-1]))
med = pct(rows[0][1], 50)
print("(durable: includes the submitter's commit fsync; async: the queue path alone)")
print("submit-to-start: %s (median %.2f ms, floor 100 ms)" % ("PASS" if med < 100 else "FAIL", med))
sys.exit(0 if med < 100 else 1)
PY
