"""tokbench keys list / revoke (straight in the database, like create), and
the request id a job records (sql/0007_job_request_id.sql).

- keys list shows each key's public record (prefix, scopes, project), never
  the key or its hash; --project narrows it; --json is the array.
- keys revoke ID revokes at once, even in an api that cached the key (the
  NOTIFY flushes its cache); an unknown id exits 1, a malformed one 2.
- POST /v1/jobs and POST /v1/presets/{name}/jobs store the request's
  X-Request-Id (or the one the api made) in jobs.request_id, so that the
  worker can name it in its logs.
"""
import json
import os
import subprocess
import time

import harness
from harness import http, wait_until

S = {}


def tokbench(*args):
    return subprocess.run([harness.bin("tokbench")] + list(args),
                          env=dict(os.environ, TOKBENCH_DATABASE_URL=S["pg"].url),
                          capture_output=True, text=True, timeout=60)


def setup(ctx):
    if S:
        return S
    S["pg"] = pg = ctx.postgres()
    port = harness.free_port()
    proc = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_DB_WAIT_MS": "5000", "TOKBENCH_MASTER_KEY": "4e" * 32,
        "TOKBENCH_RATE_LIMIT": "0", "TOKBENCH_KEY_CACHE_MS": "600000"})
    S["base"] = base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    S["proc"] = proc
    return S


def req(method, path, key, body=None, headers=None):
    h = dict(headers or {})
    h["Authorization"] = "Bearer " + key
    st, hd, data = http(method, S["base"] + path, body, h, timeout=20)
    return st, hd, (json.loads(data) if data else None)


def create_key(project, *extra):
    r = tokbench("keys", "create", "--project", project, *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_keys_list_and_revoke(ctx):
    setup(ctx)
    k1 = create_key("cli-a", "--admin", "--name", "first")
    k2 = create_key("cli-a", "--scopes", "read")
    k3 = create_key("cli-b", "--admin")
    r = tokbench("keys", "list", "--json")
    assert r.returncode == 0, r.stderr
    keys = json.loads(r.stdout)
    assert len(keys) == 3
    for k in (k1, k2, k3):
        assert k not in r.stdout
    assert {k["project"] for k in keys} == {"cli-a", "cli-b"}
    first = [k for k in keys if k["name"] == "first"][0]
    assert k1.startswith(first["prefix"]) and first["scopes"] == ["read", "write", "admin"]
    assert all(k["revoked_at"] is None for k in keys)
    hashes = S["pg"].psql("SELECT key_hash FROM api_keys").split()
    assert hashes and not any(h in r.stdout for h in hashes)
    r = tokbench("keys", "list", "--project", "cli-b")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["ID", "PROJECT", "NAME", "PREFIX"], lines
    assert len(lines) == 2 and "cli-b" in lines[1] and k3 not in r.stdout
    # the api caches the key (TOKBENCH_KEY_CACHE_MS=600000) ...
    st, _, _ = req("GET", "/v1/jobs", k1)
    assert st == 200
    # ... and revoke still takes effect at once (NOTIFY tb_keys_changed)
    r = tokbench("keys", "revoke", first["id"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["revoked_at"] is not None
    assert k1 not in r.stdout

    def refused():
        return req("GET", "/v1/jobs", k1)[0] == 401
    wait_until(refused, 5, what="revoked key refused")
    st, _, _ = req("GET", "/v1/jobs", k3)
    assert st == 200
    again = json.loads(tokbench("keys", "list", "--json", "--project", "cli-a").stdout)
    assert [k["revoked_at"] is not None for k in again if k["id"] == first["id"]] == [True]
    assert sum(k["revoked_at"] is None for k in again) == 1
    r = tokbench("keys", "revoke", "0e7e4b2a-4524-4bd4-9cd9-a930e616e5be")
    assert r.returncode == 1 and "no key" in r.stderr
    r = tokbench("keys", "revoke", "not-a-uuid")
    assert r.returncode == 2
    r = tokbench("keys", "frobnicate")
    assert r.returncode == 2


def test_jobs_record_the_request_id(ctx):
    setup(ctx)
    key = create_key("rid", "--admin")
    st, _, ep = req("POST", "/v1/endpoints", key, {"name": "e", "base_url": "http://127.0.0.1:9"})
    assert st == 201, ep
    spec = {"endpoint_id": ep["id"], "contexts": ["8k"], "concurrency": [1]}
    st, h, job = req("POST", "/v1/jobs", key, spec, {"X-Request-Id": "ci-run-42.a_b"})
    assert st == 202, job
    assert h["x-request-id"] == "ci-run-42.a_b"
    got = S["pg"].psql("SELECT request_id FROM jobs WHERE id = '%s'" % job["id"]).strip()
    assert got == "ci-run-42.a_b"
    # without one, the id the api made (and answered with) is stored
    st, h, job = req("POST", "/v1/jobs", key, spec)
    assert st == 202
    got = S["pg"].psql("SELECT request_id FROM jobs WHERE id = '%s'" % job["id"]).strip()
    assert got == h["x-request-id"] and len(got) == 24
    # a job from a preset: the same insert, the same record
    st, _, _ = req("POST", "/v1/presets", key, {"name": "p", "spec": spec})
    assert st == 201
    st, h, job = req("POST", "/v1/presets/p/jobs", key, {"labels": {"x": "y"}},
                     {"X-Request-Id": "preset-req-1"})
    assert st == 202, job
    assert job["labels"] == {"x": "y"} and job["state"] == "queued"
    assert h["location"] == "/v1/jobs/" + job["id"]
    got = S["pg"].psql("SELECT request_id FROM jobs WHERE id = '%s'" % job["id"]).strip()
    assert got == "preset-req-1"
    # the request's log line carries the same id
    time.sleep(0.2)
    assert "preset-req-1" in S["proc"].output()


def test_api_stops_cleanly(ctx):
    setup(ctx)
    assert S["proc"].stop() == 0, S["proc"].output()[-4000:]
