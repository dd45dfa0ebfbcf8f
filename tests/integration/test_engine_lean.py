"""Servers that give less than an engine (issue 12, items 2 to 4), through
`tokbench run` against tokbench-sim's switches (sim/README.md):

- a /metrics without running/waiting gauges (a gateway's own, or none): the
  cells are measured at once, readiness by the client, flagged in the cell
  and in every report format;
- a scheduler cap below C that the server does not publish: the cell is
  over capacity with the cap it measured, higher concurrencies skip at
  once, and the cap is in the result's capacity;
- no usage and no /tokenize: prompts sized by a stated estimate and output
  counted from chunks, both flagged;
- a server that ends every stream early, or refuses every request the same
  way: the run stops at the first cell with exit status 1 and one line
  naming the cause and the flag that would help.
"""
import csv
import io
import json
import os
import subprocess

import harness

BASE = ["--contexts", "1k", "--prefill-contexts", "1k", "--concurrency", "1,2",
        "--duration", "1", "--settle", "0.2", "--max-output", "256"]


def run(ctx, url, args, timeout=150):
    """tokbench run --jsonl --output FILE: (rc, cells, doc, stderr); doc is
    the document written to FILE (also on a failed run)."""
    out = os.path.join(ctx.tmp, "result-%d.json" % len(ctx.cleanups))
    argv = [harness.bin("tokbench"), "run", "--url", url, "--jsonl", "--output", out] + list(args)
    p = subprocess.run(argv, capture_output=True, timeout=timeout)
    assert p.returncode >= 0, "tokbench crashed: signal %d\n%s" % (-p.returncode, p.stderr.decode())
    lines = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
    cells = [l for l in lines if "phase" in l]
    doc = json.load(open(out)) if os.path.exists(out) else None
    return p.returncode, cells, doc, p.stderr.decode()


def report(path, fmt):
    p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", fmt],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def save(ctx, doc, name):
    path = os.path.join(ctx.tmp, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def decode_cells(cells):
    return [c for c in cells if c["phase"] == "decode"]


# ------------------------------------------------------------- readiness

def test_gateway_metrics_ready_by_the_client(ctx):
    """A /metrics with no engine gauges (a gateway's own) or none at all:
    every decode cell is measured, its readiness the client's with the
    reason, and the flag shows in md, html, csv and the terminal table.
    The ready timeout is the default (300 s): waiting for gauges that are
    not there would take minutes and end in error cells."""
    for mode, why in (("foreign", "no running/waiting gauges"), ("none", "no /metrics")):
        sim = ctx.sim("tiny", "vllm", args=["--metrics", mode])
        rc, cells, doc, err = run(ctx, sim.url, BASE)
        assert rc == 0, err
        assert doc["capacity"]["metrics"] is False, doc["capacity"]
        dec = decode_cells(cells)
        assert len(dec) == 2, cells
        for c in dec:
            assert c["status"] == "valid", c
            assert c["readiness"] == "client", c
            assert why in c["readiness_reason"], c
            assert c["avg_active_source"] == "client", c
        path = save(ctx, doc, "gateway-%s.json" % mode)
        for fmt in ("md", "html"):
            assert "ready by the client alone: " in report(path, fmt), fmt
        rows = list(csv.DictReader(io.StringIO(report(path, "csv"))))
        dec_rows = [r for r in rows if r["phase"] == "decode"]
        assert dec_rows and all(r["readiness"] == "client" and why in r["readiness_reason"]
                                for r in dec_rows), dec_rows
    # the engine's own gauges: readiness is the server's, and no note
    sim = ctx.sim("tiny", "vllm")
    rc, cells, doc, err = run(ctx, sim.url, BASE)
    assert rc == 0, err
    for c in decode_cells(cells):
        assert c["status"] == "valid" and c["readiness"] == "server", c
        assert "readiness_reason" not in c, c
    assert "ready by the client" not in report(save(ctx, doc, "engine.json"), "md")


def test_metrics_gone_mid_run_ready_by_the_client(ctx):
    """Discovery sees the engine's gauges, then /metrics answers 503 (an
    exporter restarting, a gateway in front): the cells do not wait for
    them, readiness is the client's, with the failed sample as the reason."""
    from test_engine_faults import RefusingFrontEnd
    seen = {"metrics": 0}

    def answer(line):
        if line.startswith("GET /metrics "):
            seen["metrics"] += 1
            if seen["metrics"] > 1:  # the first is discovery's
                return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n")
        return None
    sim = ctx.sim("tiny", "vllm")
    fe = RefusingFrontEnd(sim.port, limit=1 << 30, answer=answer)
    try:
        rc, cells, doc, err = run(ctx, fe.url, BASE)
    finally:
        fe.close()
    assert rc == 0, err
    assert doc["capacity"]["metrics"] is True, doc["capacity"]
    assert seen["metrics"] >= 2, seen
    dec = decode_cells(cells)
    assert len(dec) == 2, cells
    for c in dec:
        assert c["status"] == "valid", c
        assert c["readiness"] == "client", c
        assert "a /metrics sample failed (HTTP 503)" in c["readiness_reason"], c


def test_terminal_table_shows_the_flags(ctx):
    sim = ctx.sim("tiny", "openai", args=["--metrics", "foreign", "--no-usage",
                                          "--no-tokenize"])
    argv = [harness.bin("tokbench"), "run", "--url", sim.url, "--table"] + BASE
    p = subprocess.run(argv, capture_output=True, timeout=150)
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    assert "ready by the client alone" in out, out
    assert "prompt size estimated" in out, out
    assert "counted from chunks" in out, out


# ---------------------------------------------------------- scheduler cap

def test_scheduler_cap_found_in_seconds(ctx):
    """A server that runs at most 12 requests (vLLM's --max-num-seqs, which
    it publishes nowhere), with KV room for many more: at C = 16 it holds 12
    running and 4 waiting.  That cell is over capacity with the cap it
    measured, C = 20 and every C above 12 at the larger context skip at once,
    and the cap is recorded in the result.  The ready timeout is the default
    (300 s): before, each such cell waited all of it and ended in error."""
    sim = ctx.sim("tiny", "vllm", args=["--max-running", "12", "--kv-tokens", "400000"])
    args = ["--contexts", "1k,2k", "--prefill-contexts", "1k", "--concurrency", "4,16,20",
            "--duration", "1", "--settle", "0.2", "--max-output", "256"]
    rc, cells, doc, err = run(ctx, sim.url, args, timeout=150)
    assert rc == 0, err
    by = {(c["context"], c["concurrency"]): c for c in decode_cells(cells)}
    assert set(by) == {(k, n) for k in (1024, 2048) for n in (4, 16, 20)}, sorted(by)
    for k in (1024, 2048):
        assert by[(k, 4)]["status"] == "valid", by[(k, 4)]
    measured = by[(1024, 16)]
    assert measured["status"] == "over_capacity", measured
    assert measured["scheduler_cap"] == 12, measured
    assert "at most 12" in measured["reason"] and "4 waiting" in measured["reason"], measured
    for key in ((1024, 20), (2048, 16), (2048, 20)):
        c = by[key]
        assert c["status"] == "over_capacity" and c["scheduler_cap"] == 12, c
        assert "scheduler cap" in c["reason"], c
        assert "total_tps" not in c, c
    cap = doc["capacity"]["scheduler_cap"]
    assert cap["requests"] == 12 and cap["context"] == 1024 and cap["concurrency"] == 16, cap
    assert doc["status"] == "complete", doc["status"]
    assert "scheduler cap" in report(save(ctx, doc, "capped.json"), "md")


def test_scheduler_cap_found_with_short_outputs(ctx):
    """The same cap when each request is short (32 output tokens): every
    stream restarts many times a second, so at any poll some admitted
    request of ours has not yet sent its first token.  Counting only the
    streams whose current request produced, the check never held and the
    cell waited its whole ready timeout ("not ready after 40 s"); counting
    the streams that have produced in this cell, it is over capacity at 12
    within seconds."""
    sim = ctx.sim("tiny", "vllm", args=["--max-running", "12", "--kv-tokens", "400000"])
    args = ["--contexts", "0", "--prefill-contexts", "none", "--concurrency", "32",
            "--duration", "1", "--settle", "0.2", "--max-output", "32", "--ready-timeout", "40"]
    rc, cells, doc, err = run(ctx, sim.url, args, timeout=150)
    assert rc == 0, err
    (c,) = decode_cells(cells)
    assert c["status"] == "over_capacity" and c["scheduler_cap"] == 12, c
    assert "at most 12" in c["reason"], c


def test_scheduler_cap_found_with_outputs_of_two_tokens(ctx):
    """Outputs of 2 tokens against vLLM's gauges as its steps leave them
    (the simulator's snapshot after each step, the stopped requests gone):
    running reads anywhere from a few to 12 and the queue is empty at some
    samples.  Judged sample by sample, the cap never held 3 s and the cell
    waited its whole ready timeout ("not ready after 40 s"); judged on the
    most seen running and the queue in most samples, it is over capacity
    at 12."""
    sim = ctx.sim("tiny", "vllm", args=["--max-running", "12", "--kv-tokens", "400000"])
    args = ["--contexts", "0", "--prefill-contexts", "none", "--concurrency", "32",
            "--duration", "1", "--settle", "0.2", "--max-output", "2", "--ready-timeout", "40"]
    rc, cells, doc, err = run(ctx, sim.url, args, timeout=150)
    assert rc == 0, err
    (c,) = decode_cells(cells)
    assert c["status"] == "over_capacity" and c["scheduler_cap"] == 12, c
    assert "at most 12" in c["reason"] and "20 waiting" in c["reason"], c


def test_ready_with_outputs_of_a_few_tokens(ctx):
    """Below the cap, outputs of 1 to 4 tokens: at almost every sample some
    of ours have just stopped and their next requests are not yet counted
    (vLLM counts its queues after removing the requests that stopped in the
    step), so running = C exactly seldom held for the settle time and the
    cells ended "not ready after 20 s"; all C running but those restarted
    since the last sample, with none waiting, is ready: each cell valid, by
    the server's gauges, its window after the 3 s settle."""
    sim = ctx.sim("tiny", "vllm")
    for tokens in ("1", "2", "4"):
        args = ["--contexts", "0", "--prefill-contexts", "none", "--concurrency", "1,8",
                "--duration", "1", "--settle", "3", "--max-output", tokens,
                "--ready-timeout", "20"]
        rc, cells, doc, err = run(ctx, sim.url, args, timeout=150)
        assert rc == 0, (tokens, err)
        dec = decode_cells(cells)
        assert [c["concurrency"] for c in dec] == [1, 8], dec
        for c in dec:
            assert c["status"] == "valid", (tokens, c)
            assert c["readiness"] == "server", (tokens, c)
            assert c["output_tokens"] > 0, (tokens, c)


# --------------------------------------------------------- gives less

def test_no_usage_no_tokenize_measured_with_flags(ctx):
    """A bare gateway: no /tokenize, no usage anywhere, its own /metrics.
    The prompts are sized by the stated estimate, the output counted from
    chunks: measured, and flagged in each cell and in the reports."""
    sim = ctx.sim("tiny", "openai", args=["--metrics", "foreign", "--no-usage",
                                          "--no-tokenize"])
    rc, cells, doc, err = run(ctx, sim.url, BASE)
    assert rc == 0, err
    assert cells and all(c["status"] == "valid" for c in cells), cells
    pf = [c for c in cells if c["phase"] == "prefill"]
    assert len(pf) == 1 and pf[0]["prompt_tokens_source"] == "estimate", pf
    # the estimate lands near the target (the simulator's tokenizer counts
    # the tag as 1 token per 4 bytes, the estimate as 1 per 3)
    assert 900 <= pf[0]["prompt_tokens"] <= 1024, pf
    for c in cells:
        assert c["prompt_tokens_source"] == "estimate", c
        assert "no /tokenize" in c["prompt_tokens_estimate"], c
    for c in decode_cells(cells):
        assert c["token_source"] == "chunks" and c["readiness"] == "client", c
        assert c["output_tokens"] > 0, c
    path = save(ctx, doc, "gateway.json")
    md = report(path, "md")
    assert "prompt size estimated" in md and "counted from chunks" in md, md
    rows = list(csv.DictReader(io.StringIO(report(path, "csv"))))
    assert all(r["prompt_tokens_source"] == "estimate" for r in rows), rows


def test_early_stop_stops_the_run_in_one_line(ctx):
    """Every stream ends after 40 tokens whatever max_tokens and ignore_eos
    say: the first decode cell says so with the counts, and the run stops
    there with exit status 1 and one line naming the cause and the flag."""
    sim = ctx.sim("tiny", "vllm", args=["--early-stop", "40"])
    args = [a if a != "1,2" else "1,2,4" for a in BASE]
    rc, cells, doc, err = run(ctx, sim.url, args)
    assert rc == 1, (rc, err)
    assert err.count("\n") == 1, err
    assert "ends streams early" in err and "asked 256 tokens, got 40" in err, err
    assert "--max-output 40" in err, err
    dec = decode_cells(cells)
    assert len(dec) == 1, cells
    assert dec[0]["status"] == "error", dec
    assert "ended a stream early: asked 256 tokens, got 40" in dec[0]["reason"], dec
    assert doc["status"] == "failed" and "ends streams early" in doc["error"], doc
    assert len(doc["cells"]) == 2, doc["cells"]  # the prefill cell and that one


def test_refused_requests_stop_the_run_in_one_line(ctx):
    """Every chat request refused the same way (a key the chat route does
    not take, a model it does not know): one error cell, exit status 1, one
    line with the flag that would help.  A 500 stays a cell's error
    (test_engine_faults.py)."""
    for status, words in ((401, "refused the API key"), (404, "not found")):
        sim = ctx.sim("tiny", "vllm", args=["--fault", "status=%d" % status])
        rc, cells, doc, err = run(ctx, sim.url, BASE)
        assert rc == 1, (status, rc, err)
        assert err.count("\n") == 1 and words in err and "--" in err, err
        assert len(cells) == 1 and cells[0]["status"] == "error", cells
        assert "HTTP %d" % status in cells[0]["reason"], cells
        assert doc["status"] == "failed", doc


# ------------------------------------------------- the simulator's switches

def test_sim_switches(ctx):
    """tokbench-sim's --metrics, --no-usage, --no-tokenize and --early-stop
    each do one thing, as documented in sim/README.md."""
    sim = ctx.sim("tiny", "vllm", args=["--metrics", "foreign", "--no-usage", "--no-tokenize",
                                        "--early-stop", "5"])
    st, _, text = harness.http("GET", sim.url + "/metrics")
    assert st == 200 and b"gateway_upstream_up" in text and b"vllm:" not in text, text
    st, _, _ = harness.http("POST", sim.url + "/tokenize", b'{"prompt": "hi"}')
    assert st == 404
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50,
            "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    st, _, raw = harness.http("POST", sim.url + "/v1/chat/completions",
                              json.dumps(body).encode())
    assert st == 200, raw
    events = [l[6:] for l in raw.decode().splitlines() if l.startswith("data: ")]
    assert events[-1] == "[DONE]", events
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("usage" not in c for c in chunks), chunks
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop", chunks[-1]
    assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) == 5, chunks
    del body["stream"], body["stream_options"]
    st, _, ans = harness.http_json("POST", sim.url + "/v1/chat/completions", body)
    assert st == 200 and "usage" not in ans, ans
    sim = ctx.sim("tiny", "sglang", args=["--metrics", "none"])
    st, _, _ = harness.http("GET", sim.url + "/metrics")
    assert st == 404
