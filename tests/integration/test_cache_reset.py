"""The prefix-cache reset before each cell (`cache: "reset"`,
lib/engine/tb_cachereset, docs/traces.md "Prefix-cache control") asked once
per run where the server says it has none: tokbench-sim's llama.cpp flavour
counts the reset calls it receives (/sim/stats cache_reset_calls).

- Without --slot-save-path (b11669 answers every slot action 501): one
  POST /slots/0?action=erase in a run of several rate cells; the first cell
  records the server's answer, the later ones the same reason, marked as
  learned earlier in this run.  A second run asks again (the memory is the
  run's, not the process's).
- With --slot-save-path: every cell erases every slot (slots x cells).
- The matrix's prefill scouts share the run's memory with its rate cells.
"""
import harness
import test_engine

SLOTS = 3
RATES = ["--rates", "4,6,8", "--rate-requests", "4", "--arrival", "constant",
         "--input-tokens", "64", "--output-tokens", "4", "--seed", "3"]
LEARNED = " (learned earlier in this run: not asked again)"


def calls(sim):
    st, _, s = harness.http_json("GET", sim.url + "/sim/stats")
    assert st == 200, s
    return s["cache_reset_calls"]


def rate_run(sim, extra=()):
    rc, _, cells, doc, err = test_engine.run_cli(sim.url, RATES + list(extra))
    assert rc == 0, err
    assert doc["status"] == "complete", doc
    return [c for c in cells if c["phase"] == "rate"]


def test_unsupported_asked_once(ctx):
    sim = ctx.sim("tiny", "llamacpp", args=["--max-running", str(SLOTS)])
    cells = rate_run(sim)
    assert len(cells) == 3, cells
    assert calls(sim) == 1
    first = cells[0]["cache_reset_detail"]
    assert [c["cache_reset"] for c in cells] == ["unsupported"] * 3, cells
    assert first.startswith("POST /slots/0?action=erase: 501 "), first
    assert "--slot-save-path" in first and "learned" not in first, first
    for c in cells[1:]:
        assert c["cache_reset_detail"] == first + LEARNED, c["cache_reset_detail"]
        assert c["status"] == "valid", c
    # a new run asks again, once
    cells = rate_run(sim)
    assert calls(sim) == 2
    assert cells[0]["cache_reset_detail"] == first


def test_supported_every_cell(ctx):
    sim = ctx.sim("tiny", "llamacpp", args=["--max-running", str(SLOTS), "--slot-save-path", "/tmp"])
    cells = rate_run(sim)
    assert [c["cache_reset"] for c in cells] == ["done"] * 3, cells
    assert calls(sim) == SLOTS * 3
    for c in cells:
        assert "learned" not in c["cache_reset_detail"], c["cache_reset_detail"]
    # cache: keep asks nothing
    cells = rate_run(sim, ["--cache", "keep"])
    assert calls(sim) == SLOTS * 3 and "cache_reset" not in cells[0], cells[0]


def test_matrix_and_rates_share_the_memory(ctx):
    """Two prefill scouts and a rate cell in one run: one call."""
    sim = ctx.sim("tiny", "llamacpp", args=["--max-running", str(SLOTS)])
    rc, _, cells, doc, err = test_engine.run_cli(sim.url, [
        "--contexts", "256,512", "--concurrency", "1", "--prefill-contexts", "256,512",
        "--duration", "1", "--max-output", "8", "--rates", "4", "--rate-requests", "3",
        "--input-tokens", "64", "--output-tokens", "4"])
    assert rc == 0, err
    reset = [c for c in cells if "cache_reset" in c]
    assert [c["phase"] for c in reset] == ["prefill", "prefill", "rate"], cells
    assert calls(sim) == 1
    first = reset[0]["cache_reset_detail"]
    assert "learned" not in first, first
    assert [c["cache_reset_detail"] for c in reset[1:]] == [first + LEARNED] * 2, reset
