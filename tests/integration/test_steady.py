"""The steady-state window (issue 25, lib/result/tb_steady, docs/reports.md)
of rate, conversation and trace cells against tokbench-sim, through
`tokbench run`.

Each cell's `steady` object is recomputed here, independently, from the
cell's own per-request samples (start_ms, end_ms, ttft_ms, tpot_ms,
output_tokens): the in-flight count at every instant, counted by brute
force over the requests' half-open intervals (not a sweep of events).  An
open-loop cell's level is the integral of that count over its offered span
(first arrival to last arrival) over the span's length; its window runs from
the first instant the count reaches ceil(0.95 x level) (at least 1) to the
last arrival.  Inside it: the requests started, those completed, the
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


def level_window_of(reqs):
    """An open-loop cell's window: (start_us, end_us, level, peak, first
    arrival, last arrival), start_us None when there is none."""
    times = sorted({r[0] for r in reqs} | {r[1] for r in reqs})
    count = [sum(1 for r in reqs if r[0] <= t < r[1]) for t in times]
    peak = max(count, default=0)
    t0, t1 = min(r[0] for r in reqs), max(r[0] for r in reqs)
    if len(reqs) < 2 or t1 == t0:
        return None, None, None, peak, t0, t1
    area = 0
    for i, t in enumerate(times[:-1]):
        lo, hi = max(t, t0), min(times[i + 1], t1)
        if hi > lo:
            area += count[i] * (hi - lo)
    level = area / (t1 - t0)
    k = max(1, math.ceil(0.95 * level))
    a = next((t for t, c in zip(times, count) if c >= k), None)
    if a is None or a >= t1:
        return None, None, level, peak, t0, t1
    return a, t1, level, peak, t0, t1


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


def peak_span_of(reqs, peak):
    """The longest span at 95% of the peak in flight (the rule before the
    level), in microseconds: printed beside the window, for contrast."""
    times = sorted({r[0] for r in reqs} | {r[1] for r in reqs})
    best, open_at = 0, None
    for t in times:
        up = 100 * sum(1 for r in reqs if r[0] <= t < r[1]) >= 95 * peak
        if up and open_at is None:
            open_at = t
        elif not up and open_at is not None:
            best, open_at = max(best, t - open_at), None
    return best


def check_open_loop(c, what):
    """An open-loop cell's window, recomputed from its samples; printed with
    the share of the offered span it covers (returned as "covers")."""
    reqs = requests_of(c)
    assert len(reqs) == c["requests_started"] and reqs, (what, len(reqs))
    w = c["steady"]
    a, b, level, peak, t0, t1 = level_window_of(reqs)
    assert a is not None, (what, w, level)
    assert w["found"] and w["reference"] == "level", (what, w)
    assert w["peak_in_flight"] == peak == c["max_in_flight"], (what, w, peak)
    assert abs(w["level"] - level) <= 1e-6, (what, w, level)
    assert abs(w["threshold"] - 0.95 * level) <= 1e-4, (what, w, level)
    assert round(w["start_s"] * 1e6) == a and round(w["end_s"] * 1e6) == b, (what, w, a, b)
    close(w["length_s"], (b - a) / 1e6, (what, "length_s"))
    check_figures(w, figures_in(reqs, a, b), what)
    covers = (b - a) / (t1 - t0)
    print("%s: %d requests, offered span %.3f-%.3f s, peak %d, level %.3f; window %.3f-%.3f s "
          "(%.3f s, %.0f%% of the offered span), %d requests, %.1f output tok/s; at 95%% of "
          "the peak it was %.1f ms"
          % (what, len(reqs), t0 / 1e6, t1 / 1e6, peak, level, w["start_s"], w["end_s"],
             w["length_s"], 100 * covers, w["requests"], w["output_tps"],
             peak_span_of(reqs, peak) / 1e3))
    return dict(w, covers=covers)


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


def test_rate_cell_20_at_12(ctx):
    """The cell the peak rule failed: 20 Poisson requests at 12 req/s, whose
    window at 95% of its peak lasted 29 ms.  By its level it covers most of
    the offered span."""
    sim = ctx.sim("tiny", "vllm")
    for seed in ("1", "9"):
        rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
            "--rates", "12", "--rate-requests", "20", "--input-tokens", "300",
            "--output-tokens", "8", "--seed", seed])
        assert rc == 0, err
        c = [c for c in cells if c["phase"] == "rate"][0]
        assert c["status"] == "valid" and c["completed"] == 20, c
        w = check_open_loop(c, "rate 12 req/s x 20, seed " + seed)
        assert w["covers"] > 0.5 and w["requests"] >= 10, w


def test_rate_cell_one_request(ctx):
    """One arrival offers no span: no level, no window, the reason said in
    the document and the Markdown report."""
    sim = ctx.sim("tiny", "vllm")
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", "12", "--rate-requests", "1", "--input-tokens", "300",
        "--output-tokens", "8", "--seed", "1"])
    assert rc == 0, err
    c = [c for c in cells if c["phase"] == "rate"][0]
    assert c["completed"] == 1, c
    w = c["steady"]
    assert w["found"] is False and w["reference"] == "level", w
    assert w["level"] is None and w["threshold"] is None and w["peak_in_flight"] == 1, w
    assert w["reason"] == "fewer than 2 requests arrived" and "start_s" not in w, w
    path = os.path.join(ctx.tmp, "one.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", "md"],
                       capture_output=True, timeout=60)
    md = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    assert "| 1 / level \u2014 | none: fewer than 2 requests arrived |" in md, md


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
    """Trace cells (Mooncake with and without sessions, Bailian): each
    window recomputed from its samples and covering most of the offered
    span; the Markdown report shows the replay's summary."""
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + test_trace.BIG)
    # mooncake.jsonl's first 20 s hold a burst (56 arrivals in 8-10 s, twice
    # the rate around it) that lifts the level; its window opens there, at
    # about 2.2 s of the 5 s replayed (56% measured)
    for name, fmt, share in (("mooncake.jsonl", "mooncake", 0.4), ("bailian.jsonl", "bailian", 0.5)):
        c = test_trace.replay(sim, name, fmt, "duration_s=20,speedup=4")
        assert c["status"] == "valid" and c["completed"] == c["requests"], (name, c)
        w = check_open_loop(c, "trace " + name)
        assert w["covers"] > share, (name, w)
    c = test_trace.replay(sim, "mooncake-sessions.jsonl", "mooncake", "duration_s=20,speedup=4")
    assert c["status"] == "valid" and c["completed"] == c["requests"], c
    w = check_open_loop(c, "trace mooncake-sessions.jsonl")
    assert w["covers"] > 0.5, w
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
