"""Endpoint faults end in error cells with a reason, or a clear run error:
never a crash, never a figure computed from broken data.  tokbench-sim's
--fault applies to every generation request.  Each fault is met on both
stream transports: the engine's own reads (the default on plain HTTP) and
libcurl's (TB_ENGINE_CURL_STREAMS=1, as over TLS)."""
import json
import os
import signal
import subprocess
import time

import harness

BASE = ["--contexts", "1k", "--concurrency", "1,2", "--prefill-contexts", "1k",
        "--duration", "1", "--settle", "0.2", "--max-output", "2048"]


TRANSPORTS = ({}, {"TB_ENGINE_CURL_STREAMS": "1"})


def run(url, extra=(), timeout=120, env=None):
    argv = [harness.bin("tokbench"), "run", "--url", url, "--jsonl"] + BASE + list(extra)
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(argv, capture_output=True, timeout=timeout, env=full_env)
    assert p.returncode >= 0, "tokbench crashed: signal %d\n%s" % (-p.returncode, p.stderr.decode())
    lines = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
    cells = [l for l in lines if "phase" in l]
    doc = lines[-1] if lines and "cells" in lines[-1] else None
    return p.returncode, cells, doc, p.stderr.decode()


def assert_all_errors(cells, doc, words):
    assert cells, "no cells"
    for c in cells:
        assert c["status"] == "error", c
        assert any(w in c["reason"] for w in words), c
        assert "total_tps" not in c and "ttft_ms" not in c, c
    assert doc["status"] == "partial", doc


def fault_case(ctx, fault, words, extra=()):
    for env in TRANSPORTS:
        sim = ctx.sim("tiny", "vllm", args=["--fault", fault])
        rc, cells, doc, err = run(sim.url, extra, env=env)
        assert rc == 0, (env, err)
        assert_all_errors(cells, doc, words)


def test_http_500(ctx):
    fault_case(ctx, "status=500", ["HTTP 500"])


def test_http_429_and_503(ctx):
    fault_case(ctx, "status=429", ["HTTP 429"])
    fault_case(ctx, "status=503", ["HTTP 503"])


def test_cut_stream(ctx):
    sim = ctx.sim("tiny", "vllm", args=["--fault", "cut=20"])
    for env in TRANSPORTS:
        rc, cells, doc, err = run(sim.url, env=env)
        assert rc == 0, err
        pf = [c for c in cells if c["phase"] == "prefill"][0]
        assert pf["status"] == "valid", pf  # one token: the cut never comes
        for c in cells:
            if c["phase"] == "decode":
                assert c["status"] == "error", c
                assert "total_tps" not in c
        assert doc["status"] == "partial"


def test_cut_before_first_token(ctx):
    fault_case(ctx, "cut=0", ["[DONE]", "closed", "transfer", "Recv failure", "Empty reply"])


def test_stall(ctx):
    sim = ctx.sim("tiny", "vllm", args=["--fault", "stall=30:5000"])
    for env in TRANSPORTS:
        rc, cells, doc, err = run(sim.url, ["--stall-timeout", "0.3"], env=env)
        assert rc == 0, err
        for c in cells:
            if c["phase"] == "decode":
                assert c["status"] == "error" and "stalled" in c["reason"], c


def test_malformed_sse(ctx):
    sim = ctx.sim("tiny", "vllm", args=["--fault", "malformed=10"])
    for env in TRANSPORTS:
        rc, cells, doc, err = run(sim.url, env=env)
        assert rc == 0, err
        for c in cells:
            if c["phase"] == "decode":
                assert c["status"] == "error" and "malformed" in c["reason"], c



def test_slow_first_byte(ctx):
    fault_case(ctx, "first_byte=4000", ["no first token"], ["--first-token-timeout", "1"])


def test_missing_usage_chunk(ctx):
    fault_case(ctx, "no_usage", ["usage chunk"])


def test_refused_mid_run(ctx):
    fault_case(ctx, "refuse=500", ["reset", "Recv failure", "refused", "connect", "closed",
                                   "Empty reply", "[DONE]"])


def test_unreachable_endpoint(ctx):
    port = harness.free_port()
    rc, cells, doc, err = run("http://127.0.0.1:%d" % port)
    assert rc == 1, (rc, err)
    assert "unreachable" in err and err.count("\n") == 1, err


def test_server_dies_mid_run(ctx):
    sim = ctx.sim("tiny", "vllm")
    argv = [harness.bin("tokbench"), "run", "--url", sim.url, "--jsonl",
            "--contexts", "1k,2k,4k", "--concurrency", "1,2,4", "--duration", "1",
            "--settle", "0.2", "--max-output", "2048"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(2.5)
    sim.proc.signal(signal.SIGKILL)
    out, err = p.communicate(timeout=120)
    assert p.returncode in (0, 1), (p.returncode, err)
    lines = [json.loads(l) for l in out.decode().splitlines() if l.strip()]
    cells = [l for l in lines if "phase" in l]
    assert any(c["status"] == "error" for c in cells), cells
    for c in cells:
        if c["status"] == "error":
            assert c["reason"] and "total_tps" not in c


def test_server_busy_with_other_work(ctx):
    """Another client keeps a stream running on the server: no decode cell can
    reach running = C, and each says why, at half the ready timeout rather
    than at its end; no figure is made of it."""
    import http.client
    import threading
    sim = ctx.sim("tiny", "vllm")
    body = json.dumps({"model": "tiny", "prompt": "someone else", "max_tokens": 8000,
                       "ignore_eos": True, "stream": True}).encode()
    state = {"stop": False, "lines": 0}
    port = int(sim.url.rsplit(":", 1)[1])

    def foreign():  # reads its stream, as a live client does, until told to stop
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        while not state["stop"] and r.readline():
            state["lines"] += 1
        c.close()
    t = threading.Thread(target=foreign, daemon=True)
    t.start()
    harness.wait_until(lambda: state["lines"] > 2, 10, what="the other client's stream")
    t0 = time.monotonic()
    rc, cells, doc, err = run(sim.url, ["--ready-timeout", "8", "--drain-timeout", "1"])
    took = time.monotonic() - t0
    state["stop"] = True
    assert rc == 0, err
    decode = [c for c in cells if c["phase"] == "decode"]
    assert len(decode) == 2 and all(c["status"] == "error" for c in decode), decode
    for c in decode:
        assert "server busy with other work" in c["reason"], c
        assert "%d requests running" % (c["concurrency"] + 1) in c["reason"], c
        assert "total_tps" not in c, c
    assert took < 2 * 8, took  # each cell gave up at half its ready timeout


class RefusingFrontEnd:
    """A front end before the simulator (as nginx with a body size limit):
    every request passes through on its own connection, except a chat
    completion whose body is over `limit` bytes, which gets 413 at once,
    before its body is read, and a close (with the body unread, the kernel
    resets the connection while the client may still be sending).  answer,
    when given, is asked first for every request (its request line): a
    whole response to send instead, or None to pass the request on
    (test_engine_lean.py: a /metrics that goes away)."""

    def __init__(self, upstream_port, limit, answer=None):
        import socket
        import threading
        self.upstream = upstream_port
        self.limit = limit
        self.answer = answer
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.stop = False
        self.refused = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import threading
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c):
        import socket
        try:
            c.settimeout(10)
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = c.recv(4096)
                if not d:
                    return
                buf += d
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            length = 0
            for l in lines[1:]:
                k, _, v = l.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            instead = self.answer(lines[0]) if self.answer else None
            if instead is not None:
                c.sendall(instead)
                return
            if lines[0].startswith("POST /v1/chat/completions") and length > self.limit:
                self.refused += 1
                body = b"<html>413 Request Entity Too Large</html>"
                c.sendall(b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: %d\r\n"
                          b"Connection: close\r\n\r\n%s" % (len(body), body))
                return
            while len(rest) < length:
                d = c.recv(65536)
                if not d:
                    return
                rest += d
            kept = [l for l in lines[1:] if not l.lower().startswith("connection:")]
            req = "\r\n".join([lines[0]] + kept + ["Connection: close"]).encode("latin-1")
            u = socket.create_connection(("127.0.0.1", self.upstream), timeout=30)
            u.sendall(req + b"\r\n\r\n" + rest)
            while True:
                d = u.recv(65536)
                if not d:
                    break
                c.sendall(d)
            u.close()
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()


def test_early_refusal_of_a_large_request(ctx):
    """The front end refuses the chat requests (their bodies are over its
    limit) before reading them: every cell says HTTP 413, on both transports,
    however far the request got when the connection closed."""
    # 64K tokens: a body of some 300 KB, more than the socket buffers take
    # at once, so the client is still sending when the connection closes
    sim = ctx.sim("vllm-h200x2-step3p7", "vllm")
    fe = RefusingFrontEnd(sim.port, limit=2048)
    try:
        for env in TRANSPORTS:
            rc, cells, doc, err = run(fe.url, ["--contexts", "64k", "--concurrency", "1",
                                               "--prefill-contexts", "64k", "--max-output", "16"],
                                      env=env)
            assert rc == 0, (env, err)
            assert_all_errors(cells, doc, ["HTTP 413"])
        assert fe.refused >= 2
    finally:
        fe.close()


def test_cell_memory_budget(ctx):
    """Issue 13, finding 8: what the endpoint makes a cell buffer (the SSE
    line and event buffers of all its streams) has a budget; over it the
    cell is an error naming it, and the run goes on.  1 KiB is less than
    what 8 streams hold for their events."""
    sim = ctx.sim("tiny", "vllm")
    for env in TRANSPORTS:
        rc, cells, doc, err = run(sim.url, ["--concurrency", "8", "--prefill-contexts", "none",
                                            "--cell-memory-kb", "1"], env=env)
        assert rc == 0, (env, err)
        assert_all_errors(cells, doc, ["memory budget of 1 KiB"])
        # the default budget holds the same cells many times over
        rc, cells, doc, err = run(sim.url, ["--concurrency", "8", "--prefill-contexts", "none"],
                                  env=env)
        assert rc == 0 and all(c["status"] == "valid" for c in cells), (env, cells)
