"""Webhooks in (issue 7): presets, hooks, GitHub and generic deliveries, and
GET /metrics.  Real tokbench-api, real PostgreSQL, real HTTP.  No worker
runs here: the jobs a delivery starts stay queued, which is what is counted.
"""
import hashlib
import hmac
import json
import re
import time
import uuid

import harness
from harness import http, wait_until

MASTER = "5a" * 32
METRICS_TOKEN = "metrics-token-7c1d"
STATE = {}


def make_key(pg, project):
    return harness.make_key(pg, project, "--admin")


class Api(harness.Api):
    def __init__(self, ctx, pg, env=None):
        super().__init__(ctx, pg, MASTER,
                         dict({"TOKBENCH_METRICS_TOKEN": METRICS_TOKEN,
                               "TOKBENCH_PUBLIC_URL": "https://tokbench.example.com"},
                              **(env or {})))


def setup(ctx):
    if STATE:
        return STATE
    pg = ctx.postgres()
    api = Api(ctx, pg)
    key = make_key(pg, "ci")
    st, _, ep = api.json("POST", "/v1/endpoints", key, {"name": "gpu", "base_url": "http://127.0.0.1:9"})
    assert st == 201, ep
    STATE.update(pg=pg, api=api, key=key, ep=ep["id"], secrets=[])
    return STATE


def jobs_count(pg):
    return int(pg.psql("SELECT count(*) FROM jobs"))


def deliveries_in(pg):
    return int(pg.psql("SELECT count(*) FROM hook_deliveries_in"))


def github_push_payload(sha):
    """A push event's payload as GitHub sends it (abridged, same shape)."""
    return {
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": sha,
        "repository": {"id": 123456, "node_id": "R_kgDOAbc", "name": "serving",
                       "full_name": "acme/serving", "private": True,
                       "owner": {"name": "acme", "login": "acme", "id": 42},
                       "html_url": "https://github.com/acme/serving",
                       "default_branch": "main", "master_branch": "main"},
        "pusher": {"name": "octocat", "email": "octocat@example.com"},
        "sender": {"login": "octocat", "id": 1, "type": "User"},
        "created": False, "deleted": False, "forced": False,
        "base_ref": None, "compare": "https://github.com/acme/serving/compare/000000...%s" % sha[:12],
        "commits": [{"id": sha, "tree_id": "f" * 40, "distinct": True,
                     "message": "serving: bump vLLM", "timestamp": "2026-11-29T14:00:00+00:00",
                     "url": "https://github.com/acme/serving/commit/" + sha,
                     "author": {"name": "Octo Cat", "email": "octocat@example.com", "username": "octocat"},
                     "added": [], "removed": [], "modified": ["requirements.txt"]}],
        "head_commit": {"id": sha, "message": "serving: bump vLLM"},
    }


def github_headers(secret, body, event, delivery):
    """The headers GitHub sends with a delivery, signed with secret."""
    return {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/8a3b2c1",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-ID": "471234567",
        "X-GitHub-Hook-Installation-Target-ID": "123456",
        "X-GitHub-Hook-Installation-Target-Type": "repository",
        "X-Hub-Signature": "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest(),
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
    }


def test_presets_crud(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    spec = {"endpoint_id": s["ep"], "contexts": ["8k"], "concurrency": [1, 2], "duration_s": 1,
            "labels": {"suite": "nightly"}}
    st, h, doc = api.json("POST", "/v1/presets", key, {"name": "nightly", "spec": spec})
    assert st == 201, doc
    assert doc["name"] == "nightly" and doc["spec"]["contexts"] == [8192]
    assert h["location"] == "/v1/presets/nightly"
    assert api.json("POST", "/v1/presets", key, {"name": "nightly", "spec": spec})[0] == 409
    # the spec is validated as POST /v1/jobs validates it
    st, _, p = api.json("POST", "/v1/presets", key, {"name": "bad", "spec": {"endpoint_id": s["ep"],
                                                                           "contexts": [-1]}})
    assert st == 422 and any(e["field"].startswith("spec.") for e in p["errors"]), p
    assert api.json("POST", "/v1/presets", key, {"name": "x y", "spec": spec})[0] == 422
    assert api.json("POST", "/v1/presets", key, {"name": "x", "spec": spec, "zz": 1})[0] == 422
    st, _, lst = api.json("GET", "/v1/presets", key)
    assert st == 200 and [p["name"] for p in lst["presets"]] == ["nightly"]
    st, _, one = api.json("PUT", "/v1/presets/tmp", key, {"spec": spec})
    assert st == 201
    st, _, one = api.json("PUT", "/v1/presets/tmp", key, {"spec": dict(spec, duration_s=2)})
    assert st == 200 and one["spec"]["duration_s"] == 2
    assert api.req("DELETE", "/v1/presets/tmp", key)[0] == 204
    assert api.req("GET", "/v1/presets/tmp", key)[0] == 404
    # another project sees nothing
    other = make_key(s["pg"], "other")
    assert api.req("GET", "/v1/presets/nightly", other)[0] == 404
    assert api.json("GET", "/v1/presets", other)[2]["presets"] == []
    # a job from a preset, with extra labels
    before = jobs_count(s["pg"])
    st, h, job = api.json("POST", "/v1/presets/nightly/jobs", key, {"labels": {"sha": "abc"}})
    assert st == 202, job
    assert job["labels"] == {"suite": "nightly", "sha": "abc"}
    assert h["location"] == "/v1/jobs/" + job["id"]
    assert jobs_count(s["pg"]) == before + 1
    # no labels (an empty body, or none): the preset's own
    for body in ({}, None):
        st, h, job = api.json("POST", "/v1/presets/nightly/jobs", key, body)
        assert st == 202 and job["labels"] == {"suite": "nightly"}, (body, st, job)
    assert api.req("POST", "/v1/presets/nope/jobs", key)[0] == 404


def test_hook_create_shows_the_secret_once(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    st, _, p = api.json("POST", "/v1/hooks", key, {"preset": "nope", "kind": "github"})
    assert st == 422, p
    st, h, hook = api.json("POST", "/v1/hooks", key, {"preset": "nightly", "kind": "github",
                                                      "events": ["push", "workflow_run"],
                                                      "name": "acme/serving"})
    assert st == 201, hook
    assert hook["secret"].startswith("tbh_") and len(hook["secret"]) == 44
    assert hook["url"] == "https://tokbench.example.com/v1/hooks/" + hook["id"]
    s["gh"] = hook
    s["secrets"].append(hook["secret"])
    st, _, got = api.json("GET", "/v1/hooks/" + hook["id"], key)
    assert st == 200 and "secret" not in got and got["preset"] == "nightly"
    st, _, lst = api.json("GET", "/v1/hooks", key)
    assert all("secret" not in x for x in lst["hooks"]) and len(lst["hooks"]) == 1
    sealed = s["pg"].psql("SELECT secret_sealed FROM hooks WHERE id = '%s'" % hook["id"]).strip()
    assert hook["secret"] not in sealed and len(sealed) > 40


def test_github_delivery_starts_exactly_one_job(ctx):
    s = setup(ctx)
    api, pg, hook = s["api"], s["pg"], s["gh"]
    sha = hashlib.sha1(b"commit-1").hexdigest()
    body = json.dumps(github_push_payload(sha), indent=2).encode()  # GitHub pretty-prints
    delivery = str(uuid.uuid4())
    before = jobs_count(pg)
    st, h, doc = api.json("POST", "/v1/hooks/" + hook["id"], None, body,
                          github_headers(hook["secret"], body, "push", delivery))
    assert st == 202, doc
    assert jobs_count(pg) == before + 1
    labels = json.loads(pg.psql("SELECT labels FROM jobs WHERE id = '%s'" % doc["id"]))
    assert labels["ref"] == "refs/heads/main" and labels["sha"] == sha
    assert labels["repository"] == "acme/serving" and labels["suite"] == "nightly"
    assert labels["event"] == "push" and labels["delivery"] == delivery
    assert h["location"] == "/v1/jobs/" + doc["id"]
    # GitHub redelivers: the same delivery id never runs twice
    st, _, dup = api.json("POST", "/v1/hooks/" + hook["id"], None, body,
                          github_headers(hook["secret"], body, "push", delivery))
    assert st == 200 and dup["duplicate"] is True and dup["job_id"] == doc["id"]
    assert jobs_count(pg) == before + 1
    s["job_from_hook"] = doc["id"]


def test_wrong_signature_replay_and_unknown_hook_change_nothing(ctx):
    s = setup(ctx)
    api, pg, hook = s["api"], s["pg"], s["gh"]
    body = json.dumps(github_push_payload("b" * 40)).encode()
    snap = (jobs_count(pg), deliveries_in(pg))
    cases = []
    # wrong secret
    cases.append(github_headers("tbh_not-the-secret", body, "push", str(uuid.uuid4())))
    # right secret, body changed after signing
    hd = github_headers(hook["secret"], body, "push", str(uuid.uuid4()))
    cases.append(hd)
    # no signature at all, and a malformed one
    hd2 = github_headers(hook["secret"], body, "push", str(uuid.uuid4()))
    del hd2["X-Hub-Signature-256"]
    cases.append(hd2)
    hd3 = dict(hd2, **{"X-Hub-Signature-256": "sha256=zz"})
    cases.append(hd3)
    for i, headers in enumerate(cases):
        b = body + (b" " if i == 1 else b"")
        st, h, p = api.json("POST", "/v1/hooks/" + hook["id"], None, b, headers)
        assert st == 401, (i, st, p)
        assert h["content-type"] == "application/problem+json" and p["status"] == 401
        assert p["type"].endswith("/bad-signature")
    # a replay of a delivery already run (same id, same signature)
    sha = hashlib.sha1(b"commit-1").hexdigest()
    body1 = json.dumps(github_push_payload(sha), indent=2).encode()
    delivery = pg.psql("SELECT delivery_id FROM hook_deliveries_in LIMIT 1").strip()
    st, _, dup = api.json("POST", "/v1/hooks/" + hook["id"], None, body1,
                          github_headers(hook["secret"], body1, "push", delivery))
    assert st == 200 and dup["duplicate"] is True
    # unknown hooks: a random id, a non-id, a deleted hook
    good = github_headers(hook["secret"], body, "push", str(uuid.uuid4()))
    assert api.req("POST", "/v1/hooks/" + str(uuid.uuid4()), None, body, good)[0] == 404
    assert api.req("POST", "/v1/hooks/not-a-hook", None, body, good)[0] == 404
    assert (jobs_count(pg), deliveries_in(pg)) == snap


def test_ping_and_events_not_configured(ctx):
    s = setup(ctx)
    api, pg, hook = s["api"], s["pg"], s["gh"]
    snap = jobs_count(pg)
    ping = json.dumps({"zen": "Design for failure.", "hook_id": 471234567,
                       "hook": {"type": "Repository", "events": ["push"]}}).encode()
    st, _, doc = api.json("POST", "/v1/hooks/" + hook["id"], None, ping,
                          github_headers(hook["secret"], ping, "ping", str(uuid.uuid4())))
    assert st == 200 and doc["pong"] is True
    # a ping with a bad signature is refused like anything else
    assert api.req("POST", "/v1/hooks/" + hook["id"], None, ping,
                   github_headers("wrong", ping, "ping", str(uuid.uuid4())))[0] == 401
    issue = json.dumps({"action": "opened", "issue": {"number": 1}}).encode()
    st, _, doc = api.json("POST", "/v1/hooks/" + hook["id"], None, issue,
                          github_headers(hook["secret"], issue, "issues", str(uuid.uuid4())))
    assert st == 202 and doc["ignored"] is True
    # workflow_run is configured: labels from the run
    wr = json.dumps({"action": "completed", "workflow_run": {"head_branch": "release",
                     "head_sha": "c" * 40, "conclusion": "success"},
                     "repository": {"full_name": "acme/serving"}}).encode()
    st, _, doc = api.json("POST", "/v1/hooks/" + hook["id"], None, wr,
                          github_headers(hook["secret"], wr, "workflow_run", str(uuid.uuid4())))
    assert st == 202, doc
    assert doc["labels"]["ref"] == "refs/heads/release" and doc["labels"]["sha"] == "c" * 40
    assert jobs_count(pg) == snap + 1


def generic_headers(secret, body, ts, delivery=None):
    msg = str(ts).encode() + b"." + body
    h = {"Content-Type": "application/json", "X-Tokbench-Timestamp": str(ts),
         "X-Tokbench-Signature": "sha256=" + hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()}
    if delivery:
        h["X-Tokbench-Delivery"] = delivery
    return h


def test_generic_form_window_and_replay(ctx):
    s = setup(ctx)
    api, pg, key = s["api"], s["pg"], s["key"]
    st, _, hook = api.json("POST", "/v1/hooks", key, {"preset": "nightly", "kind": "generic"})
    assert st == 201, hook
    s["secrets"].append(hook["secret"])
    body = json.dumps({"ref": "refs/tags/v2", "sha": "d" * 40, "repository": "gitlab.example/acme"}).encode()
    snap = jobs_count(pg)
    now = int(time.time())
    st, _, doc = api.json("POST", "/v1/hooks/" + hook["id"], None, body,
                          generic_headers(hook["secret"], body, now))
    assert st == 202, doc
    assert doc["labels"]["ref"] == "refs/tags/v2" and doc["labels"]["sha"] == "d" * 40
    # the same request again (within the window) is a replay: no second job
    st, _, dup = api.json("POST", "/v1/hooks/" + hook["id"], None, body,
                          generic_headers(hook["secret"], body, now))
    assert st == 200 and dup["duplicate"] is True and dup["job_id"] == doc["id"]
    # correctly signed but 10 minutes old: refused, nothing written
    n_in = deliveries_in(pg)
    st, _, p = api.json("POST", "/v1/hooks/" + hook["id"], None, body,
                        generic_headers(hook["secret"], body, now - 600))
    assert st == 401 and "window" in p["detail"]
    # wrong secret
    assert api.req("POST", "/v1/hooks/" + hook["id"], None, body,
                   generic_headers("nope", body, now))[0] == 401
    # a moved timestamp breaks the signature
    hd = generic_headers(hook["secret"], body, now)
    hd["X-Tokbench-Timestamp"] = str(now + 1)
    assert api.req("POST", "/v1/hooks/" + hook["id"], None, body, hd)[0] == 401
    assert deliveries_in(pg) == n_in
    # an explicit delivery id dedupes across timestamps
    body2 = json.dumps({"labels": {"pipeline": "1234"}}).encode()
    st, _, a = api.json("POST", "/v1/hooks/" + hook["id"], None, body2,
                        generic_headers(hook["secret"], body2, now, "pipe-1234"))
    assert st == 202 and a["labels"]["pipeline"] == "1234"
    st, _, b = api.json("POST", "/v1/hooks/" + hook["id"], None, body2,
                        generic_headers(hook["secret"], body2, now + 1, "pipe-1234"))
    assert st == 200 and b["duplicate"] is True
    assert jobs_count(pg) == snap + 2
    # a deleted hook is unknown
    assert api.req("DELETE", "/v1/hooks/" + hook["id"], key)[0] == 204
    assert api.req("POST", "/v1/hooks/" + hook["id"], None, body,
                   generic_headers(hook["secret"], body, now + 2))[0] == 404


# ---- Prometheus text --------------------------------------------------------

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_prometheus(text):
    """Strict parse of the text format 0.0.4.  Returns {(name, labels): value}
    and {family: type}; raises on anything malformed."""
    assert text.endswith("\n")
    types, helps, samples = {}, {}, {}
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert name not in helps, "HELP twice: " + name
            helps[name] = True
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in types, "TYPE twice: " + name
            types[name] = typ
            continue
        assert not line.startswith("#") and line.strip(), "bad line: %r" % line
        m = SAMPLE.match(line)
        assert m, "bad sample: %r" % line
        name, lab, val = m.groups()
        labels = ()
        if lab:
            pos, parts = 0, []
            while pos < len(lab):
                lm = LABEL.match(lab, pos)
                assert lm, "bad labels: %r" % line
                parts.append((lm.group(1), lm.group(2)))
                pos = lm.end()
            labels = tuple(parts)
        float(val.replace("+Inf", "inf").replace("-Inf", "-inf"))
        fam = name
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
                fam = name[:-len(suf)]
        assert fam in types, "sample before its TYPE: " + name
        assert (name, labels) not in samples, "duplicate sample: " + line
        samples[(name, labels)] = float(val.replace("+Inf", "inf"))
    # histograms: cumulative buckets, +Inf == count
    for (name, labels), v in samples.items():
        if name.endswith("_count") and types.get(name[:-6]) == "histogram":
            fam = name[:-6]
            buckets = sorted(((float(dict(l)["le"].replace("+Inf", "inf")), bv)
                              for (n, l), bv in samples.items()
                              if n == fam + "_bucket" and tuple(x for x in l if x[0] != "le") == labels))
            assert buckets and buckets[-1][0] == float("inf") and buckets[-1][1] == v
            assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    return samples, types


def metric(samples, name, **labels):
    want = tuple(sorted(labels.items()))
    for (n, l), v in samples.items():
        if n == name and tuple(sorted(l)) == want:
            return v
    return None


def test_metrics_parse_and_count(ctx):
    s = setup(ctx)
    api, pg = s["api"], s["pg"]
    assert api.req("GET", "/metrics")[0] == 401
    assert api.req("GET", "/metrics", "wrong")[0] == 401
    assert api.req("GET", "/metrics", s["key"])[0] == 401  # a project key is not the token
    st, h, data = api.req("GET", "/metrics", METRICS_TOKEN)
    assert st == 200 and h["content-type"].startswith("text/plain; version=0.0.4")
    samples, types = parse_prometheus(data.decode())
    assert types["tokbench_http_requests_total"] == "counter"
    assert types["tokbench_http_request_duration_seconds"] == "histogram"
    # what happened above, counted
    assert metric(samples, "tokbench_hook_requests_total", kind="github", outcome="job") == 2
    assert metric(samples, "tokbench_hook_requests_total", kind="github", outcome="duplicate") == 2
    assert metric(samples, "tokbench_hook_requests_total", kind="github", outcome="bad_signature") == 5
    assert metric(samples, "tokbench_hook_requests_total", kind="github", outcome="ping") == 1
    assert metric(samples, "tokbench_hook_requests_total", kind="github", outcome="ignored") == 1
    assert metric(samples, "tokbench_hook_requests_total", kind="generic", outcome="stale") == 1
    assert metric(samples, "tokbench_hook_requests_total", kind="unknown", outcome="unknown_hook") >= 2
    assert metric(samples, "tokbench_http_requests_total", route="/v1/hooks/{id}", method="POST",
                  status="202") >= 5
    assert metric(samples, "tokbench_http_requests_total", route="/v1/hooks/{id}", method="POST",
                  status="401") == 8
    assert metric(samples, "tokbench_http_requests_total", route="/metrics", method="GET",
                  status="401") == 3
    assert metric(samples, "tokbench_http_request_duration_seconds_count",
                  route="/v1/presets") >= 6
    # raw paths never become labels
    assert not any("not-a-hook" in v for (_, l) in samples for _, v in l)
    # cluster-wide gauges from the database
    queued = int(pg.psql("SELECT count(*) FROM jobs WHERE state = 'queued'"))
    assert metric(samples, "tokbench_jobs", state="queued") == queued
    assert metric(samples, "tokbench_jobs", state="failed") == 0
    assert metric(samples, "tokbench_queue_depth") == queued
    assert metric(samples, "tokbench_queue_oldest_seconds") > 0
    assert metric(samples, "tokbench_cells_measured") == 0
    assert metric(samples, "tokbench_workers_busy") == 0
    assert metric(samples, "tokbench_database_up") == 1
    assert metric(samples, "tokbench_webhook_deliveries", status="pending") == 0
    # a second scrape counts the first
    _, _, data2 = api.req("GET", "/metrics", METRICS_TOKEN)
    s2, _ = parse_prometheus(data2.decode())
    assert metric(s2, "tokbench_http_requests_total", route="/metrics", method="GET", status="200") == 1


def test_metrics_off_without_token(ctx):
    s = setup(ctx)
    api2 = Api(ctx, s["pg"], {"TOKBENCH_METRICS_TOKEN": ""})
    assert api2.req("GET", "/metrics", METRICS_TOKEN)[0] == 404


def test_no_secret_in_logs(ctx):
    s = setup(ctx)
    logs = s["api"].proc.output()
    assert "request" in logs
    for secret in s["secrets"] + [s["key"], MASTER, METRICS_TOKEN]:
        assert secret not in logs, "a secret reached the log"
    # every log line is one JSON object, request lines carry a request id
    for line in logs.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            if doc.get("msg") == "request":
                assert doc.get("request_id")


def test_clean_stop(ctx):
    """SIGTERM stops the api cleanly, dispatcher included (under valgrind:
    no memory error, no definite leak)."""
    s = setup(ctx)
    assert s["api"].proc.stop() == 0, s["api"].proc.output()[-3000:]
