#!/bin/sh
# bench_schedules: a schedule that fires every minute, with two api replicas
# and two workers on one database, for BENCH_SCHED_SLOTS slots (default 10:
# ten minutes of wall time; issue 35, "done when").  Nothing is mocked: two
# tokbench-api processes (each with its ticker thread), two tokbench-worker
# processes, tokbench-sim (tiny profile) and a private PostgreSQL.
#
# The replicas run with TOKBENCH_SCHEDULE_CLOCK_OFFSET_S set so that the
# schedule's first slot falls a few seconds after they start rather than at
# the next minute of the wall clock; the offset is one constant, so the slots
# are still a real minute apart.  At the end the jobs are counted by slot in
# the database: a line per slot with the number of jobs (must be 1), their
# state, the worker that ran each and the replica whose ticker fired it
# (from the api logs).  Exits 1 when a slot has no job or more than one, when
# a slot is missing between the first and the last, or a job did not succeed.
# Env: TB_BIN_DIR (default build-rel/bin), BENCH_SCHED_SLOTS.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
SLOTS=${BENCH_SCHED_SLOTS:-10}
bench_setup bench_schedules tokbench-api tokbench-worker tokbench-sim tokbench

now=$(date +%s)
offset=$(((57 - now % 60 + 60) % 60)) # the api's clock reads hh:mm:57 now
common="TOKBENCH_SCHEDULE_CLOCK_OFFSET_S=$offset TOKBENCH_SCHEDULE_TICK_MS=200 TOKBENCH_LOG_LEVEL=info"
# shellcheck disable=SC2086 # $common is words
bench_start_api $common
port2=$(freeport)
# shellcheck disable=SC2086
env TOKBENCH_DATABASE_URL="$url" TOKBENCH_LISTEN_PORT="$port2" TOKBENCH_EGRESS_ALLOW=loopback \
  TOKBENCH_MASTER_KEY="$master" $common "$BIN/tokbench-api" >"$tmp/api2.log" 2>&1 &
pids="$pids $!"
simport=$(freeport)
"$BIN/tokbench-sim" --profile tiny --port "$simport" >"$tmp/sim.log" 2>&1 &
pids="$pids $!"
for w in 1 2; do
  env TOKBENCH_DATABASE_URL="$url" TOKBENCH_WORKER_ID="worker-$w" TOKBENCH_POLL_S=5 \
    TOKBENCH_EGRESS_ALLOW=loopback TOKBENCH_MASTER_KEY="$master" TOKBENCH_LOG_LEVEL=warn \
    "$BIN/tokbench-worker" >"$tmp/worker$w.log" 2>&1 &
  pids="$pids $!"
done

BENCH_URL=$url BENCH_BASE=$base BENCH_BASE2="http://127.0.0.1:$port2" BENCH_KEY=$key \
  BENCH_SIM="http://127.0.0.1:$simport" BENCH_SLOTS=$SLOTS BENCH_TMP=$tmp python3 - <<'PY'
import json, os, subprocess, sys, time, urllib.request

E = os.environ
url, slots, tmp = E["BENCH_URL"], int(E["BENCH_SLOTS"]), E["BENCH_TMP"]


def q(sql):
    return subprocess.check_output(["psql", "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-d", url,
                                    "-c", sql]).decode().strip()


def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + E["BENCH_KEY"],
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


for base in (E["BENCH_BASE"], E["BENCH_BASE2"]):
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/readyz", timeout=2)
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit("bench_schedules: an api replica did not start")
ep = call(E["BENCH_BASE"], "POST", "/v1/endpoints", {"name": "sim", "base_url": E["BENCH_SIM"]})
spec = {"contexts": [512], "concurrency": [1], "prefill_contexts": [], "duration_s": 0.5,
        "settle_s": 0, "max_output": 32}
sch = call(E["BENCH_BASE2"], "POST", "/v1/schedules",
           {"endpoint_id": ep["id"], "spec": spec, "cron": "* * * * *", "timezone": "Europe/Berlin",
            "labels": {"bench": "schedules"}})
t0 = time.time()
print("bench_schedules: schedule %s, cron '* * * * *' Europe/Berlin, first slot %s, %d slots, "
      "2 api replicas, 2 workers" % (sch["id"], sch["next_run_at"], slots))
sys.stdout.flush()
sid = sch["id"]


def fired():
    return int(q("SELECT count(*) FROM jobs WHERE schedule_id = '%s'" % sid))


# each slot is a minute; wait for the last one and its job's end
deadline = t0 + 60 * slots + 60
while time.time() < deadline and fired() < slots:
    time.sleep(1)
while time.time() < deadline + 60 and q(
        "SELECT count(*) FROM jobs WHERE schedule_id = '%s' AND state NOT IN "
        "('succeeded', 'failed', 'cancelled')" % sid) != "0":
    time.sleep(0.5)
time.sleep(2)  # one more slot would show here if the ticker fired it twice
ran = q("SELECT to_char(schedule_slot AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), count(*), "
        "string_agg(state::text, ','), string_agg(coalesce((SELECT string_agg(DISTINCT c.worker, '+') "
        "FROM job_cells c WHERE c.job_id = j.id), '-'), ','), "
        "string_agg(id::text, ',') FROM jobs j WHERE schedule_id = '%s' "
        "GROUP BY schedule_slot ORDER BY schedule_slot" % sid)
logs = {}
for i, f in ((1, "api.log"), (2, "api2.log")):
    with open(os.path.join(tmp, f)) as fh:
        logs[i] = fh.read()
bad = []
rows = [r.split("|") for r in ran.splitlines() if r]
print("%-19s  %4s  %-9s  %-8s  %s" % ("slot (UTC)", "jobs", "state", "worker", "fired by"))
prev = None
for slot, n, states, workers, ids in rows:
    by = [str(i) for j in ids.split(",") for i in (1, 2)
          if any('"job":"%s"' % j in l for l in logs[i].splitlines() if "schedule fired" in l)]
    print("%-19s  %4s  %-9s  %-8s  replica %s" % (slot, n, states, workers, ",".join(by) or "?"))
    t = time.mktime(time.strptime(slot, "%Y-%m-%d %H:%M:%S"))
    if n != "1":
        bad.append("slot %s has %s jobs" % (slot, n))
    if states != "succeeded":
        bad.append("slot %s: %s" % (slot, states))
    if prev is not None and t - prev != 60:
        bad.append("a slot missing before %s" % slot)
    prev = t
if len(rows) < slots:
    bad.append("%d slots fired of %d" % (len(rows), slots))
fires = [logs[i].count('"msg":"schedule fired"') for i in (1, 2)]
workers = sorted({w for r in rows for w in r[3].split(",")})
print("bench_schedules: %d slots, %d jobs, fired by replica 1: %d, replica 2: %d; workers: %s"
      % (len(rows), sum(int(r[1]) for r in rows), fires[0], fires[1], " ".join(workers)))
if bad:
    print("bench_schedules: FAIL: " + "; ".join(bad))
    sys.exit(1)
print("bench_schedules: every slot fired exactly once")
PY
