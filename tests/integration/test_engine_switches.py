"""The engine's switches for side-by-side measurements (TB_ENGINE_CLIENT_STAMPS,
TB_ENGINE_SERVER_SERIES, TB_ENGINE_CURL_STREAMS) are configuration keys of
the binaries that run the engine (tb_cfg), handed to it in its target: the
worker and `tokbench run` list them in --help, refuse a value other than 0
or 1, and the worker takes them from its --config file too.  What each
switch does to a measurement is tested where it matters (test_engine,
test_sampler, test_rate_checks, test_engine_faults)."""
import json
import os
import subprocess

import harness
from harness import wait_until
from test_api import Api, make_key

KEYS = ("TB_ENGINE_CLIENT_STAMPS", "TB_ENGINE_SERVER_SERIES", "TB_ENGINE_CURL_STREAMS")
MASTER = "9f" * 32  # test_api's


def test_help_lists_the_switches(ctx):
    for argv in (["tokbench", "run", "--help"], ["tokbench-worker", "--help"]):
        out = subprocess.run([harness.bin(argv[0])] + argv[1:], capture_output=True, text=True,
                             timeout=30).stdout
        for k in KEYS:
            assert k in out, (argv, out)
        assert "(default: 1)" in out and "(default: 0)" in out, (argv, out)


def test_a_value_other_than_0_or_1_is_refused(ctx):
    for k in KEYS:
        env = dict(os.environ, **{k: "yes"})
        r = subprocess.run([harness.bin("tokbench"), "run", "--url", "http://127.0.0.1:9"],
                           capture_output=True, text=True, timeout=30, env=env)
        assert r.returncode == 2 and "%s must be 0 or 1" % k in r.stderr, (k, r.stderr)
        env["TOKBENCH_DATABASE_URL"] = "postgresql://127.0.0.1:9/none"
        r = subprocess.run([harness.bin("tokbench-worker")], capture_output=True, text=True,
                           timeout=30, env=env)
        assert r.returncode == 2 and "%s must be 0 or 1" % k in r.stderr, (k, r.stderr)
    # empty is the default, as unset
    sim = ctx.sim("tiny", "vllm")
    env = dict(os.environ, **{k: "" for k in KEYS})
    r = subprocess.run([harness.bin("tokbench"), "run", "--url", sim.url, "--jsonl",
                        "--contexts", "1k", "--concurrency", "1", "--prefill-contexts", "none",
                        "--duration", "0.5", "--settle", "0.1", "--max-output", "64"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr


def test_curl_streams_reach_the_rate_cells(ctx):
    """Rate cells need the engine's own transport: with libcurl streams asked
    for, the cell fails saying so (the switch went through the target into
    the rate cells)."""
    sim = ctx.sim("tiny", "vllm")
    args = ["--rates", "2", "--rate-requests", "2", "--arrival", "constant",
            "--input-tokens", "256", "--output-tokens", "4"]
    for value, ok in (("1", False), ("0", True)):
        rc, _, cells, doc, err = run_cli(sim.url, args, {"TB_ENGINE_CURL_STREAMS": value})
        assert rc == 0, err
        rate = [c for c in cells if c["phase"] == "rate"]
        assert len(rate) == 1, cells
        if ok:
            assert rate[0]["status"] == "valid", rate[0]
        else:
            assert rate[0]["status"] == "error", rate[0]
            assert "rate cells need the engine's own transport" in rate[0]["reason"], rate[0]


def test_worker_reads_them_from_its_config_file(ctx):
    """TB_ENGINE_SERVER_SERIES=0 in the worker's --config file: the job's
    decode cell has no server series (its checks stay)."""
    pg = ctx.postgres()
    api = Api(ctx, pg)
    key = make_key(pg, "sw-alpha", "--admin")
    sim = ctx.sim("tiny", "vllm")
    st, _, ep = api.json("POST", "/v1/endpoints", key, {"name": "sw-sim", "base_url": sim.url})
    assert st == 201, ep
    conf = os.path.join(ctx.tmp, "worker.conf")
    with open(conf, "w") as f:
        f.write("TB_ENGINE_SERVER_SERIES=0\n")
    os.chmod(conf, 0o600)
    w = ctx.process("tokbench-worker", ["--config", conf], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_POLL_S": "1"})
    wait_until(lambda: '"msg":"worker ready"' in w.output() or not w.alive(), 20, what="worker")
    st, _, job = api.json("POST", "/v1/jobs", key, {
        "endpoint_id": ep["id"], "contexts": ["1k"], "concurrency": [2], "duration_s": 2,
        "max_output": 2048, "max_attempts": 1})
    assert st == 202, job

    def done():
        st, _, j = api.json("GET", "/v1/jobs/" + job["id"], key)
        return j if j["state"] in ("failed", "succeeded", "cancelled") else None
    j = wait_until(done, 120, what="job ends")
    assert j["state"] == "succeeded", j
    st, _, doc = api.json("GET", "/v1/jobs/%s/result" % job["id"], key)
    assert st == 200, doc
    dec = [c for c in doc["cells"] if c["phase"] == "decode"]
    assert len(dec) == 1 and dec[0]["status"] == "valid", doc["cells"]
    assert "server_series" not in dec[0], dec[0]
    assert "checks" in dec[0], dec[0]


def run_cli(url, args, env):
    """tokbench run --jsonl (this build: no timing is held here)."""
    argv = [harness.bin("tokbench"), "run", "--url", url, "--jsonl"] + list(args)
    p = subprocess.run(argv, capture_output=True, timeout=120, env=dict(os.environ, **env))
    lines = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
    doc = lines[-1] if lines and "cells" in lines[-1] else None
    return p.returncode, None, [l for l in lines if "phase" in l], doc, p.stderr.decode()
