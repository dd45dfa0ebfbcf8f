"""The server's view of every cell (server_series) and the cells' self-checks
(checks), through `tokbench run` against tokbench-sim (lib/engine/tb_sampler.c,
docs/engine.md "Server view" and "Self-checks").

- A cell's series has about one sample a second over its window, in the
  flavour's dialect.
- Its KV % agrees with the simulator's own generation counter: while no
  stream ends, the KV cache in use grows by exactly the tokens generated
  (each decode step adds one token to every running request), both read from
  the same /metrics body; so (kv_pct[last] - kv_pct[first]) / 100 x budget
  must equal server_tps x (t[last] - t[first]) within the rounding of the
  stored figures (kv_pct to 0.001 %, t_s to 1 ms: a few tokens).
- The server-counted tok/s agrees with the client-counted one within 3%:
  both count the same tokens, the server between its first and last sample,
  the client over the whole window; a steady simulator differs only at the
  ends (at most C tokens each, about 0.5% at C = 4 over 4 s) and by the
  time a sample takes to come back (a few ms of tokens).
- A cell with another client's streams during its window is flagged: its
  achieved concurrency (the server's running gauge) is above C, and the
  server does not drain after it.
"""
import http.client
import json
import statistics
import subprocess
import threading
import time

import harness
from test_engine import run_cli


def decode_cells(cells):
    return [c for c in cells if c["phase"] == "decode"]


def check_series(c, window_s):
    ss = c["server_series"]
    t = ss["t_s"]
    n = len(t)
    # one sample a second: a sample at each whole second of the window
    assert window_s - 1 <= n <= window_s + 1, (n, t)
    gaps = [b - a for a, b in zip(t, t[1:])]
    assert 0.9 <= statistics.median(gaps) <= 1.35, gaps
    assert all(0 <= x < window_s + 0.01 for x in t), t
    for k in ("running", "waiting", "kv_pct", "gen_tps"):
        assert len(ss[k]) == n, (k, ss)
    return ss


def kv_tokens_vs_generated(ss, budget):
    t, kv = ss["t_s"], ss["kv_pct"]
    grew = (kv[-1] - kv[0]) / 100.0 * budget
    generated = ss["summary"]["server_tps"] * (t[-1] - t[0])
    assert generated > 100, ss
    assert abs(grew - generated) <= 0.02 * generated + 4, (grew, generated, ss)
    assert ss["summary"]["peak_kv_pct"] == max(kv), ss


def test_series_vllm(ctx):
    sim = ctx.sim("tiny", "vllm", timing=True)
    rc, header, cells, doc, err = run_cli(sim.url, [
        "--duration", "5", "--settle", "0.3", "--max-output", "2048", "--contexts", "1k",
        "--concurrency", "1,4", "--prefill-contexts", "1k"])
    assert rc == 0, err
    budget = header["capacity"]["kv_budget_tokens"]
    for c in decode_cells(cells):
        assert c["status"] == "valid", c
        ss = check_series(c, 5)
        s = ss["summary"]
        kv_tokens_vs_generated(ss, budget)
        # every running request holds at least its prompt
        assert s["peak_kv_pct"] >= 100.0 * c["concurrency"] * 1024 / budget, s
        ratio = s["server_tps"] / c["total_tps"]
        assert abs(ratio - 1) <= 0.03, (ratio, s, c["total_tps"])
        assert abs(s["server_client_ratio"] - ratio) < 1e-3, s
        assert s["preemptions"] == 0, s  # the simulator never preempts
        assert "prefix_hit_pct" in ss and s["prefix_hit_source"] == "counters", s
        assert all(r == c["concurrency"] for r in ss["running"]), ss
        assert all(w == 0 for w in ss["waiting"]), ss
        ch = c["checks"]
        assert ch["ok"] is True, ch
        assert ch["failed"] == [], ch
        assert ch["achieved_source"] == "server", ch
        assert abs(ch["achieved_concurrency"] - c["concurrency"]) <= 0.5, ch
        assert ch["drained_before"] is True and ch["drained_after"] is True, ch
        assert 0 < ch["client_cpu_share"] < 0.9, ch
        assert ch["kernel_stamped"] > 0.9, ch


def test_series_sglang(ctx):
    sim = ctx.sim("tiny", "sglang", timing=True)
    rc, header, cells, doc, err = run_cli(sim.url, [
        "--duration", "4", "--settle", "0.3", "--max-output", "2048", "--contexts", "2k",
        "--concurrency", "2", "--prefill-contexts", "2k"])
    assert rc == 0, err
    budget = header["capacity"]["kv_budget_tokens"]
    c = decode_cells(cells)[0]
    assert c["status"] == "valid", c
    ss = check_series(c, 4)
    kv_tokens_vs_generated(ss, budget)
    s = ss["summary"]
    assert abs(s["server_tps"] / c["total_tps"] - 1) <= 0.03, (s, c["total_tps"])
    assert s["prefix_hit_source"] == "gauge", s  # sglang:cache_hit_rate
    assert s["preemptions"] == 0, s
    assert c["checks"]["ok"] is True, c["checks"]


def test_sampling_off(ctx):
    """TB_ENGINE_SERVER_SERIES=0 (make bench's side-by-side) leaves the
    series out; the checks stay."""
    sim = ctx.sim("tiny", "vllm")
    rc, _, cells, _, err = run_cli(sim.url, [
        "--duration", "2", "--settle", "0.2", "--max-output", "2048", "--contexts", "1k",
        "--concurrency", "2", "--prefill-contexts", "1k"], env={"TB_ENGINE_SERVER_SERIES": "0"})
    assert rc == 0, err
    c = decode_cells(cells)[0]
    assert c["status"] == "valid", c
    assert "server_series" not in c, c
    assert c["checks"]["ok"] is True, c


class Foreign:
    """Another client's streams on the simulator: each a chat completion of
    2,048 tokens (about 20 s on tiny), read until stopped."""

    def __init__(self, url, n, model):
        self.model = model
        self.port = int(url.rsplit(":", 1)[1])
        self.stop = threading.Event()
        self.conns = []
        self.threads = [threading.Thread(target=self._one, daemon=True) for _ in range(n)]

    def start(self):
        for t in self.threads:
            t.start()

    def _one(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.conns.append(conn)
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": "hi"}],
                           "max_tokens": 2048, "stream": True, "ignore_eos": True})
        try:
            conn.request("POST", "/v1/chat/completions", body,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            while not self.stop.is_set() and r.read1(65536):
                pass
        except (OSError, ValueError, AttributeError):
            pass  # closed by close(): the read loop's end

    def close(self):
        self.stop.set()
        for c in self.conns:
            c.close()


def running_now(url):
    st, _, body = harness.http("GET", url + "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("vllm:num_requests_running"):
            return float(line.split()[-1])
    return -1


def test_foreign_load_flagged(ctx):
    sim = ctx.sim("tiny", "vllm")
    st, _, models = harness.http_json("GET", sim.url + "/v1/models")
    model = models["data"][0]["id"]
    foreign = Foreign(sim.url, 2, model)
    result = {}

    def run():
        result["r"] = run_cli(sim.url, [
            "--duration", "6", "--settle", "0.3", "--max-output", "2048", "--contexts", "1k",
            "--concurrency", "2", "--prefill-contexts", "1k", "--drain-timeout", "1.5"])

    t = threading.Thread(target=run)
    t.start()
    try:
        # our two streams running and steady: the window has begun (settle 0.3 s)
        held = None
        deadline = time.time() + 60
        while time.time() < deadline:
            if running_now(sim.url) == 2:
                held = held or time.time()
                if time.time() - held > 1.0:
                    break
            else:
                held = None
            time.sleep(0.05)
        foreign.start()
        t.join(120)
    finally:
        foreign.close()
    rc, _, cells, doc, err = result["r"]
    assert rc == 0, err
    c = decode_cells(cells)[0]
    assert c["status"] == "valid", c  # flagged, not an error
    ch = c["checks"]
    assert ch["ok"] is False, ch
    text = "; ".join(ch["failed"])
    assert "achieved concurrency" in text, ch
    assert ch["achieved_concurrency"] > 2.5, ch
    assert ch["drained_after"] is False and "not drained after" in text, ch
    # the series shows the other client's requests
    assert max(c["server_series"]["running"]) >= 4, c["server_series"]
    # and every report format says so
    path = ctx.tmp + "/flagged.json"
    with open(path, "w") as f:
        json.dump(doc, f)
    for fmt in ("md", "csv", "html"):
        p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", fmt],
                           capture_output=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert b"achieved concurrency" in p.stdout, (fmt, p.stdout[:2000])
