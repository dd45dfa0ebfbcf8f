"""Rate cells and sweeps (issue 15, lib/engine/tb_rate) against tokbench-sim's
`tiny` profile, through `tokbench run`.

- At a low rate (constant arrivals, no two requests in flight at once) each
  request is cold: its TTFT is the simulator's cold prefill time and its time
  between tokens the step time of a batch of one, both within 5%.
- Goodput: the simulator's prefill lane serves cold prompts one after
  another, P ms each (its cold prefill time, /sim/expected, plus what its
  own loop adds, fitted on the requests of a queued cell and held within
  10% of the model), so constant arrivals faster than 1/P queue and request
  k (0-based) waits k x (P - 1/rate) more.  With a TTFT objective of 1.5
  times the cold prefill time the count meeting it is known from that
  model; the cell's goodput is checked exactly against its own per-request
  samples and within one request of the model.
- The sweep finds the highest rate at which all N requests meet the
  objective, 1 / (P - (objective - TTFT of the first) / (N - 1)), within
  one probe step.
"""
import math

import harness
import timing
import test_engine

N = 20


def rate_cells(cells):
    return [c for c in cells if c["phase"] == "rate"]


def prefill_ms(url, ctx, max_tokens):
    return test_engine.expected(url, ctx, 1, max_tokens)["prefill_ttft_ms"]


@test_engine.twice
def test_low_rate_matches_sim(ctx):
    sim = ctx.sim("tiny", "vllm", timing=True)
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", "2", "--rate-requests", "12", "--arrival", "constant",
        "--input-tokens", "1k", "--output-tokens", "16", "--seed", "5"])
    assert rc == 0, err
    assert doc["status"] == "complete", doc
    assert header["settings"]["rate"]["arrival"] == "constant"
    rc_ = rate_cells(cells)
    assert len(rc_) == 1 and not [c for c in cells if c["phase"] != "rate"], cells
    c = rc_[0]
    assert c["status"] == "valid", c
    assert c["requests"] == 12 and c["completed"] == 12 and c["errors"] == 0, c
    assert c["max_in_flight"] == 1, c
    e = test_engine.expected(sim.url, round(c["prompt_tokens_mean"]), 1, 16)
    for what, got, want in (("TTFT", c["ttft_ms"]["p50"], e["prefill_ttft_ms"]),
                            ("TBT", c["tbt_ms"]["p50"], e["tbt_ms"]),
                            ("TPOT", c["tpot_ms"]["p50"], e["tbt_ms"])):
        assert abs(got - want) <= (0.05 + timing.allowance()) * want, (what, got, want)
    assert c["kernel_stamped"] > 0.9, c
    assert len(c["samples"]["ttft_ms"]) == 12


def test_goodput_and_sweep(ctx):
    sim = ctx.sim("tiny", "vllm", timing=True)
    out = 16
    p = prefill_ms(sim.url, 1024, out)
    slo = 1.5 * p
    rate = 25.0
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", str(rate), "--rate-requests", str(N), "--arrival", "constant",
        "--input-tokens", "1k", "--output-tokens", str(out),
        "--slo", "ttft_ms=%.3f" % slo,
        "--sweep", "attainment_pct=100,min_rps=8,max_rps=40,step_rps=1,max_probes=12"])
    assert rc == 0, err
    assert doc["status"] == "complete", doc
    cells = rate_cells(cells)
    fixed = [c for c in cells if c["role"] == "rate"]
    assert len(fixed) == 1
    c = fixed[0]
    assert c["status"] == "valid" and c["completed"] == N, c
    s = c["samples"]
    # goodput from the engine's own per-request record, exactly
    good = sum(1 for t in s["ttft_ms"] if t is not None and t <= slo)
    assert good == c["good"] == sum(s["good"]), (good, c["good"])
    assert math.isclose(c["goodput_rps"], good / c["measured_s"], rel_tol=1e-9), c
    assert math.isclose(c["attainment"], good / N, rel_tol=1e-9), c
    # and from the simulator's model: request k's TTFT is t0 + k (P - 1000/rate),
    # P the time the prefill lane takes per request as this server runs it
    # (the model's p plus what the simulator's own loop adds: fitted on the
    # cell's requests, all queued at this rate)
    t = s["ttft_ms"]
    km, tm = (N - 1) / 2.0, sum(t) / N
    slope = sum((k - km) * (x - tm) for k, x in enumerate(t)) / sum((k - km) ** 2 for k in range(N))
    t0 = tm - slope * km
    lane = slope + 1000.0 / rate
    assert abs(lane - p) <= 0.1 * p, (lane, p, t)
    model = sum(1 for k in range(N) if t0 + k * slope <= slo)
    assert abs(good - model) <= 1, (good, model, t)
    assert 0 < good < N, good
    # the sweep: all N meet the objective while (N - 1) (lane - 1000/rate) <= slo - t0
    sw = doc["sweep"]
    want = 1000.0 / (lane - (slo - t0) / (N - 1))
    assert sw["outcome"] == "converged", sw
    assert sw["found_rps"] is not None and abs(sw["found_rps"] - want) <= 1.0, (sw, want)
    assert sw["fails_at_rps"] - sw["found_rps"] <= 1.0 + 1e-9, sw
    probes = [c for c in cells if c["role"] == "sweep"]
    assert len(probes) == len(sw["probes"]) <= 12, (probes, sw)
    for pr, cell in zip(sw["probes"], probes):
        assert cell["concurrency"] == pr["cell"] and cell["rate_rps"] == pr["rate_rps"]
        assert pr["pass"] == (cell["good"] == N), (pr, cell["good"])


def test_spec_errors(ctx):
    """Bad rate settings are refused before anything runs, naming the field."""
    sim = ctx.sim("tiny", "vllm")
    for args, field in ((["--rates", "2", "--arrival", "gamma:0"], "arrival"),
                        (["--rates", "2", "--input-tokens", "uniform:9-3"], "input_tokens"),
                        (["--rates", "0"], "rates"),
                        (["--sweep", "attainment_pct=90,over=users"], "sweep.over"),
                        (["--sweep", "attainment_pct=90,over=concurrency,max_concurrency=4096"],
                         "sweep.max_concurrency"),
                        (["--rates", "2", "--conversation", "turns=0"], "conversation.turns"),
                        (["--rates", "2", "--conversation", "turns=2,think=poisson"],
                         "conversation.think")):
        rc, _, _, _, err = test_engine.run_cli(sim.url, args)
        assert rc == 2, (args, rc, err)
        assert field in err, (args, err)


def test_seeded_lengths(ctx):
    """Lengths drawn from the seed: the same seed gives each request the same
    output length run after run (a request produces exactly its max_tokens),
    another seed other lengths; all within their range."""
    sim = ctx.sim("tiny", "vllm")

    def lengths(seed):
        rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
            "--rates", "20", "--rate-requests", "16", "--arrival", "gamma:2", "--seed", str(seed),
            "--input-tokens", "uniform:256-1k", "--output-tokens", "uniform:4-12"])
        assert rc == 0, err
        c = rate_cells(cells)[0]
        assert c["status"] == "valid" and c["completed"] == 16, c
        assert 256 <= c["prompt_tokens_mean"] <= 1024, c
        return c["samples"]["output_tokens"]

    a, b, other = lengths(7), lengths(7), lengths(8)
    assert a == b, (a, b)
    assert all(4 <= n <= 12 for n in a) and len(set(a)) > 1, a
    assert a != other, (a, other)


def test_shared_prefix_hit_rate(ctx):
    """A shared-prefix workload: every request's chat starts with the same
    system prompt, followed by one of 4 user messages.  The hit rate the cell
    reports (from each answer's usage.prompt_tokens_details.cached_tokens)
    equals the simulator's own counters over the run, token for token."""
    sim = ctx.sim("tiny", "vllm")
    st, _, before = harness.http_json("GET", sim.url + "/sim/stats")
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", "10", "--rate-requests", "16", "--arrival", "constant",
        "--input-tokens", "200", "--output-tokens", "4", "--seed", "3",
        "--prefix", "tokens=2000,suffixes=4"])
    assert rc == 0, err
    st, _, after = harness.http_json("GET", sim.url + "/sim/stats")
    assert header["settings"]["rate"]["workload"] == {
        "kind": "shared_prefix", "prefix_tokens": 2000, "suffixes": 4}
    c = rate_cells(cells)[0]
    assert c["status"] == "valid" and c["completed"] == 16, c
    pc = c["prefix_cache"]
    queried = after["prefix_query_tokens"] - before["prefix_query_tokens"]
    hit = after["prefix_hit_tokens"] - before["prefix_hit_tokens"]
    assert (pc["requests"], pc["prompt_tokens"], pc["cached_tokens"]) == (16, queried, hit), (pc, before, after)
    assert abs(pc["hit_pct"] - 100.0 * hit / queried) < 1e-9
    # the 4 distinct prompts miss (the first cold, and a later one cold too
    # when it arrives before the first one's prefill has filled the cache;
    # the others find the system prompt: partial hits), the 12 repeats hit
    assert after["cache_misses"] - before["cache_misses"] == 4, after
    assert after["cache_partial_hits"] - before["cache_partial_hits"] >= 1, after
    assert after["cache_hits"] - before["cache_hits"] == 12, after
    assert 2000 * 13 <= hit < queried, pc
    # cold prompts (the default) share nothing
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", "10", "--rate-requests", "4", "--input-tokens", "200",
        "--output-tokens", "4"])
    assert rc == 0, err
    assert header["settings"]["rate"]["workload"] == {"kind": "cold"}
    assert rate_cells(cells)[0]["prefix_cache"]["cached_tokens"] == 0


def test_conversations(ctx):
    """Multi-turn conversations: each arrival is a conversation of 3 turns;
    turn t carries the earlier turns, the server's answers as it streamed
    them, so its prompt is the last turn's prompt, its answer (32 tokens, 4
    of template) and a new message (196), and the simulator's prefix cache
    holds the earlier turns, answer included, block for block.  Each turn
    is sent its think time (constant 0.3 s) after the last one ended, as the
    simulator saw them arrive; the figures per turn equal the simulator's
    own log of the requests."""
    sim = ctx.sim("tiny", "vllm")
    st, _, before = harness.http_json("GET", sim.url + "/sim/requests")
    seen = {r["seq"] for r in before["requests"]}
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rates", "4", "--rate-requests", "6", "--arrival", "constant",
        "--input-tokens", "200", "--output-tokens", "32", "--seed", "4",
        "--conversation", "turns=3,think_time_s=0.3,think=constant"])
    assert rc == 0, err
    assert header["settings"]["rate"]["workload"] == {
        "kind": "multi_turn", "turns": 3, "think_time_s": 0.3, "think": "constant"}
    c = rate_cells(cells)[0]
    assert c["status"] == "valid", c
    assert c["requests"] == 18 and c["completed"] == 18 and c["errors"] == 0, c
    assert c["conversations"] == {"started": 6, "completed": 6, "abandoned": 0, "dropped": 0}
    st, _, after = harness.http_json("GET", sim.url + "/sim/requests")
    log = [r for r in after["requests"] if r["seq"] not in seen and r["end"] == "completed"]
    assert len(log) == 18, log
    want_prompt = [200, 200 + 36 + 196, 200 + 2 * (36 + 196)]
    for t, turn in enumerate(c["turns"]):
        mine = [r for r in log if r["prompt_tokens"] == want_prompt[t]]
        assert turn["turn"] == t + 1 and turn["requests"] == 6 and turn["completed"] == 6, turn
        assert len(mine) == 6 and turn["prompt_tokens_mean"] == want_prompt[t], (turn, mine)
        cached = sum(r["cached_tokens"] for r in mine)
        assert abs(turn["cached_pct"] - 100.0 * cached / (6 * want_prompt[t])) < 1e-9, (turn, cached)
        if t == 0:
            assert cached == 0, mine
        else:
            # the last turn's prompt and its answer (all but the last token)
            # were cached, in whole blocks: more than its prompt alone
            for r in mine:
                assert want_prompt[t - 1] < r["cached_tokens"] <= want_prompt[t - 1] + 31, r
    assert c["prefix_cache"]["cached_tokens"] == sum(r["cached_tokens"] for r in log)
    # think times: each later turn arrived 0.3 s after a turn before it ended
    for t in (1, 2):
        ends = sorted(r["end_ns"] for r in log if r["prompt_tokens"] == want_prompt[t - 1])
        for r in (r for r in log if r["prompt_tokens"] == want_prompt[t]):
            gaps = [(r["arrival_ns"] - e) / 1e9 for e in ends if e < r["arrival_ns"]]
            assert any(0.3 <= g < 0.38 for g in gaps), (t, r, gaps)
    assert all(g is None or g < 50 for g in c["samples"]["lag_ms"]), c["samples"]["lag_ms"]


def test_concurrency_sweep(ctx):
    """A sweep over concurrency: closed-loop cells of N users, each sending
    its next request when the last ended.  The simulator runs at most 4
    requests at once (--max-running 4): up to 4 users every request starts
    at once (TTFT a cold prefill), from 5 on some wait for a whole request
    (about 500 ms) in the queue.  With a TTFT objective of 200 ms met by
    90%, the sweep finds 4 users and fails at 5; each cell kept its users
    in flight."""
    sim = ctx.sim("tiny", "vllm", args=["--max-running", "4"])
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rate-duration", "2", "--input-tokens", "200", "--output-tokens", "64",
        "--slo", "ttft_ms=200",
        "--sweep", "attainment_pct=90,over=concurrency,max_concurrency=32"])
    assert rc == 0, err
    sw = doc["sweep"]
    assert sw["over"] == "concurrency" and sw["outcome"] == "converged", sw
    assert sw["found_concurrency"] == 4 and sw["fails_at_concurrency"] == 5, sw
    assert [p["users"] for p in sw["probes"]] == [1, 2, 4, 8, 6, 5], sw
    by_cell = {c["concurrency"]: c for c in rate_cells(cells)}
    for p in sw["probes"]:
        c = by_cell[p["cell"]]
        assert c["load"] == "closed" and c["users"] == p["users"] and "rate_rps" not in c, c
        assert c["status"] == "valid" and c["errors"] == 0, c
        assert c["max_in_flight"] == p["users"], c
        if p["users"] <= 4:
            assert c["attainment"] == 1.0 and c["avg_in_flight"] > 0.9 * p["users"], c
        else:
            assert c["attainment"] < 0.9, c


def test_conversations_repeat(ctx):
    """A conversation workload is repeated exactly by its seed: every draw
    of a conversation (its messages' lengths, its output lengths, its think
    times) comes from the seed, the cell and the conversation's number, not
    from the order the server answers in.  The simulator's log of two runs
    with one seed holds the same requests (prompt and output tokens, the
    prompts growing turn by turn with the answers drawn); another seed,
    others."""
    sim = ctx.sim("tiny", "vllm")

    def run(seed):
        st, _, before = harness.http_json("GET", sim.url + "/sim/requests")
        seen = {r["seq"] for r in before["requests"]}
        rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
            "--rates", "5", "--rate-requests", "5", "--arrival", "poisson", "--seed", str(seed),
            "--input-tokens", "uniform:100-300", "--output-tokens", "uniform:8-24",
            "--conversation", "turns=3,think_time_s=0.25"])
        assert rc == 0, err
        c = rate_cells(cells)[0]
        assert c["completed"] == 15 and c["conversations"]["completed"] == 5, c
        st, _, after = harness.http_json("GET", sim.url + "/sim/requests")
        log = [r for r in after["requests"] if r["seq"] not in seen]
        reqs = sorted((r["prompt_tokens"], r["output_tokens"]) for r in log)
        return reqs, c

    a, ca = run(11)
    b, cb = run(11)
    other, _ = run(12)
    assert a == b, (a, b)
    assert a != other, (a, other)
    assert [t["prompt_tokens_mean"] for t in ca["turns"]] == [t["prompt_tokens_mean"] for t in cb["turns"]]
    assert len({o for _, o in a}) > 1, a  # lengths drawn, not fixed


def test_closed_loop_pauses_after_failures(ctx):
    """A closed-loop user whose request failed waits 100 ms before its next
    one: against a server answering HTTP 500 at once, 2 users in a 2 s
    window send about 40 requests (not thousands), every one an error with
    its reason, and the sweep ends below its minimum."""
    sim = ctx.sim("tiny", "vllm", args=["--fault", "status=500"])
    rc, header, cells, doc, err = test_engine.run_cli(sim.url, [
        "--rate-duration", "2", "--input-tokens", "100", "--output-tokens", "8",
        "--sweep", "attainment_pct=50,over=concurrency,min_concurrency=2,max_probes=2"])
    assert rc == 0, err
    (c,) = rate_cells(cells)
    assert c["users"] == 2 and c["status"] == "error" and "HTTP 500" in c["reason"], c
    assert 2 * 10 <= c["requests"] <= 2 * 21 + 2 and c["errors"] == c["requests"], c
    assert doc["sweep"]["outcome"] == "below_min_concurrency", doc["sweep"]
