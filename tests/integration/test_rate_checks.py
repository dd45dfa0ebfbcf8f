"""The server's view and the self-checks of rate cells (lib/engine/tb_ratewatch.c,
docs/engine.md "Self-checks"), through `tokbench run --rates` against
tokbench-sim.

- A rate cell's server_series samples /metrics once a second over the
  cell and once more when its last request ended, and its running + waiting
  values are what the simulator's own
  request log (/sim/requests: arrival and end of every request, on the
  same CLOCK_MONOTONIC) says was in the server at that moment.  The series
  is relative to the watch's start, 20 ms (tb_rate's lead) before the
  first arrival is scheduled, and a sample is read between the call and
  its answer: each sample must lie between the requests surely in the
  server over a window from 250 ms before it to 20 ms after (the lead, the
  start lag, and a call's time on a loaded machine, where the sampling
  thread, under SCHED_IDLE, waits for a free CPU) and those possibly
  there; the bounds have teeth (requests of 2 s or more arriving every
  0.5 s on average: some surely there at most samples).
- In a normal run every check passes, with its figures beside it.
- Another client's request running on the server before the cell (and
  after it, past the drain timeout) fails drained_before and drained_after
  with their reasons, in the JSON and in every report format; the cell
  stays valid.
- Another client's requests that come and go inside the cell (drained
  before and after) show as a server peak of running + waiting above the
  most requests the cell had in flight, and fail that check.
- SGLang's dialect gives the same series (gamma arrivals: expected CV
  sqrt(B)); a gateway without engine gauges has no series and drained is
  unknown (null).
- A closed-loop cell is held to its users (the server's running + waiting
  while they sent), a conversation cell to a lag limit over every turn;
  neither has an arrival process's CV to judge.
- Through tokbench-worker (its egress policy in force) the stored cell
  carries both.
- The pure thresholds (start lag limit, CV tolerance) are unit-tested in
  tests/unit/test_sampler.c.
"""
import json
import statistics
import subprocess
import threading
import time

import harness
import timing
from test_engine import run_cli
from test_sampler import Foreign, running_now

WINDOW_BEFORE = 0.25  # s: see the module's comment
WINDOW_AFTER = 0.02


def rate_cells(cells):
    return [c for c in cells if c["phase"] == "rate"]


def sim_requests(url):
    st, _, body = harness.http_json("GET", url + "/sim/requests")
    assert st == 200, body
    return body["requests"]


def test_series_matches_sim(ctx):
    sim = ctx.sim("tiny", "vllm", timing=True)
    rc, header, cells, doc, err = run_cli(sim.url, [
        "--rates", "2", "--rate-duration", "6", "--arrival", "poisson",
        "--input-tokens", "1k", "--output-tokens", "200", "--seed", "11"])
    assert rc == 0, err
    c = rate_cells(cells)[0]
    assert c["status"] == "valid", c
    ss = c["server_series"]
    t = ss["t_s"]
    # one sample a second, from the start until the last request ended
    assert abs(len(t) - (c["measured_s"] + 1)) <= 1.5, (len(t), c["measured_s"])
    gaps = [b - a for a, b in zip(t, t[1:])]
    assert 0.9 <= statistics.median(gaps) <= 1.35, gaps
    # the cell's requests are the last ones the simulator logged
    log = sim_requests(sim.url)
    mine = log[-c["requests"]:]
    assert len(mine) == c["requests"] and all(r["end"] == "completed" for r in mine), mine
    first = min(r["arrival_ns"] for r in mine)

    def rel(ns):
        return (ns - first) / 1e9

    held = 0
    for ti, run, wait in zip(t, ss["running"], ss["waiting"]):
        lo, hi = ti - WINDOW_BEFORE, ti + WINDOW_AFTER
        sure = sum(1 for r in mine if rel(r["arrival_ns"]) <= lo and rel(r["end_ns"]) >= hi)
        maybe = sum(1 for r in mine if rel(r["arrival_ns"]) <= hi and rel(r["end_ns"]) >= lo)
        assert sure <= run + wait <= maybe, (ti, run, wait, sure, maybe)
        held += sure > 0
    assert held >= len(t) // 2, (held, len(t))
    assert max(ss["running"]) >= 2, ss
    # before the first arrival and after the last request: nothing there
    assert ss["running"][0] + ss["waiting"][0] == 0, ss
    assert ss["running"][-1] + ss["waiting"][-1] == 0, ss
    assert abs(t[-1] - c["measured_s"]) <= 0.25, (t, c["measured_s"])
    # the server's token counter against the client's: the same tokens over
    # nearly the same span (the server's starts 20 ms earlier and ends with
    # the last sample's call: under 2% of a 6 s cell)
    s = ss["summary"]
    assert abs(s["client_tps"] - c["total_tps"]) <= 1e-3 * c["total_tps"], s
    assert abs(s["server_tps"] / c["total_tps"] - 1) <= 0.03, s
    # every check passes, with the figures it judged
    ch = c["checks"]
    assert ch["ok"] is True and ch["failed"] == [], ch
    assert ch["drained_before"] is True and ch["drained_after"] is True, ch
    assert ch["dropped"] == 0 == c["dropped"], ch
    assert ch["interarrival_cv_expected"] == 1.0, ch
    assert abs(ch["interarrival_cv"] - c["interarrival_cv"]) < 1e-3, (ch, c["interarrival_cv"])
    assert ch["schedule_lag_limit_ms"] == 50.0, ch  # 10% of the 500 ms mean gap
    assert ch["schedule_lag_p99_ms"] <= ch["schedule_lag_limit_ms"], ch
    assert 0 < ch["client_cpu_share"] < 0.9, ch
    assert ch["kernel_stamped"] > 0.9, ch
    assert "requested_concurrency" not in ch, ch
    assert ch["server_peak_requests"] == max(r + w for r, w in zip(ss["running"], ss["waiting"]))
    assert ch["server_peak_requests"] <= c["max_in_flight"] == ch["max_in_flight"], ch


def test_constant_and_off(ctx):
    """Constant arrivals: expected CV 0; TB_ENGINE_SERVER_SERIES=0 leaves the
    series out, the checks stay."""
    sim = ctx.sim("tiny", "vllm")
    rc, _, cells, _, err = run_cli(sim.url, [
        "--rates", "5", "--rate-requests", "8", "--arrival", "constant",
        "--input-tokens", "256", "--output-tokens", "8"], env={"TB_ENGINE_SERVER_SERIES": "0"})
    assert rc == 0, err
    c = rate_cells(cells)[0]
    assert c["status"] == "valid", c
    assert "server_series" not in c, c
    ch = c["checks"]
    assert ch["interarrival_cv_expected"] == 0.0, ch
    assert ch["ok"] is True, ch


def test_foreign_request_flagged(ctx):
    sim = ctx.sim("tiny", "vllm")
    st, _, models = harness.http_json("GET", sim.url + "/v1/models")
    model = models["data"][0]["id"]
    foreign = Foreign(sim.url, 1, model)
    foreign.start()
    try:
        deadline = time.time() + 30
        while running_now(sim.url) < 1 and time.time() < deadline:
            time.sleep(0.05)
        assert running_now(sim.url) >= 1
        rc, _, cells, doc, err = run_cli(sim.url, [
            "--rates", "3", "--rate-requests", "6", "--arrival", "poisson",
            "--input-tokens", "256", "--output-tokens", "8", "--drain-timeout", "0.5"])
        still = running_now(sim.url)
    finally:
        foreign.close()
    assert rc == 0, err
    assert still >= 1  # the other request outlived the cell
    c = rate_cells(cells)[0]
    assert c["status"] == "valid", c  # flagged, not an error
    ch = c["checks"]
    assert ch["ok"] is False, ch
    text = "; ".join(ch["failed"])
    assert ch["drained_before"] is False and "not drained before" in text, ch
    assert ch["drained_after"] is False and "not drained after" in text, ch
    # the series saw the other request beside the cell's own
    assert min(c["server_series"]["running"]) >= 1, c["server_series"]
    path = ctx.tmp + "/flagged.json"
    with open(path, "w") as f:
        json.dump(doc, f)
    for fmt in ("md", "csv", "html"):
        p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", fmt],
                           capture_output=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert b"not drained before the cell" in p.stdout, (fmt, p.stdout[-3000:])
    html = subprocess.run([harness.bin("tokbench"), "report", path, "--format", "html"],
                          capture_output=True, timeout=30).stdout
    assert b"<svg class=\"spark\"" in html, html[-3000:]


def test_sglang_and_gateway(ctx):
    """SGLang's dialect gives the same series; a gateway's /metrics has no
    engine gauges: no series, drained unknown (null), the checks that can be
    judged still pass."""
    sim = ctx.sim("tiny", "sglang")
    rc, _, cells, _, err = run_cli(sim.url, [
        "--rates", "3", "--rate-duration", "3", "--arrival", "gamma:2",
        "--input-tokens", "512", "--output-tokens", "100", "--seed", "4"])
    assert rc == 0, err
    c = rate_cells(cells)[0]
    assert c["status"] == "valid", c
    ss = c["server_series"]
    assert len(ss["t_s"]) >= 3 and max(ss["running"]) >= 1, ss
    assert ss["summary"]["prefix_hit_source"] == "gauge", ss  # sglang:cache_hit_rate
    ch = c["checks"]
    assert ch["ok"] is True, ch
    assert abs(ch["interarrival_cv_expected"] - 2 ** 0.5) < 1e-4, ch
    assert ch["drained_before"] is True and ch["drained_after"] is True, ch
    gw = ctx.sim("tiny", "gateway")
    rc, _, cells, _, err = run_cli(gw.url, [
        "--rates", "3", "--rate-requests", "5", "--arrival", "poisson",
        "--input-tokens", "256", "--output-tokens", "8"])
    assert rc == 0, err
    c = rate_cells(cells)[0]
    assert c["status"] == "valid", c
    assert "server_series" not in c, c
    ch = c["checks"]
    assert ch["drained_before"] is None and ch["drained_after"] is None, ch
    assert "interarrival_cv" in ch and "schedule_lag_p99_ms" in ch, ch


def test_foreign_load_during_cell(ctx):
    """Another client's requests that come and go inside the cell: the
    server drains before and after, but its series holds more requests than
    the cell ever had in flight."""
    sim = ctx.sim("tiny", "vllm")
    st, _, models = harness.http_json("GET", sim.url + "/v1/models")
    model = models["data"][0]["id"]
    foreign = Foreign(sim.url, 4, model)
    result = {}

    def run():
        result["r"] = run_cli(sim.url, [
            "--rates", "2", "--rate-duration", "5", "--arrival", "constant",
            "--input-tokens", "256", "--output-tokens", "100", "--drain-timeout", "3"])

    t = threading.Thread(target=run)
    t.start()
    try:
        deadline = time.time() + 60
        while running_now(sim.url) < 1 and time.time() < deadline:
            time.sleep(0.02)  # the cell's first request is in
        time.sleep(0.5)
        foreign.start()
        time.sleep(2.5)  # two samples or more with the other client's requests
    finally:
        foreign.close()
    t.join(120)
    rc, _, cells, _, err = result["r"]
    assert rc == 0, err
    c = rate_cells(cells)[0]
    assert c["status"] == "valid", c
    ch = c["checks"]
    assert ch["drained_before"] is True and ch["drained_after"] is True, ch
    assert ch["ok"] is False, ch
    assert ch["server_peak_requests"] > c["max_in_flight"] == ch["max_in_flight"], ch
    assert ch["server_peak_requests"] == max(
        r + w for r, w in zip(c["server_series"]["running"], c["server_series"]["waiting"])), ch
    assert any("more than the %d this cell had in flight" % c["max_in_flight"] in f
               for f in ch["failed"]), ch


def test_closed_loop_and_conversations(ctx):
    """A closed-loop cell of N users (a sweep's probe) is held to its users:
    the server's running + waiting while they sent; it has no arrival
    process, so no CV is judged.  A conversation cell's starts follow think
    times, not the arrival process: no CV either, and its lag limit counts
    every turn."""
    sim = ctx.sim("tiny", "vllm")
    rc, _, cells, doc, err = run_cli(sim.url, [
        "--rate-duration", "3", "--input-tokens", "200", "--output-tokens", "64",
        "--sweep", "attainment_pct=90,over=concurrency,min_concurrency=3,max_concurrency=3,"
                   "max_probes=2"])
    assert rc == 0, err
    c = rate_cells(cells)[0]
    assert c["status"] == "valid" and c["load"] == "closed" and c["users"] == 3, c
    ch = c["checks"]
    assert ch["ok"] is True, ch
    assert ch["requested_concurrency"] == 3 and ch["achieved_source"] == "server", ch
    # the mean of the series' running + waiting while the users sent
    ss = c["server_series"]
    vals = [r + w for t, r, w in zip(ss["t_s"][1:], ss["running"][1:], ss["waiting"][1:])
            if t <= c["arrivals_s"]]
    assert vals and abs(ch["achieved_concurrency"] - sum(vals) / len(vals)) < 1e-3, (ch, ss)
    assert abs(ch["achieved_concurrency"] - 3) <= 0.5, ch
    assert "interarrival_cv" not in ch and ch["schedule_lag_limit_ms"] == 5.0, ch

    rc, _, cells, doc, err = run_cli(sim.url, [
        "--rates", "1", "--rate-requests", "3", "--arrival", "poisson",
        "--input-tokens", "200", "--output-tokens", "16",
        "--conversation", "turns=3,think_time_s=0.2"])
    assert rc == 0, err
    c = rate_cells(cells)[0]
    assert c["status"] == "valid" and len(c["turns"]) == 3, c
    ch = c["checks"]
    assert ch["ok"] is True, ch
    assert "interarrival_cv" not in ch and "requested_concurrency" not in ch, ch
    assert abs(ch["schedule_lag_limit_ms"] - 100.0 / 3) < 1e-3, ch  # 10% of 1 / (1 x 3 turns)


@timing.timing_test
def test_rate_job_through_the_worker(ctx):
    """A rate job run by tokbench-worker (its egress policy in force: the
    harness allows loopback): the stored cell carries the series and the
    checks.  A timing test: the checks hold the schedule lag to 25 ms (10%
    of the mean gap at 4/s), which the worker under ASan on a busy machine
    can miss (a full run here saw 71 ms once); each attempt a new worker
    and server."""
    from test_worker import T  # noqa: E402 - the worker tests' helpers
    t = T(ctx)
    ok = False
    try:
        sim = ctx.sim("tiny")
        ep = t.endpoint(sim)
        t.worker("w-ratechecks")
        jid = t.submit(ep, {"rates": [4], "rate_requests": 6, "arrival": "poisson",
                            "input_tokens": "200", "output_tokens": "64"})
        t.wait_state(jid, "succeeded", 90)
        res = json.loads(t.q("SELECT result FROM jobs WHERE id = '%s'" % jid))
        (c,) = res["cells"]
        assert c["status"] == "valid", c
        assert c["server_series"]["summary"]["samples"] >= 2, c["server_series"]
        assert max(c["server_series"]["running"]) >= 1, c["server_series"]
        assert c["checks"]["ok"] is True and c["checks"]["drained_before"] is True, c["checks"]
        ok = True
    finally:
        t.close(check=ok)
