"""A job names an uploaded trace by trace.id alone (docs/traces.md "Traces
in the service"): the stored trace knows its format.

- A job with only trace.id runs through api + worker + tokbench-sim: its
  spec (GET /v1/jobs/{id}) and its result's trace cell name the stored
  format; so does a preset's job.
- A trace.format beside the id that is not the stored trace's is 422
  problem+json naming trace.format, the trace and both formats; a trace
  object with neither id nor format is 422 naming trace.id.
- Another project's trace is 422 "no such trace in this project" on
  trace.id with or without a format, exactly as a missing one.
- The submit/delete race is closed in SQL: a DELETE that holds the trace's
  row makes a job naming it wait and then answers it 422 (no job names a
  deleted trace); a job being queued that holds the row makes a DELETE
  wait and then answers it 409.  Each side is driven by psql holding the
  lock the other side of the api takes (service/q_traces.c).
- A trace removed behind the api's back fails the job in the worker with a
  reason naming the trace and that it was deleted.
- Under an Idempotency-Key the replay is the first answer, format and all.
- A spec stored without a format (SQL) still replays: the worker takes the
  stored trace's, and the result records it.
"""
import json
import subprocess
import threading

import harness
import test_tenancy
from test_tenancy import Api, make_key
from test_trace import BIG
from test_traces_api import fixture, is_problem, upload, wait_job

STATE = {}


def setup(ctx):
    if STATE:
        return STATE
    STATE.update(harness.service(ctx, test_tenancy.MASTER, "traceid-a", "w-traceid"))
    STATE["api"] = Api(ctx, STATE["pg"])
    return STATE


def dead_endpoint(api, key, name):
    """An endpoint with nothing listening: its jobs are checked and queued,
    and end (cancel) without measuring anything."""
    st, _, ep = api.json("POST", "/v1/endpoints", key, {"name": name,
                                                        "base_url": "http://127.0.0.1:9"})
    assert st == 201, ep
    return ep


def project_of(pg, trace_id):
    return pg.psql("SELECT project_id FROM traces WHERE id = '%s'" % trace_id).strip()


class HeldTx:
    """One psql session whose transaction stays open between calls."""

    def __init__(self, pg):
        self.p = subprocess.Popen(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-Atq", "-d", pg.url],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.n = 0

    def run(self, sql):
        """Runs sql; returns its output lines once psql has done it."""
        self.n += 1
        mark = "held-done-%d" % self.n
        self.p.stdin.write(sql + "\n\\echo " + mark + "\n")
        self.p.stdin.flush()
        out = []
        while True:
            line = self.p.stdout.readline()
            assert line, "psql ended: %s" % "".join(out)
            if line.strip() == mark:
                return out
            out.append(line.strip())

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=30) == 0


def cancel(api, key, jid):
    """Ends a job of a dead endpoint: cancelled (200 queued: at once; 202
    running), or failed already (the worker found nothing listening: 409)."""
    st, _, doc = api.json("POST", "/v1/jobs/%s/cancel" % jid, key)
    assert st in (200, 202, 409), (st, doc)
    doc = wait_job(api, key, jid)
    assert doc["state"] in ("cancelled", "failed"), doc
    assert "trace" not in (doc["error"] or ""), doc  # never for want of its trace


def in_thread(fn):
    box = {}

    def go():
        box["r"] = fn()
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, box


def test_only_the_id(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + BIG)
    st, _, ep = api.json("POST", "/v1/endpoints", key, {"name": "id-sim", "base_url": sim.url})
    assert st == 201, ep
    st, _, t = upload(api, key, fixture("bailian.jsonl"), "bailian", "id-only")
    assert st == 201 and t["format"] == "bailian", t
    st, _, job = api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep["id"], "trace": {"id": t["id"], "duration_s": 20, "speedup": 4}})
    assert st == 202, job
    # the spec as queued names the stored format
    assert job["spec"]["trace"] == {"id": t["id"], "format": "bailian", "duration_s": 20,
                                    "speedup": 4}, job["spec"]
    doc = wait_job(api, key, job["id"])
    assert doc["state"] == "succeeded", doc
    st, _, res = api.json("GET", "/v1/jobs/%s/result" % job["id"], key)
    assert st == 200, res
    cells = res["cells"]
    assert [c["phase"] for c in cells] == ["rate"], cells
    c = cells[0]
    tr = c["trace"]
    assert c["status"] == "valid", c.get("reason")
    assert c["trace_format"] == "bailian" and tr["format"] == "bailian", (c["trace_format"], tr)
    assert tr["id"] == t["id"] and c["completed"] == c["requests"] == tr["requests"], (c, tr)
    assert abs(tr["hit_pct"] - tr["implied_hit_pct"]) <= 2, tr
    print("# trace.id alone: %s, %d requests, hit %.1f%% / implied %.1f%%"
          % (tr["format"], tr["requests"], tr["hit_pct"], tr["implied_hit_pct"]))
    # a preset's job too: its spec is checked, and filled, as the job is made
    dead = dead_endpoint(api, key, "id-dead")
    st, _, pr = api.json("POST", "/v1/presets", key, {"name": "by-id", "spec": {
        "endpoint_id": dead["id"], "trace": {"id": t["id"]}}})
    assert st == 201, pr
    st, _, pj = api.json("POST", "/v1/presets/by-id/jobs", key, {"labels": {"x": "y"}})
    assert st == 202, pj
    st, _, got = api.json("GET", "/v1/jobs/" + pj["id"], key)
    assert got["spec"]["trace"] == {"id": t["id"], "format": "bailian"}, got["spec"]
    cancel(api, key, pj["id"])


def test_format_mismatch_and_missing(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    ep = dead_endpoint(api, key, "mismatch-dead")
    st, _, t = upload(api, key, fixture("weka.json"), "weka", "mismatch")
    assert st == 201, t
    st, hd, doc = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"],
                                                     "trace": {"id": t["id"], "format": "mooncake"}})
    assert st == 422, doc
    is_problem(hd, doc, 422)
    assert [e["field"] for e in doc["errors"]] == ["trace.format"], doc
    d = doc["errors"][0]["detail"]
    assert '"weka"' in d and '"mooncake"' in d and t["id"] in d, d
    # the stored format given: queued as before
    st, _, job = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"],
                                                    "trace": {"id": t["id"], "format": "weka"}})
    assert st == 202, job
    cancel(api, key, job["id"])
    # neither id nor format: the id is what is missing, through the service
    for trace in ({}, {"speedup": 2}):
        st, hd, doc = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"], "trace": trace})
        assert st == 422 and [e["field"] for e in doc["errors"]] == ["trace.id"], (trace, doc)
        is_problem(hd, doc, 422)
    # a good trace of an endpoint not the project's: the transaction that
    # held the trace is rolled back, and the connection serves on
    for _ in range(3):
        st, hd, doc = api.json("POST", "/v1/jobs", key, {
            "endpoint_id": "0e7e4b2a-4524-4bd4-9cd9-a930e616e5be", "trace": {"id": t["id"]}})
        assert st == 422 and doc["errors"] == [{"field": "endpoint_id", "detail":
                                                "no such endpoint in this project"}], doc
    assert api.json("DELETE", "/v1/traces/" + t["id"], key)[0] == 204
    # a preset with neither is refused as it is saved
    st, _, doc = api.json("POST", "/v1/presets", key, {"name": "no-trace", "spec": {
        "endpoint_id": ep["id"], "trace": {"speedup": 2}}})
    assert st == 422 and "trace.id" in json.dumps(doc), doc


def test_another_projects_trace_by_id_alone(ctx):
    s = setup(ctx)
    api, ka = s["api"], s["key"]
    kb = make_key(s["pg"], "traceid-b")
    st, _, t = upload(api, ka, fixture("mooncake.jsonl"), "mooncake", "a-only")
    assert st == 201, t
    ep = dead_endpoint(api, kb, "b-dead")
    for trace in ({"id": t["id"]}, {"id": t["id"], "format": "mooncake"},
                  {"id": t["id"], "format": "weka"}):
        st, hd, doc = api.json("POST", "/v1/jobs", kb, {"endpoint_id": ep["id"], "trace": trace})
        assert st == 422 and doc["errors"] == [{"field": "trace.id",
                                                "detail": "no such trace in this project"}], doc
        is_problem(hd, doc, 422)
    st, _, page = api.json("GET", "/v1/jobs?limit=100", kb)
    assert st == 200 and page["jobs"] == [], page
    assert api.json("GET", "/v1/traces/" + t["id"], kb)[0] == 404


def test_delete_first_refuses_the_job(ctx):
    """A DELETE holding the trace's row (here psql, as tb_q_traces_delete
    does): a job naming the trace waits for it, then is 422, and no job is
    queued naming a deleted trace."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    ep = dead_endpoint(api, key, "race-dead-1")
    st, _, t = upload(api, key, fixture("azure2023.csv"), "azure", "race-1")
    assert st == 201, t
    held = HeldTx(pg)
    held.run("BEGIN;")
    assert held.run("SELECT 1 FROM traces WHERE id = '%s' FOR UPDATE;" % t["id"]) == ["1"]
    th, box = in_thread(lambda: api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep["id"], "trace": {"id": t["id"]}}))
    th.join(1.5)
    assert th.is_alive(), box  # the job's check waits for the row
    held.run("DELETE FROM traces WHERE id = '%s'; COMMIT;" % t["id"])
    th.join(30)
    st, hd, doc = box["r"]
    assert st == 422 and doc["errors"] == [{"field": "trace.id",
                                            "detail": "no such trace in this project"}], doc
    is_problem(hd, doc, 422)
    held.close()
    assert pg.psql("SELECT count(*) FROM jobs WHERE spec->'trace'->>'id' = '%s'"
                   % t["id"]).strip() == "0"


def test_job_first_makes_delete_409(ctx):
    """A job being queued holding the trace's row (psql does what
    tb_api_traces_job_insert does: the row FOR KEY SHARE, then the job's
    insert): a DELETE waits for its commit, then sees the job: 409."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    ep = dead_endpoint(api, key, "race-dead-2")
    st, _, t = upload(api, key, fixture("azure2023.csv"), "azure", "race-2")
    assert st == 201, t
    held = HeldTx(pg)
    held.run("BEGIN;")
    assert held.run("SELECT format FROM traces WHERE id = '%s' FOR KEY SHARE;" % t["id"]) == ["azure"]
    spec = json.dumps({"endpoint_id": ep["id"], "trace": {"id": t["id"], "format": "azure"}})
    jid = held.run("INSERT INTO jobs (project_id, endpoint_id, spec, busy_key) VALUES "
                   "('%s', '%s', '%s'::jsonb, '%s') RETURNING id;"
                   % (project_of(pg, t["id"]), ep["id"], spec, ep["id"]))[0]
    th, box = in_thread(lambda: api.json("DELETE", "/v1/traces/" + t["id"], key))
    th.join(1.5)
    assert th.is_alive(), box  # the delete waits for the row
    held.run("COMMIT;")
    th.join(30)
    st, hd, doc = box["r"]
    assert st == 409, doc
    is_problem(hd, doc, 409)
    held.close()
    assert api.json("GET", "/v1/traces/" + t["id"], key)[0] == 200
    cancel(api, key, jid)
    assert api.json("DELETE", "/v1/traces/" + t["id"], key)[0] == 204


def test_deleted_behind_the_apis_back(ctx):
    """The worker's reason when the trace is gone anyway (removed by SQL
    while its job waits behind another of its exclusive group)."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    sim = ctx.sim("tiny", "vllm", args=BIG)
    st, _, ep = api.json("POST", "/v1/endpoints", key, {"name": "gone-sim", "base_url": sim.url})
    assert st == 201, ep
    st, _, t = upload(api, key, fixture("azure2023.csv"), "azure", "gone")
    assert st == 201, t
    spec = {"endpoint_id": ep["id"], "exclusive_group": "gone-node",
            "trace": {"id": t["id"], "duration_s": 60}}
    st, _, first = api.json("POST", "/v1/jobs", key, spec)
    assert st == 202, first
    st, _, second = api.json("POST", "/v1/jobs", key, spec)
    assert st == 202, second
    harness.wait_until(lambda: api.json("GET", "/v1/jobs/" + first["id"], key)[2]["state"]
                       == "running", 60, what="the first job running")
    assert api.json("GET", "/v1/jobs/" + second["id"], key)[2]["state"] == "queued"
    pg.psql("DELETE FROM traces WHERE id = '%s'" % t["id"])
    assert api.json("POST", "/v1/jobs/%s/cancel" % first["id"], key)[0] == 202
    doc = wait_job(api, key, second["id"])
    assert doc["state"] == "failed", doc
    e = doc["error"]
    assert t["id"] in e and "deleted" in e and "is not in the job's project" in e, e
    print("# the worker's reason: %s" % e)
    assert wait_job(api, key, first["id"])["state"] == "cancelled"


def test_idempotent_submit_by_id(ctx):
    """With an Idempotency-Key the trace's check and the job's insert run in
    the key's transaction: the replay answers the first body, format and
    all, and one job is queued."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    ep = dead_endpoint(api, key, "idem-dead")
    st, _, t = upload(api, key, fixture("mooncake.jsonl"), "mooncake", "idem")
    assert st == 201, t
    body = {"endpoint_id": ep["id"], "trace": {"id": t["id"]}}
    h = {"Idempotency-Key": "traceid-idem-1"}
    st, _, first = api.json("POST", "/v1/jobs", key, body, h)
    assert st == 202 and first["spec"]["trace"]["format"] == "mooncake", first
    st, hd, again = api.json("POST", "/v1/jobs", key, body, h)
    assert st == 202 and hd.get("idempotent-replayed") == "true" and again == first, (hd, again)
    assert pg.psql("SELECT count(*) FROM jobs WHERE spec->'trace'->>'id' = '%s'"
                   % t["id"]).strip() == "1"
    # a mismatch under a key: 422, and the key is free for a good body
    st, hd, doc = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"], "trace": {
        "id": t["id"], "format": "azure"}}, {"Idempotency-Key": "traceid-idem-2"})
    assert st == 422 and doc["errors"][0]["field"] == "trace.format", doc
    is_problem(hd, doc, 422)
    st, hd, second = api.json("POST", "/v1/jobs", key, body, {"Idempotency-Key": "traceid-idem-2"})
    assert st == 202 and "idempotent-replayed" not in hd and second["id"] != first["id"], second
    cancel(api, key, first["id"])
    cancel(api, key, second["id"])


def test_worker_takes_the_stored_format(ctx):
    """A spec stored without trace.format (here its format removed by SQL
    while the job waits behind another of its exclusive group) still
    replays: the worker takes the stored trace's format, and the result
    records it."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + BIG)
    st, _, ep = api.json("POST", "/v1/endpoints", key, {"name": "fill-sim", "base_url": sim.url})
    assert st == 201, ep
    st, _, t = upload(api, key, fixture("weka.json"), "weka", "fill")
    assert st == 201, t
    spec = {"endpoint_id": ep["id"], "exclusive_group": "fill-node",
            "trace": {"id": t["id"], "duration_s": 20, "speedup": 4}}
    st, _, first = api.json("POST", "/v1/jobs", key, dict(spec, trace={"id": t["id"],
                                                                       "duration_s": 600}))
    assert st == 202, first
    st, _, second = api.json("POST", "/v1/jobs", key, spec)
    assert st == 202, second
    harness.wait_until(lambda: api.json("GET", "/v1/jobs/" + first["id"], key)[2]["state"]
                       == "running", 60, what="the first job running")
    pg.psql("UPDATE jobs SET spec = spec #- '{trace,format}' WHERE id = '%s'" % second["id"])
    st, _, got = api.json("GET", "/v1/jobs/" + second["id"], key)
    assert got["state"] == "queued" and "format" not in got["spec"]["trace"], got
    cancel(api, key, first["id"])
    doc = wait_job(api, key, second["id"])
    assert doc["state"] == "succeeded", doc
    st, _, res = api.json("GET", "/v1/jobs/%s/result" % second["id"], key)
    assert st == 200, res
    c = res["cells"][0]
    assert c["status"] == "valid", c.get("reason")
    assert c["trace_format"] == "weka" and c["trace"]["format"] == "weka", c["trace"]
    assert abs(c["trace"]["hit_pct"] - c["trace"]["implied_hit_pct"]) <= 2, c["trace"]


def test_a_traces_span_counts_in_the_job_seconds(ctx):
    """Issue 34, item 2: a 2-request Mooncake trace 10^12 ms (31 years)
    long was a job that held a worker until cancelled.  Its span counts in
    the job's seconds (TOKBENCH_LIMIT_JOB_SECONDS, 21600 by default) as a
    duration_s of 10^9 would: 422 job_seconds at submit, nothing queued;
    scaled by speedup and rate_scale; a duration_s bounds it instead.
    Another project's job is queued beside it all the while."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    ep = dead_endpoint(api, key, "span-dead")
    long = (b'{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
            b'{"timestamp": 1000000000000, "input_length": 10, "output_length": 2, '
            b'"hash_ids": [2]}\n')
    st, _, t = upload(api, key, long, "mooncake", "thirty-one-years")
    assert st == 201, t
    assert abs(t["summary"]["span_s"] - 1e9) < 1, t["summary"]  # what the estimate reads
    before = pg.psql("SELECT count(*) FROM jobs").strip()
    st, hd, p = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"],
                                                    "trace": {"id": t["id"]}})
    is_problem(hd, p, 422)
    assert p["type"].endswith("/job-too-large") and p["limit"] == "job_seconds", p
    assert p["max"] == 21600 and abs(p["value"] - 1e9) < 1, p
    # seven rate cells of an hour each, for comparison: the same refusal
    st, _, q = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"],
                                                   "rates": [1, 2, 3, 4, 5, 6, 7],
                                                   "rate_duration_s": 3600})
    assert st == 422 and q.get("limit") == "job_seconds", (st, q)
    # scaled: a trace of 10^5 s is refused as it is, and taken at speedup 10
    # (10^4 s) or at speedup 2 x rate_scale 2.5 (2 x 10^4 s)
    day = long.replace(b"1000000000000", b"100000000")
    st, _, t2 = upload(api, key, day, "mooncake", "a-day-and-more")
    assert st == 201 and abs(t2["summary"]["span_s"] - 1e5) < 1e-3, t2
    st, _, p = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"],
                                                   "trace": {"id": t2["id"]}})
    assert st == 422 and p.get("limit") == "job_seconds" and abs(p["value"] - 1e5) < 1e-3, p
    st, _, ok = api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep["id"], "trace": {"id": t2["id"], "speedup": 10}})
    assert st == 202, ok
    st, _, ok3 = api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep["id"], "trace": {"id": t2["id"], "speedup": 2, "rate_scale": 2.5}})
    assert st == 202, ok3
    # a window bounds the replay: 60 s
    st, _, ok2 = api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep["id"], "trace": {"id": t["id"], "duration_s": 60}})
    assert st == 202, ok2
    assert int(pg.psql("SELECT count(*) FROM jobs").strip()) == int(before) + 3
    # another project's small job is taken as ever
    other = harness.make_key(pg, "traceid-b", "--admin")
    oep = dead_endpoint(api, other, "span-other")
    st, _, oj = api.json("POST", "/v1/jobs", other, {"endpoint_id": oep["id"], "duration_s": 1,
                                                     "contexts": ["1k"], "concurrency": [1],
                                                     "prefill_contexts": []})
    assert st == 202, oj
    for j in (ok, ok2, ok3, oj):
        api.json("POST", "/v1/jobs/%s/cancel" % j["id"], other if j is oj else key)
