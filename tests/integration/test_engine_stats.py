"""The uncertainty of every figure (issue 14), measured against
tokbench-sim's `tiny` profile through `tokbench run`: each valid decode cell
carries a 95% interval of its total tok/s that contains the simulator's
noise-free /sim/expected value, intervals of its latency medians where there
are enough requests, and its samples; `--repeats` measures the matrix pass by
pass (interleaved, visible in each cell's repeat_runs); the simulator's noise
model widens the intervals and its slowdown shows in the throughput.

The intervals are checked as they are (a statistical claim), except that an
instrumented build (no release build beside it) may miss by the same slack
test_engine.py gives its accuracy checks."""
import json
import urllib.request

import harness
from test_engine import run_cli, expected, twice

ARGS = ["--duration", "2", "--settle", "0.3", "--max-output", "2048"]
SLACK_REL = 0.0 if harness.TIMING_EXACT else 0.08


def contains(ci, value, what):
    assert ci is not None and len(ci) == 2, "%s: no interval" % what
    lo, hi = ci
    lo -= SLACK_REL * value
    hi += SLACK_REL * value
    assert lo <= value <= hi, "%s: %.3f outside [%.3f, %.3f]" % (what, value, ci[0], ci[1])


def half_width(c):
    lo, hi = c["total_tps_ci95"]
    return (hi - lo) / 2


def decode_cells(cells):
    return [c for c in cells if c["phase"] == "decode" and c["status"] == "valid"]


@twice
def test_intervals_contain_expected(ctx):
    sim = ctx.sim("tiny", "vllm", timing=True)
    rc, header, cells, doc, err = run_cli(sim.url, ARGS + [
        "--contexts", "1k,4k", "--concurrency", "1,2,8", "--prefill-contexts", "1k"])
    assert rc == 0, err
    assert header["settings"]["repeats"] == 1
    valid = decode_cells(cells)
    assert len(valid) == 5, cells  # 4K x 8 is over capacity
    for c in valid:
        e = expected(sim.url, c["context"], c["concurrency"])
        where = "%s x%d" % (c["context_label"], c["concurrency"])
        assert c["total_tps_se_method"] == "batch_means"
        assert c["total_tps_se"] > 0, c
        contains(c["total_tps_ci95"], e["total_tok_s"], where + " total tok/s")
        s = c["samples"]
        assert len(s["total_tps"]) == 10 and abs(s["slice_s"] - 0.2) < 1e-6, s
        # the slices make the figure: their mean is the window's rate
        assert abs(sum(s["total_tps"]) / 10 - c["total_tps"]) < 1e-6 * c["total_tps"] + 0.01
        assert len(s["ttft_ms"]) == c["requests_started"] or c["completed"] > 0
        if c["concurrency"] >= 8:
            # 8 streams: intervals of the medians exist and hold the median
            for k in ("ttft", "tbt"):
                lo, hi = c["%s_p50_ci95" % k]
                assert lo <= c["%s_ms" % k]["p50"] <= hi, c
            # (not against /sim/expected: the simulator's streams are all
            # alike, so the interval is as narrow as their spread)
        else:
            assert c["tbt_p50_ci95"] is None, c  # under 6 streams: none
    pf = [c for c in cells if c["phase"] == "prefill"][0]
    assert "prompt_tps_ci95" not in pf  # one scout: no spread
    assert doc["status"] == "complete"


@twice
def test_repeats_interleaved(ctx):
    sim = ctx.sim("tiny", "vllm", timing=True)
    rc, header, cells, doc, err = run_cli(sim.url, ARGS + [
        "--contexts", "1k,4k", "--concurrency", "1,4", "--prefill-contexts", "1k,4k",
        "--repeats", "3"])
    assert rc == 0, err
    assert header["settings"]["repeats"] == 3
    assert doc["status"] == "complete", doc
    assert len(cells) == 2 + 4
    seqs = {}
    for c in cells:
        assert c["repeats"] == 3, c
        runs = c["repeat_runs"]
        assert [r["repeat"] for r in runs] == [1, 2, 3], runs
        seqs[(c["phase"], c["context"], c["concurrency"])] = [r["seq"] for r in runs]
    # interleaved: every measurement of pass 1 comes before any of pass 2,
    # and in the matrix's order within a pass (prefill 1K, 1K x1, 1K x4, ...)
    n = len(seqs)
    for key, s in seqs.items():
        assert s[0] < n <= s[1] < 2 * n <= s[2] < 3 * n, (key, s)
    order = sorted(seqs, key=lambda k: seqs[k][0])
    assert order == sorted(order, key=lambda k: seqs[k][1]) == sorted(order, key=lambda k: seqs[k][2])
    for c in decode_cells(cells):
        e = expected(sim.url, c["context"], c["concurrency"])
        assert abs(c["measured_s"] - 6.0) < 1e-6, c  # three 2 s windows
        mean = sum(r["total_tps"] for r in c["repeat_runs"]) / 3
        assert abs(mean - c["total_tps"]) < 1e-6 * mean, c
        contains(c["total_tps_ci95"], e["total_tok_s"],
                 "%s x%d total tok/s over 3 repeats" % (c["context_label"], c["concurrency"]))
    for c in cells:
        if c["phase"] == "prefill":
            # three cold scouts (each pass has prompts of its own)
            e = expected(sim.url, c["context"], 1)
            assert len(c["samples"]["prompt_tps"]) == 3, c
            assert c["prompt_tps_min"] <= c["prompt_tps"] <= c["prompt_tps_max"], c
            lo, hi = c["prompt_tps_ci95"]
            assert lo <= c["prompt_tps"] <= hi, c
            # cold: the prefill lane (1K: 52.7 ms), not a prefix-cache hit
            # (15.7 ms); test_engine.py holds the cold TTFT to 2%
            for t in c["samples"]["ttft_ms"]:
                assert t > (e["cached_ttft_ms"] + e["prefill_ttft_ms"]) / 2, c
