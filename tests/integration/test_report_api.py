"""The report routes of the API (issue 6): GET /v1/jobs/{id}/report in every
format (Accept and ?format=), partial while a job runs, GET /v1/compare,
POST /v1/results (ours and llm-inference-bench's), thresholds and the
regression check (tb_regress_check), and the static web files (no key, no
path traversal).  Jobs are made by import and, for a running job, by SQL."""
import json
import os
import subprocess
import urllib.parse

import harness
from harness import http, wait_until

FIX = os.path.join(harness.ROOT, "tests", "fixtures")
MASTER = "7a" * 32
S = {}


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f)


def setup(ctx):
    if S:
        return S
    pg = ctx.postgres()
    port = harness.free_port()
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
           "TOKBENCH_DB_WAIT_MS": "5000", "TOKBENCH_MASTER_KEY": MASTER,
           "TOKBENCH_RATE_LIMIT": "0", "TOKBENCH_MAX_BODY": str(4 * 1024 * 1024)}
    proc = ctx.process("tokbench-api", [], env=env)
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    keys = {}
    for proj in ("alpha", "beta"):
        r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", proj, "--admin"],
                           env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        keys[proj] = r.stdout.strip()
    S.update(pg=pg, base=base, key=keys["alpha"], other=keys["beta"])
    st, _, body = req("POST", "/v1/endpoints", {"name": "h200", "base_url": "http://127.0.0.1:9"})
    assert st == 201, body
    S["endpoint"] = json.loads(body)["id"]
    return S


def req(method, path, body=None, key=None, headers=None):
    h = dict(headers or {})
    h["Authorization"] = "Bearer " + (key or S["key"])
    return http(method, S["base"] + path, body, h, timeout=20)


def jreq(method, path, body=None, key=None, headers=None):
    st, h, data = req(method, path, body, key, headers)
    return st, h, (json.loads(data) if data else None)


def import_doc(doc, labels=None, key=None):
    body = {"endpoint_id": S["endpoint"], "result": doc}
    if labels is not None:
        body["labels"] = labels
    return jreq("POST", "/v1/results", body, key=key)


def test_import_and_report_formats(ctx):
    setup(ctx)
    doc = load("result_sglang.json")
    st, h, r = import_doc(doc, {"gpu": "rtx6000", "engine": "sglang"})
    assert st == 201, r
    assert r["source"] == "tokbench" and r["cells"] == 55 and r["state"] == "succeeded"
    assert h["location"] == "/v1/jobs/" + r["job_id"]
    assert r["regressions"]["base_job_id"] is None       # nothing before it
    S["sglang_job"] = jid = r["job_id"]

    st, h, html = req("GET", "/v1/jobs/%s/report" % jid)    # default: HTML
    html = html.decode()
    assert st == 200 and h["content-type"].startswith("text/html")
    assert "script-src" not in h["content-security-policy"]
    assert "default-src 'none'" in h["content-security-policy"]
    assert "<b>118.4</b><span>498 ms TTFT</span>" in html
    assert 'id="partial"' not in html
    st, h, md = req("GET", "/v1/jobs/%s/report" % jid, headers={"Accept": "text/markdown"})
    assert st == 200 and h["content-type"].startswith("text/markdown")
    assert "| 8K | **118.4**<br>498 ms TTFT |" in md.decode()
    st, h, csv = req("GET", "/v1/jobs/%s/report?format=csv" % jid,
                     headers={"Accept": "text/html"})             # ?format= wins
    assert st == 200 and h["content-type"].startswith("text/csv")
    assert len(csv.decode().strip().split("\r\n")) == 56
    st, h, js = jreq("GET", "/v1/jobs/%s/report" % jid,
                     headers={"Accept": "application/json;q=0.9, text/html;q=0.1"})
    assert st == 200 and js["cells"] == doc["cells"] and js["job_id"] == jid
    st, _, _ = req("GET", "/v1/jobs/%s/report?format=pdf" % jid)
    assert st == 400
    # Another project does not see it; no key is 401.
    st, _, _ = req("GET", "/v1/jobs/%s/report" % jid, key=S["other"])
    assert st == 404
    st, _, _ = http("GET", S["base"] + "/v1/jobs/%s/report" % jid)
    assert st == 401


def test_import_llm_inference_bench(ctx):
    setup(ctx)
    st, _, r = jreq("POST", "/v1/results?endpoint_id=" + S["endpoint"], load("llm_inference_bench_vllm.json"))
    assert st == 201, r
    assert r["source"] == "llm-inference-bench" and r["cells"] == 55
    st, _, doc = jreq("GET", "/v1/jobs/%s/result" % r["job_id"])
    assert doc["imported_from"]["version"] == "0.4.29"
    # Refused: junk, a bad document, an unknown endpoint, bad labels.
    st, _, p = jreq("POST", "/v1/results?endpoint_id=" + S["endpoint"], {"hello": 1})
    assert st == 422 and "not a result document" in p["detail"]
    bad = load("result_sglang.json")
    bad["cells"][2]["status"] = "great"
    st, _, p = import_doc(bad)
    assert st == 422 and "cells[2].status" in p["detail"]
    st, _, p = jreq("POST", "/v1/results", {"endpoint_id": "00000000-0000-0000-0000-000000000000",
                                           "result": load("result_sglang.json")})
    assert st == 404
    st, _, p = import_doc(load("result_sglang.json"), labels={"a": 1})
    assert st == 422
    st, _, p = jreq("POST", "/v1/results", load("result_sglang.json"))
    assert st == 422 and "endpoint_id" in p["detail"]


def test_thresholds_and_regressions(ctx):
    setup(ctx)
    labels = {"gpu": "h200", "engine": "vllm"}
    st, _, t = jreq("POST", "/v1/thresholds", {"labels": labels, "tolerance_pct": 2})
    assert st == 201 and t["tolerance_pct"] == 2
    st, _, t2 = jreq("POST", "/v1/thresholds", {"labels": labels, "tolerance_pct": 8})
    assert st == 200 and t2["id"] == t["id"] and t2["tolerance_pct"] == 8
    st, _, g = jreq("POST", "/v1/thresholds", {"labels": {}, "tolerance_pct": 1})
    assert st == 201
    st, _, lst = jreq("GET", "/v1/thresholds")
    assert st == 200 and len(lst["thresholds"]) == 2
    st, _, p = jreq("POST", "/v1/thresholds", {"tolerance_pct": 100})
    assert st == 422
    st, _, lst = jreq("GET", "/v1/thresholds", key=S["other"])
    assert lst["thresholds"] == []

    base = load("result_vllm.json")
    st, _, r1 = import_doc(base, labels)
    assert st == 201
    # Head: 8K x 1 loses 10% of its throughput, 8K x 2 loses 5%.
    head = load("result_vllm.json")
    head["run_id"] = "head"
    for c in head["cells"]:
        if c["phase"] == "decode" and c["context"] == 8192 and c["concurrency"] in (1, 2):
            c["total_tps"] *= 0.90 if c["concurrency"] == 1 else 0.95
    st, _, r2 = import_doc(head, labels)
    assert st == 201
    reg = r2["regressions"]
    assert reg["base_job_id"] == r1["job_id"]
    assert abs(reg["tolerance"] - 0.08) < 1e-12          # the most specific threshold
    assert reg["regressed"] is True
    assert [(c["context"], c["concurrency"], c["metric"]) for c in reg["cells"]] == [(8192, 1, "total_tps")]
    assert abs(reg["cells"][0]["change_pct"] + 10) < 1e-6
    # The regressions are part of the job's result.
    st, _, doc = jreq("GET", "/v1/jobs/%s/result" % r2["job_id"])
    assert doc["regressions"]["regressed"] is True
    S["vllm_jobs"] = (r1["job_id"], r2["job_id"])
    # Other labels: no base (the sglang import has other labels), no regression.
    st, _, r3 = import_doc(head, {"gpu": "h200"})
    assert r3["regressions"]["base_job_id"] is None and r3["regressions"]["regressed"] is False
    assert abs(r3["regressions"]["tolerance"] - 0.01) < 1e-12  # the {} threshold
    st, _, _ = req("DELETE", "/v1/thresholds/" + g["id"])
    assert st == 204
    st, _, _ = req("DELETE", "/v1/thresholds/" + g["id"])
    assert st == 404


def test_compare(ctx):
    setup(ctx)
    b, h = S["vllm_jobs"]
    st, hd, cmp = jreq("GET", "/v1/compare?base=%s&head=%s&format=json" % (b, h))
    assert st == 200, cmp
    assert cmp["tolerance"] == 0.08 and cmp["regressed"] is True
    assert cmp["base"]["job_id"] == b and cmp["head"]["job_id"] == h
    st, _, cmp = jreq("GET", "/v1/compare?base=%s&head=%s&tolerance=20" % (b, h),
                      headers={"Accept": "application/json"})
    assert cmp["tolerance"] == 0.2 and cmp["regressed"] is False
    st, hd, html = req("GET", "/v1/compare?base=%s&head=%s" % (b, h))
    assert st == 200 and hd["content-type"].startswith("text/html")
    assert 'id="compare-matrix"' in html.decode()
    for fmt in ("md", "csv"):
        st, _, out = req("GET", "/v1/compare?base=%s&head=%s&format=%s" % (b, h, fmt))
        assert st == 200 and out
    st, _, _ = req("GET", "/v1/compare?base=%s" % b)
    assert st == 400
    st, _, _ = req("GET", "/v1/compare?base=%s&head=nope" % b)
    assert st == 400
    st, _, _ = req("GET", "/v1/compare?base=%s&head=%s&tolerance=-1" % (b, h))
    assert st == 400
    st, _, p = jreq("GET", "/v1/compare?base=%s&head=%s" % (b, "11111111-1111-1111-1111-111111111111"))
    assert st == 404 and "head" in p["detail"]
    st, _, _ = req("GET", "/v1/compare?base=%s&head=%s" % (b, h), key=S["other"])
    assert st == 404


SECRET_LAUNCH = "HF_TOKEN=hf_abc OPENAI_API_KEY=sk-x vllm serve m --api-key sk-y"
SECRETS = ("hf_abc", "sk-x", "sk-y")


def no_secret(what, data):
    text = data.decode() if isinstance(data, bytes) else json.dumps(data)
    for s in SECRETS:
        assert s not in text, (what, s)


def test_redacted_everywhere(ctx):
    """A launch command with secrets, imported or stored before redaction,
    shows none of them in /result, /report (every format), /compare."""
    s = setup(ctx)
    doc = load("result_sglang.json")
    doc["launch_command"] = SECRET_LAUNCH
    st, _, r = import_doc(doc)
    assert st == 201, r
    imported = r["job_id"]
    # a row written by an older version, unredacted
    raw = json.dumps(doc)
    old = s["pg"].psql(
        "INSERT INTO jobs (project_id, endpoint_id, spec, busy_key, state, result, cells_total, "
        "cells_done, started_at, finished_at) SELECT e.project_id, e.id, '{}', 'old-x', "
        "'succeeded', $r$%s$r$::jsonb, 55, 55, now(), now() FROM endpoints e WHERE e.id = '%s' "
        "RETURNING id" % (raw, s["endpoint"])).strip().splitlines()[0]
    for jid in (imported, old):
        st, _, body = req("GET", "/v1/jobs/%s/result" % jid)
        assert st == 200
        no_secret("result", body)
        assert json.loads(body)["launch_command"].startswith("HF_TOKEN=<redacted>")
        for fmt in ("md", "csv", "html", "json"):
            st, _, body = req("GET", "/v1/jobs/%s/report?format=%s" % (jid, fmt))
            assert st == 200, (fmt, body)
            no_secret(fmt, body)
        st, _, body = req("GET", "/v1/compare?base=%s&head=%s&format=json" % (old, jid))
        assert st == 200, body
        no_secret("compare", body)


def test_partial_report_of_running_job(ctx):
    s = setup(ctx)
    pg = s["pg"]
    doc = load("result_sglang.json")
    header = {k: v for k, v in doc.items() if k not in ("cells", "status", "error", "finished_at")}
    jid = pg.psql(
        "INSERT INTO jobs (project_id, endpoint_id, spec, busy_key, state, header, cells_total, "
        "cells_done, started_at) SELECT e.project_id, e.id, '{}', 'run-x', 'running', %s::jsonb, "
        "55, 10, now() FROM endpoints e WHERE e.id = '%s' RETURNING id" %
        ("$h$" + json.dumps(header) + "$h$", s["endpoint"])).strip().splitlines()[0]
    for c in doc["cells"][:10]:
        pg.psql("INSERT INTO job_cells (job_id, phase, context, concurrency, cell) VALUES "
                "('%s', '%s', %d, %d, $c$%s$c$::jsonb)" %
                (jid, c["phase"], c["context"], c["concurrency"], json.dumps(c)))
    st, _, html = req("GET", "/v1/jobs/%s/report" % jid)
    html = html.decode()
    assert st == 200
    assert 'id="partial"' in html and "still going; 10 of 55 cells done so far" in html
    assert ">pending<" in html
    assert "<b>118.4</b><span>498 ms TTFT</span>" in html   # 8K x 1 is among the first 10
    st, _, md = req("GET", "/v1/jobs/%s/report?format=md" % jid)
    assert "Partial result" in md.decode()


def test_static_files(ctx):
    setup(ctx)
    st, h, body = http("GET", S["base"] + "/")
    assert st == 200 and h["content-type"].startswith("text/html")
    assert b"/web/app.js" in body
    assert "frame-ancestors 'none'" in h["content-security-policy"]
    st, h, body = http("GET", S["base"] + "/web/app.js")
    assert st == 200 and h["content-type"].startswith("text/javascript")
    st, h, body = http("GET", S["base"] + "/web/style.css")
    assert st == 200 and h["content-type"].startswith("text/css")
    for path in ("/web/../README.md", "/web/..%2FREADME.md", "/web/%2e%2e%2fMakefile",
                 "/web/.hidden.js", "/web/nope.js", "/web/index.html/x", "/web/",
                 "/web/app.c", "/web/..", "/../Makefile", "/web/%2Fetc%2Fpasswd"):
        st, _, body = http("GET", S["base"] + path)
        assert st in (404, 400), (path, st)
        assert b"tokbench-api" not in body and b"root:" not in body
    st, _, _ = http("POST", S["base"] + "/web/app.js", b"")
    assert st in (401, 405)
