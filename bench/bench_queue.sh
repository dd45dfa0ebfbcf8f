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
TOKBENCH_DATABASE_URL=$url TOKBENCH_WORKER_ID=bench-queue TOKBENCH_POLL_S=60 TOKBENCH_EGRESS_ALLOW=loopback \
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
    """Two latencies per job, in ms: from the submit's transaction start
    (jobs.created_at) and from the end of its INSERT (clock_timestamp(),
    so what is left is the commit, the notification, the wake-up and the
    claim) to the claim (jobs.started_at)."""
    total, path = [], []
    for i in range(n + 2):  # two warm-up jobs, not counted
        pre = "" if sync else "SET synchronous_commit = off; "
        row = q(pre + "WITH j AS (INSERT INTO jobs (project_id, endpoint_id, spec, busy_key) "
                "VALUES ('%s', '%s', '%s', '%s') RETURNING id) "
                "SELECT id, clock_timestamp(), pg_notify('tb_jobs_queued', id::text) FROM j"
                % (project, ep, spec, ep))
        jid, inserted = row.split("|")[:2]
        deadline = time.monotonic() + 30
        while not done(jid):
            if time.monotonic() > deadline:
                sys.exit("bench_queue: job %s did not finish" % jid)
            time.sleep(0.02)
        a, b = q("SELECT extract(epoch FROM started_at - created_at) * 1000, "
                 "extract(epoch FROM started_at - '%s'::timestamptz) * 1000 FROM jobs "
                 "WHERE id = '%s'" % (inserted, jid)).split("|")
        if i >= 2:
            total.append(float(a))
            path.append(float(b))
        time.sleep(float(os.environ.get("BENCH_GAP", "0.05")))  # the worker waits again
    return sorted(total), sorted(path)


def pct(lat, p):
    return lat[min(len(lat) - 1, int(round(p / 100.0 * (len(lat) - 1))))]


durable, fast = run(True), run(False)
print("%-44s %5s %8s %8s %8s %8s" % ("submit -> worker start (ms)", "jobs", "p50", "p90", "p99",
                                     "max"))
for name, lat in (("from submit, durable commit", durable[0]),
                  ("from INSERT done, durable commit", durable[1]),
                  ("from submit, async commit", fast[0]),
                  ("from INSERT done, async commit", fast[1])):
    print("%-44s %5d %8.2f %8.2f %8.2f %8.2f" % (name, len(lat), pct(lat, 50), pct(lat, 90),
                                                pct(lat, 99), lat[-1]))
med = pct(durable[0], 50)
print("(from submit: the submitter's transaction (a fresh psql connection), its commit,")
print(" the NOTIFY, the worker waking and claiming; from INSERT done: without the first)")
print("submit-to-start: %s (median %.2f ms, p99 %.2f ms, floor 100 ms)"
      % ("PASS" if med < 100 else "FAIL", med, pct(durable[0], 99)))
sys.exit(0 if med < 100 else 1)
PY
