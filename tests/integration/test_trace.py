"""Trace replay (issue 25, docs/traces.md) through `tokbench run --trace`
against tokbench-sim.

- Every generated fixture of tests/fixtures/traces/ (each format, gzip
  too) replays as one trace cell: every request of the window completes,
  the server's prefix-cache hit rate (usage.prompt_tokens_details, the
  simulator's block cache) equals the rate the trace implies within 2
  points, requests start at their trace times within the schedule-lag
  check, and a trace without sessions is offered at its own rate.
- The prefix-cache reset before the cell: done on the simulator's vLLM
  (with --dev-mode, as VLLM_SERVER_DEV_MODE=1), SGLang and llama.cpp
  flavours, unsupported on vLLM without it and on TGI; with the same run id
  twice, `--cache keep` finds the first replay's blocks and `reset` does
  not.
- A malformed trace is refused before anything runs, naming line and field.
"""
import json
import os

import harness
import test_engine
import timing

FIX = os.path.join(harness.ROOT, "tests", "fixtures", "traces")
# a KV budget that holds every fixture's blocks, lengths that fit, and a
# fast model clock (the hit rate, not the timing, is under test here)
BIG = ["--kv-tokens", "4000000", "--max-model-len", "32768", "--time-scale", "20"]
FORMATS = [("mooncake.jsonl", "mooncake"), ("mooncake.jsonl.gz", "mooncake"),
           ("mooncake-sessions.jsonl", "mooncake"), ("bailian.jsonl", "bailian"),
           ("weka.json", "weka"), ("azure2023.csv", "azure"), ("azure2024.csv", "azure"),
           ("burstgpt.csv", "burstgpt")]
# the schedule-lag check of these replays: tokbench run uninstrumented
# (TB_REL_BIN_DIR) or under ASan on a shared machine
LAG_P99_MS = 50 if harness.REL_BIN_DIR else 150


def replay(sim, name, fmt, opts="duration_s=20,speedup=4", extra=()):
    rc, _, cells, _, err = test_engine.run_cli(
        sim.url, ["--trace", os.path.join(FIX, name), "--trace-format", fmt,
                  "--trace-replay", opts] + list(extra))
    assert rc == 0, err
    assert [c["phase"] for c in cells] == ["rate"], cells  # the trace cell alone
    return cells[0]


def window_count(name, seconds):
    """Requests of a plain Mooncake fixture in its first `seconds`."""
    ts = [json.loads(l)["timestamp"] for l in open(os.path.join(FIX, name)) if l.strip()]
    return sum(1 for t in ts if (t - min(ts)) / 1000 < seconds)


@timing.timing_test
def test_every_format_replays(ctx):
    """Each fixture replays whole (see the module's doc).  A timing test:
    its cells are valid only within the schedule-lag check, which a busy
    machine can miss (each attempt on a new simulator)."""
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + BIG)
    for name, fmt in FORMATS:
        c = replay(sim, name, fmt)
        t = c["trace"]
        assert c["status"] == "valid", (name, c.get("reason"))
        assert c["completed"] == c["requests"] == t["requests"] and c["errors"] == 0, (name, c)
        assert t["format"] == fmt and t["abandoned"] == 0, (name, t)
        assert abs(t["hit_pct"] - t["implied_hit_pct"]) <= 2, (name, t)
        assert c["schedule_lag_ms"]["p99"] < LAG_P99_MS, (name, c["schedule_lag_ms"])
        assert c["cache_reset"] == "done", (name, c.get("cache_reset_detail"))
        if t["sessions"] == 0:  # every request is a root: offered at the trace's rate
            assert abs(c["offered_rps"] - t["trace_rps"]) <= 0.05 * t["trace_rps"], (name, c, t)
        else:
            assert t["sessions"] > 1, (name, t)
        assert len(c["samples"]["lag_ms"]) == c["requests"], name
        if name == "mooncake.jsonl":
            assert t["requests"] == window_count(name, 20), t
            assert t["speedup"] == 4
            assert t["block_tokens"] == 512 and t["implied_hit_pct"] > 20, t


def test_speedup_and_caps(ctx):
    """Twice as fast: the trace's rate doubles and the offered rate follows;
    max_output caps every request's output; max_requests the count."""
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + BIG)
    base = replay(sim, "mooncake.jsonl", "mooncake", "duration_s=10")
    fast = replay(sim, "mooncake.jsonl", "mooncake", "duration_s=10,speedup=2,max_output=7")
    assert fast["trace"]["requests"] == base["trace"]["requests"]
    assert abs(fast["trace"]["trace_rps"] - 2 * base["trace"]["trace_rps"]) < 0.01 * base["trace"]["trace_rps"]
    assert abs(fast["offered_rps"] - fast["trace"]["trace_rps"]) <= 0.05 * fast["trace"]["trace_rps"]
    assert max(fast["samples"]["output_tokens"]) == 7, fast["samples"]["output_tokens"]
    few = replay(sim, "mooncake.jsonl", "mooncake", "max_requests=9")
    assert few["requests"] == few["trace"]["requests"] == 9


def test_cache_reset_per_flavour(ctx):
    for flavour, args, want in (("vllm", ["--dev-mode"], "done"), ("vllm", [], "unsupported"),
                                ("sglang", [], "done"),
                                ("llamacpp", ["--slot-save-path", "/tmp"], "done"),
                                ("llamacpp", [], "unsupported"),
                                ("tgi-3.3", [], "unsupported")):
        sim = ctx.sim("tiny", flavour, args=args + BIG)
        c = replay(sim, "azure2023.csv", "azure", "max_requests=3")
        assert c["cache_reset"] == want, (flavour, args, c.get("cache_reset_detail"))
        if want == "unsupported" and flavour == "vllm":
            assert "VLLM_SERVER_DEV_MODE" in c["cache_reset_detail"], c["cache_reset_detail"]
        if want == "unsupported" and flavour == "llamacpp":
            assert "--slot-save-path" in c["cache_reset_detail"], c["cache_reset_detail"]
    # the same run id twice: kept, the second replay finds the first's blocks
    sim = ctx.sim("tiny", "vllm", args=["--dev-mode"] + BIG)
    same = ["--run-id", "trace-reuse"]
    opts = "duration_s=10,speedup=4"
    first = replay(sim, "mooncake-sessions.jsonl", "mooncake", opts, same)
    kept = replay(sim, "mooncake-sessions.jsonl", "mooncake", opts, same + ["--cache", "keep"])
    reset = replay(sim, "mooncake-sessions.jsonl", "mooncake", opts, same)
    assert "cache_reset" not in kept
    assert kept["trace"]["hit_pct"] > first["trace"]["hit_pct"] + 20, (first["trace"], kept["trace"])
    assert abs(reset["trace"]["hit_pct"] - reset["trace"]["implied_hit_pct"]) <= 2, reset["trace"]


def test_bad_traces_are_refused(ctx):
    sim = ctx.sim("tiny", "vllm")
    bad = os.path.join(ctx.tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"timestamp": 0, "input_length": 5}\n{"timestamp": 1, "input_length": -3}\n')
    argv = [harness.timing_bin("tokbench"), "run", "--url", sim.url, "--jsonl"]
    for args, words in (
            (["--trace", bad, "--trace-format", "mooncake"],
             'line 2: field "input_length": expected a whole number'),
            (["--trace", bad], "--trace FILE and --trace-format F go together"),
            (["--trace", bad, "--trace-format", "csv"], "trace.format must be one of mooncake"),
            (["--trace", os.path.join(ctx.tmp, "none"), "--trace-format", "weka"], "No such file"),
            (["--trace-replay", "speedup=2"], "--trace-replay needs --trace FILE")):
        p = harness.subprocess.run(argv + args, capture_output=True, timeout=60)
        assert p.returncode == 2 and words in p.stderr.decode(), (args, p.returncode, p.stderr)
    st, _, log = harness.http_json("GET", sim.url + "/sim/requests")
    assert log["requests"] == []  # nothing was sent
