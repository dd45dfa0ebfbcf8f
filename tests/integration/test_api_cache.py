"""The job-document cache of GET /v1/jobs/{id} (service/api_jobcache.c).

- A change announced by NOTIFY tb_job_changed (as workers and the api's
  cancel send it) is visible to the next GET at once, and wakes a long-poll
  with the new document, not the cached one.
- A change without a NOTIFY is visible after TOKBENCH_JOB_CACHE_MS at most.
- Another project's key still gets 404 for a cached job.
- A finished job's rendered result is kept (TOKBENCH_RESULT_CACHE_MS): a
  write without a NOTIFY is not seen, the verdict's write (which notifies,
  lib/db/tb_history.c) is seen at once; another project still gets 404.
- The POSTs of a burst each queue their job, and the workers' channel
  (tb_jobs_queued) hears every one of them, outside the inserts'
  transactions.
"""
import json
import os
import subprocess
import threading
import time

import harness
from harness import http, wait_until

S = {}
TTL_MS = 1500


def setup(ctx):
    if S:
        return S
    S["pg"] = pg = ctx.postgres()
    port = harness.free_port()
    proc = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_DB_WAIT_MS": "5000", "TOKBENCH_MASTER_KEY": "6f" * 32,
        "TOKBENCH_RATE_LIMIT": "0", "TOKBENCH_JOB_CACHE_MS": str(TTL_MS)})
    S["base"] = base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    S["proc"] = proc
    for proj in ("c1", "c2"):
        r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", proj, "--admin"],
                           env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        S[proj] = r.stdout.strip()
    st, _, ep = req("POST", "/v1/endpoints", {"name": "e", "base_url": "http://127.0.0.1:9"})
    assert st == 201, ep
    S["spec"] = {"endpoint_id": ep["id"], "contexts": ["8k"], "concurrency": [1]}
    return S


def req(method, path, body=None, key=None, headers=None):
    h = dict(headers or {})
    h["Authorization"] = "Bearer " + (key or S["c1"])
    st, hd, data = http(method, S["base"] + path, body, h, timeout=30)
    return st, hd, (json.loads(data) if data else None)


def new_job():
    st, _, job = req("POST", "/v1/jobs", S["spec"])
    assert st == 202, job
    return job["id"]


def test_notify_drops_the_cached_copy(ctx):
    setup(ctx)
    jid = new_job()
    for _ in range(3):  # cached after the first
        st, h, doc = req("GET", "/v1/jobs/" + jid)
        assert st == 200 and doc["progress"]["eta_s"] is None
    # a worker's progress write, with its NOTIFY
    S["pg"].psql("UPDATE jobs SET eta_s = 42, updated_at = now() WHERE id = '%s'; "
                 "SELECT pg_notify('tb_job_changed', '%s')" % (jid, jid))
    wait_until(lambda: req("GET", "/v1/jobs/" + jid)[2]["progress"]["eta_s"] == 42, 1.0,
               what="the change after its NOTIFY")
    st, h2, doc = req("GET", "/v1/jobs/" + jid)
    assert h2["etag"] != h["etag"]
    # another project: 404 even though the job is cached
    st, _, _ = req("GET", "/v1/jobs/" + jid, key=S["c2"])
    assert st == 404
    # the api's own cancel notifies too
    st, _, _ = req("POST", "/v1/jobs/%s/cancel" % jid)
    assert st == 200
    wait_until(lambda: req("GET", "/v1/jobs/" + jid)[2]["state"] == "cancelled", 1.0,
               what="cancelled")


def test_long_poll_wakes_with_the_new_document(ctx):
    setup(ctx)
    jid = new_job()
    st, h, doc = req("GET", "/v1/jobs/" + jid)
    etag = h["etag"]
    out = {}

    def poll():
        t0 = time.monotonic()
        out["r"] = req("GET", "/v1/jobs/%s?wait=20" % jid, headers={"If-None-Match": etag})
        out["s"] = time.monotonic() - t0
    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.5)
    S["pg"].psql("UPDATE jobs SET state = 'running', started_at = now(), updated_at = now() "
                 "WHERE id = '%s'; SELECT pg_notify('tb_job_changed', '%s')" % (jid, jid))
    t.join(25)
    st, h2, doc = out["r"]
    assert st == 200 and doc["state"] == "running", (st, doc)
    assert h2["etag"] != etag and out["s"] < 5, out["s"]


def test_change_without_notify_seen_within_the_ttl(ctx):
    setup(ctx)
    jid = new_job()
    req("GET", "/v1/jobs/" + jid)
    S["pg"].psql("UPDATE jobs SET eta_s = 7, updated_at = now() WHERE id = '%s'" % jid)
    t0 = time.monotonic()
    wait_until(lambda: req("GET", "/v1/jobs/" + jid)[2]["progress"]["eta_s"] == 7,
               TTL_MS / 1000 + 2, what="the change after the TTL")
    assert time.monotonic() - t0 < TTL_MS / 1000 + 1.5


def test_every_post_notifies_the_workers(ctx):
    setup(ctx)
    listener = subprocess.Popen(["psql", "-X", "-q", "-d", S["pg"].url], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        listener.stdin.write("LISTEN tb_jobs_queued;\nSELECT 'ready';\n")
        listener.stdin.flush()
        line = listener.stdout.readline()
        while "ready" not in line:
            line = listener.stdout.readline()
        ids = []
        threads = [threading.Thread(target=lambda: ids.append(new_job())) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(ids) == 12
        time.sleep(0.5)
        # psql prints the notifications it holds after each command
        out, _ = listener.communicate("SELECT 'done';\n", timeout=20)
        seen = {i for i in ids if 'tb_jobs_queued' in out and '"%s"' % i in out}
        assert seen == set(ids), (len(seen), len(ids))
    finally:
        listener.kill()
        listener.wait()


def test_finished_result_is_cached_until_its_notify(ctx):
    setup(ctx)
    jid = new_job()
    S["pg"].psql("UPDATE jobs SET state = 'succeeded', finished_at = now(), updated_at = now(), "
                 "result = '{\"status\": \"complete\", \"cells\": [], \"mark\": 1}' "
                 "WHERE id = '%s'; SELECT pg_notify('tb_job_changed', '%s')" % (jid, jid))
    wait_until(lambda: req("GET", "/v1/jobs/%s/result" % jid)[2].get("mark") == 1, 2.0,
               what="the finished result")
    st, _, first = req("GET", "/v1/jobs/%s/result" % jid)
    assert st == 200 and first["state"] == "succeeded", first
    # a write that sends no NOTIFY: the cached render is served, byte for byte
    S["pg"].psql("UPDATE jobs SET result = jsonb_set(result, '{mark}', '2') WHERE id = '%s'" % jid)
    st, _, again = req("GET", "/v1/jobs/%s/result" % jid)
    assert st == 200 and again == first, again
    st, _, _ = req("GET", "/v1/jobs/%s/result" % jid, key=S["c2"])
    assert st == 404
    # the verdict's write as lib/db/tb_history.c makes it: with its NOTIFY
    S["pg"].psql("UPDATE jobs SET result = jsonb_set(result, '{mark}', '3') WHERE id = '%s' "
                 "RETURNING pg_notify('tb_job_changed', id::text)" % jid)
    wait_until(lambda: req("GET", "/v1/jobs/%s/result" % jid)[2].get("mark") == 3, 1.0,
               what="the verdict's write after its NOTIFY")


def test_api_stops_cleanly(ctx):
    setup(ctx)
    assert S["proc"].stop() == 0, S["proc"].output()[-4000:]
