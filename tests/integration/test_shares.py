"""Share links (issue 35, item 2): POST /v1/jobs/{id}/shares,
/v1/compare/shares, /v1/endpoints/{id}/shares, GET /v1/shares, DELETE
/v1/shares/{id} and GET /s/{token}, opened with no API key.

Two projects over one api and one worker: a job that the worker ran
against tokbench-sim (an endpoint with an API key, a private label), an
imported document that carries the endpoint's URL, its key and the private
label's value in its own strings and a "signature" block.  Every format of
every shared page is grepped for the endpoint's URL, its address, its key,
the private label, the project's and the endpoint's ids; the owner's own
report is grepped too, to show that the strings are there to be found.
Project B cannot share A's jobs or endpoint; revoke gives 404, expiry 410,
over the link's rate 429; Chromium shows the page with JavaScript on and off
and 404 after revoke."""
import copy
import json
import os
import time

import harness
from harness import http, wait_until

MASTER = "5d" * 32
EP_SECRET = "sk-share-SECRET-0417"
PRIVATE = "team-zebra-confidential"
FIX = os.path.join(harness.ROOT, "tests", "fixtures")
SPEC = {"contexts": [512], "concurrency": [1, 2], "prefill_contexts": [512],
        "duration_s": 0.3, "settle_s": 0.05, "max_output": 128}
FORMATS = ("html", "md", "csv", "json")
CTYPES = {"html": "text/html", "md": "text/markdown", "csv": "text/csv",
          "json": "application/json"}
S = {}


def setup(ctx):
    if S:
        return S
    s = harness.service(ctx, MASTER, "alpha", "w-shares",
                        api_env={"TOKBENCH_SHARE_RATE": "5", "TOKBENCH_SHARE_BURST": "20",
                                 "TOKBENCH_PUBLIC_URL": "https://bench.example.org"})
    S.update(s)
    S["other"] = harness.make_key(s["pg"], "beta", "--admin")
    S["sim"] = ctx.sim("tiny", args=["--api-key", EP_SECRET])
    st, ep = call("POST", "/v1/endpoints", {
        "name": "sim-shared", "base_url": S["sim"].url, "api_key": EP_SECRET,
        "launch_command": "vllm serve tiny --api-key %s" % EP_SECRET,
        "hardware": {"gpu": "Simulated GPU", "count": 1, "vram_gb": 1}})
    assert st == 201, ep
    S["ep"] = ep["id"]
    S["project"] = s["pg"].psql("SELECT id FROM projects WHERE name = 'alpha'").strip()
    return S


def call(method, path, body=None, key=None):
    st, h, data = http(method, S["base"] + path, body,
                       {"Authorization": "Bearer " + (key or S["key"])}, timeout=30)
    return st, (json.loads(data) if data else None)


def run_job(labels):
    st, doc = call("POST", "/v1/jobs", dict(SPEC, endpoint_id=S["ep"], labels=labels))
    assert st == 202, doc
    jid = doc["id"]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        st, doc = call("GET", "/v1/jobs/%s?wait=5" % jid)
        assert st == 200, doc
        if doc["state"] in ("succeeded", "failed", "cancelled"):
            assert doc["state"] == "succeeded", doc
            return jid
    raise AssertionError("job %s did not finish" % jid)


def job():
    """The worker's job of the endpoint, with a private label (made once)."""
    if "job" not in S:
        S["job"] = run_job({"team": PRIVATE, "try": "shares"})
    return S["job"]


def share(path, body=None, key=None):
    st, doc = call("POST", path, body if body is not None else {}, key)
    assert st == 201, (st, doc)
    assert len(doc["token"]) == 43 and doc["url"].endswith("/s/" + doc["token"]), doc
    S.setdefault("tokens", []).append(doc["token"])
    return doc


def open_share(token, fmt=None, ext=None):
    """GET /s/{token}[.ext][?format=] with no key: (status, headers, bytes)."""
    path = "/s/" + token + ("." + ext if ext else "") + ("?format=" + fmt if fmt else "")
    return http("GET", S["base"] + path, timeout=30)


def forbidden(jids=()):
    """What no shared page may hold (bytes), and what it is."""
    sim = S["sim"].url
    out = {"endpoint URL": sim, "endpoint address": sim.split("//", 1)[1],
           "endpoint key": EP_SECRET, "private label": PRIVATE,
           "project id": S["project"], "endpoint id": S["ep"]}
    for j in jids:
        out["other job " + j] = j
    return {k: v.encode() for k, v in out.items()}


def assert_clean(body, what, jids=()):
    for name, needle in forbidden(jids).items():
        assert needle not in body, "%s: the %s is in the page" % (what, name)


# ------------------------------------------------------------------ tests

def test_job_share_every_format_without_a_key(ctx):
    """A share of the worker's job opens with no key in html, md, csv and json
    (by ?format= and by extension), shows the report, and none of its bytes
    holds the endpoint's URL, address or key, the private label, or the
    project's or endpoint's id, though the owner's report holds them."""
    setup(ctx)
    jid = job()
    own = {}
    for f in FORMATS:
        st, _, body = http("GET", S["base"] + "/v1/jobs/%s/report?format=%s" % (jid, f), None,
                           {"Authorization": "Bearer " + S["key"]}, timeout=30)
        assert st == 200
        own[f] = body
    # the strings are there to be found where the owner looks
    assert S["sim"].url.encode() in own["json"] and S["sim"].url.encode() in own["html"]
    doc = share("/v1/jobs/%s/shares" % jid, {"private_labels": ["team"]})
    assert doc["kind"] == "job" and doc["job_id"] == jid and doc["private_labels"] == ["team"]
    assert doc["url"] == "https://bench.example.org/s/" + doc["token"]
    assert doc["expires_at"] is not None  # TOKBENCH_SHARE_TTL_S by default
    tok = doc["token"]
    for f in FORMATS:
        for how in ({"fmt": f}, {"ext": f}):
            st, h, body = open_share(tok, **how)
            assert st == 200, (f, how, st, body[:300])
            assert h["content-type"].startswith(CTYPES[f]), h
            assert h.get("x-robots-tag") == "noindex" and h.get("referrer-policy") == "no-referrer"
            assert_clean(body, "%s %s" % (f, how))
    st, h, html = open_share(tok)
    assert st == 200 and h["content-type"].startswith("text/html")
    assert "script-src" not in h["content-security-policy"] and "default-src 'none'" in h[
        "content-security-policy"]
    text = html.decode()
    assert 'id="decode-matrix"' in text and '<meta name="robots" content="noindex">' in text
    assert '<meta property="og:type" content="article">' in text
    assert '<meta property="og:url" content="https://bench.example.org/s/%s">' % tok in text
    assert '<meta property="og:title" content="' in text
    assert 'property="og:description" content="Peak decode ' in text and "tok/s" in text
    assert "<script" not in text and "signed by this service" not in text
    # the same report as the owner's, cells and all
    shared = json.loads(open_share(tok, "json")[2])
    mine = json.loads(own["json"])
    assert [c.get("total_tps") for c in shared["cells"]] == [c.get("total_tps") for c in mine["cells"]]
    assert shared["job_id"] == jid and shared["labels"] == {"try": "shares"}
    assert "url" not in shared["endpoint"] and shared["endpoint"]["name"] == "sim-shared"
    assert shared["shared"]["read_only"] is True and "signature" not in shared
    md = open_share(tok, ext="md")[2].decode()
    assert "Speed test matrix" in md and "signed by this service" not in md
    csv = open_share(tok, ext="csv")[2].decode()
    assert csv.splitlines()[0] == own["csv"].decode().splitlines()[0]
    assert len(csv.splitlines()) == len(own["csv"].decode().splitlines())


def test_imported_document_is_stripped_and_says_it_was_signed(ctx):
    """A document that holds the endpoint's URL, key and the private label in
    its own strings, another job's id in its verdict, and a signature block:
    every format is clean, html and md say "signed by this service, key
    <kid>", and the json keeps the signature aside, not as its own."""
    setup(ctx)
    with open(os.path.join(FIX, "result_sglang.json")) as f:
        doc = json.load(f)
    other = job()
    sim = S["sim"].url
    doc["endpoint"] = {"url": sim + "/", "name": "sim-shared", "api_key": EP_SECRET,
                       "telemetry_url": sim + "/metrics"}
    doc["error"] = "earlier attempt: POST %s/v1/completions with Bearer %s for %s failed" % (
        sim, EP_SECRET, PRIVATE)
    doc["model"]["revision"] = PRIVATE
    doc["project_id"] = S["project"]
    doc["cells"][0]["note"] = "served from " + sim.split("//", 1)[1]
    st, imp = call("POST", "/v1/results", {"endpoint_id": S["ep"], "result": doc,
                                           "labels": {"team": PRIVATE, "gpu": "rtx"}})
    assert st == 201, imp
    jid = imp["job_id"]
    sig = {"alg": "Ed25519", "kid": "tbk-2026-05-a", "signed_at": "2026-05-01T11:02:01Z",
           "value": "c2lnbmF0dXJlLWJ5dGVz"}
    res = copy.deepcopy(doc)
    res["signature"] = sig
    res["regressions"] = {"method": "two_run", "regressed": False, "tolerance": 0.05,
                          "base_job_id": other, "cells": []}
    S["pg"].psql("UPDATE jobs SET result = '%s'::jsonb WHERE id = '%s'"
                 % (json.dumps(res).replace("'", "''"), jid))
    st, _, owner = http("GET", S["base"] + "/v1/jobs/%s/result" % jid, None,
                        {"Authorization": "Bearer " + S["key"]}, timeout=30)
    assert st == 200 and EP_SECRET.encode() in owner and other.encode() in owner
    tok = share("/v1/jobs/%s/shares" % jid, {"private_labels": ["team"],
                                             "expires_in_s": 3600})["token"]
    for f in FORMATS:
        st, _, body = open_share(tok, ext=f)
        assert st == 200, (f, body[:300])
        assert_clean(body, f, jids=(other,))
    html = open_share(tok)[2].decode()
    assert "signed by this service, key tbk-2026-05-a" in html, html[:2000]
    assert "Too little history" in html or "compared with the last good job" in html
    md = open_share(tok, ext="md")[2].decode()
    assert "signed by this service, key tbk\\-2026\\-05\\-a" in md or \
        "signed by this service, key tbk-2026-05-a" in md, md[:600]
    assert "signed by" not in open_share(tok, ext="csv")[2].decode()
    js = json.loads(open_share(tok, ext="json")[2])
    assert "signature" not in js and js["shared"]["original_signature"]["kid"] == "tbk-2026-05-a"
    assert js["labels"] == {"gpu": "rtx"} and js["regressions"]["base_job_id"] == "not shared"
    assert "<redacted>" in js["error"] and js["model"]["revision"] == "<redacted>"


def test_other_project_cannot_share(ctx):
    """Project B's key: A's job and endpoint are 404, a comparison naming
    A's job is 422 naming the field; B sees none of A's shares and cannot
    revoke them."""
    setup(ctx)
    jid = job()
    b = S["other"]
    st, doc = call("POST", "/v1/jobs/%s/shares" % jid, {}, key=b)
    assert st == 404 and doc["type"].endswith("/not-found"), doc
    st, doc = call("POST", "/v1/endpoints/%s/shares" % S["ep"], {}, key=b)
    assert st == 404, doc
    st, doc = call("POST", "/v1/compare/shares", {"base": jid, "head": jid}, key=b)
    assert st == 422 and doc["errors"][0]["field"] == "base", doc
    mine = share("/v1/jobs/%s/shares" % jid)
    st, lst = call("GET", "/v1/shares", key=b)
    assert st == 200 and lst["shares"] == [], lst
    st, _ = call("DELETE", "/v1/shares/%s" % mine["id"], key=b)
    assert st == 404
    assert open_share(mine["token"])[0] == 200
    st, lst = call("GET", "/v1/shares")
    assert st == 200 and mine["id"] in [x["id"] for x in lst["shares"]]
    text = json.dumps(lst)
    assert mine["token"] not in text and "token" not in text, text[:500]


def test_revoked_link_is_404_in_every_format(ctx):
    setup(ctx)
    doc = share("/v1/jobs/%s/shares" % job())
    tok = doc["token"]
    assert open_share(tok)[0] == 200
    st, _ = call("DELETE", "/v1/shares/%s" % doc["id"])
    assert st == 204
    for f in FORMATS:
        st, h, body = open_share(tok, ext=f)
        assert st == 404 and h["content-type"].startswith("application/problem+json"), (f, st)
        assert b"Speed test matrix" not in body
    st, lst = call("GET", "/v1/shares")
    row = [x for x in lst["shares"] if x["id"] == doc["id"]][0]
    assert row["state"] == "revoked" and row["revoked_at"] is not None
    assert call("DELETE", "/v1/shares/%s" % doc["id"])[0] == 404


def test_expired_link_is_410(ctx):
    setup(ctx)
    doc = share("/v1/jobs/%s/shares" % job(), {"expires_in_s": 1})
    assert open_share(doc["token"])[0] == 200
    time.sleep(1.3)
    st, h, body = open_share(doc["token"])
    assert st == 410 and h["content-type"].startswith("application/problem+json"), (st, body)
    assert json.loads(body)["type"].endswith("/share-expired")
    st, lst = call("GET", "/v1/shares")
    assert [x["state"] for x in lst["shares"] if x["id"] == doc["id"]] == ["expired"]


def test_bad_bodies_are_422_naming_the_field(ctx):
    setup(ctx)
    path = "/v1/jobs/%s/shares" % job()
    cases = [
        ({"expires_in_s": 0}, "expires_in_s"),
        ({"expires_in_s": "60"}, "expires_in_s"),
        ({"expires_in_s": 10 ** 9}, "expires_in_s"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"expires_at": "2999-01-01T00:00:00Z"}, "expires_at"),
        ({"expires_in_s": 60, "expires_at": "2030-01-01T00:00:00Z"}, "expires_at"),
        ({"private_labels": "team"}, "private_labels"),
        ({"private_labels": ["bad key!"]}, "private_labels"),
        ({"colour": "red"}, "colour"),
    ]
    for body, field in cases:
        st, doc = call("POST", path, body)
        assert st == 422 and doc["errors"][0]["field"] == field, (body, st, doc)
    st, doc = call("POST", path, "[1, 2")
    assert st == 400, doc
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7200))
    ok = share(path, {"expires_at": at})
    assert ok["expires_at"] is not None
    st, doc = call("POST", "/v1/compare/shares", {"base": job()})
    assert st == 422 and doc["errors"][0]["field"] == "head", doc
    st, doc = call("POST", "/v1/compare/shares", {"base": job(), "head": job(), "tolerance": 100})
    assert st == 422 and doc["errors"][0]["field"] == "tolerance", doc
    st, doc = call("POST", "/v1/endpoints/%s/shares" % S["ep"], {"metric": "colour"})
    assert st == 422 and doc["errors"][0]["field"] == "metric", doc
    st, doc = call("POST", "/v1/endpoints/%s/shares" % S["ep"], {"phase": "both"})
    assert st == 422 and doc["errors"][0]["field"] == "phase", doc


def test_unknown_and_malformed_tokens_are_404(ctx):
    setup(ctx)
    tok = share("/v1/jobs/%s/shares" % job())["token"]
    for path in ("/s/short", "/s/" + "A" * 43, "/s/" + tok + ".exe", "/s/" + tok[:-1] + "!",
                 "/s/" + tok + ".markdown"):
        st, h, body = http("GET", S["base"] + path, timeout=10)
        assert st == 404 and h["content-type"].startswith("application/problem+json"), (path, st)
    assert open_share(tok, "bogus")[0] == 400
    # the token never reaches the api's log
    assert tok not in S["api"].output()


def test_rate_limit_per_link(ctx):
    """TOKBENCH_SHARE_RATE=5, TOKBENCH_SHARE_BURST=20: forty quick requests to
    one link get 429 past the burst, with Retry-After; another link is not
    charged for them."""
    setup(ctx)
    a = share("/v1/jobs/%s/shares" % job())["token"]
    b = share("/v1/jobs/%s/shares" % job())["token"]
    codes, limited = [], None
    for _ in range(40):
        st, h, body = open_share(a, ext="json")
        codes.append(st)
        if st == 429 and limited is None:
            limited = (h, json.loads(body))
    assert codes[:15] == [200] * 15, codes
    assert codes.count(429) >= 10, codes
    h, doc = limited
    assert int(h["retry-after"]) >= 1 and doc["type"].endswith("/rate-limited"), (h, doc)
    assert "TOKBENCH_SHARE_RATE" in doc["detail"]
    assert open_share(b, ext="json")[0] == 200
    time.sleep(1.0)
    assert open_share(a, ext="json")[0] == 200


def test_compare_share(ctx):
    """A comparison of two of the endpoint's jobs, shared: every format opens
    with no key, shows the comparison and is clean."""
    setup(ctx)
    base, head = job(), run_job({"team": PRIVATE, "try": "shares"})
    S["job2"] = head
    doc = share("/v1/compare/shares", {"base": base, "head": head, "tolerance": 50,
                                       "private_labels": ["team"]})
    assert doc["kind"] == "compare" and doc["base_job_id"] == base and doc["head_job_id"] == head
    for f in FORMATS:
        st, h, body = open_share(doc["token"], ext=f)
        assert st == 200 and h["content-type"].startswith(CTYPES[f]), (f, st, body[:300])
        assert_clean(body, f)
    html = open_share(doc["token"])[2].decode()
    assert "tokbench comparison" in html and 'property="og:description" content="Head vs base' in html
    js = json.loads(open_share(doc["token"], ext="json")[2])
    assert js["schema"] == "tokbench.compare/v1" and js["tolerance"] == 0.5
    assert js["base"]["job_id"] == base and js["head"]["job_id"] == head


def test_endpoint_history_share(ctx):
    """The endpoint's history of the label set its jobs carried, one cell's
    and the matrix's: every format opens, holds the runs the owner's
    /v1/series holds, and names none of the jobs nor the endpoint."""
    setup(ctx)
    labels = {"team": PRIVATE, "try": "shares"}
    jobs = [job(), S.get("job2") or run_job(labels)]
    while len(jobs) < 4:  # the matrix's series counts a cell from its third run on
        jobs.append(run_job(labels))
    for cell in ({"context": "512", "concurrency": 2}, {}):
        doc = share("/v1/endpoints/%s/shares" % S["ep"],
                    dict(cell, labels=labels, private_labels=["team"]))
        assert doc["kind"] == "endpoint" and doc["endpoint_id"] == S["ep"]
        want = {"labels": labels, "phase": "decode", "metric": "total_tps"}
        if cell:
            want.update(context=512, concurrency=2)
        assert doc["params"] == want, doc
        for f in FORMATS:
            st, h, body = open_share(doc["token"], ext=f)
            assert st == 200 and h["content-type"].startswith(CTYPES[f]), (f, st, body[:300])
            assert_clean(body, f, jids=jobs)
        js = json.loads(open_share(doc["token"], ext="json")[2])
        assert js["labels"] == {"try": "shares"} and js["metric"] == "total_tps"
        assert js["scope"] == ("cell" if cell else "matrix")
        assert "endpoint_id" not in js and all("job_id" not in p for p in js["points"])
        q = "endpoint_id=%s&labels=%s" % (S["ep"], json.dumps(labels).replace(" ", ""))
        if cell:
            q += "&context=512&concurrency=2"
        st, own = call("GET", "/v1/series?" + q)
        assert st == 200 and len(js["points"]) == len(own["points"]) >= 2, (js, own)
        assert [p["value"] for p in js["points"]] == [p["value"] for p in own["points"]]
        html = open_share(doc["token"])[2].decode()
        assert "<h1>An endpoint's history</h1>" in html and "<polyline" in html, html[:3000]
        table = html.split('id="points"', 1)[1].split("</table>", 1)[0]
        assert table.count("<tr><td>") == len(own["points"]), table
        assert html.count("<tr><td>") == len(own["points"]) + len(own["change_points"])
        csv = open_share(doc["token"], ext="csv")[2].decode().splitlines()
        assert csv[0] == "at,value,se,ci95_lo,ci95_hi,change_pct"
        assert len(csv) == 1 + len(own["points"])
    st, bad = call("POST", "/v1/endpoints/%s/shares" % S["ep"], {"concurrency": 2})
    assert st == 422 and bad["errors"][0]["field"] == "concurrency", bad
    st, bad = call("POST", "/v1/endpoints/%s/shares" % S["ep"], {"context": "lots"})
    assert st == 422 and bad["errors"][0]["field"] == "context", bad


def page_html(chrome):
    """The loaded page's HTML, read over DevTools' DOM domain (no page script
    needed, so it works with JavaScript off)."""
    root = chrome.call("DOM.getDocument", depth=-1)["root"]
    return chrome.call("DOM.getOuterHTML", nodeId=root["nodeId"])["outerHTML"]


def navigate(chrome, url):
    chrome.call("Page.navigate", url=url)
    wait_until(lambda: chrome.call("Runtime.evaluate", expression="document.readyState",
                                   returnByValue=True).get("result", {}).get("value") == "complete",
               30, interval=0.1, what="page load")


def status_of(chrome):
    return chrome.call("Runtime.evaluate", returnByValue=True, expression=(
        "performance.getEntriesByType('navigation')[0].responseStatus"))["result"]["value"]


def test_chromium_opens_the_link_without_a_key(ctx):
    """Headless Chromium (test_web's DevTools driver), never signed in: the
    shared report shows, with JavaScript on and with it off; revoked, the
    same browser gets 404 and the problem, not the report."""
    setup(ctx)
    import test_web  # its Chromium driver
    if not os.access(test_web.CHROMIUM, os.X_OK):
        raise AssertionError("%s missing: make deps installs chromium" % test_web.CHROMIUM)
    chrome = S.get("chrome") or test_web.Chrome(ctx)
    S["chrome"] = chrome
    doc = share("/v1/jobs/%s/shares" % job(), {"private_labels": ["team"]})
    url = S["base"] + "/s/" + doc["token"]
    for js_off in (False, True):
        chrome.call("Emulation.setScriptExecutionDisabled", value=js_off)
        navigate(chrome, url)
        if not js_off:
            assert status_of(chrome) == 200
            assert chrome.eval("!!document.querySelector('#decode-matrix td[data-context]')")
            assert chrome.eval("document.querySelector('meta[name=robots]').content") == "noindex"
        dom = page_html(chrome)
        assert 'id="decode-matrix"' in dom and "Speed test matrix" in dom, (js_off, dom[:1000])
        assert S["sim"].url not in dom and EP_SECRET not in dom and PRIVATE not in dom
    chrome.call("Emulation.setScriptExecutionDisabled", value=False)
    assert call("DELETE", "/v1/shares/%s" % doc["id"])[0] == 204
    navigate(chrome, url)
    assert status_of(chrome) == 404
    dom = page_html(chrome)
    assert "decode-matrix" not in dom and "no such share link" in dom, dom[:1000]


def test_console_share_button(ctx):
    """The web console's job page: "Share a read-only link" (labels hidden)
    shows a URL that opens with no key and shows neither the endpoint nor
    the private label; Revoke makes it 404."""
    setup(ctx)
    import test_web
    chrome = S.get("chrome") or test_web.Chrome(ctx)
    S["chrome"] = chrome
    chrome.call("Emulation.setScriptExecutionDisabled", value=False)
    navigate(chrome, S["base"] + "/")
    chrome.wait_js("!!document.querySelector('#signin-form')", what="sign-in form")
    chrome.eval("document.querySelector('#key').value = %s;"
                "document.querySelector('#signin-form').requestSubmit(); true" % json.dumps(S["key"]))
    chrome.wait_js("!!document.querySelector('#jobs tbody tr[data-id]')", what="jobs list")
    chrome.eval("location.hash = '#/jobs/%s'; true" % job())
    chrome.wait_js("!!document.querySelector('#share-btn') && "
                   "document.querySelector('#job-state').textContent === 'succeeded'", what="job page")
    chrome.eval("document.querySelector('#share-private').checked = true;"
                "document.querySelector('#share-btn').click(); true")
    url = chrome.wait_js("document.querySelector('#share-url').value", what="the share's URL")
    assert url.startswith("https://bench.example.org/s/"), url  # TOKBENCH_PUBLIC_URL
    tok = url.rsplit("/", 1)[1]
    S.setdefault("tokens", []).append(tok)
    st, _, body = open_share(tok, ext="json")
    assert st == 200 and json.loads(body)["labels"] == {}, body[:300]
    assert_clean(body, "console share")
    st, lst = call("GET", "/v1/shares")
    row = [x for x in lst["shares"] if x["job_id"] == job() and sorted(x["private_labels"]) == ["team", "try"]]
    assert len(row) == 1, lst
    chrome.eval("document.querySelector('#share-revoke').click(); true")
    chrome.wait_js("document.querySelector('#share-revoke').disabled", what="revoked")
    assert open_share(tok)[0] == 404


def test_live_shares_capped_per_project(ctx):
    """TOKBENCH_LIMIT_SHARES counts a project's live links (neither revoked
    nor expired): at the cap a new one is 429 limit-reached naming it;
    revoking one makes room."""
    setup(ctx)
    st, lst = call("GET", "/v1/shares")
    live = sum(1 for x in lst["shares"] if x["state"] == "active")
    api = harness.Api(ctx, S["pg"], MASTER, env={"TOKBENCH_LIMIT_SHARES": str(live + 1)})
    path = "/v1/jobs/%s/shares" % job()
    st, _, one = api.json("POST", path, S["key"], {})
    assert st == 201, one
    S.setdefault("tokens", []).append(one["token"])
    st, h, doc = api.json("POST", path, S["key"], {})
    assert st == 429 and doc["type"].endswith("/limit-reached"), doc
    assert doc["setting"] == "TOKBENCH_LIMIT_SHARES" and doc["max"] == live + 1
    assert int(h["retry-after"]) >= 1
    st, _, _ = api.json("DELETE", "/v1/shares/%s" % one["id"], S["key"])
    assert st == 204
    st, _, two = api.json("POST", path, S["key"], {})
    assert st == 201, two
    S["tokens"].append(two["token"])
    api.stop()


def test_clean_exit(ctx):
    """Last: the api that served every page above stops with status 0, the
    sanitizers silent, and no token or endpoint key in its log."""
    setup(ctx)
    api = S["api"]
    assert api.stop() == 0
    out = api.output()
    assert "AddressSanitizer" not in out and "runtime error" not in out and "LeakSanitizer" not in out
    assert EP_SECRET not in out and '"path":"/s/(token)"' in out
    for t in S.get("tokens", []):
        assert t not in out
