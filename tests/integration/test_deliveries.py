"""Webhooks out (issue 7): when a job ends, a signed summary reaches the
project's callbacks (Standard Webhooks), is retried while the receiver
fails, and is listed with its outcome.  Real tokbench-api (its dispatcher
thread), real PostgreSQL, a real HTTP receiver (http.server).  Jobs are
ended by SQL, the way a worker's last write ends them: the deliveries come
from the database trigger, whoever ends the job."""
import base64
import hashlib
import hmac
import http.server
import json
import os
import subprocess
import threading
import time

import harness
from harness import http as hreq, wait_until

MASTER = "3c" * 32
STATE = {}


class Receiver:
    """A local webhook receiver.  statuses: the answers to give, in order
    (the last one repeats)."""

    def __init__(self, ctx, statuses=(200,)):
        self.statuses = list(statuses)
        self.got = []
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                rec.got.append(({k.lower(): v for k, v in self.headers.items()}, body, time.time()))
                st = rec.statuses[min(len(rec.got) - 1, len(rec.statuses) - 1)]
                self.send_response(st)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/hook" % self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()
        ctx.cleanups.append(self.close)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def verify_standard(secret, headers, body):
    """Standard Webhooks verification, as a receiver would write it."""
    assert secret.startswith("whsec_")
    key = base64.b64decode(secret[len("whsec_"):])
    msg_id, ts = headers["webhook-id"], headers["webhook-timestamp"]
    assert abs(time.time() - int(ts)) < 300
    want = base64.b64encode(hmac.new(key, ("%s.%s." % (msg_id, ts)).encode() + body,
                                     hashlib.sha256).digest()).decode()
    sigs = [s.split(",", 1)[1] for s in headers["webhook-signature"].split(" ") if s.startswith("v1,")]
    return any(hmac.compare_digest(want, s) for s in sigs)


def api_json(base, method, path, key, body=None):
    st, h, data = hreq(method, base + path, body, {"Authorization": "Bearer " + key})
    return st, h, (json.loads(data) if data else None)


def setup(ctx):
    if STATE:
        return STATE
    pg = ctx.postgres()
    port = harness.free_port()
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
           "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_RATE_LIMIT": "0",
           "TOKBENCH_DELIVERY_BACKOFF_MS": "300", "TOKBENCH_DELIVERY_TIMEOUT_MS": "2000",
           "TOKBENCH_PUBLIC_URL": "https://tb.example.com", "TOKBENCH_METRICS_TOKEN": "m"}
    proc = ctx.process("tokbench-api", [], env=env)
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and hreq("GET", base + "/readyz", timeout=2)[0] == 200, 20,
               what="api up")
    r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", "out", "--admin"],
                       env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url), capture_output=True,
                       text=True, timeout=60)
    key = r.stdout.strip()
    st, _, ep = api_json(base, "POST", "/v1/endpoints", key, {"name": "gpu", "base_url": "http://127.0.0.1:9"})
    assert st == 201, ep
    STATE.update(pg=pg, base=base, key=key, ep=ep["id"], proc=proc, secrets=[])
    return STATE


def new_job(s, **spec):
    body = {"endpoint_id": s["ep"], "contexts": ["8k"], "concurrency": [1], "duration_s": 1,
            "labels": {"sha": "abc123"}}
    body.update(spec)
    st, _, job = api_json(s["base"], "POST", "/v1/jobs", s["key"], body)
    assert st == 202, job
    return job["id"]


RESULT = {"schema": "tokbench.result/v1", "status": "complete", "cells": [
    {"phase": "prefill", "context": 8192, "concurrency": 1, "status": "valid", "prompt_tps": 20000.0},
    {"phase": "decode", "context": 8192, "concurrency": 1, "status": "valid", "total_tps": 90.5},
    {"phase": "decode", "context": 8192, "concurrency": 8, "status": "valid", "total_tps": 600.0}],
    "regressions": [{"phase": "decode", "context": 8192, "concurrency": 8, "metric": "total_tps",
                     "base": 700.0, "head": 600.0, "ratio": 0.857, "kind": "worse"}]}


def end_job(pg, job_id, state="succeeded", result=RESULT):
    """What the worker's last write does: the state change (the trigger
    queues the deliveries in the same transaction)."""
    t0 = time.monotonic()
    pg.psql("UPDATE jobs SET state = 'running', started_at = now() WHERE id = '%s'" % job_id)
    pg.psql("UPDATE jobs SET state = '%s', finished_at = now(), cells_done = 3, cells_total = 3, "
            "result = %s WHERE id = '%s'"
            % (state, "'%s'::jsonb" % json.dumps(result).replace("'", "''") if result else "NULL", job_id))
    return time.monotonic() - t0


def deliveries(s, **q):
    qs = "&".join("%s=%s" % kv for kv in q.items())
    st, _, doc = api_json(s["base"], "GET", "/v1/deliveries" + ("?" + qs if qs else ""), s["key"])
    assert st == 200, doc
    return doc["deliveries"]


def test_callback_create_shows_the_secret_once(ctx):
    s = setup(ctx)
    rec = Receiver(ctx)
    st, h, cb = api_json(s["base"], "POST", "/v1/callbacks", s["key"], {"url": rec.url})
    assert st == 201, cb
    assert cb["secret"].startswith("whsec_") and len(base64.b64decode(cb["secret"][6:])) == 32
    assert cb["scope"] == "all" and cb["events"] == ["succeeded", "failed", "cancelled"]
    s["secrets"].append(cb["secret"])
    st, _, lst = api_json(s["base"], "GET", "/v1/callbacks", s["key"])
    assert st == 200 and len(lst["callbacks"]) == 1 and "secret" not in lst["callbacks"][0]
    for bad in ({"url": "ftp://x"}, {"url": "http://u:p@x/"}, {"url": rec.url, "scope": "some"},
                {"url": rec.url, "events": ["queued"]}, {"url": rec.url, "x": 1}):
        assert api_json(s["base"], "POST", "/v1/callbacks", s["key"], bad)[0] == 422, bad
    s["rec"], s["cb"] = rec, cb


def test_delivery_reaches_the_receiver_signed(ctx):
    s = setup(ctx)
    rec, cb = s["rec"], s["cb"]
    job = new_job(s)
    assert end_job(s["pg"], job) < 5  # the worker's write does not wait for the receiver
    wait_until(lambda: rec.got, 15, what="a delivery")
    headers, body, _ = rec.got[0]
    assert verify_standard(cb["secret"], headers, body), headers
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("tokbench/")
    doc = json.loads(body)
    assert doc["type"] == "job.succeeded"
    d = doc["data"]
    assert d["job_id"] == job and d["state"] == "succeeded" and d["labels"] == {"sha": "abc123"}
    assert d["regressed"] is True and d["regressions"][0]["metric"] == "total_tps"
    assert d["figures"]["best_decode"] == {"context": 8192, "concurrency": 8, "total_tps": 600.0}
    assert d["figures"]["best_prefill"]["prompt_tps"] == 20000.0
    assert d["figures"]["cells_valid"] == 3
    assert d["links"]["report_md"] == "https://tb.example.com/v1/jobs/%s/report?format=md" % job
    # a tampered body does not verify
    assert not verify_standard(cb["secret"], headers, body + b" ")
    dl = wait_until(lambda: [x for x in deliveries(s, job_id=job) if x["status"] == "succeeded"], 10,
                    what="delivery recorded")
    assert dl[0]["attempts"] == 1 and dl[0]["response_code"] == 200
    assert dl[0]["id"] == headers["webhook-id"]
    assert "secret" not in json.dumps(dl)


def test_failing_receiver_is_retried_with_the_same_message(ctx):
    s = setup(ctx)
    rec = Receiver(ctx, statuses=(500, 503, 200))
    st, _, cb = api_json(s["base"], "POST", "/v1/callbacks", s["key"],
                         {"url": rec.url, "scope": "named", "events": ["failed"]})
    assert st == 201
    s["secrets"].append(cb["secret"])
    job = new_job(s, callbacks=[rec.url])
    end_job(s["pg"], job, "failed", result=None)
    wait_until(lambda: len(rec.got) >= 3, 30, what="three attempts")
    ids = {h["webhook-id"] for h, _, _ in rec.got}
    bodies = {b for _, b, _ in rec.got}
    assert len(ids) == 1 and len(bodies) == 1, "retries resend the same message"
    for h, b, _ in rec.got:
        assert verify_standard(cb["secret"], h, b)
    # exponential backoff: the second wait is longer than the first
    t = [g[2] for g in rec.got[:3]]
    assert t[1] - t[0] >= 0.25 and t[2] - t[1] >= 0.5, t
    assert json.loads(rec.got[0][1])["data"]["regressed"] is False
    dl = wait_until(lambda: [x for x in deliveries(s, job_id=job) if x["url"] == rec.url
                             and x["status"] == "succeeded"], 10, what="succeeded after retries")
    assert dl[0]["attempts"] == 3
    # the "all" callback from before got this job too (its events include failed)
    assert any(x["url"] == s["rec"].url for x in deliveries(s, job_id=job))


def test_unreachable_receiver_and_unregistered_url(ctx):
    s = setup(ctx)
    dead = "http://127.0.0.1:%d/gone" % harness.free_port()
    st, _, cb = api_json(s["base"], "POST", "/v1/callbacks", s["key"], {"url": dead, "scope": "named"})
    assert st == 201
    s["secrets"].append(cb["secret"])
    job = new_job(s, callbacks=[dead, "http://127.0.0.1:1/never-registered"])
    end_job(s["pg"], job, "cancelled", result=None)
    dl = wait_until(lambda: [x for x in deliveries(s, job_id=job) if x["url"] == dead
                             and x["attempts"] >= 2], 20, what="retries to a dead receiver")
    assert dl[0]["status"] in ("pending", "sending") and dl[0]["last_error"]
    assert dl[0]["next_attempt_at"] is not None
    unreg = [x for x in deliveries(s, job_id=job) if "never-registered" in x["url"]]
    assert unreg and unreg[0]["status"] == "failed" and "no callback" in unreg[0]["last_error"]
    # listing filters
    assert all(x["status"] == "failed" for x in deliveries(s, status="failed"))
    assert api_json(s["base"], "GET", "/v1/deliveries?status=nope", s["key"])[0] == 400
    assert api_json(s["base"], "GET", "/v1/deliveries?limit=0", s["key"])[0] == 400


def test_metrics_count_deliveries(ctx):
    s = setup(ctx)
    st, _, data = hreq("GET", s["base"] + "/metrics", headers={"Authorization": "Bearer m"})
    assert st == 200
    text = data.decode()
    assert 'tokbench_webhook_deliveries_total{outcome="succeeded"} ' in text
    ok = [l for l in text.splitlines() if l.startswith('tokbench_webhook_deliveries_total{outcome="succeeded"}')]
    assert float(ok[0].split()[-1]) >= 3
    retry = [l for l in text.splitlines() if l.startswith('tokbench_webhook_deliveries_total{outcome="retry"}')]
    assert float(retry[0].split()[-1]) >= 3
    assert 'tokbench_webhook_deliveries{status="failed"} 1' in text


def test_no_secret_in_logs(ctx):
    s = setup(ctx)
    logs = s["proc"].output()
    assert "webhook delivery" in logs
    for secret in s["secrets"] + [s["key"], MASTER]:
        assert secret not in logs


def test_clean_stop(ctx):
    """SIGTERM stops the api and its dispatcher thread cleanly (under
    valgrind: no memory error, no definite leak)."""
    s = setup(ctx)
    assert s["proc"].stop() == 0, s["proc"].output()[-3000:]
