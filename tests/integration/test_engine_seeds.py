"""The engine reproduces the two seed reports against tokbench-sim's seed
profiles: every valid decode cell's total tok/s and time between tokens
within 3% of the report's, every prefill TTFT within 3%, and the same Over
capacity cells.  The sim runs TIME_SCALE times faster than the real servers
(durations divided), so tok/s are divided and times multiplied back by it;
windows are a few modelled seconds."""
import json
import os
import re
import subprocess

import harness
import timing

TIME_SCALE = 4.0
# The two seed reports, kept in the repository (a clean clone has nothing
# beside it).
SEEDS = [os.path.join(harness.ROOT, "tests", "fixtures", "seeds")]


def seed_rows(name):
    """(phase, context label, C) -> row dict from the seed's All measurements."""
    for d in SEEDS:
        p = os.path.join(d, name)
        if os.path.exists(p):
            text = open(p).read()
            break
    else:
        raise AssertionError("seed report %s not found" % name)
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| (Prefill|Sustained decode) \| (\d+K) \| (\d+) \| ([A-Za-z ]+) \|(.*)", line)
        if not m:
            continue
        cols = [c.strip() for c in m.group(5).split("|")]
        phase = "prefill" if m.group(1) == "Prefill" else "decode"
        rows[(phase, m.group(2), int(m.group(3)))] = {"status": m.group(4).strip(), "cols": cols}
    return rows


def num(s):
    s = s.replace(",", "").replace(" ms", "").replace(" s", "")
    return float(s[:-1]) * 1000 if s.endswith("K") else float(s)


def measure(url, contexts, conc, prefill):
    argv = [harness.timing_bin("tokbench"), "run", "--url", url, "--jsonl",
            "--contexts", contexts, "--concurrency", conc, "--prefill-contexts", prefill,
            "--duration", "1.0", "--settle", "0.3", "--drain-timeout", "30"]
    p = subprocess.run(argv, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    lines = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
    return [l for l in lines if "phase" in l]


def compare(cells, rows):
    """-> (failures as {key: text}, number of valid cells)"""
    failures = {}
    n_valid = 0
    for c in cells:
        key = (c["phase"], c["context_label"], c["concurrency"])
        assert key in rows, "cell %s not in the seed report" % (key,)
        seed = rows[key]
        if seed["status"] == "Over capacity":
            # capacity is a rule, not a measurement: no retry hides it
            assert c["status"] == "over_capacity", "%s: %s, seed Over capacity" % (key, c["status"])
            continue
        assert c["status"] != "over_capacity", "%s over capacity, seed Valid" % (key,)
        if c["status"] != "valid":
            failures[key] = "%s: %s (%s)" % (key, c["status"], c.get("reason"))
            continue
        n_valid += 1
        cols = seed["cols"]
        if c["phase"] == "prefill":
            want = num(cols[2])
            got = c["ttft_ms"] * TIME_SCALE
            if abs(got - want) > 0.03 * want:
                failures[key] = "%s prefill TTFT %.0f ms, seed %.0f" % (key, got, want)
            continue
        want_tps, want_tbt = num(cols[0]), num(cols[3])
        got_tps = c["total_tps"] / TIME_SCALE
        got_tbt = c["tbt_ms"]["p50"] * TIME_SCALE
        msg = []
        tol = 0.03 + timing.allowance()
        if abs(got_tps - want_tps) > tol * want_tps:
            msg.append("%s total tok/s %.1f, seed %.1f" % (key, got_tps, want_tps))
        if abs(got_tbt - want_tbt) > tol * want_tbt:
            msg.append("%s TBT %.2f ms, seed %.1f" % (key, got_tbt, want_tbt))
        if msg:
            failures[key] = "; ".join(msg)
    return failures, n_valid


def run_profile(ctx, profile, flavour, seed_file):
    sim = ctx.sim(profile, flavour, args=["--time-scale", str(TIME_SCALE)], timing=True)
    rows = seed_rows(seed_file)
    cells = measure(sim.url, "8k,16k,32k,64k,128k,251k", "1,2,4,8,16,32,64,128",
                    "8k,16k,32k,64k,128k,251k,256k")
    failures, n_valid = compare(cells, rows)
    seed_valid = sum(1 for r in rows.values() if r["status"] == "Valid")
    assert n_valid + sum(1 for f in failures if "error" in failures[f]) <= seed_valid
    if failures:
        # This machine is shared (2 cores): a cell that missed is measured
        # once more, alone; it must then be within 3%.
        print("# retrying after noise: " + " | ".join(failures.values()))
        for key in list(failures):
            phase, label, conc = key
            if phase == "prefill":
                again = measure(sim.url, label.lower(), "1", label.lower())
                again = [c for c in again if c["phase"] == "prefill"]
            else:
                again = measure(sim.url, label.lower(), str(conc), "none")
            f2, _ = compare(again, rows)
            if not f2:
                del failures[key]
            else:
                failures[key] = " / ".join(f2.values())
    assert not failures, "\n".join(failures.values())
    assert sum(1 for c in cells if c["status"] == "valid") >= seed_valid - 2


# Timing-exact: run from the uninstrumented build (see test_engine.py); only
# make valgrind, which has none, skips them.
INSTRUMENTED = not harness.TIMING_EXACT


def skip_unless_timing_exact():
    if INSTRUMENTED:
        raise harness.Skip("instrumented build (ASan/valgrind) cannot keep seed timing, "
                           "and no uninstrumented one beside it (TB_REL_BIN_DIR)")


@timing.timing_test
def test_vllm_h200_seed(ctx):
    skip_unless_timing_exact()
    run_profile(ctx, "vllm-h200x2-step3p7", "vllm", "vllm-h200x2-step3p7-flash-fp8.txt")


@timing.timing_test
def test_sglang_rtxpro6000_seed(ctx):
    skip_unless_timing_exact()
    run_profile(ctx, "sglang-rtxpro6000x4-step3p7", "sglang",
                "sglang-rtxpro6000x4-step3p7-flash-fp8.txt")
