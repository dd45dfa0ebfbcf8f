"""tokbench submit (issue 7): submit from a preset, follow, print the
report, exit 0 / 1 (regressions) / 2 (failure or error).  Real tokbench-api
and PostgreSQL; the job is ended by SQL plus the NOTIFY a worker's last write
sends, so each verdict is exact."""
import json
import os
import subprocess
import time

import harness
from harness import http, wait_until

MASTER = "7e" * 32
STATE = {}


def setup(ctx):
    if STATE:
        return STATE
    pg = ctx.postgres()
    port = harness.free_port()
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
           "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_RATE_LIMIT": "0", "TOKBENCH_DELIVERIES": "0"}
    proc = ctx.process("tokbench-api", [], env=env)
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and http("GET", base + "/readyz", timeout=2)[0] == 200, 20,
               what="api up")
    r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", "ci", "--admin"],
                       env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url), capture_output=True,
                       text=True, timeout=60)
    key = r.stdout.strip()
    key_file = os.path.join(ctx.tmp, "api.key")
    with open(key_file, "w") as f:
        f.write(key + "\n")
    os.chmod(key_file, 0o600)
    auth = {"Authorization": "Bearer " + key}
    st, _, data = http("POST", base + "/v1/endpoints", {"name": "gpu", "base_url": "http://127.0.0.1:9"}, auth)
    ep = json.loads(data)["id"]
    st, _, data = http("POST", base + "/v1/presets", {"name": "smoke", "spec": {
        "endpoint_id": ep, "contexts": ["8k"], "concurrency": [1], "duration_s": 1}}, auth)
    assert st == 201, data
    STATE.update(pg=pg, base=base, key=key, key_file=key_file, proc=proc)
    return STATE


def submit(s, *extra, env=None, wait=True):
    argv = [harness.bin("tokbench"), "submit", "--preset", "smoke", "--api", s["base"],
            "--api-key-file", s["key_file"]] + list(extra) + (["--wait"] if wait else [])
    e = dict(os.environ)
    e.pop("TOKBENCH_API_KEY", None)
    e.update(env or {})
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)


CELLS = [{"phase": "prefill", "context": 8192, "context_label": "8K", "concurrency": 1,
          "status": "valid", "prompt_tokens": 8192, "ttft_ms": 300.0, "prompt_tps": 27306.7},
         {"phase": "decode", "context": 8192, "context_label": "8K", "concurrency": 1,
          "status": "valid", "total_tps": 95.0, "ttft_p50_ms": 310.0, "tbt_p50_ms": 10.5}]


def finish(s, label, state, regressions=None):
    """Waits for the job carrying label run=<label>, then ends it."""
    pg = s["pg"]
    jid = wait_until(lambda: pg.psql("SELECT id FROM jobs WHERE labels @> '{\"run\": \"%s\"}'" % label).strip(),
                     20, what="the submitted job")
    result = {"schema": "tokbench.result/v1", "status": "complete" if state == "succeeded" else "failed",
              "error": None, "cells": CELLS}
    if regressions is not None:
        result["regressions"] = regressions
    time.sleep(0.3)  # let submit reach its long-poll
    pg.psql("UPDATE jobs SET state = 'running', started_at = now() WHERE id = '%s'" % jid)
    pg.psql("UPDATE jobs SET state = '%s', finished_at = now(), cells_done = 2, cells_total = 2, "
            "result = '%s'::jsonb, error = %s, updated_at = now() WHERE id = '%s'; "
            "NOTIFY tb_job_changed, '%s'"
            % (state, json.dumps(result), "'engine: endpoint unreachable'" if state == "failed" else "NULL",
               jid, jid))
    return jid


def test_exit_0_when_the_job_succeeds(ctx):
    s = setup(ctx)
    p = submit(s, "--label", "run=ok", "--label", "sha=abc")
    jid = finish(s, "ok", "succeeded", regressions=[])
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, (out, err)
    assert jid in err and "succeeded" in err
    assert out.strip(), "a report on stdout"
    labels = json.loads(s["pg"].psql("SELECT labels FROM jobs WHERE id = '%s'" % jid))
    assert labels["sha"] == "abc"
    assert s["key"] not in out + err


def test_exit_1_on_a_regression(ctx):
    s = setup(ctx)
    p = submit(s, "--label", "run=reg", "--quiet")
    finish(s, "reg", "succeeded", regressions=[{"phase": "decode", "context": 8192, "concurrency": 1,
                                                "metric": "total_tps", "base": 110.0, "head": 95.0,
                                                "ratio": 0.86, "kind": "worse"}])
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, (out, err)
    assert "1 regression" in err


def test_exit_2_on_failure_and_errors(ctx):
    s = setup(ctx)
    p = submit(s, "--label", "run=bad")
    finish(s, "bad", "failed")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2, (out, err)
    assert "failed" in err and "endpoint unreachable" in err
    # unknown preset
    p = subprocess.run([harness.bin("tokbench"), "submit", "--preset", "nope", "--api", s["base"],
                        "--api-key-file", s["key_file"], "--wait"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "404" in p.stderr
    # the API unreachable
    p = subprocess.run([harness.bin("tokbench"), "submit", "--preset", "smoke", "--api",
                        "http://127.0.0.1:%d" % harness.free_port(), "--api-key-file", s["key_file"]],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    # a bad key, no key, bad usage
    p = subprocess.run([harness.bin("tokbench"), "submit", "--preset", "smoke", "--api", s["base"]],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, TOKBENCH_API_KEY="tkb_wrong"))
    assert p.returncode == 2 and "401" in p.stderr
    env = dict(os.environ)
    env.pop("TOKBENCH_API_KEY", None)
    p = subprocess.run([harness.bin("tokbench"), "submit", "--preset", "smoke"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 2 and "no API key" in p.stderr
    p = subprocess.run([harness.bin("tokbench"), "submit", "--label", "x"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2


def test_without_wait_prints_the_job_id(ctx):
    s = setup(ctx)
    p = submit(s, "--label", "run=nowait", wait=False, env={})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    jid = out.strip()
    assert s["pg"].psql("SELECT state FROM jobs WHERE id = '%s'" % jid).strip() == "queued"
