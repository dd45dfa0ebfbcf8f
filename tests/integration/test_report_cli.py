"""tokbench report / tokbench compare: the CLI over stored results (the seed
fixtures), over llm-inference-bench's JSON, and over a fresh `tokbench run`
against tokbench-sim."""
import csv
import io
import json
import os
import subprocess

import harness

FIX = os.path.join(harness.ROOT, "tests", "fixtures")
SGLANG = os.path.join(FIX, "result_sglang.json")
VLLM = os.path.join(FIX, "result_vllm.json")
LIB = os.path.join(FIX, "llm_inference_bench_vllm.json")
SECRET_LAUNCH = "HF_TOKEN=hf_abc OPENAI_API_KEY=sk-x vllm serve m --api-key sk-y"
REDACTED_LAUNCH = ("HF_TOKEN=<redacted> OPENAI_API_KEY=<redacted> vllm serve m "
                   "--api-key <redacted>")
SECRETS = ("hf_abc", "sk-x", "sk-y")


def tokbench(*args, stdin=None):
    p = subprocess.run([harness.bin("tokbench")] + list(args), input=stdin,
                       capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_report_formats(ctx):
    doc = json.load(open(SGLANG))
    rc, html, err = tokbench("report", SGLANG, "--format", "html")
    assert rc == 0, err
    assert html.startswith("<!DOCTYPE html>")
    assert "<b>15.5K</b></td><td>1,047 ms TTFT" in html
    assert "<b>118.4</b><span>498 ms TTFT</span>" in html
    assert html.count("class=\"oc\">Over capacity<") == 23
    rc, md, err = tokbench("report", SGLANG, "--format", "md")
    assert rc == 0, err
    assert "| 8K | **118.4**<br>498 ms TTFT |" in md
    rc, out, err = tokbench("report", SGLANG, "--format", "csv")
    assert rc == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == len(doc["cells"])
    by_key = {(c["phase"], c["context"], c["concurrency"]): c for c in doc["cells"]}
    for r in rows:
        c = by_key[(r["phase"], int(r["context"]), int(r["concurrency"]))]
        assert r["status"] == c["status"]
        if c["status"] == "valid" and c["phase"] == "decode":
            assert float(r["total_tps"]) == c["total_tps"]
            assert float(r["ttft_p50_ms"]) == c["ttft_ms"]["p50"]
    rc, out, err = tokbench("report", SGLANG, "--format", "json")
    assert rc == 0 and json.loads(out) == doc


def test_report_redacts_any_document(ctx):
    """A result file written before redaction (or by hand) shows no secret of
    its launch command in any format, nor in a comparison."""
    doc = json.load(open(SGLANG))
    doc["launch_command"] = SECRET_LAUNCH
    path = os.path.join(ctx.tmp, "unredacted.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    for fmt in ("md", "csv", "html", "json"):
        rc, out, err = tokbench("report", path, "--format", fmt)
        assert rc == 0, (fmt, err)
        for s in SECRETS:
            assert s not in out, (fmt, s)
        if fmt in ("md", "html", "json"):
            assert "<redacted>" in out or "&lt;redacted&gt;" in out, fmt
    assert json.loads(tokbench("report", path, "--format", "json")[1])["launch_command"] \
        == REDACTED_LAUNCH
    for fmt in ("md", "csv", "html", "json"):
        rc, out, err = tokbench("compare", path, path, "--format", fmt)
        assert rc == 0, (fmt, err)
        for s in SECRETS:
            assert s not in out, (fmt, s)


def test_report_output_file_and_stdin(ctx):
    out = os.path.join(ctx.tmp, "r.html")
    rc, stdout, err = tokbench("report", "-", "-o", out, stdin=open(SGLANG, "rb").read())
    assert rc == 0, err
    assert stdout == ""
    assert os.path.exists(out) and not os.path.exists(out + ".tmp")
    assert "Speed test matrix" in open(out).read()


def test_report_llm_inference_bench(ctx):
    rc, out, err = tokbench("report", LIB, "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "tokbench.result/v1"
    assert doc["imported_from"]["tool"] == "llm-inference-bench"
    assert len(doc["cells"]) == 55
    rc, md, err = tokbench("report", LIB, "--format", "md")
    assert rc == 0 and "llm-inference-bench v0.4.29 (imported)" in md


def test_compare_exit_status(ctx):
    rc, out, err = tokbench("compare", SGLANG, SGLANG)
    assert rc == 0, err
    assert "No regression beyond the tolerated 5.0%" in out
    rc, out, err = tokbench("compare", SGLANG, VLLM, "--format", "json")
    assert rc == 1, err
    cmp = json.loads(out)
    assert cmp["regressed"] is True
    regs = {(g["context"], g["concurrency"], g["metric"]) for g in cmp["regressions"]}
    assert (8192, 1, "total_tps") in regs          # 118.4 -> 111.9: -5.5%
    assert (8192, 2, "total_tps") not in regs      # 175.6 -> 191.5: better
    rc, out, err = tokbench("compare", SGLANG, VLLM, "--tolerance", "6", "--format", "json")
    assert (8192, 1, "total_tps") not in {(g["context"], g["concurrency"], g["metric"])
                                          for g in json.loads(out)["regressions"]}
    for fmt in ("html", "md", "csv"):
        rc, out, err = tokbench("compare", SGLANG, VLLM, "--format", fmt)
        assert rc == 1 and out, (fmt, err)
    # The imported llm-inference-bench file compares with our own result.
    rc, out, err = tokbench("compare", VLLM, LIB, "--format", "json")
    assert rc in (0, 1), err
    assert json.loads(out)["summary"]["total_tps"]["cells"] == 27


def test_bad_input(ctx):
    rc, _, err = tokbench("report", "/nonexistent.json")
    assert rc == 2 and "/nonexistent.json" in err
    rc, _, err = tokbench("report", SGLANG, "--format", "pdf")
    assert rc == 2 and "unknown format" in err
    bad = os.path.join(ctx.tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"schema": "tokbench.result/v1", "cells": [{"phase": "decode"}]}')
    rc, _, err = tokbench("report", bad)
    assert rc == 2 and "cells[0]" in err
    rc, _, err = tokbench("compare", SGLANG)
    assert rc == 2
    rc, _, err = tokbench("compare", SGLANG, SGLANG, "--tolerance", "abc")
    assert rc == 2
    rc, out, _ = tokbench("report", "--help")
    assert rc == 0 and "usage: tokbench report" in out


def test_report_of_a_run(ctx):
    """`tokbench run --output` then `tokbench report`: the engine's document."""
    sim = ctx.sim("tiny", "vllm")
    res = os.path.join(ctx.tmp, "run.json")
    p = subprocess.run([harness.bin("tokbench"), "run", "--url", sim.url, "--jsonl",
                        "--duration", "1", "--settle", "0.2", "--max-output", "2048",
                        "--contexts", "1k,2k", "--concurrency", "1,2",
                        "--prefill-contexts", "1k", "--output", res, "-q",
                        "--launch-command", SECRET_LAUNCH],
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    for text in (open(res).read(), p.stdout.decode(), p.stderr.decode()):
        for s in SECRETS:
            assert s not in text, s
    doc = json.load(open(res))
    assert doc["launch_command"] == REDACTED_LAUNCH
    rc, html, err = tokbench("report", res)
    assert rc == 0, err
    for c in doc["cells"]:
        if c["phase"] == "decode" and c["status"] == "valid":
            tps = "{:,.1f}".format(c["total_tps"])
            assert ('data-context="%d" data-concurrency="%d"' % (c["context"], c["concurrency"])) in html
            assert "<b>%s</b>" % tps in html, tps
    rc, out, err = tokbench("compare", res, res)
    assert rc == 0, err
