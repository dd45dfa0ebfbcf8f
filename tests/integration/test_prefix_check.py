"""The cold-cell self-check, prefix_hits_unexplained (issue 25, part 5;
lib/result/tb_checks.h), against tokbench-sim through `tokbench run`.

- Cold cells whose hits their own prompts explain pass: cold prompts (no
  hit at all), a shared prefix (the prefix and the repeated user messages
  hit), conversations (the later turns carry the earlier ones) and a trace
  (what it implies).
- A cell with `cache: keep` after an identical earlier cell (the same run id
  and seed: the cache is warm with our own earlier prompts) is not a cold
  cell: it hits almost everything and is not judged, so it passes.
- A cold cell whose cache something else warms behind its back fails: a
  second client sends the run's very prompts (a second `tokbench run`, the
  same run id and seed, started while the first runs, `cache: keep`) and
  the server's series shows the hits our prompts cannot explain.
"""
import json
import subprocess
import time

import harness
import test_engine
import test_trace

BIG = ["--dev-mode", "--kv-tokens", "4000000", "--max-model-len", "32768", "--time-scale", "20"]


def rate_cell(cells):
    cs = [c for c in cells if c["phase"] == "rate"]
    assert len(cs) == 1, cells
    return cs[0]


def no_prefix_failure(ch):
    """No failed reason is this check's (the timing checks are others')."""
    return not any(f.startswith("prefix hits unexplained") for f in ch["failed"])


def judged(c, what):
    ch = c["checks"]
    assert c["cache_reset"] == "done", (what, c.get("cache_reset_detail"))
    assert ch["prefix_hit_source"] == "server series, counters", (what, ch)
    return ch


def test_explained_hits_pass(ctx):
    sim = ctx.sim("tiny", "vllm", args=BIG)
    cases = {
        "cold": ["--rates", "8", "--rate-requests", "16", "--input-tokens", "1000",
                 "--output-tokens", "8"],
        "shared prefix": ["--rates", "10", "--rate-requests", "16", "--input-tokens", "200",
                          "--output-tokens", "4", "--prefix", "tokens=2000,suffixes=4"],
        "conversations": ["--rates", "4", "--rate-requests", "6", "--input-tokens", "200",
                          "--output-tokens", "32",
                          "--conversation", "turns=3,think_time_s=0.1,think=constant"],
    }
    for what, args in cases.items():
        rc, _, cells, _, err = test_engine.run_cli(sim.url, args + ["--seed", "3"])
        assert rc == 0, err
        c = rate_cell(cells)
        ch = judged(c, what)
        assert ch["prefix_hits_unexplained"] is False and no_prefix_failure(ch), (what, ch)
        if what == "cold":
            assert ch["prefix_hit_pct"] == 0 and ch["prefix_hit_explained_pct"] < 7, ch
        else:  # real hits, explained
            assert 20 < ch["prefix_hit_pct"] <= ch["prefix_hit_explained_pct"] + 2, (what, ch)
    # the matrix's prefill scouts (1K, 4K and the longest context): one
    # prompt of their own each
    rc, _, cells, _, err = test_engine.run_cli(sim.url, [
        "--contexts", "1k,4k", "--concurrency", "1", "--duration", "1", "--max-output", "16"])
    assert rc == 0, err
    scouts = [c for c in cells if c["phase"] == "prefill"]
    assert len(scouts) >= 2, [c["context"] for c in scouts]  # and the longest context's
    for c in scouts:
        ch = c["checks"]
        assert c["cache_reset"] == "done" and ch["prefix_hit_source"] == "usage", c
        assert ch["prefix_hits_unexplained"] is False and no_prefix_failure(ch), ch
        assert ch["prefix_hit_pct"] == 0 and ch["prefix_hit_explained_pct"] < 7, ch
    c = test_trace.replay(sim, "mooncake-sessions.jsonl", "mooncake", "duration_s=20,speedup=4")
    ch = judged(c, "trace")
    assert ch["prefix_hits_unexplained"] is False and no_prefix_failure(ch), (ch, c["trace"])
    assert ch["prefix_hit_explained_pct"] >= c["trace"]["implied_hit_pct"], ch


def test_kept_cache_is_not_cold(ctx):
    """The same cell twice under one run id: the second, cache: keep, finds
    the first's prompts in the cache (our own, not unexplained) and passes."""
    sim = ctx.sim("tiny", "vllm", args=BIG)
    args = ["--rates", "8", "--rate-requests", "16", "--input-tokens", "1000",
            "--output-tokens", "8", "--seed", "5", "--run-id", "keep-twice"]
    rc, _, cells, _, err = test_engine.run_cli(sim.url, args)
    assert rc == 0, err
    first = rate_cell(cells)
    assert judged(first, "first")["prefix_hits_unexplained"] is False
    rc, _, cells, _, err = test_engine.run_cli(sim.url, args + ["--cache", "keep"])
    assert rc == 0, err
    kept = rate_cell(cells)
    assert "cache_reset" not in kept and kept["prefix_cache"]["hit_pct"] > 90, kept["prefix_cache"]
    ch = kept["checks"]
    assert "prefix_hits_unexplained" not in ch and no_prefix_failure(ch), ch


def test_cache_warmed_behind_our_back_fails(ctx):
    sim = ctx.sim("tiny", "vllm", args=BIG)
    args = ["run", "--url", sim.url, "--jsonl", "--rates", "8", "--rate-requests", "40",
            "--input-tokens", "1000", "--output-tokens", "16", "--seed", "7",
            "--run-id", "behind-our-back"]
    cold = subprocess.Popen([harness.timing_bin("tokbench")] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        time.sleep(1.5)  # the cold cell has reset the cache and is sending
        warm = subprocess.run([harness.timing_bin("tokbench")] + args + ["--cache", "keep"],
                              capture_output=True, timeout=120)
        out, err = cold.communicate(timeout=120)
    finally:
        if cold.poll() is None:
            cold.kill()
    assert cold.returncode == 0 and warm.returncode == 0, (err, warm.stderr)
    lines = [json.loads(l) for l in out.decode().splitlines() if l.strip()]
    cells = [l for l in lines if "phase" in l]
    c = rate_cell(cells)
    ch = judged(c, "cold, warmed behind its back")
    # our own requests hit nothing (they came first); the second client's
    # hit our prompts' blocks, in the server's counters over our cell
    assert c["prefix_cache"]["cached_tokens"] == 0, c["prefix_cache"]
    assert ch["prefix_hits_unexplained"] is True and not ch["ok"], ch
    assert ch["prefix_hit_pct"] > ch["prefix_hit_explained_pct"] + 10, ch
    assert any(f.startswith("prefix hits unexplained: after a cache reset the server's prefix "
                            "cache held ") for f in ch["failed"]), ch["failed"]
