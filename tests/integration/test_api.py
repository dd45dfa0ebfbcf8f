"""The REST API (issue 5): keys, endpoints, jobs, errors, isolation, secrets,
idempotency, long-poll, SSE, database restarts.  Real tokbench-api, real
PostgreSQL, real HTTP; the worker is simulated by SQL where a test needs a
job to move (the worker's own tests run the real one)."""
import http.client as hc
import json
import threading
import time
import urllib.parse

import harness
from harness import http, http_json, wait_until

MASTER = "9f" * 32
EP_SECRET = "sk-endpoint-SECRET-5f1e2d"


class Api(harness.Api):
    def __init__(self, ctx, pg, env=None):
        super().__init__(ctx, pg, MASTER, dict({"TOKBENCH_DB_WAIT_MS": "5000"}, **(env or {})),
                         ready="/healthz")


RESPONSES = []  # every body seen, checked for secrets at the end


def keep(resp):
    RESPONSES.append(resp[2] if isinstance(resp[2], bytes) else json.dumps(resp[2]).encode())
    RESPONSES.append(json.dumps(resp[1]).encode())
    return resp


make_key = harness.make_key


STATE = {}


def setup(ctx):
    if STATE:
        return STATE
    pg = ctx.postgres()
    api = Api(ctx, pg)
    STATE.update(pg=pg, api=api, admin=make_key(pg, "alpha", "--admin"),
                 other=make_key(pg, "beta", "--admin"))
    return STATE


def new_endpoint(api, key, name, **kw):
    body = {"name": name, "base_url": "http://127.0.0.1:9", "api_key": EP_SECRET,
            "launch_command": "vllm serve m --api-key %s --port 8000" % EP_SECRET,
            "hardware": {"gpu": "H200", "count": 2, "vram_gb": 141}}
    body.update(kw)
    st, h, doc = keep(api.json("POST", "/v1/endpoints", key, body))
    assert st == 201, doc
    return doc


def submit(api, key, ep_id, **kw):
    spec = {"endpoint_id": ep_id, "contexts": ["8k", 16384], "concurrency": [1, 2],
            "duration_s": 1, "labels": {"gpu": "h200"}}
    spec.update(kw)
    st, h, doc = keep(api.json("POST", "/v1/jobs", key, spec))
    assert st == 202, doc
    assert h["location"] == "/v1/jobs/" + doc["id"]
    return doc


def test_job_list_every_filter_set_pages(ctx):
    """GET /v1/jobs runs one statement per set of filters and per page
    (q_jobs.c): each of the eight sets, paged two at a time, gives exactly
    the project's matching jobs, newest first, and no other project's."""
    s = setup(ctx)
    api, pg = s["api"], s["pg"]
    key = make_key(pg, "gamma", "--admin")
    eps = [new_endpoint(api, key, "list-%d" % i)["id"] for i in range(2)]
    jobs = []  # (id, endpoint, suite, state), oldest first
    for i in range(12):
        suite = "a" if i % 3 else "b"
        j = submit(api, key, eps[i % 2], labels={"suite": suite})
        jobs.append([j["id"], eps[i % 2], suite, "queued"])
    for j in jobs[1::4]:
        assert api.json("POST", "/v1/jobs/%s/cancel" % j[0], key)[0] == 200
        j[3] = "cancelled"
    # another project's job that every filter would match
    okey = make_key(pg, "delta", "--admin")
    oep = new_endpoint(api, okey, "list-other")["id"]
    submit(api, okey, oep, labels={"suite": "a"})
    pg.psql("UPDATE jobs SET state = 'cancelled' WHERE endpoint_id = '%s'" % oep)
    for state in (None, "cancelled", "queued"):
        for ep in (None, eps[1]):
            for suite in (None, "a"):
                want = [j[0] for j in reversed(jobs)
                        if (state is None or j[3] == state) and (ep is None or j[1] == ep)
                        and (suite is None or j[2] == suite)]
                q = "/v1/jobs?limit=2"
                q += "&state=" + state if state else ""
                q += "&endpoint_id=" + ep if ep else ""
                q += "&label=suite:" + suite if suite else ""
                seen, cursor = [], None
                while True:
                    st, _, page = api.json("GET", q + ("&cursor=" + cursor if cursor else ""), key)
                    assert st == 200 and len(page["jobs"]) <= 2, page
                    seen += [j["id"] for j in page["jobs"]]
                    cursor = page["next_cursor"]
                    if not cursor:
                        break
                assert seen == want, (q, seen, want)
                assert want  # every set matches some


def test_keys_cli_and_api(ctx):
    s = setup(ctx)
    api, admin = s["api"], s["admin"]
    st, h, doc = keep(api.json("POST", "/v1/keys", admin, {"name": "ci", "scopes": ["read"],
                                                             "expires_in": "30d"}))
    assert st == 201 and doc["key"].startswith("tkb_") and doc["scopes"] == ["read"]
    assert doc["expires_at"] is not None and "key_hash" not in doc
    s["reader"] = doc["key"]
    st, _, lst = keep(api.json("GET", "/v1/keys", admin))
    assert st == 200 and len(lst["keys"]) == 2
    for k in lst["keys"]:
        assert set(k) == {"id", "name", "prefix", "scopes", "created_at", "expires_at",
                          "revoked_at", "last_used_at"}
    # the database holds only the hash
    assert pg_has(s["pg"], doc["key"]) is False
    # a read key reads but does not write or administer
    assert api.req("GET", "/v1/jobs", doc["key"])[0] == 200
    st, h, p = keep(api.json("POST", "/v1/endpoints", doc["key"], {"name": "x", "base_url": "http://a"}))
    assert st == 403 and h["content-type"] == "application/problem+json" and p["status"] == 403
    assert api.req("GET", "/v1/keys", doc["key"])[0] == 403
    # revocation is seen at once (NOTIFY tb_keys_changed flushes the cache)
    st, _, k2 = keep(api.json("POST", "/v1/keys", admin, {"name": "tmp"}))
    assert api.req("GET", "/v1/jobs", k2["key"])[0] == 200
    st, _, rv = keep(api.json("DELETE", "/v1/keys/" + k2["id"], admin))
    assert st == 200 and rv["revoked_at"] is not None
    st, h, p = api.json("GET", "/v1/jobs", k2["key"])
    assert st == 401 and p["type"].endswith("/key-revoked") and "Bearer" in h["www-authenticate"]


def pg_has(pg, text):
    dump = pg.psql("SELECT string_agg(t::text, ' ') FROM (SELECT k FROM api_keys k) t")
    dump += pg.psql("SELECT string_agg(t::text, ' ') FROM (SELECT e FROM endpoints e) t")
    return text in dump


def test_endpoints(ctx):
    s = setup(ctx)
    api, admin = s["api"], s["admin"]
    ep = new_endpoint(api, admin, "gpu-1", engine_hint="vllm", exclusive_group="rack-1",
                      engine={"name": "vllm", "version": "0.11"})
    assert ep["api_key_set"] is True and "api_key" not in ep
    assert ep["launch_command"] == "vllm serve m --api-key <redacted> --port 8000"
    assert ep["hardware"] == {"gpu": "H200", "count": 2, "vram_gb": 141.0}
    s["ep"] = ep
    st, h, one = keep(api.json("GET", "/v1/endpoints/" + ep["id"], admin))
    assert st == 200 and one["name"] == "gpu-1"
    st, _, lst = keep(api.json("GET", "/v1/endpoints", admin))
    assert [e["id"] for e in lst["endpoints"]] == [ep["id"]]
    st, _, pt = keep(api.json("PATCH", "/v1/endpoints/" + ep["id"], admin,
                              {"launch_command": "sglang --api_key=%s" % EP_SECRET,
                               "exclusive_group": None}))
    assert st == 200 and pt["launch_command"] == "sglang --api_key=<redacted>"
    assert pt["exclusive_group"] is None and pt["api_key_set"] is True
    # the sealed key opens only with the master key and the endpoint id
    sealed = s["pg"].psql("SELECT api_key_sealed FROM endpoints WHERE id = '%s'" % ep["id"]).strip()
    assert sealed and EP_SECRET not in sealed
    assert not pg_has(s["pg"], EP_SECRET)
    # names are unique per project; a deleted endpoint gives its name back
    st, _, p = keep(api.json("POST", "/v1/endpoints", admin, {"name": "gpu-1", "base_url": "http://b"}))
    assert st == 409
    tmp = new_endpoint(api, admin, "gpu-tmp")
    assert keep(api.req("DELETE", "/v1/endpoints/" + tmp["id"], admin))[0] == 204
    assert api.req("GET", "/v1/endpoints/" + tmp["id"], admin)[0] == 404
    new_endpoint(api, admin, "gpu-tmp")
    # base_url must be http(s)
    st, _, p = api.json("POST", "/v1/endpoints", admin, {"name": "f", "base_url": "file:///etc/passwd"})
    assert st == 422 and p["errors"][0]["field"] == "base_url"


def test_probe(ctx):
    s = setup(ctx)
    api, admin = s["api"], s["admin"]
    sim = ctx.sim(args=["--api-key", EP_SECRET])
    ep = new_endpoint(api, admin, "sim-1", base_url=sim.url)
    st, _, found = keep(api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], admin, timeout=60))
    assert st == 200, found
    assert found.get("max_model_len") and found.get("model")
    # without the key the endpoint refuses: 502 problem
    ep2 = new_endpoint(api, admin, "sim-nokey", base_url=sim.url, api_key="wrong-key")
    st, h, p = keep(api.json("POST", "/v1/endpoints/%s/probe" % ep2["id"], admin, timeout=60))
    assert st == 502 and h["content-type"] == "application/problem+json"


def test_jobs_submit_get_list_cancel(ctx):
    s = setup(ctx)
    api, admin, pg = s["api"], s["admin"], s["pg"]
    ep = s["ep"]
    job = submit(api, admin, ep["id"], priority=5, max_attempts=2)
    assert job["state"] == "queued" and job["spec"]["contexts"] == [8192, 16384]
    row = pg.psql("SELECT busy_key, priority, max_attempts FROM jobs WHERE id = '%s'" % job["id"]).strip()
    assert row == "%s|5|2" % ep["id"]  # no exclusive group (cleared by PATCH): the endpoint
    job2 = submit(api, admin, ep["id"], exclusive_group="grp-x", labels={"gpu": "h100", "run": "b"})
    # an exclusive group is the project's own (issue 13; test_tenancy.py)
    assert pg.psql("SELECT busy_key FROM jobs WHERE id = '%s'" % job2["id"]).strip() == \
        "group:%s:grp-x" % pg.psql("SELECT project_id FROM jobs WHERE id = '%s'" % job2["id"]).strip()
    st, h, got = keep(api.json("GET", "/v1/jobs/" + job["id"], admin))
    assert st == 200 and got["progress"] == {"cells_done": 0, "cells_total": None,
                                             "current_cell": None, "eta_s": None}
    assert got["cells"] == [] and h["etag"].startswith('W/"queued-0-')
    # list, filters, pagination
    ids = [job["id"], job2["id"]] + [submit(api, admin, ep["id"])["id"] for _ in range(3)]
    seen, cursor = [], None
    while True:
        q = "/v1/jobs?limit=2" + ("&cursor=" + cursor if cursor else "")
        st, _, page = keep(api.json("GET", q, admin))
        assert st == 200 and len(page["jobs"]) <= 2
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    assert seen == list(reversed(ids))  # newest first
    st, _, f = api.json("GET", "/v1/jobs?label=gpu:h100", admin)
    assert [j["id"] for j in f["jobs"]] == [job2["id"]]
    st, _, f = api.json("GET", "/v1/jobs?label=gpu:h200&label=run:b", admin)
    assert f["jobs"] == []
    st, _, f = api.json("GET", "/v1/jobs?state=running", admin)
    assert f["jobs"] == []
    st, _, f = api.json("GET", "/v1/jobs?endpoint_id=" + ep["id"] + "&state=queued&limit=100", admin)
    assert len(f["jobs"]) == 5
    assert api.req("GET", "/v1/jobs?state=nope", admin)[0] == 400
    assert api.req("GET", "/v1/jobs?limit=101", admin)[0] == 400
    assert api.req("GET", "/v1/jobs?cursor=zz", admin)[0] == 400
    # cancel a queued job: at once
    st, _, c = keep(api.json("POST", "/v1/jobs/%s/cancel" % job2["id"], admin))
    assert st == 200 and c["state"] == "cancelled"
    st, _, p = api.json("POST", "/v1/jobs/%s/cancel" % job2["id"], admin)
    assert st == 409 and p["type"].endswith("/job-finished")
    # cancel a running job: cancel_requested + NOTIFY
    pg.psql("UPDATE jobs SET state = 'running', started_at = now() WHERE id = '%s'" % job["id"])
    st, _, c = keep(api.json("POST", "/v1/jobs/%s/cancel" % job["id"], admin))
    assert st == 202 and c["state"] == "running" and c["cancel_requested"] is True
    # the result of a running job is partial: header + cells so far
    pg.psql("UPDATE jobs SET header = '{\"schema\":\"x\",\"engine\":{\"name\":\"vllm\"}}' WHERE id = '%s';"
            "INSERT INTO job_cells (job_id, phase, context, concurrency, cell) VALUES "
            "('%s', 'prefill', 8192, 1, '{\"phase\":\"prefill\",\"context\":8192}')" % (job["id"], job["id"]))
    st, _, res = keep(api.json("GET", "/v1/jobs/%s/result" % job["id"], admin))
    assert st == 200 and res["status"] == "running" and res["engine"] == {"name": "vllm"}
    assert res["state"] == "running" and res["job_id"] == job["id"]
    assert res["cells"] == [{"phase": "prefill", "context": 8192}]
    st, _, got = api.json("GET", "/v1/jobs/" + job["id"], admin)
    assert got["cells"] == [{"phase": "prefill", "context": 8192}]
    pg.psql("UPDATE jobs SET state = 'succeeded', result = '{\"status\":\"complete\",\"cells\":[]}' "
            "WHERE id = '%s'" % job["id"])
    st, _, res = api.json("GET", "/v1/jobs/%s/result" % job["id"], admin)
    assert res == {"status": "complete", "cells": [], "state": "succeeded", "job_id": job["id"]}
    s["job"] = job


def test_spec_validation_names_fields(ctx):
    s = setup(ctx)
    api, admin = s["api"], s["admin"]
    bad = {"endpoint_id": s["ep"]["id"], "contexts": [8192, "8k", "zz", -1], "concurrency": [1, 2.5],
           "duration_s": "long", "labels": {"ok": "x", "bad": 3}, "priority": 10 ** 6,
           "surprise": True, "callbacks": ["ftp://x"]}
    st, h, p = api.json("POST", "/v1/jobs", admin, bad)
    assert st == 422 and h["content-type"] == "application/problem+json"
    fields = {e["field"] for e in p["errors"]}
    assert {"contexts[1]", "contexts[2]", "contexts[3]", "concurrency[1]", "duration_s", "labels.bad",
            "priority", "surprise", "callbacks[0]"} <= fields, fields
    assert "contexts[1]" in p["detail"]
    st, _, p = api.json("POST", "/v1/jobs", admin, {"contexts": [8192]})
    assert st == 422 and p["errors"] == [{"field": "endpoint_id", "detail": "is required"}]
    # a kv_budget beyond what the engine runs (1e12) is refused now, not at run time
    st, _, p = api.json("POST", "/v1/jobs", admin, {"endpoint_id": s["ep"]["id"],
                                                    "kv_budget": 10 ** 13})
    assert st == 422 and p["errors"] == [{"field": "kv_budget",
                                          "detail": "must be an integer from 1 to 1000000000000"}]
    # another project's endpoint is "no such endpoint", named by field
    other_ep = new_endpoint(api, s["other"], "beta-ep")
    s["other_ep"] = other_ep
    st, _, p = api.json("POST", "/v1/jobs", admin, {"endpoint_id": other_ep["id"]})
    assert st == 422 and p["errors"][0]["field"] == "endpoint_id"


def test_error_statuses(ctx):
    s = setup(ctx)
    api, admin = s["api"], s["admin"]
    def problem(resp, status, typ=None):
        st, h, body = resp
        assert st == status, (st, body)
        assert h["content-type"] == "application/problem+json"
        p = json.loads(body)
        assert p["status"] == status and p["type"].startswith("https://tokbench.dev/problems/")
        if typ:
            assert p["type"].endswith("/" + typ), p
        assert h["x-request-id"]
        return h, p
    # 400
    problem(api.req("POST", "/v1/jobs", admin, b"{not json", {"Content-Type": "application/json"}),
            400, "bad-json")
    problem(api.req("POST", "/v1/jobs", admin, b'{"a":1,"a":2}', {"Content-Type": "application/json"}),
            400, "bad-json")
    problem(api.req("POST", "/v1/jobs", admin, b'[1]', {"Content-Type": "application/json"}), 400)
    # 401: none, malformed, unknown, expired
    h, _ = problem(api.req("GET", "/v1/jobs"), 401, "unauthorized")
    assert h["www-authenticate"].startswith("Bearer")
    problem(api.req("GET", "/v1/jobs", headers={"Authorization": "Basic Zm9vOmJhcg=="}), 401)
    problem(api.req("GET", "/v1/jobs", "tkb_" + "A" * 40), 401, "unauthorized")
    problem(api.req("GET", "/v1/jobs", "tkb_short"), 401)
    exp = make_key(s["pg"], "alpha", "--expires-in", "1s")
    time.sleep(1.5)
    problem(api.req("GET", "/v1/jobs", exp), 401, "key-expired")
    # 403 covered in test_keys; 404
    problem(api.req("GET", "/v1/nothing", admin), 404)
    problem(api.req("GET", "/v1/jobs/not-a-uuid", admin), 404)
    problem(api.req("GET", "/v1/jobs/00000000-0000-4000-8000-000000000000", admin), 404)
    # 405 with Allow
    h, _ = problem(api.req("PUT", "/v1/jobs", admin), 405)
    assert "GET" in h["allow"] and "POST" in h["allow"]
    # 409 in test_jobs and test_endpoints; 413 by Content-Length and while uploading
    big = b'{"x":"' + b"a" * (1024 * 1024 + 10) + b'"}'
    problem(early_413(api, admin, len(big)), 413)
    problem(chunked_post(api, "/v1/jobs", admin, big), 413)
    # 413 for a body under the cap whose JSON tree would be 60 MB (1 MiB of
    # "[],"): refused on an estimate before jansson builds it (issue 34)
    bomb = b'{"contexts": [' + b",".join([b"[]"] * (1000 * 1000 // 3)) + b"]}"
    h, doc = problem(api.req("POST", "/v1/jobs", admin, bomb, {"Content-Type": "application/json"}),
                     413)
    assert "32 times TOKBENCH_MAX_BODY" in doc["detail"], doc
    # 415
    problem(api.req("POST", "/v1/jobs", admin, b'{}', {"Content-Type": "text/plain"}), 415)
    problem(api.req("POST", "/v1/jobs", admin, b'{}'), 415)
    # 422 in test_spec_validation; 429 and 503 below; the api is still fine
    assert api.req("GET", "/healthz")[0] == 200


def early_413(api, key, length):
    """Headers only, announcing a body over the cap: the answer comes first."""
    conn = hc.HTTPConnection("127.0.0.1", api.port, timeout=20)
    try:
        conn.putrequest("POST", "/v1/jobs")
        conn.putheader("Authorization", "Bearer " + key)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(length))
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def chunked_post(api, path, key, body):
    conn = hc.HTTPConnection("127.0.0.1", api.port, timeout=20)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", "Bearer " + key)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for i in range(0, len(body), 65536):
            c = body[i:i + 65536]
            try:
                conn.send(b"%x\r\n%s\r\n" % (len(c), c))
            except (BrokenPipeError, ConnectionResetError):
                break
        try:
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_rate_limit_and_cors(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_RATE_LIMIT": "2", "TOKBENCH_RATE_BURST": "3",
                             "TOKBENCH_CORS_ORIGINS": "https://ui.example, https://b.example"})
    codes = [api.req("GET", "/v1/jobs", s["admin"]) for _ in range(6)]
    limited = [c for c in codes if c[0] == 429]
    assert limited, [c[0] for c in codes]
    st, h, body = limited[0]
    assert int(h["retry-after"]) >= 1 and json.loads(body)["type"].endswith("/rate-limited")
    # preflight
    st, h, _ = api.req("OPTIONS", "/v1/jobs", headers={"Origin": "https://ui.example",
                                                      "Access-Control-Request-Method": "POST"})
    assert st == 204 and h["access-control-allow-origin"] == "https://ui.example"
    assert "POST" in h["access-control-allow-methods"]
    assert "Authorization" in h["access-control-allow-headers"]
    st, h, _ = api.req("GET", "/healthz", headers={"Origin": "https://evil.example"})
    assert st == 200 and "access-control-allow-origin" not in h
    st, h, _ = api.req("GET", "/healthz", headers={"Origin": "https://b.example"})
    assert h["access-control-allow-origin"] == "https://b.example"
    # the request id is echoed
    st, h, _ = api.req("GET", "/healthz", headers={"X-Request-Id": "abc-123"})
    assert h["x-request-id"] == "abc-123"
    api.proc.stop()


def test_idempotent_submit(ctx):
    s = setup(ctx)
    api, admin = s["api"], s["admin"]
    spec = {"endpoint_id": s["ep"]["id"], "contexts": [8192], "labels": {"idem": "1"}}
    h = {"Idempotency-Key": "deploy-42"}
    a = keep(api.req("POST", "/v1/jobs", admin, spec, h))
    b = keep(api.req("POST", "/v1/jobs", admin, spec, h))
    assert a[0] == b[0] == 202 and a[2] == b[2] and a[1]["location"] == b[1]["location"]
    assert b[1].get("idempotent-replayed") == "true"
    n = s["pg"].psql("SELECT count(*) FROM jobs WHERE labels @> '{\"idem\":\"1\"}'").strip()
    assert n == "1"
    st, _, p = api.json("POST", "/v1/jobs", admin, dict(spec, priority=1), h)
    assert st == 422 and p["type"].endswith("/idempotency-key-reused")
    # concurrent first requests: exactly one job
    results = []
    def go():
        results.append(api.req("POST", "/v1/jobs", admin, dict(spec, labels={"idem": "2"}),
                               {"Idempotency-Key": "race"}))
    ts = [threading.Thread(target=go) for _ in range(6)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert all(r[0] == 202 for r in results) and len({r[2] for r in results}) == 1
    assert s["pg"].psql("SELECT count(*) FROM jobs WHERE labels @> '{\"idem\":\"2\"}'").strip() == "1"


def test_project_isolation(ctx):
    s = setup(ctx)
    api, other = s["api"], s["other"]
    ep, job = s["ep"], s["job"]
    kid = s["pg"].psql("SELECT id FROM api_keys WHERE project_id = "
                       "(SELECT id FROM projects WHERE name = 'alpha') LIMIT 1").strip()
    routes = [("GET", "/v1/endpoints/" + ep["id"], None),
              ("PATCH", "/v1/endpoints/" + ep["id"], {"name": "stolen"}),
              ("DELETE", "/v1/endpoints/" + ep["id"], None),
              ("POST", "/v1/endpoints/%s/probe" % ep["id"], None),
              ("GET", "/v1/jobs/" + job["id"], None),
              ("GET", "/v1/jobs/%s?wait=1" % job["id"], None),
              ("POST", "/v1/jobs/%s/cancel" % job["id"], None),
              ("GET", "/v1/jobs/%s/result" % job["id"], None),
              ("GET", "/v1/jobs/%s/events" % job["id"], None),
              ("DELETE", "/v1/keys/" + kid, None)]
    for method, path, body in routes:
        st, h, p = keep(api.json(method, path, other, body))
        assert st == 404, (method, path, st, p)
    # lists show nothing of alpha
    st, _, l1 = api.json("GET", "/v1/endpoints", other)
    assert [e["id"] for e in l1["endpoints"]] == [s["other_ep"]["id"]]
    st, _, l2 = api.json("GET", "/v1/jobs?limit=100", other)
    assert l2["jobs"] == []
    st, _, l3 = api.json("GET", "/v1/keys", other)
    assert all(k["id"] != kid for k in l3["keys"])
    # and nothing changed
    st, _, e = api.json("GET", "/v1/endpoints/" + ep["id"], s["admin"])
    assert st == 200 and e["name"] == "gpu-1"


def test_long_poll_wakes_on_change(ctx):
    s = setup(ctx)
    api, admin, pg = s["api"], s["admin"], s["pg"]
    job = submit(api, admin, s["ep"]["id"])
    st, h, _ = api.req("GET", "/v1/jobs/" + job["id"], admin)
    etag = h["etag"]
    # unchanged: the wait times out with 304
    t0 = time.monotonic()
    st, h2, _ = api.req("GET", "/v1/jobs/%s?wait=1" % job["id"], admin, headers={"If-None-Match": etag})
    assert st == 304 and h2["etag"] == etag and 0.9 <= time.monotonic() - t0 < 3
    # a change with NOTIFY wakes the waiter at once
    out = {}
    def poll():
        t = time.monotonic()
        out["r"] = api.json("GET", "/v1/jobs/%s?wait=20" % job["id"], admin,
                            headers={"If-None-Match": etag}, timeout=30)
        out["t"] = time.monotonic() - t
    th = threading.Thread(target=poll)
    th.start()
    time.sleep(1.0)
    pg.psql("UPDATE jobs SET state = 'running', updated_at = now() WHERE id = '%s';"
            "NOTIFY tb_job_changed, '%s'" % (job["id"], job["id"]))
    th.join(25)
    st, h3, doc = out["r"]
    assert st == 200 and doc["state"] == "running" and h3["etag"] != etag
    assert 0.9 <= out["t"] < 3, out["t"]
    # ?since=<cells_done> waits for a cell
    def poll2():
        out["r2"] = api.json("GET", "/v1/jobs/%s?wait=20&since=0" % job["id"], admin, timeout=30)
    th = threading.Thread(target=poll2)
    th.start()
    time.sleep(0.5)
    assert th.is_alive()
    pg.psql("UPDATE jobs SET cells_done = 1, updated_at = now() WHERE id = '%s';"
            "SELECT pg_notify('tb_job_changed', '%s')" % (job["id"], job["id"]))
    th.join(25)
    assert out["r2"][0] == 200 and out["r2"][2]["progress"]["cells_done"] == 1
    s["running_job"] = job


def sse_read(api, key, job_id, last_id=None, timeout=20):
    conn = hc.HTTPConnection("127.0.0.1", api.port, timeout=timeout)
    h = {"Authorization": "Bearer " + key, "Accept": "text/event-stream"}
    if last_id is not None:
        h["Last-Event-ID"] = str(last_id)
    conn.request("GET", "/v1/jobs/%s/events" % job_id, headers=h)
    r = conn.getresponse()
    return conn, r


def parse_events(text):
    evs = []
    for block in text.split("\n\n"):
        ev = {}
        for line in block.split("\n"):
            if line.startswith("id: "):
                ev["id"] = int(line[4:])
            elif line.startswith("event: "):
                ev["event"] = line[7:]
            elif line.startswith("data: "):
                ev["data"] = json.loads(line[6:])
            elif line.startswith(": ping"):
                ev["ping"] = True
        if ev:
            evs.append(ev)
    return evs


def test_sse_events_and_last_event_id(ctx):
    s = setup(ctx)
    api, admin, pg = s["api"], s["admin"], s["pg"]
    job = s["running_job"]
    jid = job["id"]
    pg.psql("INSERT INTO job_events (job_id, kind, data) VALUES "
            "('%s', 'state', '{\"state\":\"running\"}'), "
            "('%s', 'progress', '{\"cells_done\":0}')" % (jid, jid))
    conn, r = sse_read(api, admin, jid)
    assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
    got = b""
    deadline = time.monotonic() + 10
    while got.count(b"\n\n") < 3 and time.monotonic() < deadline:  # retry + 2 events
        got += r.read1(65536)
    evs = [e for e in parse_events(got.decode()) if "id" in e]
    assert [e["event"] for e in evs] == ["state", "progress"]
    first_id = evs[0]["id"]

    def later():
        time.sleep(1.0)
        pg.psql("INSERT INTO job_events (job_id, kind, data) VALUES "
                "('%s', 'cell', '{\"cell\":{\"phase\":\"decode\"},\"cells_done\":1}');"
                "NOTIFY tb_job_changed, '%s'" % (jid, jid))
        time.sleep(0.5)
        pg.psql("UPDATE jobs SET state = 'succeeded', updated_at = now() WHERE id = '%s';"
                "INSERT INTO job_events (job_id, kind, data) VALUES "
                "('%s', 'state', '{\"state\":\"succeeded\"}');"
                "NOTIFY tb_job_changed, '%s'" % (jid, jid, jid))
    th = threading.Thread(target=later)
    th.start()
    t0 = time.monotonic()
    while True:  # the stream ends after the terminal state event
        chunk = r.read1(65536)
        if not chunk:
            break
        got += chunk
    th.join()
    conn.close()
    assert time.monotonic() - t0 < 10
    evs = [e for e in parse_events(got.decode()) if "id" in e]
    assert [e["event"] for e in evs] == ["state", "progress", "cell", "state"]
    assert evs[-1]["data"]["state"] == "succeeded"
    ids = [e["id"] for e in evs]
    assert ids == sorted(ids)
    # Last-Event-ID resumes after the first event, and the ended job's stream closes
    conn, r = sse_read(api, admin, jid, last_id=first_id)
    body = r.read().decode()
    conn.close()
    evs2 = [e for e in parse_events(body) if "id" in e]
    assert [e["id"] for e in evs2] == ids[1:]


def test_sse_heartbeat(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_SSE_PING_S": "1"})
    job = submit(api, s["admin"], s["ep"]["id"])
    conn, r = sse_read(api, s["admin"], job["id"])
    got = b""
    t0 = time.monotonic()
    while b": ping" not in got and time.monotonic() - t0 < 5:
        got += r.read1(4096)
    conn.close()
    assert b": ping" in got
    api.proc.stop()


def test_secrets_absent_from_responses_and_logs(ctx):
    s = setup(ctx)
    api = s["api"]
    secrets = [EP_SECRET, s["admin"], s["other"], s.get("reader", "tkb_none")]
    log = api.proc.output()
    assert '"msg":"request"' in log and "request_id" in log
    for sec in secrets:
        assert sec not in log, "secret in the api log"
    for sec in secrets:
        for body in RESPONSES:
            if sec == s.get("reader") and b'"key"' in body:
                continue  # the one response that shows a new key, once
            assert sec.encode() not in body, "secret in a response"
    assert not pg_has(s["pg"], EP_SECRET)
    for k in [s["admin"], s["other"]]:
        assert not pg_has(s["pg"], k)


def test_database_restart(ctx):
    s = setup(ctx)
    api, admin, pg = s["api"], s["admin"], s["pg"]
    jid = s["job"]["id"]
    assert api.req("GET", "/v1/jobs/" + jid, admin)[0] == 200
    pg.stop()
    st, h, body = api.req("GET", "/readyz", timeout=20)
    assert st == 503 and h["content-type"] == "application/problem+json"
    # requests needing the database answer 503 with Retry-After, they do not hang
    st, h, body = api.req("POST", "/v1/jobs", admin, {"endpoint_id": s["ep"]["id"]}, timeout=20)
    assert st == 503 and "retry-after" in h, (st, body)
    assert api.req("GET", "/healthz")[0] == 200
    pg.start()
    wait_until(lambda: api.req("GET", "/readyz", timeout=15)[0] == 200, 30, what="readyz")
    wait_until(lambda: api.req("GET", "/v1/jobs/" + jid, admin, timeout=15)[0] == 200, 30,
               what="jobs after restart")
    job = submit(api, admin, s["ep"]["id"])
    # the listener reconnected: long-poll still wakes on NOTIFY
    st, h, _ = api.req("GET", "/v1/jobs/" + job["id"], admin)
    out = {}
    def poll():
        out["r"] = api.req("GET", "/v1/jobs/%s?wait=20" % job["id"], admin,
                           headers={"If-None-Match": h["etag"]}, timeout=30)
    th = threading.Thread(target=poll)
    th.start()
    time.sleep(1.5)
    pg.psql("UPDATE jobs SET state = 'running', updated_at = now() WHERE id = '%s';"
            "NOTIFY tb_job_changed, '%s'" % (job["id"], job["id"]))
    th.join(25)
    assert out["r"][0] == 200


def test_sigterm_with_waiters(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"])
    job = submit(api, s["admin"], s["ep"]["id"])
    st, h, _ = api.req("GET", "/v1/jobs/" + job["id"], s["admin"])
    ths = []
    for _ in range(3):
        t = threading.Thread(target=lambda: api.req("GET", "/v1/jobs/%s?wait=30" % job["id"], s["admin"],
                                                    headers={"If-None-Match": h["etag"]}, timeout=40))
        t.start()
        ths.append(t)
    conn, r = sse_read(api, s["admin"], job["id"])
    time.sleep(0.5)
    t0 = time.monotonic()
    assert api.proc.stop() == 0
    assert time.monotonic() - t0 < 10
    conn.close()
    for t in ths:
        t.join(5)


def test_clean_exit(ctx):
    """Last: the main api stops with status 0, sanitizers silent."""
    s = setup(ctx)
    api = s["api"]
    assert api.proc.stop() == 0
    out = api.proc.output()
    assert "AddressSanitizer" not in out and "runtime error" not in out and "LeakSanitizer" not in out
