"""Schedules (issue 35, item 1): jobs run on a cron in a time zone, through the
real service.  Real tokbench-api processes (their ticker threads), real
PostgreSQL; a real tokbench-worker, tokbench-sim and webhook receiver for the
run that ends in a callback.

The clock is moved, never waited for: a slot is made due by setting the row's
next_run_at into the past (what time passing does), and a restart "ten
minutes later" is an api started with TOKBENCH_SCHEDULE_CLOCK_OFFSET_S=600.
Each test works in a project of its own, so that the queued jobs of one (no
worker runs here but in the callback test) never count against another's
limits."""
import json
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import harness
from harness import http, wait_until
import test_deliveries

MASTER = "6d" * 32
S = {}
SPEC = {"contexts": ["1k"], "concurrency": [1], "duration_s": 1, "labels": {"suite": "sched"}}
YEARLY = "0 0 1 1 *"  # never due by itself while a test runs
ENV = {"TOKBENCH_SCHEDULE_TICK_MS": "100", "TOKBENCH_SCHEDULE_MIN_INTERVAL_S": "300",
       "TOKBENCH_LIMIT_SCHEDULES": "4", "TOKBENCH_LIMIT_QUEUED": "2",
       "TOKBENCH_LIMIT_JOB_SECONDS": "3600"}


def api_env(pg, port, extra=None):
    e = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
         "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_RATE_LIMIT": "0", "TOKBENCH_LOG_LEVEL": "debug"}
    e.update(ENV)
    e.update(extra or {})
    return e


def start_api(ctx, pg, extra=None):
    port = harness.free_port()
    proc = ctx.process("tokbench-api", [], env=api_env(pg, port, extra))
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and http("GET", base + "/readyz", timeout=2)[0] == 200, 20,
               what="api up")
    return proc, base


def setup(ctx):
    if S:
        return S
    pg = ctx.postgres()
    proc, base = start_api(ctx, pg)
    S.update(pg=pg, proc=proc, base=base, keys={})
    return S


def key(s, project):
    if project not in s["keys"]:
        s["keys"][project] = harness.make_key(s["pg"], project, "--admin")
    return s["keys"][project]


def call(s, project, method, path, body=None, base=None):
    st, h, data = http(method, (base or s["base"]) + path, body,
                       {"Authorization": "Bearer " + key(s, project)})
    doc = json.loads(data) if data else None
    return st, h, doc


def endpoint(s, project, name="gpu", url="http://127.0.0.1:9"):
    st, _, ep = call(s, project, "POST", "/v1/endpoints", {"name": name, "base_url": url})
    assert st == 201, ep
    return ep["id"]


def schedule(s, project, ep, **kw):
    body = {"endpoint_id": ep, "spec": SPEC, "cron": YEARLY, "timezone": "UTC"}
    body.update(kw)
    st, h, doc = call(s, project, "POST", "/v1/schedules", body)
    assert st == 201, doc
    assert h["location"] == "/v1/schedules/" + doc["id"]
    return doc


def row(pg, sid, cols):
    return pg.psql("SELECT %s FROM schedules WHERE id = '%s'" % (cols, sid)).strip().split("|")


def make_due(pg, sid, slot="now() - interval '1 second'"):
    """Time passes: the schedule's slot is due now.  Returns the slot."""
    return pg.psql("UPDATE schedules SET next_run_at = %s WHERE id = '%s' RETURNING next_run_at"
                   % (slot, sid)).strip()


def wait_handled(pg, sid, slot, timeout=10):
    """Until the ticker has moved past slot (fired, refused or paused)."""
    wait_until(lambda: row(pg, sid, "coalesce(next_run_at::text, 'none') <> '%s'" % slot)[0] == "t",
               timeout, what="the slot handled")


def jobs_of(pg, sid):
    out = pg.psql("SELECT id, schedule_slot FROM jobs WHERE schedule_id = '%s' ORDER BY created_at"
                  % sid).strip()
    return [l.split("|") for l in out.splitlines() if l]


def utc(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ---------------------------------------------------------------- the routes

def test_create_read_change_delete(ctx):
    s = setup(ctx)
    ep = endpoint(s, "crud")
    doc = schedule(s, "crud", ep, cron="30 2 * * *", timezone="America/New_York",
                   labels={"team": "infra"})
    assert doc["preset"] is None and doc["paused"] is False and doc["runs"] == 0
    assert doc["spec"]["endpoint_id"] == ep and doc["spec"]["contexts"] == [1024], doc["spec"]
    assert doc["labels"] == {"team": "infra"} and doc["cron"] == "30 2 * * *"
    nxt = utc(doc["next_run_at"])
    now = datetime.now(timezone.utc)
    assert now < nxt < now + timedelta(hours=25), (now, nxt)
    local = nxt.astimezone(ZoneInfo("America/New_York"))
    # 02:30 New York time (03:00 on the one day a year that skips it)
    assert (local.hour, local.minute) in ((2, 30), (3, 0)), local
    sid = doc["id"]
    st, _, lst = call(s, "crud", "GET", "/v1/schedules")
    assert st == 200 and [x["id"] for x in lst["schedules"]] == [sid]
    st, _, one = call(s, "crud", "GET", "/v1/schedules/" + sid)
    assert st == 200 and one == doc
    # pause, resume
    st, _, p = call(s, "crud", "PATCH", "/v1/schedules/" + sid, {"paused": True})
    assert st == 200 and p["paused"] is True and p["next_run_at"] is None, p
    st, _, p = call(s, "crud", "PATCH", "/v1/schedules/" + sid, {"paused": False})
    assert st == 200 and p["paused"] is False and p["paused_reason"] is None
    assert p["next_run_at"] == doc["next_run_at"], p
    # a new cron and zone: a new next slot, 09:00 on a weekday in Berlin
    st, _, p = call(s, "crud", "PATCH", "/v1/schedules/" + sid,
                    {"cron": "0 9 * * mon-fri", "timezone": "Europe/Berlin"})
    assert st == 200, p
    local = utc(p["next_run_at"]).astimezone(ZoneInfo("Europe/Berlin"))
    assert (local.hour, local.minute) == (9, 0) and local.weekday() < 5, local
    # labels only: the slot stays as the ticker left it
    st, _, q = call(s, "crud", "PATCH", "/v1/schedules/" + sid, {"labels": {"team": "gpu"}})
    assert st == 200 and q["labels"] == {"team": "gpu"} and q["next_run_at"] == p["next_run_at"]
    # a new spec, normalised as POST /v1/jobs does
    st, _, q = call(s, "crud", "PATCH", "/v1/schedules/" + sid,
                    {"spec": {"contexts": ["2k", "4k"], "concurrency": [1, 2], "duration_s": 1}})
    assert st == 200 and q["spec"]["contexts"] == [2048, 4096] and q["spec"]["endpoint_id"] == ep
    # a preset instead of a spec
    st, _, pr = call(s, "crud", "POST", "/v1/presets",
                     {"name": "nightly", "spec": dict(SPEC, endpoint_id=ep)})
    assert st == 201, pr
    st, _, q = call(s, "crud", "PATCH", "/v1/schedules/" + sid, {"preset": "nightly"})
    assert st == 200 and q["preset"] == "nightly" and q["spec"] is None, q
    st, _, pdoc = call(s, "crud", "POST", "/v1/schedules",
                       {"endpoint_id": ep, "preset": "nightly", "cron": "@daily",
                        "timezone": "Asia/Kolkata", "paused": True})
    assert st == 201 and pdoc["paused"] is True and pdoc["next_run_at"] is None, pdoc
    # delete
    st, _, _ = call(s, "crud", "DELETE", "/v1/schedules/" + sid)
    assert st == 204
    assert call(s, "crud", "GET", "/v1/schedules/" + sid)[0] == 404
    assert call(s, "crud", "DELETE", "/v1/schedules/" + sid)[0] == 404
    assert call(s, "crud", "PATCH", "/v1/schedules/" + sid, {"paused": True})[0] == 404


def test_bad_input_names_the_field(ctx):
    s = setup(ctx)
    ep = endpoint(s, "bad")
    other_ep = endpoint(s, "bad-other")
    base = {"endpoint_id": ep, "spec": SPEC, "cron": YEARLY, "timezone": "UTC"}
    cases = [
        ({"cron": "0 0 30 2 *"}, "cron", "never fires"),
        ({"cron": "0 0 31 4 *"}, "cron", "never fires"),
        ({"cron": "*/2 * * * *"}, "cron", "more often than the minimum interval of 300 s"),
        ({"cron": "*/7 * * * *"}, "cron", "fires 240 s apart"),
        ({"cron": "61 * * * *"}, "cron", "minute: 61 is outside 0-59"),
        ({"cron": "* * * *"}, "cron", "five fields"),
        ({"cron": "@reboot"}, "cron", "unknown macro"),
        ({"cron": 5}, "cron", ""),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone", "unknown time zone"),
        ({"timezone": "../../etc/passwd"}, "timezone", "unknown time zone"),
        ({"timezone": "zone.tab"}, "timezone", "unknown time zone"),
        ({"timezone": "America"}, "timezone", "unknown time zone"),
        ({"timezone": ""}, "timezone", ""),
        ({"endpoint_id": "nope"}, "endpoint_id", ""),
        ({"endpoint_id": other_ep}, "endpoint_id", ""),  # another project's: checked below
        ({"spec": {"contexts": ["lots"]}}, "spec.contexts[0]", ""),
        ({"spec": {"bogus": 1}}, "spec.bogus", "unknown field"),
        ({"spec": dict(SPEC, endpoint_id=other_ep)}, "spec.endpoint_id", "differs"),
        ({"spec": [1]}, "spec", ""),
        ({"spec": dict(SPEC, duration_s=600, contexts=["1k", "2k", "4k", "8k"],
                       concurrency=[1, 2, 4, 8])}, "", "job_seconds"),
        ({"preset": "nightly"}, "preset", "not both"),
        ({"spec": None, "preset": "missing"}, "preset", "no preset"),
        ({"spec": None, "preset": "a b"}, "preset", ""),
        ({"spec": None}, "spec", "give spec"),
        ({"paused": "yes"}, "paused", ""),
        ({"labels": {"k": 5}}, "labels.k", ""),
        # 31 + the spec's "suite" + "schedule": more than a job may carry
        ({"labels": {"k%d" % i: "v" for i in range(31)}}, "spec.labels", ""),
        ({"extra": 1}, "extra", "unknown field"),
    ]
    for change, field, detail in cases:
        body = dict(base)
        body.update(change)
        body = {k: v for k, v in body.items() if v is not None}
        if change.get("endpoint_id") == other_ep:
            # the other project's own endpoint, named by this project: no such endpoint
            st, h, prob = call(s, "bad", "POST", "/v1/schedules", body)
            assert st == 422 and prob["errors"][0]["field"] == "endpoint_id", prob
            continue
        st, h, prob = call(s, "bad", "POST", "/v1/schedules", body)
        assert st == 422, (change, st, prob)
        assert h["content-type"].startswith("application/problem+json"), h
        if field:
            assert prob["errors"][0]["field"] == field, (change, prob)
            assert prob["detail"].startswith(field + ":"), (change, prob)
        assert detail in prob["detail"] or detail in json.dumps(prob), (change, prob)
    # nothing was stored, and the api still answers
    st, _, lst = call(s, "bad", "GET", "/v1/schedules")
    assert st == 200 and lst["schedules"] == []
    # bodies that are not JSON objects
    st, _, data = http("POST", s["base"] + "/v1/schedules", b"{nope",
                       {"Authorization": "Bearer " + key(s, "bad"),
                        "Content-Type": "application/json"})
    assert st == 400
    # another project's schedule is 404 everywhere
    theirs = schedule(s, "bad-other", other_ep)
    for meth, body in (("GET", None), ("PATCH", {"paused": True}), ("DELETE", None)):
        assert call(s, "bad", meth, "/v1/schedules/" + theirs["id"], body)[0] == 404
    # a change is checked as a create is
    mine = schedule(s, "bad", ep)
    for change, field in (({"cron": "0 0 30 2 *"}, "cron"), ({"timezone": "Nowhere/X"}, "timezone"),
                          ({"endpoint_id": other_ep}, "endpoint_id"),
                          ({"spec": {"concurrency": [0]}}, "spec.concurrency[0]"),
                          ({"preset": "missing"}, "preset"), ({"paused": 1}, "paused")):
        st, _, prob = call(s, "bad", "PATCH", "/v1/schedules/" + mine["id"], change)
        assert st == 422 and prob["errors"][0]["field"] == field, (change, prob)
    st, _, still = call(s, "bad", "GET", "/v1/schedules/" + mine["id"])
    assert still == mine


def test_cap_per_project(ctx):
    s = setup(ctx)
    ep = endpoint(s, "cap")
    made = [schedule(s, "cap", ep)["id"] for _ in range(4)]
    st, h, prob = call(s, "cap", "POST", "/v1/schedules",
                       {"endpoint_id": ep, "spec": SPEC, "cron": YEARLY, "timezone": "UTC"})
    assert st == 429, prob
    assert prob["limit"] == "schedules" and prob["setting"] == "TOKBENCH_LIMIT_SCHEDULES"
    assert prob["max"] == 4 and h["retry-after"] == "60"
    # another project is not held by this one's cap
    schedule(s, "cap-other", endpoint(s, "cap-other"))
    assert call(s, "cap", "DELETE", "/v1/schedules/" + made[0])[0] == 204
    schedule(s, "cap", ep)


# ---------------------------------------------------------------- the ticker

def test_a_due_slot_fires_once_as_a_job_that_names_it(ctx):
    s = setup(ctx)
    pg = s["pg"]
    ep = endpoint(s, "fire")
    sid = schedule(s, "fire", ep, labels={"team": "infra"})["id"]
    slot = make_due(pg, sid)
    wait_handled(pg, sid, slot)
    jobs = jobs_of(pg, sid)
    assert len(jobs) == 1, jobs
    assert jobs[0][1] == slot, (jobs, slot)
    st, _, sch = call(s, "fire", "GET", "/v1/schedules/" + sid)
    assert sch["runs"] == 1 and sch["last_job_id"] == jobs[0][0] and sch["last_error"] is None
    assert utc(sch["next_run_at"]) == datetime(datetime.now(timezone.utc).year + 1, 1, 1,
                                               tzinfo=timezone.utc), sch
    st, _, job = call(s, "fire", "GET", "/v1/jobs/" + jobs[0][0])
    assert st == 200 and job["state"] == "queued" and job["schedule_id"] == sid, job
    assert job["labels"] == {"suite": "sched", "team": "infra", "schedule": sid}, job["labels"]
    assert job["spec"]["contexts"] == [1024] and job["endpoint_id"] == ep
    # the job lists with its label like any job
    st, _, lst = call(s, "fire", "GET", "/v1/jobs?label=schedule:" + sid)
    assert st == 200 and [j["id"] for j in lst["jobs"]] == [jobs[0][0]]
    time.sleep(1.0)  # ten more ticks: nothing more
    assert len(jobs_of(pg, sid)) == 1
    assert '"msg":"schedule fired"' in s["proc"].output()


def test_gone_endpoint_or_preset_pauses_with_the_reason(ctx):
    s = setup(ctx)
    pg = s["pg"]
    ep = endpoint(s, "gone")
    sid = schedule(s, "gone", ep)["id"]
    assert call(s, "gone", "DELETE", "/v1/endpoints/" + ep)[0] == 204
    slot = make_due(pg, sid)
    wait_handled(pg, sid, slot)
    st, _, sch = call(s, "gone", "GET", "/v1/schedules/" + sid)
    assert sch["paused"] is True and sch["next_run_at"] is None, sch
    assert sch["paused_reason"] == "the endpoint %s was deleted" % ep, sch
    assert jobs_of(pg, sid) == []
    # it cannot be resumed on the endpoint that is gone; on another it can
    st, _, prob = call(s, "gone", "PATCH", "/v1/schedules/" + sid, {"paused": False})
    assert st == 422 and prob["errors"][0]["field"] == "endpoint_id", prob
    ep_new = endpoint(s, "gone", "gpu-new")
    st, _, sch = call(s, "gone", "PATCH", "/v1/schedules/" + sid,
                      {"paused": False, "endpoint_id": ep_new})
    assert st == 200 and sch["paused_reason"] is None and sch["next_run_at"], sch
    assert sch["spec"]["endpoint_id"] == ep_new, sch
    slot = make_due(pg, sid)
    wait_handled(pg, sid, slot)
    assert row(pg, sid, "paused, runs") == ["f", "1"]
    # a preset deleted
    ep2 = endpoint(s, "gone", "gpu2")
    st, _, _ = call(s, "gone", "POST", "/v1/presets", {"name": "p1", "spec": dict(SPEC, endpoint_id=ep2)})
    assert st == 201
    st, _, pdoc = call(s, "gone", "POST", "/v1/schedules",
                       {"endpoint_id": ep2, "preset": "p1", "cron": YEARLY, "timezone": "UTC"})
    assert st == 201, pdoc
    assert call(s, "gone", "DELETE", "/v1/presets/p1")[0] == 204
    slot = make_due(pg, pdoc["id"])
    wait_handled(pg, pdoc["id"], slot)
    st, _, sch = call(s, "gone", "GET", "/v1/schedules/" + pdoc["id"])
    assert sch["paused"] is True and sch["paused_reason"] == 'the preset "p1" was deleted', sch
    # an endpoint the egress policy refuses now (its URL moved under the api's feet)
    ep3 = endpoint(s, "gone", "gpu3")
    sid3 = schedule(s, "gone", ep3)["id"]
    pg.psql("UPDATE endpoints SET base_url = 'http://169.254.169.254/' WHERE id = '%s'" % ep3)
    slot = make_due(pg, sid3)
    wait_handled(pg, sid3, slot)
    st, _, sch = call(s, "gone", "GET", "/v1/schedules/" + sid3)
    assert sch["paused"] is True and "refused" in sch["paused_reason"], sch
    assert "169.254.169.254" in sch["paused_reason"], sch
    assert jobs_of(pg, sid3) == []


def test_a_refused_slot_is_recorded_and_other_projects_go_on(ctx):
    s = setup(ctx)
    pg = s["pg"]
    ep = endpoint(s, "storm")
    storm = [schedule(s, "storm", ep)["id"] for _ in range(3)]
    calm = schedule(s, "calm", endpoint(s, "calm"))["id"]
    # all four due at once: the storm project may queue 2 (TOKBENCH_LIMIT_QUEUED)
    slots = {sid: make_due(pg, sid, "now() - interval '10 seconds'") for sid in storm}
    slots[calm] = make_due(pg, calm)
    for sid, slot in slots.items():
        wait_handled(pg, sid, slot)
    assert len(jobs_of(pg, calm)) == 1
    made = [len(jobs_of(pg, sid)) for sid in storm]
    assert sorted(made) == [0, 1, 1], made
    refused = storm[made.index(0)]
    st, _, sch = call(s, "storm", "GET", "/v1/schedules/" + refused)
    assert sch["paused"] is False and sch["runs"] == 0, sch
    assert "queued_jobs" in sch["last_error"] and sch["last_error_at"], sch
    assert utc(sch["next_run_at"]) > datetime.now(timezone.utc)  # the slot is done, not retried


def test_restart_across_a_due_time_fires_once(ctx):
    """The slot came due while no api ran, and nine more after it: one job,
    and the next slot is the first after the clock now."""
    pg = ctx.postgres(fresh=True)
    a, base = start_api(ctx, pg, {"TOKBENCH_SCHEDULE_MIN_INTERVAL_S": "60"})
    s = {"pg": pg, "base": base, "keys": {}}
    ep = endpoint(s, "restart")
    doc = schedule(s, "restart", ep, cron="* * * * *")
    first = utc(doc["next_run_at"])
    assert a.stop() == 0
    # ten minutes later
    b, base = start_api(ctx, pg, {"TOKBENCH_SCHEDULE_CLOCK_OFFSET_S": "600",
                                  "TOKBENCH_SCHEDULE_MIN_INTERVAL_S": "60"})
    s["base"] = base
    wait_until(lambda: len(jobs_of(pg, doc["id"])) >= 1, 10, what="the missed slot")
    time.sleep(1.5)  # fifteen more ticks
    jobs = jobs_of(pg, doc["id"])
    assert len(jobs) == 1, jobs
    assert utc(jobs[0][1].replace(" ", "T").replace("+00", "+00:00")) == first
    st, _, sch = call(s, "restart", "GET", "/v1/schedules/" + doc["id"])
    nxt = utc(sch["next_run_at"])
    now = datetime.now(timezone.utc)
    assert now.timestamp() + 540 < nxt.timestamp() <= now.timestamp() + 661, (nxt, now)
    assert sch["runs"] == 1
    assert b.stop() == 0


def test_two_replicas_fire_each_slot_exactly_once(ctx):
    """Two api processes tick every 10 ms on one database; 40 schedules of
    four projects come due together, five times.  Every slot is one job."""
    pg = ctx.postgres(fresh=True)
    extra = {"TOKBENCH_SCHEDULE_TICK_MS": "10", "TOKBENCH_LIMIT_SCHEDULES": "0",
             "TOKBENCH_LIMIT_QUEUED": "0", "TOKBENCH_SCHEDULE_MIN_INTERVAL_S": "60"}
    r1, base1 = start_api(ctx, pg, extra)
    r2, _ = start_api(ctx, pg, extra)
    s = {"pg": pg, "base": base1, "keys": {}}
    ids = []
    for p in ("race-a", "race-b", "race-c", "race-d"):
        ep = endpoint(s, p)
        ids += [schedule(s, p, ep, cron="* * * * *")["id"] for _ in range(10)]
    rounds = 5
    for k in range(rounds):
        pg.psql("UPDATE schedules SET next_run_at = timestamptz '2020-01-01 00:00:00+00' + "
                "interval '%d minutes'" % k)
        wait_until(lambda: pg.psql("SELECT count(*) FROM schedules WHERE next_run_at <= now()")
                   .strip() == "0", 20, what="round %d fired" % k)
    dup = pg.psql("SELECT count(*) FROM (SELECT schedule_id, schedule_slot FROM jobs "
                  "GROUP BY 1, 2 HAVING count(*) > 1) d").strip()
    assert dup == "0"
    per_round = pg.psql("SELECT count(*) FROM jobs WHERE schedule_slot < '2021-01-01' "
                        "GROUP BY schedule_slot ORDER BY schedule_slot").split()
    assert per_round == ["40"] * rounds, per_round
    runs = pg.psql("SELECT min(runs), count(*) FROM schedules").strip()
    assert int(runs.split("|")[0]) >= rounds, runs
    out1, out2 = r1.output(), r2.output()
    fired = (out1.count('"msg":"schedule fired"'), out2.count('"msg":"schedule fired"'))
    total = int(pg.psql("SELECT count(*) FROM jobs").strip())
    print("# fired by replica 1: %d, replica 2: %d, jobs: %d" % (fired[0], fired[1], total))
    assert sum(fired) == total
    for out in (out1, out2):
        assert "a schedule's slot failed" not in out and "duplicate key" not in out


def test_a_scheduled_run_that_regressed_reaches_the_callback(ctx):
    """A schedule's run ends like any job's: the Standard Webhooks callback,
    with the verdict against the schedule's history (its runs are one
    series: the "schedule" label)."""
    pg = ctx.postgres(fresh=True)
    _, base = start_api(ctx, pg, {"TOKBENCH_LIMIT_QUEUED": "10", "TOKBENCH_DELIVERY_BACKOFF_MS": "300"})
    s = {"pg": pg, "base": base, "keys": {}}
    worker = ctx.process("tokbench-worker", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_MASTER_KEY": MASTER,
        "TOKBENCH_WORKER_ID": "w-sched", "TOKBENCH_LEASE_S": "15", "TOKBENCH_HEARTBEAT_S": "2"})
    wait_until(lambda: '"msg":"worker ready"' in worker.output(), 20, what="worker ready")
    sim = ctx.sim("tiny")
    ep = endpoint(s, "nightly", "sim", sim.url)
    rec = test_deliveries.Receiver(ctx)
    st, _, cb = call(s, "nightly", "POST", "/v1/callbacks", {"url": rec.url})
    assert st == 201, cb
    spec = {"contexts": [512], "concurrency": [1, 2], "prefill_contexts": [512],
            "duration_s": 0.4, "settle_s": 0.05, "max_output": 256}
    sid = schedule(s, "nightly", ep, spec=spec, cron="0 3 * * *", timezone="Europe/Berlin")["id"]

    def run():
        slot = make_due(pg, sid)
        wait_handled(pg, sid, slot)
        job = jobs_of(pg, sid)[-1][0]
        wait_until(lambda: pg.psql("SELECT state FROM jobs WHERE id = '%s'" % job).strip()
                   in ("succeeded", "failed"), 120, what="the run")
        got = wait_until(lambda: [g for g in rec.got if json.loads(g[1])["data"]["job_id"] == job],
                         20, what="its callback")
        return job, got[0]

    first, (headers, body, _) = run()
    assert test_deliveries.verify_standard(cb["secret"], headers, body), headers
    d = json.loads(body)
    assert d["type"] == "job.succeeded", d
    d = d["data"]
    assert d["schedule_id"] == sid and d["schedule_slot"] is not None, d
    assert d["labels"]["schedule"] == sid and d["regressed"] is False, d
    # a history of five runs like the first, imported under the same labels
    st, _, doc = call(s, "nightly", "GET", "/v1/jobs/%s/result" % first)
    for f in (1.002, 0.997, 1.004, 0.999, 1.001):
        r = json.loads(json.dumps(doc))
        for c in r["cells"]:
            if c.get("phase") == "decode" and c.get("status") == "valid":
                c["total_tps"] *= f
        r.pop("regressions", None)
        st, _, imp = call(s, "nightly", "POST", "/v1/results",
                          {"endpoint_id": ep, "result": r, "labels": d["labels"]})
        assert st == 201, imp
    # the server at half speed: tonight's run regressed, and the team hears of it
    slow = ctx.sim("tiny", args=["--time-scale", "0.5"])
    assert call(s, "nightly", "PATCH", "/v1/endpoints/" + ep, {"base_url": slow.url})[0] == 200
    second, (headers, body, _) = run()
    assert test_deliveries.verify_standard(cb["secret"], headers, body), headers
    d = json.loads(body)["data"]
    assert d["job_id"] == second and d["schedule_id"] == sid, d
    assert d["regressed"] is True and d["regressions_total"] > 0, d
    assert any(g["metric"] == "total_tps" for g in d["regressions"]), d["regressions"]
