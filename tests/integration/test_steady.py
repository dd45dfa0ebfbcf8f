"""The steady-state window (issue 25, lib/result/tb_steady, docs/reports.md)
of rate, conversation and trace cells against tokbench-sim, through
`tokbench run`.

Each cell's `steady` object is recomputed here, independently, from the
cell's own per-request samples (start_ms, end_ms, ttft_ms, tpot_ms,
output_tokens): the in-flight count on every segment between two
consecutive instants, counted by brute force over the requests' half-open
intervals (not a sweep of events), the longest run of segments at or above
95% of the peak, and inside it the requests started, those completed, the
output tokens spread over each request's decode span, and the TTFT and
TPOT percentiles (type 7).  A closed-loop cell's reference is its users:
its window starts when the last user began and no request starts before
it; its figures inside that window are recomputed the same way.  The
Markdown report shows the window and a trace cell's summary.
"""
import json
import math
import os
import subprocess

import harness
import test_engine
import test_trace


def quantile7(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    if lo + 1 >= len(xs):
        return xs[-1]
    return xs[lo] + (h - lo) * (xs[lo + 1] - xs[lo])


def requests_of(cell):
    """The requests that started: (start_us, end_us, ok, ttft, tpot, tokens)."""
    s = cell["samples"]
    out = []
    for i, st in enumerate(s["start_ms"]):
        if st is None:
            continue
        a, b = round(st * 1000), round(s["end_ms"][i] * 1000)
        out.append((a, max(a, b), s["ttft_ms"][i] is not None, s["ttft_ms"][i],
                    s["tpot_ms"][i], s["output_tokens"][i]))
    return out


def window_of(reqs, ref=None):
    """The longest span of segments where 100 x in flight >= 95 x ref (ref:
    the peak when None): (start_us, end_us, peak) or None."""
    times = sorted({r[0] for r in reqs} | {r[1] for r in reqs})
    segs = []
    for t0, t1 in zip(times, times[1:]):
        level = sum(1 for r in reqs if r[0] <= t0 < r[1])
        segs.append((t0, t1, level))
    peak = max((l for _, _, l in segs), default=0)
    ref = peak if ref is None else ref
    best, cur = None, None
    for t0, t1, level in segs:
        if 100 * level >= 95 * ref:
            cur = (cur[0], t1) if cur else (t0, t1)
            if best is None or cur[1] - cur[0] > best[1] - best[0]:
                best = cur
        else:
            cur = None
    return (best[0], best[1], peak) if best else None


def figures_in(reqs, a, b):
    started = [r for r in reqs if a <= r[0] < b]
    done = [r for r in reqs if r[2] and a < r[1] <= b]
    tokens = 0.0
    for st, en, ok, ttft, _, n in reqs:
        if not ok:
            continue
        f = min(st + ttft * 1000.0, en)
        if en > f:
            lo, hi = max(f, a), min(en, b)
            if hi > lo:
                tokens += n * (hi - lo) / (en - f)
        elif a <= f < b:
            tokens += n
    length = (b - a) / 1e6
    ttft = [r[3] for r in started if r[2]]
    tpot = [r[4] for r in started if r[2] and r[4] is not None]
    return {"requests": len(started), "completed": len(done), "rps": len(done) / length,
            "output_tps": tokens / length,
            "ttft_ms": {"p50": quantile7(ttft, 0.5), "p99": quantile7(ttft, 0.99)},
            "tpot_ms": {"p50": quantile7(tpot, 0.5), "p99": quantile7(tpot, 0.99)}}


def close(got, want, what):
    if want is None:
        assert got is None, (what, got)
        return
    assert abs(got - want) <= 1e-6 * max(1.0, abs(want)) + 2e-6, (what, got, want)


def check_figures(w, want, what):
    for k in ("requests", "completed"):
        assert w[k] == want[k], (what, k, w, want)
    for k in ("rps", "output_tps"):
        close(w[k], want[k], (what, k))
    for k in ("ttft_ms", "tpot_ms"):
        for p in ("p50", "p99"):
            close(w[k][p], want[k][p], (what, k, p))


def check_open_loop(c, what):
    """An open-loop cell's window, recomputed from its samples."""
    reqs = requests_of(c)
    assert len(reqs) == c["requests_started"] and reqs, (what, len(reqs))
    w = c["steady"]
    a, b, peak = window_of(reqs)
    assert w["found"] and w["reference"] == "peak", (what, w)
    assert w["peak_in_flight"] == peak == c["max_in_flight"], (what, w, peak)
    assert abs(w["threshold"] - 0.95 * peak) < 1e-9, (what, w)
    assert round(w["start_s"] * 1e6) == a and round(w["end_s"] * 1e6) == b, (what, w, a, b)
    close(w["length_s"], (b - a) / 1e6, (what, "length_s"))
    check_figures(w, figures_in(reqs, a, b), what)
    return w


def test_rate_cell_window(ctx):
    """Poisson arrivals at 12 req/s: the window at the cell's peak in
    flight, recomputed from the samples; the Markdown report and the
    terminal show it."""
    sim = ctx.sim("tiny", "vllm")
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", "12", "--rate-requests", "60", "--input-tokens", "300",
        "--output-tokens", "48", "--seed", "9"])
    assert rc == 0, err
    c = [c for c in cells if c["phase"] == "rate"][0]
    assert c["status"] == "valid" and c["completed"] == 60, c
    w = check_open_loop(c, "rate")
    assert 0 < w["length_s"] <= c["measured_s"], w
    path = os.path.join(ctx.tmp, "rate.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", "md"],
                       capture_output=True, timeout=60)
    md = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    assert "### Steady-state window" in md, md
    assert "%.3f s |" % w["length_s"] in md, md
    # the terminal: the tables of tokbench run
    p = subprocess.run([harness.timing_bin("tokbench"), "run", "--table", "--url", sim.url, "--rates", "12",
                        "--rate-requests", "20", "--input-tokens", "300", "--output-tokens", "8"],
                       capture_output=True, timeout=120)
    out = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0, out
    assert "### Steady-state window" in out and "| 1 rate |" in out, out


def test_conversation_cells_window(ctx):
    """Conversations, open loop (the peak is the reference) and closed loop
    (a sweep over users: the users are the reference, each counted busy from
    its first request to its last, so that think times are no dip)."""
    sim = ctx.sim("tiny", "vllm", args=["--max-running", "4"])
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", "4", "--rate-requests", "8", "--input-tokens", "200",
        "--output-tokens", "24", "--seed", "4",
        "--conversation", "turns=3,think_time_s=0.2,think=constant"])
    assert rc == 0, err
    c = [c for c in cells if c["phase"] == "rate"][0]
    assert c["completed"] == 24, c
    check_open_loop(c, "conversations, open loop")
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rate-duration", "2", "--input-tokens", "200", "--output-tokens", "24",
        "--slo", "ttft_ms=5000", "--seed", "4",
        "--sweep", "attainment_pct=90,over=concurrency,max_concurrency=4",
        "--conversation", "turns=3,think_time_s=0.1,think=constant"])
    assert rc == 0, err
    closed = [c for c in cells if c["phase"] == "rate" and c.get("users")]
    assert [c["users"] for c in closed] == [1, 2, 4], closed
    for c in closed:
        n, w = c["users"], c["steady"]
        assert w["found"] and w["reference"] == "target" and w["target"] == n, w
        assert w["peak_in_flight"] == n and abs(w["threshold"] - 0.95 * n) < 1e-9, w
        reqs = requests_of(c)
        a, b = round(w["start_s"] * 1e6), round(w["end_s"] * 1e6)
        # every user starts at once: the window opens at the last one's
        # first request, the n-th start; it closes at a request's end
        assert a == sorted(r[0] for r in reqs)[n - 1], (w, reqs[:n])
        assert b in {r[1] for r in reqs}, w
        # the users kept at least their requests' in-flight peak, and the
        # window covers most of the cell (it leaves out only the drain)
        assert b - a > 0.5 * c["measured_s"] * 1e6, (w, c["measured_s"])
        check_figures(w, figures_in(reqs, a, b), ("closed", n))


def test_trace_cell_window(ctx):
    """A trace cell (Mooncake, with sessions): its window recomputed from
    its samples; the Markdown report shows the replay's summary."""
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + test_trace.BIG)
    c = test_trace.replay(sim, "mooncake-sessions.jsonl", "mooncake", "duration_s=20,speedup=4")
    assert c["status"] == "valid" and c["completed"] == c["requests"], c
    check_open_loop(c, "trace")
    doc = {"schema": "tokbench.result/v1", "status": "complete", "settings": {}, "cells": [c]}
    path = os.path.join(ctx.tmp, "trace.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", "md"],
                       capture_output=True, timeout=60)
    md = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    t = c["trace"]
    assert "### Trace replay" in md, md
    assert "| mooncake | %d | %d |" % (t["requests"], t["sessions"]) in md, md
    assert "%.1f%% / %.1f%%" % (t["implied_hit_pct"], t["hit_pct"]) in md, md
    assert "### Steady-state window" in md, md


def test_job_through_the_worker(ctx):
    """A job of the service (tokbench-worker): the stored rate cell carries
    its window and its cold-cell check (SGLang's flavour flushes its cache),
    and the stored result renders both."""
    from test_worker import T  # noqa: E402 - the worker tests' helpers
    t = T(ctx)
    ok = False
    try:
        sim = ctx.sim("tiny", "sglang")
        ep = t.endpoint(sim)
        t.worker("w-steady")
        jid = t.submit(ep, {"rates": [6], "rate_requests": 18, "arrival": "poisson",
                            "input_tokens": "300", "output_tokens": "24", "seed": 2})
        t.wait_state(jid, "succeeded", 90)
        res = json.loads(t.q("SELECT result FROM jobs WHERE id = '%s'" % jid))
        (c,) = res["cells"]
        assert c["status"] == "valid" and c["cache_reset"] == "done", c
        check_open_loop(c, "job")
        ch = c["checks"]
        assert ch["prefix_hits_unexplained"] is False, ch
        assert not any(f.startswith("prefix hits") for f in ch["failed"]), ch
        path = os.path.join(ctx.tmp, "job.json")
        with open(path, "w") as f:
            json.dump(res, f)
        for fmt, want in (("md", "### Steady-state window"), ("html", "id=\"steady\""),
                          ("csv", "steady_output_tps")):
            p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", fmt],
                               capture_output=True, timeout=60)
            assert p.returncode == 0 and want in p.stdout.decode(), (fmt, p.stderr)
        ok = True
    finally:
        t.close(check=ok)
