"""HTTPS and IPv6 for real (issue 12, item 6).

tokbench-sim serves HTTPS with a certificate this module makes at run time
(the openssl command line, into the module's temporary directory: no key
material in the repository), and `tokbench run` measures it through libcurl
streams over real TLS, trusting the certificate with --cacert; without it
the run is refused in one line that names the flag; a worker given
TOKBENCH_CA_FILE runs a job on it (and one without fails the job with the
certificate in the reason).  The simulator stays
whole under broken handshakes, pipelining over TLS (plaintext held inside
OpenSSL, SSL_pending) and a reader slower than a large answer.  Then the
simulator listens on ::1 and the engine's own transport (tb_direct) measures
it over IPv6, kernel-stamped.  A machine without ::1 on loopback skips the
IPv6 tests (they never pass silently)."""
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time

import harness
from test_engine import RUN_ARGS, check_against_expected, run_cli, twice

SUBJECT_ALT = "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"


def make_cert(ctx, name):
    """A self-signed P-256 certificate for localhost, 127.0.0.1 and ::1,
    valid one day; returns (cert, key) paths."""
    if shutil.which("openssl") is None:
        raise harness.Skip("no openssl command to make a certificate")
    cert = os.path.join(ctx.tmp, name + "-cert.pem")
    key = os.path.join(ctx.tmp, name + "-key.pem")
    if not os.path.exists(cert):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=localhost", "-addext", SUBJECT_ALT],
                       check=True, capture_output=True, timeout=60)
    return cert, key


class TlsSim:
    """tokbench-sim on a port of its choosing (--port 0, read from its
    "listening on" line), with TLS when cert is given."""

    def __init__(self, ctx, host="127.0.0.1", cert=None, key=None, args=(), timing=False):
        argv = ["--host", host, "--port", "0", "--profile",
                os.path.join(harness.ROOT, "sim", "profiles", "tiny.json")] + list(args)
        if cert:
            argv += ["--tls-cert", cert, "--tls-key", key]
        self.proc = harness.Process(ctx, "tokbench-sim", argv, timing=timing)
        m = harness.wait_until(self._listening, 15, what="tokbench-sim listening")
        self.host = host
        self.port = int(m.group(1))
        scheme = "https" if cert else "http"
        self.url = "%s://%s:%d" % (scheme, "[%s]" % host if ":" in host else host, self.port)
        self.cert = cert

    def _listening(self):
        out = self.proc.output()
        if not self.proc.alive():
            raise AssertionError("tokbench-sim exited:\n" + out)
        return re.search(r"listening on \S+:(\d+) ", out)

    def tls_context(self):
        c = ssl.create_default_context(cafile=self.cert)
        return c

    def connect(self, host="localhost"):
        """A TLS socket to the simulator (verified)."""
        raw = socket.create_connection((self.host, self.port), timeout=10)
        return self.tls_context().wrap_socket(raw, server_hostname=host)

    def get_json(self, path):
        import http.client
        c = http.client.HTTPSConnection(self.host, self.port, context=self.tls_context(), timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            c.close()


def read_until(sock, pred, timeout=10):
    data = b""
    deadline = time.monotonic() + timeout
    while not pred(data):
        assert time.monotonic() < deadline, data[-300:]
        d = sock.recv(65536)
        if not d:
            break
        data += d
    return data


def stream_request(max_tokens, host="localhost"):
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hello world"}],
                       "max_tokens": max_tokens, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"X-Tokbench-Stamps: 1\r\n"  # the stamps are asked for (off by default)
            b"Content-Length: %d\r\n\r\n" % (host.encode(), len(body))) + body


def test_https_protocol(ctx):
    """A stream over TLS: one chunk per token, each after its `: t=` stamp,
    usage, [DONE]; keep-alive and pipelining over one TLS connection."""
    cert, key = make_cert(ctx, "sim")
    sim = TlsSim(ctx, cert=cert, key=key)
    ctx.tls_sim = sim
    st, models = sim.get_json("/v1/models")
    assert st == 200 and models["data"][0]["max_model_len"] == 8192, models
    with sim.connect() as c:
        c.sendall(stream_request(20))
        data = read_until(c, lambda d: b"data: [DONE]" in d and d.endswith(b"\r\n0\r\n\r\n"))
        assert data.startswith(b"HTTP/1.1 200"), data[:200]
        events = [e for e in re.findall(rb"data: (\{.*?\})\n", data)]
        chunks = [json.loads(e) for e in events]
        tokens = [ch for ch in chunks if ch["choices"] and ch["choices"][0]["delta"].get("content")]
        assert len(tokens) == 20, len(tokens)
        assert chunks[-1]["usage"]["completion_tokens"] == 20, chunks[-1]
        assert data.count(b": t=") == len(chunks) + 1  # every event, [DONE] too
        # three requests in one TLS write: OpenSSL decrypts them at once and
        # holds what the first stream's reading does not take (SSL_pending)
        c.sendall(stream_request(5) + stream_request(6) + stream_request(7))
        data = read_until(c, lambda d: d.count(b"data: [DONE]") == 3, timeout=20)
        usage = [json.loads(u) for u in re.findall(rb'data: (\{"id[^\n]*"choices":\[\][^\n]*)\n', data)]
        assert [u["usage"]["completion_tokens"] for u in usage] == [5, 6, 7], usage


def test_https_large_answer_slow_reader(ctx):
    """An answer of megabytes to a reader that waits first: the socket fills,
    the rest waits in the ciphertext buffer and goes on EPOLLOUT, byte exact."""
    sim = ctx.tls_sim
    prompt = " ".join(["abcd"] * 200000)
    body = json.dumps({"model": "tiny", "prompt": prompt}).encode()
    with sim.connect() as c:
        c.sendall(b"POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(1.0)
        data = read_until(c, lambda d: b"\r\n\r\n" in d and len(d) >= d.index(b"\r\n\r\n") + 4 + int(
            re.search(rb"content-length: (\d+)", d).group(1)), timeout=30)
    head, _, payload = data.partition(b"\r\n\r\n")
    doc = json.loads(payload)
    assert doc["count"] == 200001 and len(doc["tokens"]) == 200001, doc["count"]


def test_https_bad_handshakes(ctx):
    """Plain HTTP to the TLS port, garbage, a ClientHello cut short and left
    hanging, a client that rejects the certificate: each costs its own
    connection and nothing else; the simulator keeps serving."""
    sim = ctx.tls_sim
    for junk in [b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\x00\x05hello",
                 b"\x16\x03\x01\xff\xff" + b"\x01" * 3000, b"\x00" * 70000]:
        with socket.create_connection(("127.0.0.1", sim.port), timeout=5) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                data = read_until(s, lambda d: False, timeout=5)
            except OSError:  # reset, broken pipe, not connected: the sim hung up
                data = b""
            assert not data.startswith(b"HTTP/"), data[:80]
    hanging = socket.create_connection(("127.0.0.1", sim.port), timeout=5)
    hanging.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # half a ClientHello
    # a client that does not trust the certificate aborts the handshake
    raw = socket.create_connection(("127.0.0.1", sim.port), timeout=5)
    try:
        ssl.create_default_context().wrap_socket(raw, server_hostname="localhost")
        raise AssertionError("an untrusted certificate was accepted")
    except ssl.SSLCertVerificationError:
        pass
    finally:
        raw.close()
    st, models = sim.get_json("/v1/models")  # while the half handshake hangs
    assert st == 200, models
    # the handshake that never ends is cut after 10 s (SIM_TLS_HANDSHAKE_NS)
    hanging.settimeout(20)
    t0 = time.monotonic()
    try:
        rest = hanging.recv(100)
    except ConnectionResetError:
        rest = b""
    waited = time.monotonic() - t0
    hanging.close()
    assert rest == b"" and 5 < waited < 15, (rest, waited)
    st, stats = sim.get_json("/sim/stats")
    assert st == 200 and stats["errors"] == 0, stats
    assert sim.proc.alive()


@twice
def test_https_run(ctx):
    """tokbench run over https with --cacert: discovery, prompts, metrics and
    libcurl streams over TLS measure as over plain HTTP (within the same 2%
    of /sim/expected, kernel-stamped), and the token counts add up."""
    cert, key = make_cert(ctx, "run")
    sim = TlsSim(ctx, cert=cert, key=key, timing=True)
    url = "https://localhost:%d" % sim.port
    rc, header, cells, doc, err = run_cli(url, RUN_ARGS + [
        "--contexts", "1k,4k", "--concurrency", "1,4", "--prefill-contexts", "1k", "--cacert", cert])
    assert rc == 0, err
    assert header["engine"]["name"] == "vllm" and header["capacity"]["kv_budget_tokens"] == 24576, header
    assert doc["status"] == "complete", doc
    # /sim/expected over the TLS connection: the same checks as test_engine
    import test_engine
    saved = test_engine.expected

    def expected_tls(_url, c, n, m=2048):
        st, e = sim.get_json("/sim/expected?context=%d&concurrency=%d&max_tokens=%d" % (c, n, m))
        assert st == 200, e
        return e
    test_engine.expected = expected_tls
    try:
        # decode TTFTs are not held to cached_ttft(C): the C streams' new TLS
        # connections reach the server a few ms apart, and the model counts a
        # prefix-cache group's TTFT from its first arrival.  The cold
        # scout's prefill TTFT is checked (its handshake is not counted).
        assert check_against_expected(url, cells, check_ttft=False) == 4
    finally:
        test_engine.expected = saved
    for c in cells:
        if c["phase"] == "prefill":
            # prompts of exact token counts, sized through /tokenize over TLS
            assert c["prompt_tokens"] == c["context"], c


def test_https_untrusted(ctx):
    """Without --cacert (or with another CA) the certificate is refused: exit
    1 and one line that says why and names the flag; an unreadable --cacert
    is refused before anything is sent."""
    cert, key = make_cert(ctx, "run")
    other, _ = make_cert(ctx, "other")
    sim = TlsSim(ctx, cert=cert, key=key)
    url = "https://localhost:%d" % sim.port
    for extra in ([], ["--cacert", other]):
        rc, _, cells, _, err = run_cli(url, ["--contexts", "1k", "--concurrency", "1",
                                             "--duration", "1"] + extra, timeout=60)
        assert rc == 1, (rc, err)
        lines = [l for l in err.splitlines() if l.strip()]
        assert len(lines) == 1, err
        assert "certificate" in lines[0], err
        if not extra:
            assert "--cacert" in lines[0], err
        assert cells == [], cells
    rc, _, _, _, err = run_cli(url, ["--cacert", os.path.join(ctx.tmp, "nope.pem")], timeout=30)
    assert rc == 2 and "--cacert" in err and "No such file" in err, (rc, err)


def ipv6_loopback():
    """Skip unless ::1 is configured on lo and can be bound."""
    try:
        out = subprocess.run(["ip", "-6", "addr", "show", "lo"], capture_output=True,
                             timeout=10).stdout.decode()
    except (OSError, subprocess.TimeoutExpired) as e:
        raise harness.Skip("cannot ask for lo's IPv6 addresses: %s" % e)
    if "::1/128" not in out:
        raise harness.Skip("no IPv6 address ::1 on loopback (ip -6 addr show lo)")
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError as e:
        raise harness.Skip("cannot bind ::1: %s" % e)


@twice
def test_ipv6_direct(ctx):
    """The simulator on [::1]; tokbench run on http://[::1]:port takes the
    engine's own transport (plain HTTP, no proxy) and every read is stamped
    by the kernel; figures within 2% of /sim/expected."""
    ipv6_loopback()
    sim = TlsSim(ctx, host="::1", timing=True)
    assert sim.url.startswith("http://[::1]:")
    env = {k: "" for k in ("http_proxy", "all_proxy", "ALL_PROXY", "TB_ENGINE_CURL_STREAMS")}
    rc, header, cells, doc, err = run_cli(sim.url, RUN_ARGS + [
        "--contexts", "1k,4k", "--concurrency", "1,4", "--prefill-contexts", "1k"], env=env)
    assert rc == 0, err
    assert doc["status"] == "complete", doc
    assert header["capacity"]["kv_budget_tokens"] == 24576, header
    assert check_against_expected(sim.url, cells) == 4  # includes kernel_stamped > 0.9
    # nothing listens on 127.0.0.1 at that port: the run went over IPv6
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", sim.port)) != 0


def test_ipv6_https(ctx):
    """TLS and IPv6 together: https://[::1] with the certificate's IP name."""
    ipv6_loopback()
    cert, key = make_cert(ctx, "sim")
    sim = TlsSim(ctx, host="::1", cert=cert, key=key)
    with sim.connect(host="::1") as c:
        c.sendall(stream_request(3, host="[::1]"))
        data = read_until(c, lambda d: b"data: [DONE]" in d)
    assert data.startswith(b"HTTP/1.1 200") and data.count(b'"content":" ') == 3, data[:300]


def test_worker_https_with_ca_file(ctx):
    """The service's side: a worker given TOKBENCH_CA_FILE runs a job on an
    https endpoint with a self-signed certificate to the end; a worker
    without it fails the job with the certificate in the reason."""
    from test_worker import SHORT, T, assert_complete
    cert, key = make_cert(ctx, "worker")
    sim = TlsSim(ctx, cert=cert, key=key)
    t = T(ctx)
    ok = False
    try:
        ep = t.endpoint(sim)
        t.worker("w-tls", TOKBENCH_CA_FILE=cert)
        jid = t.submit(ep, SHORT)
        t.wait_state(jid, "succeeded", 90)
        res = assert_complete(t, jid, SHORT)
        assert res["status"] == "complete", res
        assert all(c["status"] == "valid" for c in res["cells"]), res["cells"]
        t.close(check=True)
        t.procs = []
        t.worker("w-notrust")
        jid = t.submit(ep, SHORT, max_attempts=1)
        t.wait_state(jid, "failed", 60)
        err = t.job(jid)["error"]
        assert "certificate" in err, err
        ok = True
    finally:
        t.close(check=ok)
