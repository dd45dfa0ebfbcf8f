"""History and the statistical verdict (issue 14), through the real service:
tokbench-api, tokbench-worker and tokbench-sim.  A first job runs on the
simulator (tokbench submit --wait: no history, exit 0); copies of its result,
each with its throughput moved by a few tenths of a percent, are imported as
its history; GET /v1/series shows the points; the same server at half speed
is then a significant regression (submit --wait exits 1 and says why: effect,
CI, p-value, earlier runs), in the result, the Markdown report and the
callback's payload; a step confirmed by later runs is a change point."""
import json
import os
import subprocess
import urllib.parse

import harness
from harness import http, wait_until

MASTER = "5c" * 32
EP_SECRET = "sk-sim-SECRET-for-series-42"
SPEC = {"contexts": [512], "concurrency": [1, 2], "prefill_contexts": [512],
        "duration_s": 0.4, "settle_s": 0.05, "max_output": 256}
S = {}


def setup(ctx):
    if S:
        return S
    pg = ctx.postgres()
    port = harness.free_port()
    api = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_RATE_LIMIT": "0",
        "TOKBENCH_MAX_BODY": str(4 * 1024 * 1024)})
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: api.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", "hist", "--admin"],
                       env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    key = r.stdout.strip()
    key_file = os.path.join(ctx.tmp, "series.key")
    with open(key_file, "w") as f:
        f.write(key + "\n")
    os.chmod(key_file, 0o600)
    worker = ctx.process("tokbench-worker", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_MASTER_KEY": MASTER,
        "TOKBENCH_WORKER_ID": "w-series", "TOKBENCH_LEASE_S": "15", "TOKBENCH_HEARTBEAT_S": "2"})
    wait_until(lambda: '"msg":"worker ready"' in worker.output(), 20, what="worker ready")
    sim = ctx.sim("tiny", args=["--api-key", EP_SECRET])
    S.update(pg=pg, base=base, key=key, key_file=key_file, sim=sim)
    st, ep = call("POST", "/v1/endpoints", {"name": "sim-series", "base_url": sim.url,
                                            "api_key": EP_SECRET})
    assert st == 201, ep
    S["ep"] = ep["id"]
    st, p = call("POST", "/v1/presets", {"name": "series", "spec": dict(SPEC, endpoint_id=ep["id"])})
    assert st == 201, p
    return S


def call(method, path, body=None, timeout=15):
    st, _, data = http(method, S["base"] + path, body, {"Authorization": "Bearer " + S["key"]},
                       timeout)
    try:
        return st, json.loads(data) if data else None
    except ValueError:
        return st, data.decode()


def submit(*labels):
    argv = [harness.bin("tokbench"), "submit", "--preset", "series", "--api", S["base"],
            "--api-key-file", S["key_file"], "--wait"]
    for l in labels:
        argv += ["--label", l]
    e = dict(os.environ)
    e.pop("TOKBENCH_API_KEY", None)
    p = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=180)
    jid = S["pg"].psql("SELECT id FROM jobs ORDER BY created_at DESC LIMIT 1").strip()
    return p, jid


def series(labels, ctx=512, conc=1, metric="total_tps"):
    q = {"endpoint_id": S["ep"], "labels": json.dumps(labels), "metric": metric}
    if ctx is not None:
        q.update(context=ctx, concurrency=conc)
    q = urllib.parse.urlencode(q)
    st, doc = call("GET", "/v1/series?" + q)
    assert st == 200, doc
    return doc


def imported(doc, labels, factor):
    d = json.loads(json.dumps(doc))
    for c in d["cells"]:
        if c.get("phase") == "decode" and c.get("status") == "valid":
            c["total_tps"] *= factor
    d.pop("regressions", None)
    st, r = call("POST", "/v1/results", {"endpoint_id": S["ep"], "result": d, "labels": labels})
    assert st == 201, r
    return r


def test_history_series_and_verdict(ctx):
    setup(ctx)
    # 1. No history: the two-run fallback, nothing to compare, exit 0.
    p, first = submit("suite=series")
    assert p.returncode == 0, (p.stdout, p.stderr)
    st, job = call("GET", "/v1/jobs/" + first)
    labels = job["labels"]
    st, doc = call("GET", "/v1/jobs/%s/result" % first)
    reg = doc["regressions"]
    assert reg["method"] == "two_run" and reg["regressed"] is False, reg
    assert all(v["outcome"] == "too_little_history" for v in reg["verdicts"]), reg
    # 2. History: five more runs of the same server (throughput within 0.4%).
    for f in (1.002, 0.997, 1.004, 0.999, 1.001):
        r = imported(doc, labels, f)
    assert r["regressions"]["method"] == "history", r["regressions"]
    assert r["regressions"]["regressed"] is False, r["regressions"]
    s = series(labels)
    assert [pt["job_id"] for pt in s["points"]][0] == first and len(s["points"]) == 6, s
    assert s["change_points"] == [] and s["better"] == "higher"
    assert all(pt["value"] > 0 for pt in s["points"])
    # wrong arguments are 400 problems
    st, prob = call("GET", "/v1/series?endpoint_id=%s&context=512&metric=bogus" % S["ep"])
    assert st == 400 and prob["status"] == 400
    st, prob = call("GET", "/v1/series?endpoint_id=nope&context=512")
    assert st == 400

    # 3. The same server at half speed: a significant regression, exit 1.
    slow = ctx.sim("tiny", args=["--api-key", EP_SECRET, "--time-scale", "0.5"])
    st, _ = call("PATCH", "/v1/endpoints/" + S["ep"], {"base_url": slow.url, "api_key": EP_SECRET})
    assert st == 200
    p, third = submit("suite=series")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "CI" in p.stderr and "6 earlier runs" in p.stderr and "p < 0.001" in p.stderr, p.stderr
    st, doc3 = call("GET", "/v1/jobs/%s/result" % third)
    reg = doc3["regressions"]
    assert reg["method"] == "history" and reg["regressed"] is True, reg
    tps = [g for g in reg["cells"] if g["metric"] == "total_tps"]
    assert len(tps) == 2 and all(g["change_pct"] < -30 and g["ci95_pct"][1] < 0 and g["p"] < 0.001
                                 and g["earlier_runs"] == 6 for g in tps), tps
    assert reg["matrix"]["total_tps"]["outcome"] == "worse", reg["matrix"]
    # 4. Two more slow runs confirm the step: a change point at the first.
    imported(doc3, labels, 1.001)
    r = imported(doc3, labels, 0.999)
    s = series(labels)
    assert len(s["points"]) == 9
    cps = s["change_points"]
    assert [c["job_id"] for c in cps] == [third], cps
    assert cps[0]["change_pct"] < -30
    v = [v for v in r["regressions"]["verdicts"]
         if v["metric"] == "total_tps" and v["context"] == 512 and v["concurrency"] == 1][0]
    assert v["step"] is True and v["new_runs"] == 3 and v["outcome"] == "worse", v
    # the matrix's series: geometric means of the cells over their medians
    mx = series(labels, ctx=None)
    assert mx["scope"] == "matrix" and mx["context"] is None and len(mx["points"]) == 9, mx
    assert abs(mx["points"][0]["value"] - 1) < 0.01 and mx["points"][-1]["value"] < 0.7, mx
    assert [c["job_id"] for c in mx["change_points"]] == [third], mx["change_points"]
    # the Markdown report says why
    st, md = call("GET", "/v1/jobs/%s/report?format=md" % third)
    assert st == 200 and "6 earlier runs" in md and "CI" in md, md


def test_compare_with_history(ctx):
    """tokbench compare EARLIER... BASE HEAD: HEAD judged against every earlier
    file; exit 1 only on a significant regression, told on stderr and in the
    Markdown.  (Eight earlier runs: with four, a 5% loss of one cell among
    95 judged figures is not significant at 0.001 / 95 on 3 degrees of
    freedom, rightly.)"""
    with open(os.path.join(harness.ROOT, "tests", "fixtures", "result_vllm.json")) as f:
        doc = json.load(f)
    files = []
    for i, w in enumerate((1.002, 0.997, 1.003, 0.999, 1.001, 0.998, 1.002, 0.999)):
        d = json.loads(json.dumps(doc))
        for c in d["cells"]:
            if c.get("phase") == "decode" and c.get("status") == "valid":
                c["total_tps"] *= w
        files.append(os.path.join(ctx.tmp, "run%d.json" % i))
        with open(files[-1], "w") as f:
            json.dump(d, f)

    def compare(head):
        path = os.path.join(ctx.tmp, "head.json")
        with open(path, "w") as f:
            json.dump(head, f)
        return subprocess.run([harness.bin("tokbench"), "compare"] + files + [path, "--format", "md"],
                              capture_output=True, text=True, timeout=60)

    same = json.loads(json.dumps(doc))
    p = compare(same)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr)
    assert "No significant regression beyond 2.0% against up to 8 earlier runs" in p.stdout
    slow = json.loads(json.dumps(doc))
    for c in slow["cells"]:
        if c["phase"] == "decode" and c["context"] == 8192 and c["concurrency"] == 1:
            c["total_tps"] *= 0.95
    p = compare(slow)
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr)
    assert "8K \u00d7 1 total_tps: \u22125.0% (CI" in p.stderr and "8 earlier runs" in p.stderr, p.stderr
    assert "### Verdict" in p.stdout and "8 earlier runs" in p.stdout
    # two files: the two-run comparison at 5%, flagged (run0 is 0.2% faster:
    # the loss is 5.2%)
    p = subprocess.run([harness.bin("tokbench"), "compare", files[0], os.path.join(ctx.tmp, "head.json")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "5.2% (against the last good run: too little history)" in p.stderr, \
        p.stderr
