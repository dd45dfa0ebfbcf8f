"""The web frontend end to end in headless Chromium (Debian's chromium),
driven over the DevTools protocol with a websocket client written here on the
standard library: sign in with an API key, open a finished job's page, check
that the decode matrix shows the job's numbers, keep a screenshot
(tests/artifacts/web_job.png).  A second test follows a job that the real
worker runs against tokbench-sim until the page shows it done.

Set TB_UPDATE_DOCS=1 to also refresh docs/report.png (the README's picture)."""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse

import harness
from harness import http, wait_until

CHROMIUM = os.environ.get("TB_CHROMIUM", "/usr/bin/chromium")
FIX = os.path.join(harness.ROOT, "tests", "fixtures")
ARTIFACTS = os.path.join(harness.ROOT, "tests", "artifacts")
MASTER = "5c" * 32
S = {}


# ------------------------------------------------------------ websocket

class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames,
    masked from the client, fragmented or not, ping answered."""

    def __init__(self, url, timeout=30):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
               % (u.path, u.hostname, u.port, key))
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: closed")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError("websocket handshake: %r" % status)
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        head = bytes([0x81])
        n = len(data)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._read(2)
            op, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            if op == 0x9:  # ping
                continue
            if op == 0x8:
                raise ConnectionError("websocket closed by the browser")
            msg += payload
            if b0 & 0x80:
                return msg.decode()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Chrome:
    """Headless Chromium with one page, driven through DevTools."""

    def __init__(self, ctx):
        self.profile = tempfile.mkdtemp(prefix="tb-chromium-")
        self.port = harness.free_port()
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                "--user-data-dir=" + self.profile, "--remote-debugging-port=%d" % self.port,
                "--window-size=1280,1600", "about:blank"]
        self.log = open(os.path.join(ctx.tmp, "chromium.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        ctx.cleanups.append(self.close)
        pages = wait_until(self._pages, 30, what="chromium DevTools")
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"])
        self.seq = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _pages(self):
        if self.proc.poll() is not None:
            raise AssertionError("chromium exited %s" % self.proc.returncode)
        try:
            st, _, body = http("GET", "http://127.0.0.1:%d/json/list" % self.port, timeout=2)
        except OSError:
            return None
        if st != 200:
            return None
        pages = [t for t in json.loads(body) if t.get("type") == "page"]
        return pages or None

    def call(self, method, **params):
        self.seq += 1
        mid = self.seq
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise AssertionError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError("JS: %s" % json.dumps(r["exceptionDetails"])[:500])
        return r.get("result", {}).get("value")

    def wait_js(self, expr, timeout=30, what=None):
        return wait_until(lambda: self.eval(expr), timeout, interval=0.1, what=what or expr)

    def goto(self, url):
        self.call("Page.navigate", url=url)
        self.wait_js("document.readyState === 'complete'", what="page load")

    def screenshot(self, path, full=True, height=None):
        """The page (full: all of it) or its top `height` pixels."""
        if full:
            h = self.eval("Math.ceil(document.documentElement.scrollHeight)") or 1600
            self.call("Emulation.setDeviceMetricsOverride", width=1280, height=min(int(h), 8000),
                      deviceScaleFactor=1, mobile=False)
        params = {"format": "png"}
        if height:
            params["clip"] = {"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1}
        r = self.call("Page.captureScreenshot", **params)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


# ---------------------------------------------------------------- setup

def setup(ctx):
    if S:
        return S
    if not os.access(CHROMIUM, os.X_OK):
        raise AssertionError("%s missing: make deps installs chromium" % CHROMIUM)
    pg = ctx.postgres()
    port = harness.free_port()
    signing = os.path.join(ctx.tmp, "signing.key")  # issue 35: finished results are signed
    r = subprocess.run([harness.bin("tokbench"), "signing-keys", "create", signing],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
           "TOKBENCH_DB_WAIT_MS": "5000", "TOKBENCH_MASTER_KEY": MASTER,
           "TOKBENCH_RATE_LIMIT": "0", "TOKBENCH_SIGNING_KEY_FILE": signing}
    api = ctx.process("tokbench-api", [], env=env)
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: api.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", "web", "--admin"],
                       env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    S.update(pg=pg, base=base, key=r.stdout.strip(), chrome=Chrome(ctx))
    return S


def api(method, path, body=None):
    st, h, data = http(method, S["base"] + path, body,
                       {"Authorization": "Bearer " + S["key"]}, timeout=20)
    return st, (json.loads(data) if data else None)


def sign_in(chrome):
    chrome.goto(S["base"] + "/")
    chrome.wait_js("!!document.querySelector('#signin-form')", what="sign-in form")
    chrome.eval("document.querySelector('#key').value = %s;"
                "document.querySelector('#signin-form').requestSubmit(); true" % json.dumps(S["key"]))
    chrome.wait_js("!!document.querySelector('#jobs tbody tr[data-id]')", what="jobs list")
    assert chrome.eval("sessionStorage.getItem('tokbench.key')") == S["key"]


MATRIX_JS = """
(() => {
  const f = document.querySelector('#report');
  const d = f && f.contentDocument;
  const tds = d ? d.querySelectorAll('#decode-matrix td[data-context]') : [];
  return Array.from(tds).map(td => [+td.dataset.context, +td.dataset.concurrency,
                                    td.innerText.replace(/\\s+/g, ' ').trim()]);
})()
"""


def expected_matrix(doc):
    out = {}
    for c in doc["cells"]:
        if c["phase"] != "decode":
            continue
        if c["status"] == "valid":
            ms = c["ttft_ms"]["p50"]
            ttft = ("{:,.0f}".format(ms) if ms >= 9.95 else "{:.1f}".format(ms)) + " ms TTFT"
            tps = "{:,.1f}".format(c["total_tps"])
            ci = c.get("total_tps_ci95")  # the renderer's " ± <hi - value>"
            if isinstance(ci, list) and len(ci) == 2 and ci[1] >= c["total_tps"]:
                tps += " \u00b1 " + "{:,.1f}".format(ci[1] - c["total_tps"])
            out[(c["context"], c["concurrency"])] = tps + " " + ttft
        elif c["status"] == "over_capacity":
            out[(c["context"], c["concurrency"])] = "Over capacity"
    return out


# ---------------------------------------------------------------- tests

def test_finished_job_page(ctx):
    """Sign in, open a finished job (the sglang seed, imported), and read the
    matrix the browser shows."""
    setup(ctx)
    st, ep = api("POST", "/v1/endpoints", {
        "name": "rtx6000x4", "base_url": "http://127.0.0.1:9",
        "hardware": {"gpu": "RTX PRO 6000 Blackwell Server Edition", "count": 4, "vram_gb": 96}})
    assert st == 201, ep
    with open(os.path.join(FIX, "result_sglang.json")) as f:
        doc = json.load(f)
    st, r = api("POST", "/v1/results", {"endpoint_id": ep["id"], "result": doc,
                                        "labels": {"gpu": "rtx6000", "engine": "sglang"}})
    assert st == 201, r
    jid = S["sglang_job"] = r["job_id"]
    S["endpoint"] = ep["id"]
    chrome = S["chrome"]
    sign_in(chrome)
    row = chrome.eval("document.querySelector('#jobs tbody tr[data-id=\"%s\"] .state').textContent" % jid)
    assert row == "succeeded"
    chrome.eval("location.hash = '#/jobs/%s'; true" % jid)
    chrome.wait_js("(() => { const f = document.querySelector('#report');"
                   " return !!(f && f.contentDocument &&"
                   " f.contentDocument.querySelector('#decode-matrix')); })()",
                   what="report in the job page")
    got = {(c, n): text for c, n, text in chrome.eval(MATRIX_JS)}
    want = expected_matrix(doc)
    assert got == want, [(k, got.get(k), want.get(k)) for k in sorted(want) if got.get(k) != want[k]][:5]
    assert got[(8192, 1)] == "118.4 498 ms TTFT"
    assert chrome.eval("document.querySelector('#job-state').textContent") == "succeeded"
    # The report frame runs no script, whatever the document holds.
    assert chrome.eval("document.querySelector('#report').getAttribute('sandbox')") == "allow-same-origin"
    time.sleep(0.5)
    shot = os.path.join(ARTIFACTS, "web_job.png")
    chrome.screenshot(shot)
    assert os.path.getsize(shot) > 10000
    if os.environ.get("TB_UPDATE_DOCS") == "1":  # header, prefill, matrix, charts
        chrome.screenshot(os.path.join(harness.ROOT, "docs", "report.png"), height=2420)
    chrome.call("Emulation.clearDeviceMetricsOverride")


def test_live_job_page(ctx):
    """A job run by the real worker against tokbench-sim: the page follows
    its events and shows the report when it is done."""
    setup(ctx)
    sim = ctx.sim("tiny", "vllm")
    worker = ctx.process("tokbench-worker", [], env={
        "TOKBENCH_DATABASE_URL": S["pg"].url, "TOKBENCH_WORKER_ID": "web-w1",
        "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_POLL_S": "1"})
    st, ep = api("POST", "/v1/endpoints", {"name": "sim", "base_url": sim.url})
    assert st == 201, ep
    st, job = api("POST", "/v1/jobs", {"endpoint_id": ep["id"], "contexts": ["1k", "2k"],
                                       "concurrency": [1, 2], "prefill_contexts": ["1k"],
                                       "duration_s": 2, "max_output": 2048, "settle_s": 0.2,
                                       "labels": {"gpu": "sim"}})
    assert st in (201, 202), job
    jid = job["id"]
    chrome = S["chrome"]
    chrome.eval("location.hash = '#/jobs/%s'; true" % jid)
    chrome.wait_js("document.querySelector('#job-id') && "
                   "document.querySelector('#job-id').textContent === %s" % json.dumps(jid))
    chrome.wait_js("document.querySelector('#job-state').textContent === 'succeeded'", timeout=180,
                   what="job succeeded in the page (worker: %s)" % worker.output()[-2000:])
    chrome.wait_js("(() => { const f = document.querySelector('#report'); const d = f && f.contentDocument;"
                   " return !!(d && d.querySelector('#decode-matrix') && !d.querySelector('#partial')); })()",
                   timeout=30, what="final report")
    st, doc = api("GET", "/v1/jobs/%s/result" % jid)
    got = {(c, n): text for c, n, text in chrome.eval(MATRIX_JS)}
    want = expected_matrix(doc)
    assert got == want, [(k, got.get(k), want.get(k)) for k in sorted(want) if got.get(k) != want[k]][:5]
    # a cell the worker measured carries its interval, and the page shows it
    assert any("\u00b1" in t for t in got.values()), got
    # issue 35: the page says the result is signed, and by which key
    chrome.wait_js("!document.querySelector('#signature').hidden", timeout=20, what="signature line")
    line = chrome.eval("document.querySelector('#signature').textContent")
    assert "Signed by this service" in line and doc["signature"]["kid"] in line, line
    chrome.screenshot(os.path.join(ARTIFACTS, "web_live_job.png"))


def test_compare_page(ctx):
    """The compare page renders GET /v1/compare for two finished jobs."""
    setup(ctx)
    with open(os.path.join(FIX, "result_vllm.json")) as f:
        doc = json.load(f)
    st, r = api("POST", "/v1/results", {"endpoint_id": S["endpoint"], "result": doc})
    assert st == 201, r
    chrome = S["chrome"]
    chrome.eval("location.hash = '#/compare?base=%s&head=%s'; true" % (S["sglang_job"], r["job_id"]))
    chrome.wait_js("(() => { const f = document.querySelector('#compare-report');"
                   " const d = f && f.contentDocument;"
                   " return !!(d && d.querySelector('#compare-matrix')); })()", what="comparison")
    text = chrome.eval("document.querySelector('#compare-report').contentDocument"
                       ".querySelector('#compare-matrix td').innerText")
    assert "111.9" in text and "118.4" in text, text          # 8K x 1: head, was base
    assert chrome.eval("document.querySelector('#base').value") == S["sglang_job"]
    chrome.screenshot(os.path.join(ARTIFACTS, "web_compare.png"))


def test_frontier_page(ctx):
    """The frontier view (issue 26) draws GET /v1/pareto: a point per valid
    decode cell of the project's jobs (three configurations, imported and
    priced by their labels), the frontier's points marked and joined by its
    line, a title on each point naming its cell and job, a link to the job;
    the y axis switch redraws it as the cost."""
    setup(ctx)
    chrome = S["chrome"]
    if not chrome.eval("!!sessionStorage.getItem('tokbench.key')"):
        sign_in(chrome)
    jobs = []
    for i, (fix, price, gpus) in enumerate((("result_vllm.json", "7.2", "2"),
                                            ("result_sglang.json", "4.0", "4"),
                                            ("llm_inference_bench_vllm.json", "9.5", "2"))):
        st, ep = api("POST", "/v1/endpoints", {"name": "frontier-%d" % i,
                                               "base_url": "http://127.0.0.1:9"})
        assert st == 201, ep
        with open(os.path.join(FIX, fix)) as f:
            doc = json.load(f)
        st, r = api("POST", "/v1/results", {"endpoint_id": ep["id"], "result": doc, "labels": {
            "frontier": "web", "price_per_hour": price, "gpu_count": gpus}})
        assert st == 201, r
        jobs.append(r["job_id"])
    labels = json.dumps({"frontier": "web"})
    st, want = api("GET", "/v1/pareto?labels=" + urllib.parse.quote(labels))
    assert st == 200 and want["jobs"] == 3 and len(want["points"]) > 20, want
    chrome.eval("location.hash = '#/frontier'; true")
    chrome.wait_js("!!document.querySelector('#frontier-form')", what="frontier form")
    chrome.eval("document.querySelector('#frontier-labels').value = %s;"
                "document.querySelector('#frontier-form').requestSubmit(); true" % json.dumps(labels))
    n = len(want["points"])
    try:
        chrome.wait_js("document.querySelectorAll('#frontier-chart circle').length === %d" % n,
                       what="the points drawn")
    except AssertionError:
        raise AssertionError("points drawn: %s of %d; error: %r" % (
            chrome.eval("document.querySelectorAll('#frontier-chart circle').length"), n,
            chrome.eval("(document.querySelector('#frontier-error') || {}).textContent")))
    front = sum(1 for p in want["points"] if p["frontier"])
    assert chrome.eval("document.querySelectorAll('#frontier-chart circle.front').length") == front
    if front > 1:
        assert chrome.eval("!!document.querySelector('#frontier-line')")
    # three configurations, three colours in the legend
    assert chrome.eval("document.querySelectorAll('#frontier-legend span').length") == 3
    title = chrome.eval("document.querySelector('#frontier-chart circle.front title').textContent")
    assert "tok/s per user" in title and "on the frontier" in title, title
    href = chrome.eval("document.querySelector('#frontier-chart a').getAttribute('href')")
    assert href.startswith("#/jobs/") and href[7:] in jobs, href
    chrome.screenshot(os.path.join(ARTIFACTS, "web_frontier.png"), full=False, height=900)
    # the cost axis: lower is better; the label says so
    chrome.eval("const s = document.querySelector('#frontier-y');"
                "s.value = 'cost_per_m_output_tokens'; s.dispatchEvent(new Event('change')); true")
    chrome.wait_js("(document.querySelector('#frontier-ylabel') || {}).textContent"
                   " && document.querySelector('#frontier-ylabel').textContent"
                   ".startsWith('cost per M output tokens')", what="the cost axis")
    st, cost = api("GET", "/v1/pareto?y=cost_per_m_output_tokens&labels=" +
                   urllib.parse.quote(labels))
    chrome.wait_js("document.querySelectorAll('#frontier-chart circle').length === %d"
                   % len(cost["points"]), what="the cost points")
    assert chrome.eval("document.querySelectorAll('#frontier-chart circle.front').length") == \
        sum(1 for p in cost["points"] if p["frontier"])


def test_schedules_page(ctx):
    """The schedules page (issue 35): a schedule made with its form, listed
    with its next run, paused, resumed and deleted with its buttons; a cron
    that never fires is refused with the api's reason, naming the field."""
    setup(ctx)
    chrome = S["chrome"]
    chrome.goto(S["base"] + "/")  # signed in already, or as sign_in leaves the tab
    chrome.eval("sessionStorage.setItem('tokbench.key', %s); true" % json.dumps(S["key"]))
    st, ep = api("POST", "/v1/endpoints", {"name": "sched-web", "base_url": "http://127.0.0.1:9"})
    assert st == 201, ep
    chrome.eval("location.hash = '#/schedules'; true")
    chrome.wait_js("!!document.querySelector('#sched-endpoint option[value=\"%s\"]')" % ep["id"],
                   what="the form with the endpoint")
    row = "document.querySelector('#schedules tbody tr[data-id]')"

    def fill(cron):
        chrome.eval("document.querySelector('#sched-endpoint').value = %s;"
                    "document.querySelector('#sched-cron').value = %s;"
                    "document.querySelector('#sched-tz').value = 'America/New_York';"
                    "document.querySelector('#sched-labels').value = '{\"suite\": \"web\"}';"
                    "document.querySelector('#sched-form').requestSubmit(); true"
                    % (json.dumps(ep["id"]), json.dumps(cron)))

    fill("0 0 30 2 *")
    chrome.wait_js("document.querySelector('#sched-form-error').textContent.startsWith("
                   "'cron: never fires')", what="the refusal shown")
    assert api("GET", "/v1/schedules")[1]["schedules"] == []
    fill("30 2 * * *")
    chrome.wait_js("!!" + row, what="the new schedule listed")
    st, lst = api("GET", "/v1/schedules")
    s = lst["schedules"][0]
    assert s["cron"] == "30 2 * * *" and s["labels"] == {"suite": "web"} and not s["paused"], s
    assert chrome.eval(row + ".dataset.id") == s["id"]
    assert chrome.eval(row + ".querySelector('.state').textContent") == "active"
    assert chrome.eval(row + ".children[4].textContent") != ""  # the next run
    chrome.screenshot(os.path.join(ARTIFACTS, "web_schedules.png"), full=False, height=700)
    chrome.eval(row + ".querySelector('button[data-action=pause]').click(); true")
    chrome.wait_js(row + " && " + row + ".querySelector('.state').textContent === 'paused'",
                   what="paused")
    assert api("GET", "/v1/schedules/" + s["id"])[1]["paused"] is True
    chrome.eval(row + ".querySelector('button[data-action=resume]').click(); true")
    chrome.wait_js(row + " && " + row + ".querySelector('.state').textContent === 'active'",
                   what="resumed")
    assert api("GET", "/v1/schedules/" + s["id"])[1]["next_run_at"] is not None
    chrome.eval(row + ".querySelector('button[data-action=delete]').click(); true")
    chrome.wait_js("!" + row, what="deleted")
    assert api("GET", "/v1/schedules/" + s["id"])[0] == 404
