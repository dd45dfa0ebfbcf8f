"""Issue 13, findings 1-3: the egress policy, endpoint keys bound to their
origin, and probes that never hold a request thread.  Real tokbench-api and
tokbench-worker, real PostgreSQL, real HTTP over loopback; the listeners a
tenant would point an endpoint at are small Python servers in this file.

The harness allows loopback (TOKBENCH_EGRESS_ALLOW=loopback, like make run);
the tests of the defaults start an api or a worker with the list empty."""
import http.server as httpserver
import json
import os
import socket
import subprocess
import threading
import time

import harness
from harness import wait_until
from test_api import Api, make_key
from test_worker import seal  # tb_crypto_seal with the associated data given

MASTER = "9f" * 32  # test_api's
EP_KEY = "sk-origin-bound-7c1d"


class Listener:
    """An OpenAI-compatible enough endpoint that records the Authorization
    header of every request it gets."""

    def __init__(self, ctx):
        seen = self.seen = []

        class H(httpserver.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                seen.append((self.path, self.headers.get("Authorization")))
                if self.path == "/v1/models":
                    body = json.dumps({"data": [{"id": "m", "max_model_len": 4096}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                else:
                    body = b"SECRET-REMOTE-BODY not here"
                    self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = httpserver.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        ctx.cleanups.append(self.srv.shutdown)

    def auth_headers(self):
        return [a for _, a in self.seen]


class Hanging:
    """Accepts connections (the kernel's backlog) and never answers."""

    def __init__(self, ctx):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        ctx.cleanups.append(self.sock.close)


STATE = {}


def setup(ctx):
    if STATE:
        return STATE
    pg = ctx.postgres()
    api = Api(ctx, pg, env={"TOKBENCH_PROBE_DEADLINE_MS": "3000"})
    STATE.update(pg=pg, api=api, key=make_key(pg, "eg-alpha", "--admin"))
    return STATE


def create(api, key, name, base_url, **kw):
    body = {"name": name, "base_url": base_url}
    body.update(kw)
    return api.json("POST", "/v1/endpoints", key, body)


def assert_refused(resp, field, rule_part):
    st, h, p = resp
    assert st == 422, (st, p)
    assert h["content-type"] == "application/problem+json", h
    assert p["type"].endswith("/egress-refused"), p
    assert rule_part in p["rule"], p
    assert p["errors"][0]["field"] == field, p
    assert field in p["detail"], p


def run_job(ctx, api, key, pg, ep_id, worker_env):
    """Runs a one-cell job of ep_id on a worker of its own; the job's document
    once it ended."""
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_POLL_S": "1"}
    env.update(worker_env)
    w = ctx.process("tokbench-worker", [], env=env)
    wait_until(lambda: '"msg":"worker ready"' in w.output() or not w.alive(), 20, what="worker")
    st, _, job = api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep_id, "contexts": ["1k"], "concurrency": [1], "duration_s": 1,
        "max_attempts": 1})
    assert st == 202, job

    def done():
        st, _, j = api.json("GET", "/v1/jobs/" + job["id"], key)
        return j if j["state"] in ("failed", "succeeded", "cancelled") else None
    j = wait_until(done, 90, what="job ends")
    w.stop()
    return j


# ------------------------------------------------------------ 1. egress policy

def test_metadata_and_link_local_refused_at_create(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    for i, (url, rule) in enumerate([
            ("http://169.254.169.254/latest/meta-data/", "169.254.169.254/32 (built-in: cloud metadata)"),
            ("http://[fd00:ec2::254]/", "fd00:ec2::254/128 (built-in: cloud metadata)"),
            ("http://100.100.100.200/", "cloud metadata"),
            ("http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal"),
            ("http://169.254.10.1:8000", "169.254.0.0/16 (built-in: link-local)"),
            ("http://[fe80::1]:8000", "fe80::/10 (built-in: link-local)"),
            ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
            ("http://2852039166/", "cloud metadata"),  # 169.254.169.254 as one number
            ("http://0.0.0.0:8000/", "0.0.0.0/8"),
    ]):
        assert_refused(create(api, key, "meta-%d" % i, url, api_key="k"), "base_url", rule)
    # a refused PATCH changes nothing
    st, _, ep = create(api, key, "fine", "http://10.1.2.3:8000")
    assert st == 201, ep
    assert_refused(api.json("PATCH", "/v1/endpoints/" + ep["id"], key,
                            {"base_url": "http://169.254.169.254/"}), "base_url", "cloud metadata")
    st, _, got = api.json("GET", "/v1/endpoints/" + ep["id"], key)
    assert got["base_url"] == "http://10.1.2.3:8000", got
    # callbacks: the same check where they are registered
    assert_refused(api.json("POST", "/v1/callbacks", key, {"url": "http://169.254.169.254/hook"}),
                   "url", "cloud metadata")
    st, _, cb = api.json("POST", "/v1/callbacks", key, {"url": "https://ci.example.com/hook"})
    assert st == 201, cb


def test_every_spelling_of_a_refused_host_refused_at_create(ctx):
    """Issue 27, finding 3: registration refuses what connection would.  A
    trailing dot, upper case, an address in hex, octal or short form, and a
    name that IDNA would map onto another (full-width letters) were judged
    as names that decide nothing (http://169.254.169.254.:80/ was
    accepted)."""
    s = setup(ctx)
    api, key = s["api"], s["key"]
    for i, (url, rule) in enumerate([
            ("http://169.254.169.254.:80/", "169.254.169.254/32 (built-in: cloud metadata)"),
            ("http://169.254.169.254../latest/", "cloud metadata"),
            ("http://0xA9.0xFE.0xA9.0xFE/", "cloud metadata"),
            ("http://0251.0376.0251.0376./", "cloud metadata"),
            ("http://169.254.43518/", "cloud metadata"),
            ("http://2852039166./", "cloud metadata"),
            ("http://METADATA.Google.Internal./", "metadata.google.internal"),
            ("http://[::ffff:a9fe:a9fe]/", "cloud metadata"),
            ("http://\uff4d\uff45\uff54\uff41\uff44\uff41\uff54\uff41.google.internal/", "xn--"),
            ("http://169\u3002254\u3002169\u3002254/", "xn--"),
    ]):
        assert_refused(create(api, key, "spell-%d" % i, url, api_key="k"), "base_url", rule)
    assert_refused(api.json("POST", "/v1/callbacks", key, {"url": "http://169.254.169.254.:80/h"}),
                   "url", "cloud metadata")
    st, _, ep = create(api, key, "spell-ok", "http://GPU-1.Example.com.:8000")
    assert st == 201, ep


def defaults_api(ctx):
    """An api of the shared cluster without the harness's allow list."""
    s = setup(ctx)
    if "api_defaults" not in s:
        s["api_defaults"] = Api(ctx, s["pg"], env={"TOKBENCH_EGRESS_ALLOW": ""})
    return s["api_defaults"], s["key"]


def test_defaults_refuse_loopback(ctx):
    """Without the harness's allow list: loopback is refused at create."""
    api, key = defaults_api(ctx)
    lst = Listener(ctx)
    assert_refused(create(api, key, "lo-1", lst.url), "base_url", "127.0.0.0/8 (built-in: loopback)")
    port = lst.url.rsplit(":", 1)[1]
    assert_refused(create(api, key, "lo-2", "http://localhost:%s" % port), "base_url", "loopback")
    assert_refused(create(api, key, "lo-3", "http://[::1]:%s" % port), "base_url", "::1/128")


def test_defaults_check_the_resolved_address(ctx):
    """Without the harness's allow list: a name that resolves to loopback
    (here from /etc/hosts) passes create but is refused on the address the
    probe connects to."""
    name = _loopback_name()
    api, key = defaults_api(ctx)
    lst = Listener(ctx)
    port = lst.url.rsplit(":", 1)[1]
    st, _, ep = create(api, key, "lo-name", "http://%s:%s" % (name, port), api_key=EP_KEY)
    assert st == 201, ep
    st, h, p = api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], key, timeout=30)
    assert st == 502, p
    assert "egress refused" in p["detail"] and "127.0.0.0/8" in p["detail"], p
    assert lst.seen == [], lst.seen  # not a single byte went there


def _loopback_name():
    """A name other than localhost that resolves to loopback only (from
    /etc/hosts), or Skip: the egress check on the resolved address needs one."""
    for n in ("vm", "runsc", socket.gethostname()):
        if n != "localhost" and _resolves_to_loopback(n):
            return n
    raise harness.Skip("no name other than localhost resolves to loopback here "
                       "(vm, runsc or the host name in /etc/hosts)")


def _resolves_to_loopback(name):
    try:
        return all(a[4][0].startswith("127.") or a[4][0] == "::1"
                   for a in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP))
    except OSError:
        return False


def test_operator_deny_list_and_bad_lists(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"], env={"TOKBENCH_EGRESS_DENY": "10.9.0.0/16, .internal.example",
                                 "TOKBENCH_EGRESS_ALLOW": "loopback"})
    key = s["key"]
    assert_refused(create(api, key, "d-1", "http://10.9.8.7:8000"), "base_url",
                   "10.9.0.0/16 (TOKBENCH_EGRESS_DENY)")
    assert_refused(create(api, key, "d-2", "http://gpu.internal.example/"), "base_url",
                   "*.internal.example (TOKBENCH_EGRESS_DENY)")
    st, _, ep = create(api, key, "d-3", "http://10.8.0.1:8000")
    assert st == 201, ep
    # a list that does not parse stops the daemons at start
    for binary in ("tokbench-api", "tokbench-worker"):
        r = subprocess.run([harness.bin(binary)], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, TOKBENCH_DATABASE_URL=s["pg"].url,
                                    TOKBENCH_EGRESS_DENY="10.0.0.0/33"))
        assert r.returncode == 2 and "TOKBENCH_EGRESS_DENY" in r.stderr, (binary, r.stderr)
    out = subprocess.run([harness.bin("tokbench-api"), "--help"], capture_output=True, text=True,
                         timeout=30).stdout
    for k in ("TOKBENCH_EGRESS_ALLOW", "TOKBENCH_EGRESS_DENY", "TOKBENCH_PROBE_PER_PROJECT"):
        assert k in out, out
    out = subprocess.run([harness.bin("tokbench-worker"), "--help"], capture_output=True,
                         text=True, timeout=30).stdout
    assert "TOKBENCH_EGRESS_ALLOW" in out, out


def test_worker_job_refused_at_run_time(ctx):
    """A job on an endpoint whose address the worker's policy refuses fails
    with the rule in its error, and nothing reaches the endpoint."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    lst = Listener(ctx)
    st, _, ep = create(api, key, "w-1", lst.url)
    assert st == 201, ep
    j = run_job(ctx, api, key, pg, ep["id"],
                {"TOKBENCH_EGRESS_ALLOW": "", "TOKBENCH_WORKER_ID": "eg-w",
                 # issue 27: handed back first, failed once no worker took it for 2 s
                 "TOKBENCH_EGRESS_GIVE_UP_S": "2"})
    assert j["state"] == "failed", j
    assert "egress refused" in j["error"] and "127.0.0.0/8 (built-in: loopback)" in j["error"], j
    assert lst.seen == [], lst.seen


def test_worker_refusal_hands_the_job_back(ctx):
    """Issue 27, finding 3: a worker whose own egress policy refuses the
    endpoint hands the job back without spending an attempt, with an event
    naming the worker and the rule, and does not claim it again at once; a
    worker allowed to reach the endpoint then runs it (max_attempts 1: the
    refusal used none).  It used to fail the job."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    sim = ctx.sim("tiny")
    st, _, ep = create(api, key, "w-handback", sim.url)
    assert st == 201, ep
    base = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_POLL_S": "1"}
    no = ctx.process("tokbench-worker", [], env=dict(base, TOKBENCH_EGRESS_ALLOW="",
                                                     TOKBENCH_WORKER_ID="eg-refuser"))
    wait_until(lambda: '"msg":"worker ready"' in no.output() or not no.alive(), 20, what="worker")
    st, _, job = api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep["id"], "contexts": ["1k"], "concurrency": [1], "duration_s": 0.3,
        "prefill_contexts": [], "max_attempts": 1})
    assert st == 202, job
    q = ("SELECT count(*) FROM job_events WHERE job_id = '%s' AND data ? 'egress_refused'"
         % job["id"])
    wait_until(lambda: pg.psql(q).strip() == "1", 30, what="the job handed back")
    time.sleep(2.5)  # a few claims of the refusing worker: it passes the job over
    assert pg.psql(q).strip() == "1", pg.psql(q)
    row = pg.psql("SELECT state, attempts, coalesce(error, '') FROM jobs WHERE id = '%s'"
                  % job["id"]).strip()
    assert row == "queued|0|", row
    ev = json.loads(pg.psql("SELECT data FROM job_events WHERE job_id = '%s' "
                            "AND data ? 'egress_refused'" % job["id"]))
    assert ev["state"] == "queued" and ev["worker"] == "eg-refuser", ev
    assert "worker eg-refuser: egress refused" in ev["reason"], ev
    assert "127.0.0.0/8 (built-in: loopback)" in ev["reason"], ev
    assert "job handed back: this worker may not reach its endpoint" in no.output()
    yes = ctx.process("tokbench-worker", [], env=dict(base, TOKBENCH_WORKER_ID="eg-allowed"))

    def done():
        st, _, j = api.json("GET", "/v1/jobs/" + job["id"], key)
        return j if j["state"] in ("failed", "succeeded", "cancelled") else None
    j = wait_until(done, 90, what="job ends")
    assert j["state"] == "succeeded", j
    runs = pg.psql("SELECT data->>'worker', data->>'attempt' FROM job_events WHERE job_id = '%s' "
                   "AND kind = 'state' AND data->>'state' = 'running' ORDER BY id" % job["id"]).split()
    assert runs == ["eg-refuser|1", "eg-allowed|1"], runs  # the refusal gave its attempt back
    yes.stop()
    no.stop()


def test_callback_delivery_refused_on_the_resolved_address(ctx):
    """A callback URL whose name resolves to a refused address passes
    registration (names are not resolved there) and is refused when the
    dispatcher connects: the delivery records the rule, the receiver gets
    nothing.  A cluster of its own: no other dispatcher may claim it."""
    name = _loopback_name()
    pg = ctx.postgres(fresh=True)
    api = Api(ctx, pg, env={"TOKBENCH_EGRESS_ALLOW": "", "TOKBENCH_DELIVERY_BACKOFF_MS": "200"})
    key = make_key(pg, "eg-cb", "--admin")
    rec = Listener(ctx)
    port = rec.url.rsplit(":", 1)[1]
    st, _, cb = api.json("POST", "/v1/callbacks", key, {"url": "http://%s:%s/hook" % (name, port)})
    assert st == 201, cb
    st, _, ep = create(api, key, "cb-ep", "http://10.1.2.3:8000")
    st, _, job = api.json("POST", "/v1/jobs", key, {"endpoint_id": ep["id"], "contexts": ["1k"],
                                                     "concurrency": [1], "duration_s": 1})
    assert st == 202, job
    pg.psql("UPDATE jobs SET state = 'running', started_at = now() WHERE id = '%s'" % job["id"])
    pg.psql("UPDATE jobs SET state = 'failed', finished_at = now(), error = 'x' WHERE id = '%s'"
            % job["id"])

    def refused():
        st, _, doc = api.json("GET", "/v1/deliveries", key)
        d = doc["deliveries"]
        return d if d and d[0]["last_error"] else None
    d = wait_until(refused, 30, what="a delivery attempt")[0]
    assert "egress refused: 127.0.0.1 by rule 127.0.0.0/8 (built-in: loopback)" in \
        d["last_error"], d
    assert d["response_code"] is None and d["status"] in ("pending", "failed"), d
    assert rec.seen == [], rec.seen


# ------------------------------------------------ 2. keys bound to their origin

def test_patch_to_another_origin_drops_the_key(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    home, thief = Listener(ctx), Listener(ctx)
    st, _, ep = create(api, key, "bound-1", home.url + "/v1", api_key=EP_KEY)
    assert st == 201 and ep["api_key_set"] is True, ep
    path = "/v1/endpoints/%s" % ep["id"]
    # same origin, another path: the key stays
    st, _, got = api.json("PATCH", path, key, {"base_url": home.url + "/"})
    assert st == 200 and got["api_key_set"] is True, got
    st, _, found = api.json("POST", path + "/probe", key, timeout=30)
    assert st == 200, found
    assert "Bearer " + EP_KEY in home.auth_headers(), home.seen
    # another origin: the key is dropped in the same PATCH
    st, _, got = api.json("PATCH", path, key, {"base_url": thief.url})
    assert st == 200 and got["api_key_set"] is False, got
    st, _, found = api.json("POST", path + "/probe", key, timeout=30)
    assert st == 200, found
    assert thief.seen and all(a is None for a in thief.auth_headers()), thief.seen
    # moving back does not bring it back
    st, _, got = api.json("PATCH", path, key, {"base_url": home.url})
    assert got["api_key_set"] is False, got
    # a new origin with a new key in the same request: that key goes there
    st, _, got = api.json("PATCH", path, key, {"base_url": thief.url, "api_key": "sk-new"})
    assert st == 200 and got["api_key_set"] is True, got
    st, _, found = api.json("POST", path + "/probe", key, timeout=30)
    assert st == 200 and "Bearer sk-new" in thief.auth_headers(), thief.seen
    assert "Bearer " + EP_KEY not in thief.auth_headers()
    # a key alone is sealed for the current origin
    st, _, got = api.json("PATCH", path, key, {"api_key": "sk-third"})
    assert st == 200 and got["api_key_set"] is True, got
    st, _, found = api.json("POST", path + "/probe", key, timeout=30)
    assert st == 200 and "Bearer sk-third" in thief.auth_headers(), thief.seen


def test_the_seal_names_the_origin(ctx):
    """Moving base_url behind the api's back (SQL) leaves a key that does not
    go to the new origin: the seal and the stored origin name the old one."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    home, thief = Listener(ctx), Listener(ctx)
    st, _, ep = create(api, key, "bound-2", home.url, api_key=EP_KEY)
    assert st == 201, ep
    assert pg.psql("SELECT api_key_origin FROM endpoints WHERE id = '%s'" % ep["id"]).strip() \
        == home.url
    pg.psql("UPDATE endpoints SET base_url = '%s' WHERE id = '%s'" % (thief.url, ep["id"]))
    st, _, p = api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], key, timeout=30)
    assert st == 500 and "another origin" in p["detail"], p
    # nor does pointing the stored origin at it: the associated data differs
    pg.psql("UPDATE endpoints SET api_key_origin = '%s' WHERE id = '%s'" % (thief.url, ep["id"]))
    st, _, p = api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], key, timeout=30)
    assert st == 500 and "does not open" in p["detail"], p
    assert thief.seen == [], thief.seen


def test_legacy_keys_open_and_are_resealed_at_start(ctx):
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    home = Listener(ctx)
    st, _, ep = create(api, key, "legacy-1", home.url)
    assert st == 201, ep
    old = seal(ctx, "sk-legacy", ep["id"], MASTER)  # before sql/0008: the id alone
    pg.psql("UPDATE endpoints SET api_key_sealed = '%s', api_key_origin = NULL WHERE id = '%s'"
            % (old, ep["id"]))
    st, _, found = api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], key, timeout=30)
    assert st == 200 and "Bearer sk-legacy" in home.auth_headers(), (found, home.seen)
    # a new api start re-seals it bound to its origin
    Api(ctx, pg)
    row = pg.psql("SELECT api_key_origin, api_key_sealed FROM endpoints WHERE id = '%s'"
                  % ep["id"]).strip().split("|")
    assert row[0] == home.url and row[1] != old, row
    home.seen.clear()
    st, _, found = api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], key, timeout=30)
    assert st == 200 and "Bearer sk-legacy" in home.auth_headers(), (found, home.seen)


# ------------------------------------------------ 3. probes off the request threads

def test_hanging_probes_do_not_block_other_routes(ctx):
    """16 concurrent probes of an endpoint that accepts and never answers:
    /healthz and another route still answer (bound generous: 2 s)."""
    s = setup(ctx)
    pg, key = s["pg"], s["key"]
    api = Api(ctx, pg, env={"TOKBENCH_THREADS": "4", "TOKBENCH_PROBE_PER_PROJECT": "16",
                            "TOKBENCH_PROBE_DEADLINE_MS": "4000"})
    hang = Hanging(ctx)
    st, _, ep = create(api, key, "hang-1", hang.url)
    assert st == 201, ep
    results = []

    def probe():
        results.append(api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], key, timeout=60))
    threads = [threading.Thread(target=probe) for _ in range(16)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # all 16 are in flight now (each holds for its deadline)
    for path, k in (("/healthz", None), ("/v1/endpoints", key), ("/healthz", None)):
        t0 = time.monotonic()
        st, _, _ = api.req("GET", path, k, timeout=2)
        assert st == 200, (path, st, time.monotonic() - t0)
    for t in threads:
        t.join(60)
    assert len(results) == 16
    # each ends within its deadline with a 502 that names the deadline or timeout
    for st, h, p in results:
        assert st == 502 and h["content-type"] == "application/problem+json", p


def test_probes_per_project_cap(ctx):
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]  # default cap: 2 per project
    other = make_key(pg, "eg-beta", "--admin")
    hang = Hanging(ctx)
    st, _, ep = create(api, key, "hang-2", hang.url)
    st, _, ep_b = create(api, other, "hang-b", hang.url)
    results = []

    def probe(k, e):
        results.append(api.json("POST", "/v1/endpoints/%s/probe" % e, k, timeout=60))
    threads = [threading.Thread(target=probe, args=(key, ep["id"])) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    busy = [r for r in results if r[0] == 429]
    assert len(busy) >= 14, [r[0] for r in results]
    st, h, p = busy[0]
    assert h["content-type"] == "application/problem+json" and "retry-after" in h, h
    assert p["type"].endswith("/probes-busy") and "TOKBENCH_PROBE_PER_PROJECT" in p["detail"], p
    # another project is not held by this one's probes
    t = threading.Thread(target=probe, args=(key, ep["id"]))
    t.start()
    time.sleep(0.3)
    results.clear()
    probe(other, ep_b["id"])
    assert results[0][0] == 502, results[0]  # ran (and timed out), not 429
    t.join(60)


def test_probe_failure_shows_no_remote_body(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]

    class Chatty(httpserver.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b"SECRET-REMOTE-BODY from the internal service"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = httpserver.ThreadingHTTPServer(("127.0.0.1", 0), Chatty)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    ctx.cleanups.append(srv.shutdown)
    st, _, ep = create(api, key, "chatty", "http://127.0.0.1:%d" % srv.server_address[1])
    st, _, raw = api.req("POST", "/v1/endpoints/%s/probe" % ep["id"], key, timeout=30)
    assert st == 502 and b"HTTP 500" in raw and b"SECRET-REMOTE-BODY" not in raw, raw


def test_job_cells_keep_no_remote_body(ctx):
    """An endpoint's error answer stays out of a job's cells: "HTTP 500",
    not the bytes it sent (they may come from a service the tenant must not
    read)."""
    s = setup(ctx)
    api, key, pg = s["api"], s["key"], s["pg"]
    sim = ctx.sim("tiny", "vllm", args=["--fault", "status=500"])
    st, _, ep = create(api, key, "fault-500", sim.url)
    assert st == 201, ep
    j = run_job(ctx, api, key, pg, ep["id"], {"TOKBENCH_WORKER_ID": "eg-w2"})
    st, _, raw = api.req("GET", "/v1/jobs/%s/result" % j["id"], key)
    assert st == 200, raw
    cells = json.loads(raw)["cells"]
    assert cells and all(c["status"] == "error" for c in cells), (j, cells)
    for c in cells:
        assert c["reason"].endswith("stream failed: HTTP 500"), c
