"""Traces in the service (issue 25, part 4; docs/traces.md "Traces in the
service"): POST/GET/DELETE /v1/traces and a job naming an uploaded trace.

- Every generated fixture of tests/fixtures/traces/ (each format, gzip too)
  uploads as sent (201, Location), its summary the one the generator
  computed on its own (<file>.expect.json), its SHA-256 that of the bytes;
  the list pages through them newest first; a trace shows and deletes.
- A malformed trace is 422 problem+json naming the line and field (the
  reader's own message); a trace over TOKBENCH_TRACE_MAX_BYTES is 413
  before its body is read; the project's caps TOKBENCH_LIMIT_TRACES and
  TOKBENCH_LIMIT_TRACE_BYTES are 429 naming the setting.
- Another project's key gets 404 on the trace (show, delete: it stays) and
  422 on a job naming it; its list is its own.
- A job through the service (api + worker + tokbench-sim) replays an
  uploaded fixture of each format: every request completes, the server's
  hit rate is the implied one within 2 points (as test_trace.py holds
  `tokbench run --trace` to), and the trace cell records the trace's id and
  SHA-256; the trace cannot be deleted while the job is queued or running.
- A small gzip that inflates to a tree bomb (12 MiB of "{}," in a WEKA
  conversation, an array of them, a 4 MiB JSON line) is 422 naming the cap
  it passed, and the api's peak RSS grows by at most 64 MB for it (issue 34,
  item 1: it grew by 972 MB); TOKBENCH_TRACE_MAX_MEMORY lowers the cap, and
  another project's upload goes through meanwhile.
"""
import gzip
import hashlib
import http.client
import json
import os
import socket
import time

import harness
import test_tenancy
import test_trace
from test_tenancy import Api, make_key
from test_trace import BIG, FIX, FORMATS

STATE = {}


def setup(ctx):
    if STATE:
        return STATE
    STATE.update(harness.service(ctx, test_tenancy.MASTER, "traces-a", "w-traces"))
    STATE["api"] = Api(ctx, STATE["pg"])  # the same service, for Api's helpers
    return STATE


def fixture(name):
    with open(os.path.join(FIX, name), "rb") as f:
        return f.read()


def upload(api, key, data, fmt, name=None, headers=None):
    q = "/v1/traces?format=%s" % fmt + ("&name=%s" % name if name else "")
    h = {"Content-Type": "application/octet-stream"}
    h.update(headers or {})
    return api.json("POST", q, key, data, h)


def is_problem(hd, doc, status):
    assert hd["content-type"].startswith("application/problem+json"), hd
    assert doc["status"] == status and doc["type"].startswith("https://"), doc


def test_upload_every_fixture(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    ids = []
    for name, fmt in FORMATS:
        data = fixture(name)
        st, hd, doc = upload(api, key, data, fmt, name)
        assert st == 201, (name, doc)
        assert hd["location"] == "/v1/traces/" + doc["id"], hd
        assert doc["name"] == name and doc["format"] == fmt, doc
        assert doc["size_bytes"] == len(data), doc
        assert doc["sha256"] == hashlib.sha256(data).hexdigest(), doc
        assert doc["gzip"] == name.endswith(".gz"), doc
        want = json.load(open(os.path.join(FIX, name + ".expect.json")))
        sm = doc["summary"]
        for k in ("requests", "sessions", "unique_blocks", "block_tokens"):
            assert sm[k] == want[k], (name, k, sm, want)
        assert abs(sm["span_s"] - want["span_s"]) < 1e-6, (name, sm)
        assert abs(sm["implied_hit_pct"] - 100 * want["implied_hit_rate"]) < 1e-6, (name, sm)
        assert abs(sm["input_tokens"]["mean"] - want["input_tokens_mean"]) < 1e-6, (name, sm)
        for d in ("input_tokens", "output_tokens"):
            q = sm[d]
            assert q["p50"] <= q["p90"] <= q["p99"] <= q["max"], (name, d, q)
        if sm["span_s"] > 0:
            assert abs(sm["rate_rps"] - sm["requests"] / sm["span_s"]) < 1e-6, sm
        st, _, got = api.json("GET", "/v1/traces/" + doc["id"], key)
        assert st == 200 and got == doc, (got, doc)
        ids.append(doc["id"])
    # gzip kept as sent: the plain and the gzip Mooncake are the same trace
    plain = next(i for i, (n, _) in enumerate(FORMATS) if n == "mooncake.jsonl")
    gz = next(i for i, (n, _) in enumerate(FORMATS) if n == "mooncake.jsonl.gz")
    assert gzip.decompress(fixture("mooncake.jsonl.gz")) == fixture("mooncake.jsonl")
    _, _, a = api.json("GET", "/v1/traces/" + ids[plain], key)
    _, _, b = api.json("GET", "/v1/traces/" + ids[gz], key)
    assert a["summary"] == b["summary"] and a["sha256"] != b["sha256"], (a, b)
    # the list, newest first, 3 a page, through its cursors
    seen, cursor, pages = [], None, 0
    while True:
        st, _, page = api.json("GET", "/v1/traces?limit=3" + ("&cursor=" + cursor if cursor else ""),
                               key)
        assert st == 200, page
        assert len(page["traces"]) <= 3
        seen += [t["id"] for t in page["traces"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids)), (seen, ids)
    assert pages == (len(ids) + 2) // 3
    for bad in ("limit=0", "limit=101", "cursor=zz"):
        st, hd, doc = api.json("GET", "/v1/traces?" + bad, key)
        assert st == 400, (bad, doc)
        is_problem(hd, doc, 400)
    # a name defaults to the format; delete, then it is gone
    st, _, doc = upload(api, key, fixture("azure2023.csv"), "azure")
    assert st == 201 and doc["name"] == "azure", doc
    st, _, _ = api.json("DELETE", "/v1/traces/" + doc["id"], key)
    assert st == 204
    for m in ("GET", "DELETE"):
        st, hd, p = api.json(m, "/v1/traces/" + doc["id"], key)
        assert st == 404, (m, p)
        is_problem(hd, p, 404)


def test_bad_traces(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    bad_line = b'{"timestamp": 0, "input_length": 5, "output_length": 3}\n' \
               b'{"timestamp": 1, "input_length": -3, "output_length": 3}\n'
    cases = [
        (bad_line, "mooncake", 'line 2: field "input_length": expected a whole number'),
        (gzip.compress(bad_line), "mooncake", 'line 2: field "input_length"'),
        (b"TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,12\n", "azure",
         'the header has no column "GeneratedTokens"'),
        (fixture("mooncake.jsonl.gz")[:200], "mooncake", "gzip: "),
        (b'{"block_size": 64, "requests": [{"t": 0, "type": "n", "in": 5}]}', "weka",
         'field "out"'),
        (fixture("bailian.jsonl"), "burstgpt", "line 1"),  # another format's file
        (b"", "mooncake", "body: empty"),
    ]
    for data, fmt, words in cases:
        st, hd, doc = upload(api, key, data, fmt)
        assert st == 422, (words, st, doc)
        is_problem(hd, doc, 422)
        assert words in doc["detail"], (words, doc)
        assert doc["errors"][0]["field"] == "body", doc
    for q, words in (("", "?format="), ("?format=csv", "?format="),
                     ("?format=azure&name=", "name:"), ("?format=azure&name=a%01b", "name:")):
        st, hd, doc = api.json("POST", "/v1/traces" + q, key, fixture("azure2023.csv"))
        assert st == 400 and words in doc["detail"], (q, doc)
        is_problem(hd, doc, 400)
    st, _, page = api.json("GET", "/v1/traces?limit=100", key)
    assert all(t["name"] not in ("mooncake", "weka", "burstgpt") for t in page["traces"]), page
    # scopes: reading needs read, uploading and deleting write
    st, _, ro = api.json("POST", "/v1/keys", key, {"name": "ro", "scopes": ["read"]})
    assert st == 201, ro
    st, hd, doc = upload(api, ro["key"], fixture("azure2023.csv"), "azure")
    assert st == 403, doc
    st, _, doc = api.json("GET", "/v1/traces", ro["key"])
    assert st == 200, doc
    st, _, doc = api.json("GET", "/v1/traces", None)
    assert st == 401, doc


def test_size_limit_and_caps(ctx):
    s = setup(ctx)
    small = fixture("azure2023.csv")  # 10.9 KB
    api = Api(ctx, s["pg"], {"TOKBENCH_TRACE_MAX_BYTES": "30000", "TOKBENCH_LIMIT_TRACES": "3",
                             "TOKBENCH_LIMIT_TRACE_BYTES": "25000"})
    key = make_key(s["pg"], "traces-caps")
    st, hd, doc = upload(api, key, fixture("weka.json"), "weka")  # 23 KB: fits the upload
    assert st == 201, doc
    st, hd, doc = upload(api, key, fixture("mooncake.jsonl"), "mooncake")  # 26.8 KB > 25000
    assert st == 422 and doc["setting"] == "TOKBENCH_LIMIT_TRACE_BYTES", doc
    is_problem(hd, doc, 422)
    st, hd, doc = upload(api, key, fixture("bailian.jsonl"), "bailian")  # 74.6 KB > 30000
    assert st == 413 and "TOKBENCH_TRACE_MAX_BYTES" in doc["detail"], doc
    is_problem(hd, doc, 413)
    # chunked, no Content-Length: cut off as the body passes the limit
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    conn.putrequest("POST", "/v1/traces?format=bailian")
    for k, v in (("Authorization", "Bearer " + key), ("Transfer-Encoding", "chunked")):
        conn.putheader(k, v)
    conn.endheaders()
    data = fixture("bailian.jsonl")
    for i in range(0, len(data), 8192):
        part = data[i:i + 8192]
        conn.send(b"%x\r\n%s\r\n" % (len(part), part))
    conn.send(b"0\r\n\r\n")
    r = conn.getresponse()
    doc = json.loads(r.read())
    conn.close()
    assert r.status == 413 and "TOKBENCH_TRACE_MAX_BYTES" in doc["detail"], doc
    st, hd, doc = upload(api, key, small, "azure")  # 23 + 10.9 KB > 25000 in all
    assert st == 429 and doc["setting"] == "TOKBENCH_LIMIT_TRACE_BYTES", doc
    assert doc["max"] == 25000 and doc["value"] == len(fixture("weka.json")), doc
    assert "retry-after" in hd, hd
    is_problem(hd, doc, 429)
    st, _, page = api.json("GET", "/v1/traces", key)
    for t in page["traces"]:
        assert api.json("DELETE", "/v1/traces/" + t["id"], key)[0] == 204
    for i in range(3):
        st, _, doc = upload(api, key, fixture("burstgpt.csv")[:2000].rsplit(b"\n", 1)[0] + b"\n",
                            "burstgpt", "b%d" % i)
        assert st == 201, doc
    st, hd, doc = upload(api, key, small[:1500].rsplit(b"\n", 1)[0] + b"\n", "azure")
    assert st == 429 and doc["setting"] == "TOKBENCH_LIMIT_TRACES" and doc["value"] == 3, doc
    # a full project is told so before its trace is read (no parse: not 422)
    st, _, doc = upload(api, key, b"not a trace\n", "azure")
    assert st == 429 and doc["setting"] == "TOKBENCH_LIMIT_TRACES", doc
    # another project has room of its own
    other = make_key(s["pg"], "traces-caps-2")
    assert upload(api, other, small, "azure")[0] == 201
    api.stop()


def test_another_projects_trace_is_404(ctx):
    s = setup(ctx)
    api, ka = s["api"], s["key"]
    kb = make_key(s["pg"], "traces-b")
    st, _, t = upload(api, ka, fixture("mooncake.jsonl"), "mooncake", "a-only")
    assert st == 201, t
    for m in ("GET", "DELETE"):
        st, hd, doc = api.json(m, "/v1/traces/" + t["id"], kb)
        assert st == 404, (m, doc)
        is_problem(hd, doc, 404)
    assert api.json("GET", "/v1/traces/" + t["id"], ka)[0] == 200  # still there
    st, _, page = api.json("GET", "/v1/traces?limit=100", kb)
    assert st == 200 and page["traces"] == [], page
    st, _, ep = api.json("POST", "/v1/endpoints", kb, {"name": "b-sim",
                                                       "base_url": "http://127.0.0.1:9"})
    assert st == 201, ep
    st, hd, doc = api.json("POST", "/v1/jobs", kb, {
        "endpoint_id": ep["id"], "trace": {"id": t["id"], "format": "mooncake"}})
    assert st == 422 and doc["errors"] == [{"field": "trace.id",
                                            "detail": "no such trace in this project"}], doc
    is_problem(hd, doc, 422)
    # nor through a preset (saved as a spec; its jobs are checked as made)
    st, _, pr = api.json("POST", "/v1/presets", kb, {"name": "steal", "spec": {
        "endpoint_id": ep["id"], "trace": {"id": t["id"], "format": "mooncake"}}})
    assert st == 201, pr
    st, hd, doc = api.json("POST", "/v1/presets/steal/jobs", kb, {"labels": {"x": "y"}})
    assert st == 422 and doc["errors"][0]["field"] == "trace.id", doc
    is_problem(hd, doc, 422)
    # the owner's own checks: a trace object needs the id, of its format
    st, _, epa = api.json("POST", "/v1/endpoints", ka, {"name": "a-dead",
                                                        "base_url": "http://127.0.0.1:9"})
    for trace, field in (({"format": "mooncake"}, "trace.id"),
                         ({"id": t["id"], "format": "weka"}, "trace.format")):
        st, _, doc = api.json("POST", "/v1/jobs", ka, {"endpoint_id": epa["id"], "trace": trace})
        assert st == 422 and doc["errors"][0]["field"] == field, (trace, doc)


def wait_job(api, key, jid, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st, _, doc = api.json("GET", "/v1/jobs/%s?wait=5" % jid, key)
        assert st == 200, doc
        if doc["state"] in ("succeeded", "failed", "cancelled"):
            return doc
    raise AssertionError("job %s did not end" % jid)


def test_job_replays_each_format(ctx):
    s = setup(ctx)
    api, key = s["api"], s["key"]
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + BIG)
    st, _, ep = api.json("POST", "/v1/endpoints", key, {"name": "trace-sim", "base_url": sim.url})
    assert st == 201, ep
    runs = []
    for name, fmt in (("mooncake.jsonl.gz", "mooncake"), ("mooncake-sessions.jsonl", "mooncake"),
                      ("bailian.jsonl", "bailian"), ("weka.json", "weka"),
                      ("azure2024.csv", "azure"), ("burstgpt.csv", "burstgpt")):
        data = fixture(name)
        st, _, t = upload(api, key, data, fmt, "job-" + name)
        assert st == 201, t
        st, _, job = api.json("POST", "/v1/jobs", key, {
            "endpoint_id": ep["id"], "labels": {"trace": name},
            "trace": {"id": t["id"].upper(), "format": fmt, "duration_s": 20, "speedup": 4}})
        assert st == 202, job
        runs.append((name, fmt, t, job["id"], hashlib.sha256(data).hexdigest()))
    # a queued or running job holds its trace
    st, hd, doc = api.json("DELETE", "/v1/traces/" + runs[-1][2]["id"], key)
    assert st == 409, doc
    is_problem(hd, doc, 409)
    for name, fmt, t, jid, sha in runs:
        doc = wait_job(api, key, jid)
        assert doc["state"] == "succeeded", (name, doc)
        st, _, res = api.json("GET", "/v1/jobs/%s/result" % jid, key)
        assert st == 200, res
        cells = res["cells"]
        assert [c["phase"] for c in cells] == ["rate"], (name, cells)
        c = cells[0]
        tr = c["trace"]
        assert c["status"] == "valid", (name, c.get("reason"))
        assert c["completed"] == c["requests"] == tr["requests"] and c["errors"] == 0, (name, c)
        assert tr["format"] == fmt and tr["abandoned"] == 0, (name, tr)
        assert abs(tr["hit_pct"] - tr["implied_hit_pct"]) <= 2, (name, tr)
        assert tr["id"] == t["id"] and tr["sha256"] == sha, (name, tr)
        print("# %s: %d requests, hit %.1f%% / implied %.1f%%, lag p99 %.1f ms"
              % (name, tr["requests"], tr["hit_pct"], tr["implied_hit_pct"],
                 c["schedule_lag_ms"]["p99"]))
    # ended: the trace may go
    assert api.json("DELETE", "/v1/traces/" + runs[-1][2]["id"], key)[0] == 204


def test_worker_reads_the_jobs_own_project(ctx):
    """The worker loads a job's trace through the job's own project: a spec
    changed behind the api's back (here by SQL, while the job waits behind
    another of its exclusive group) to name another project's trace fails
    with that reason."""
    s = setup(ctx)
    api, ka = s["api"], s["key"]
    kb = make_key(s["pg"], "traces-worker-b")
    sim = ctx.sim("tiny", "vllm", args=BIG)
    st, _, ta = upload(api, ka, fixture("azure2023.csv"), "azure", "a-secret")
    assert st == 201, ta
    st, _, tb = upload(api, kb, fixture("azure2023.csv"), "azure", "b-own")
    assert st == 201, tb
    st, _, ep = api.json("POST", "/v1/endpoints", kb, {"name": "b-sim", "base_url": sim.url})
    assert st == 201, ep
    spec = {"endpoint_id": ep["id"], "exclusive_group": "b-node",
            "trace": {"id": tb["id"], "format": "azure", "duration_s": 60}}
    st, _, first = api.json("POST", "/v1/jobs", kb, spec)
    assert st == 202, first
    st, _, second = api.json("POST", "/v1/jobs", kb, spec)
    assert st == 202, second
    harness.wait_until(lambda: api.json("GET", "/v1/jobs/" + first["id"], kb)[2]["state"] == "running",
                       60, what="the first job running")
    assert api.json("GET", "/v1/jobs/" + second["id"], kb)[2]["state"] == "queued"
    s["pg"].psql("UPDATE jobs SET spec = jsonb_set(spec, '{trace,id}', '\"%s\"') WHERE id = '%s'"
                 % (ta["id"], second["id"]))
    assert api.json("POST", "/v1/jobs/%s/cancel" % first["id"], kb)[0] == 202
    doc = wait_job(api, kb, second["id"])
    assert doc["state"] == "failed", doc
    assert "is not in the job's project" in doc["error"] and ta["id"] in doc["error"], doc
    assert wait_job(api, kb, first["id"])["state"] == "cancelled"


def test_curl_upload_as_documented(ctx):
    """docs/traces.md's curl line: --data-binary of a 2.5 MB trace (curl
    then asks Expect: 100-continue) stores it whole; the same over
    TOKBENCH_TRACE_MAX_BYTES is refused before the body (413)."""
    s = setup(ctx)
    path = os.path.join(ctx.tmp, "big.jsonl")
    lines = [l for l in fixture("mooncake.jsonl").decode().splitlines() if l.strip()]
    with open(path, "w") as f:
        n = 0
        while f.tell() < 2500000:
            for l in lines:
                d = json.loads(l)
                d["timestamp"] += 30000 * (n // len(lines))
                f.write(json.dumps(d) + "\n")
                n += 1
    size = os.path.getsize(path)

    def curl(base):
        p = harness.subprocess.run(
            ["curl", "-s", "-w", "\n%{http_code}", "-H", "Authorization: Bearer " + s["key"],
             "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + path,
             base + "/v1/traces?format=mooncake&name=big%20one"],
            capture_output=True, text=True, timeout=60)
        body, code = p.stdout.rsplit("\n", 1)
        return int(code), json.loads(body)
    code, doc = curl(s["base"])
    assert code == 201, doc
    assert doc["name"] == "big one" and doc["size_bytes"] == size, doc
    assert doc["summary"]["requests"] == n, (doc["summary"], n)
    with open(path, "rb") as f:
        assert doc["sha256"] == hashlib.sha256(f.read()).hexdigest()
    small = Api(ctx, s["pg"], {"TOKBENCH_TRACE_MAX_BYTES": "1048576"})
    code, doc = curl(small.base)
    assert code == 413 and "1048576 bytes (TOKBENCH_TRACE_MAX_BYTES)" in doc["detail"], doc
    small.stop()


def test_settings(ctx):
    """The three settings are checked at start (out of range: exit 2 naming
    it), and the worker accepts them too (one config file for both)."""
    for k, v in (("TOKBENCH_TRACE_MAX_BYTES", "10"), ("TOKBENCH_TRACE_MAX_BYTES", "300000000"),
                 ("TOKBENCH_LIMIT_TRACES", "-1"), ("TOKBENCH_LIMIT_TRACE_BYTES", "lots")):
        r = harness.subprocess.run([harness.bin("tokbench-api")], capture_output=True, text=True,
                                   timeout=30, env={"TOKBENCH_DATABASE_URL": "postgresql:///x", k: v})
        assert r.returncode == 2 and k in r.stderr, (k, v, r.returncode, r.stderr)
    for b in ("tokbench-api", "tokbench-worker"):
        r = harness.subprocess.run([harness.bin(b), "--help"], capture_output=True, text=True)
        for k in ("TOKBENCH_TRACE_MAX_BYTES", "TOKBENCH_LIMIT_TRACES", "TOKBENCH_LIMIT_TRACE_BYTES"):
            assert r.returncode == 0 and k in r.stdout, (b, k)


def test_uploads_at_once_per_project(ctx):
    """TOKBENCH_TRACE_UPLOADS_PER_PROJECT: an upload holds its project's slot
    from its head to its end, body included; one more at once is 429 naming
    the setting, another project is not held back, and a slot comes back
    when its upload ends (or its client goes away)."""
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_TRACE_UPLOADS_PER_PROJECT": "1"})
    key, other = make_key(s["pg"], "traces-slots"), make_key(s["pg"], "traces-slots-2")
    data = fixture("azure2024.csv")

    def start(half):
        """An upload sending half its body, once the api has taken its slot
        (a probe upload racing it may take the slot first: then it starts
        again)."""
        for _ in range(50):
            c = socket.create_connection(("127.0.0.1", api.port), timeout=10)
            c.sendall(("POST /v1/traces?format=azure&name=slow HTTP/1.1\r\nHost: x\r\n"
                       "Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                       % (key, len(data))).encode() + data[:half])
            time.sleep(0.1)
            if held():
                return c
            c.close()
        raise AssertionError("the slow upload never held the slot")

    def held():
        st, hd, doc = upload(api, key, data, "azure")
        return st == 429 and doc["limit"] == "TOKBENCH_TRACE_UPLOADS_PER_PROJECT" and \
            "retry-after" in hd

    slow = start(1000)
    assert upload(api, other, data, "azure")[0] == 201  # another project's own slot
    slow.sendall(data[1000:])
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += slow.recv(4096)
    assert reply.startswith(b"HTTP/1.1 201"), reply[:200]
    slow.close()
    harness.wait_until(lambda: upload(api, key, data, "azure")[0] == 201, 10, what="slot back")
    gone = start(500)
    gone.close()  # the client goes away mid-body: its slot comes back
    harness.wait_until(lambda: upload(api, key, data, "azure")[0] == 201, 10, what="slot back")
    # one upload after another, each sent once the last one's reply is read:
    # none may find the slot still held (CI saw a 429 here when the slot was
    # given back only when MHD completed the request, after its reply)
    bad = b"TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,12\n"
    seen = [upload(api, key, bad, "azure")[0] for _ in range(60)]
    assert seen == [422] * 60, seen
    api.stop()


def peak_rss_mb(proc):
    """The process's peak resident set (VmHWM), in MB."""
    with open("/proc/%d/status" % proc.proc.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmHWM")


def test_tree_bombs_are_refused_cheaply(ctx):
    s = setup(ctx)
    # an api of its own, so its peak is this test's; ASan's quarantine would
    # hold freed buffers and blur the figure
    api = Api(ctx, s["pg"], {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:quarantine_size_mb=0"})
    key, other = make_key(s["pg"], "traces-bomb"), make_key(s["pg"], "traces-bomb-2")
    reps = (12 << 20) // 3
    bombs = [
        ("weka", b'{"block_size": 64, "requests": [' + b",".join([b"{}"] * reps) + b"]}",
         "more than the 128 MiB of one JSON line or conversation"),
        ("weka", b"[" + b",".join([b"{}"] * reps) + b"]", 'conversation 0: field "requests"'),
        ("mooncake", b'{"timestamp": 0, "input_length": 1, "x": ['
         + b",".join([b"{}"] * ((4 << 20) // 3 - 30)) + b"]}\n", "line 1: its JSON would take about"),
    ]
    base = peak_rss_mb(api.proc)
    for fmt, text, words in bombs:
        gz = gzip.compress(text, 9)
        assert len(gz) < 64 << 10, len(gz)
        st, hd, doc = upload(api, key, gz, fmt)
        assert st == 422, (words, st, doc)
        is_problem(hd, doc, 422)
        assert words in doc["detail"], (words, doc)
        grown = peak_rss_mb(api.proc) - base
        print("# %s bomb: %d KiB gzip, %d MiB inflated; api peak RSS +%.1f MB (%s)"
              % (fmt, len(gz) >> 10, len(text) >> 20, grown, doc["detail"][:60]))
        assert grown <= 64, (words, grown)
        # the other project is not held back
        st, _, doc = upload(api, other, fixture("azure2023.csv"), "azure")
        assert st == 201, doc
        api.json("DELETE", "/v1/traces/" + doc["id"], other)
    api.stop()
    # the operator's lower cap, named in the refusal; a trace within it reads
    small = Api(ctx, s["pg"], {"TOKBENCH_TRACE_MAX_MEMORY": str(1 << 20)})
    st, hd, doc = upload(small, key, gzip.compress(fixture("bailian.jsonl") * 20), "bailian")
    assert st == 422 and "inflates to more than 1048576 bytes" in doc["detail"], doc
    st, _, doc = upload(small, key, fixture("azure2023.csv"), "azure")
    assert st == 201, doc
    small.stop()
