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
import statistics

import harness
import timing
from test_engine import run_cli, expected, twice

ARGS = ["--duration", "2", "--settle", "0.3", "--max-output", "2048"]
SLACK_REL = 0.0 if harness.TIMING_EXACT else 0.08


def contains(ci, value, what):
    assert ci is not None and len(ci) == 2, "%s: no interval" % what
    lo, hi = ci
    slack = SLACK_REL + timing.allowance()
    lo -= slack * value
    hi += slack * value
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


def sim_noise(url):
    st, _, n = harness.http_json("GET", url + "/sim/noise")
    assert st == 200, n
    return n


def median_rel_half_width(cells):
    """The median over cells (one cell caught by a stall of this shared
    machine does not decide) of the interval's half-width / the figure."""
    return statistics.median(half_width(c) / c["total_tps"] for c in decode_cells(cells))


MATRIX = ["--contexts", "1k,4k", "--concurrency", "1,2,4", "--prefill-contexts", "none"]


@twice
def test_noise_widens_intervals(ctx):
    """Jitter on every decode step (the simulator's noise model) widens each
    cell's interval, and the noise-free truth stays inside it (jitter has mean
    1: the long-run rate is the model's)."""
    quiet = ctx.sim("tiny", "vllm", timing=True)
    noisy = ctx.sim("tiny", "vllm", args=["--noise", "jitter=30%,seed=7"], timing=True)
    assert sim_noise(quiet.url)["active"] is False
    n = sim_noise(noisy.url)
    assert n["active"] is True and abs(n["jitter"] - 0.3) < 1e-12 and n["seed"] == 7
    widths = []
    for sim in (quiet, noisy):
        rc, _, cells, doc, err = run_cli(sim.url, ARGS + MATRIX)
        assert rc == 0, err
        assert len(decode_cells(cells)) == 6, cells  # 4K x 4 = 24,576 tokens just fits
        for c in decode_cells(cells):
            e = expected(sim.url, c["context"], c["concurrency"])
            contains(c["total_tps_ci95"], e["total_tok_s"],
                     "%s x%d total tok/s (noise %s)" % (c["context_label"], c["concurrency"],
                                                        sim is noisy))
        widths.append(median_rel_half_width(cells))
    assert widths[1] > 1.5 * widths[0], "intervals: quiet ±%.2f%%, noisy ±%.2f%%" % (
        100 * widths[0], 100 * widths[1])


@twice
def test_drift_and_slowdown(ctx):
    """Drift moves a run's true rate by its factor (/sim/noise says which);
    the interval holds the drifted truth.  A 20% slowdown shows in the
    measured throughput: the interval holds 0.8 x the model, not the model."""
    sim = ctx.sim("tiny", "vllm", args=["--noise", "drift=10%,seed=3"], timing=True)
    rc, header, cells, doc, err = run_cli(sim.url, ARGS + MATRIX)
    assert rc == 0, err
    n = sim_noise(sim.url)
    assert n["run"] == header["run_id"], (n, header["run_id"])
    f = n["drift_factor"]
    assert f != 1.0
    for c in decode_cells(cells):
        e = expected(sim.url, c["context"], c["concurrency"])
        contains(c["total_tps_ci95"], e["total_tok_s"] / f,
                 "%s x%d total tok/s at drift %.4f" % (c["context_label"], c["concurrency"], f))

    slow = ctx.sim("tiny", "vllm", args=["--slowdown", "20%"], timing=True)
    rc, _, cells, doc, err = run_cli(slow.url, ARGS + MATRIX)
    assert rc == 0, err
    assert sim_noise(slow.url)["slowdown_on"] is True
    for c in decode_cells(cells):
        e = expected(slow.url, c["context"], c["concurrency"])
        where = "%s x%d" % (c["context_label"], c["concurrency"])
        contains(c["total_tps_ci95"], 0.8 * e["total_tok_s"], where + " total tok/s slowed 20%")
        assert c["total_tps_ci95"][1] < e["total_tok_s"], (where, c["total_tps_ci95"], e)


@twice
def test_slowdown_from_a_request(ctx):
    """--slowdown 25%@requests=N: the cells measured before the N-th request
    run at the model's rate, those after at 0.75 of it (repeats make a pass
    of fresh requests; the step shows between the passes)."""
    sim = ctx.sim("tiny", "vllm", timing=True, args=["--slowdown", "25%@requests=1000000"])
    assert sim_noise(sim.url)["slowdown_after_requests"] == 1000000
    # the first pass: count its requests, then start the slowdown right after
    rc, _, cells, doc, err = run_cli(sim.url, ARGS + ["--contexts", "1k", "--concurrency", "2",
                                                      "--prefill-contexts", "none"])
    assert rc == 0, err
    per_run = sim_noise(sim.url)["requests"]
    sim2 = ctx.sim("tiny", "vllm", timing=True,
                   args=["--slowdown", "25%%@requests=%d" % (per_run + 1)])
    rc, _, cells, doc, err = run_cli(sim2.url, ARGS + ["--contexts", "1k", "--concurrency", "2",
                                                       "--prefill-contexts", "none", "--repeats", "2"])
    assert rc == 0, err
    e = expected(sim2.url, 1024, 2)
    c = decode_cells(cells)[0]
    first, second = [r["total_tps"] for r in c["repeat_runs"]]
    tol = 0.03 + SLACK_REL
    assert abs(first - e["total_tok_s"]) <= tol * e["total_tok_s"], (first, e["total_tok_s"])
    assert abs(second - 0.75 * e["total_tok_s"]) <= tol * e["total_tok_s"], (second, e["total_tok_s"])
