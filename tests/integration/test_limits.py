"""Issue 13, finding 7: connection-level abuse.  A real tokbench-api on a
real PostgreSQL, spoken to over raw sockets where the point is what a
client does not send: the per-address connection cap, the header timeout,
the small body cap before a valid key, the per-key caps on event streams
and long-polls, and request metrics that junk methods and paths cannot
fill."""
import json
import re
import socket
import threading
import time

import harness
from harness import wait_until
from test_api import Api, make_key, new_endpoint, submit

STATE = {}


def setup(ctx):
    if not STATE:
        pg = ctx.postgres()
        STATE.update(pg=pg, alpha=make_key(pg, "alpha", "--admin"),
                     alpha2=make_key(pg, "alpha", "--admin"))
    return STATE


def connect(api, src="127.0.0.1", timeout=5):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", api.port))
    return s


def recv_all(s, limit=1 << 20):
    """Everything until the peer closes (or the socket's timeout)."""
    out = b""
    try:
        while len(out) < limit:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        out += b"<timeout>"
    except ConnectionResetError:
        out += b"<reset>"
    return out


def alive(c):
    """True while the server keeps c open without answering."""
    c.setblocking(False)
    try:
        c.recv(16)
        return False  # closed (or answered)
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        c.setblocking(True)
        c.settimeout(5)


def head_of(s, timeout=5):
    """Reads up to the end of a response head; (status, lower-case headers)."""
    s.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(4096)
        if not b:
            break
        buf += b
    head = buf.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    if not head or not head[0].startswith("HTTP/"):
        return None, {}, buf
    hdrs = {}
    for line in head[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return int(head[0].split()[1]), hdrs, buf.split(b"\r\n\r\n", 1)[1]


def test_per_address_cap(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_MAX_CONNECTIONS_PER_IP": "4",
                             "TOKBENCH_HEADER_TIMEOUT_S": "30"})
    def half_head():
        c = connect(api)
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        return c
    # fill the address's places with connections that send half a head and
    # stop (slowloris); a place may still be held for a moment by a closed
    # connection of the start-up check, so refusals before 4 are retried
    held = []
    deadline = time.monotonic() + 15
    while True:
        c = half_head()
        time.sleep(0.2)
        if alive(c):
            held.append(c)
            assert len(held) <= 4, "a 5th connection from one address was kept"
            continue
        c.close()
        if len(held) == 4:
            break
        assert time.monotonic() < deadline, "only %d places" % len(held)
        time.sleep(0.3)
    # one more from the same address: refused, no answer
    extra = connect(api)
    try:
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = recv_all(extra)
    except (BrokenPipeError, ConnectionResetError):
        got = b""
    assert not got.startswith(b"HTTP/1.1 200"), got[:80]
    extra.close()
    # another address still gets in, at once
    other = connect(api, "127.0.0.2")
    t0 = time.monotonic()
    other.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    st, _, _ = head_of(other)
    assert st == 200 and time.monotonic() - t0 < 2.0
    other.close()
    # a held one given back frees a place for its address
    held.pop().close()
    def again():
        c = connect(api)
        try:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return head_of(c)[0] == 200
        finally:
            c.close()
    wait_until(again, 5, what="a place again after a close")
    for c in held:
        c.close()


def test_header_timeout(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_HEADER_TIMEOUT_S": "1",
                             "TOKBENCH_IDLE_TIMEOUT_S": "60"})
    # silent from the start: closed after about a second, not 120
    c = connect(api, timeout=10)
    t0 = time.monotonic()
    got = recv_all(c)
    assert b"<timeout>" not in got and time.monotonic() - t0 < 5, got[:80]
    c.close()
    # half a head, then silence: closed too
    c = connect(api, timeout=10)
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    t0 = time.monotonic()
    got = recv_all(c)
    assert b"<timeout>" not in got and time.monotonic() - t0 < 5
    c.close()
    # kept alive after a request: the short limit again
    c = connect(api, timeout=10)
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    st, _, _ = head_of(c)
    assert st == 200
    t0 = time.monotonic()
    recv_all(c)
    assert time.monotonic() - t0 < 5
    c.close()


def test_small_body_before_the_key(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"])
    def announce(key, length, path="/v1/jobs"):
        c = connect(api, timeout=5)
        try:
            h = "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" % path
            if key:
                h += "Authorization: Bearer %s\r\n" % key
            h += "Content-Length: %d\r\n\r\n" % length
            c.sendall(h.encode())
            return head_of(c)  # the body is never sent
        except socket.timeout:
            return None, {}, b""
        finally:
            c.close()
    # no key, a body announced: answered on the head, nothing read
    st, h, _ = announce(None, 100000)
    assert st == 401, st
    st, _, _ = announce("tkb_" + "A" * 40, 100000)
    assert st == 401, st
    # no such route, a body over the small cap: 413 naming it
    st, _, body = announce(None, 100000, "/v1/nothing")
    assert st == 413, st
    # a valid key: the full cap applies (the body is awaited: no answer yet)
    st, _, _ = announce(s["alpha"], 100000)
    assert st is None
    st, _, _ = announce(s["alpha"], 2 * 1024 * 1024)
    assert st == 413
    # a real body over the small cap with a valid key is read and judged
    big = {"endpoint_id": "00000000-0000-4000-8000-000000000000",
           "labels": {"pad": "x" * 200}, "description": "y" * 6000}
    st, _, p = api.json("POST", "/v1/jobs", s["alpha"], big)
    assert st in (404, 422), (st, p)
    # a chunked body without a key stops at the small cap
    c = connect(api, timeout=5)
    c.sendall(b"POST /v1/nothing HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        for _ in range(4):
            c.sendall(b"1000\r\n" + b"a" * 4096 + b"\r\n")
        c.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    st, _, _ = head_of(c)
    assert st == 413
    c.close()
    # hooks: an unknown hook reads no more than the small cap
    st, _, _ = announce(None, 100000, "/v1/hooks/00000000-0000-4000-8000-000000000000")
    assert st == 413


def sse_open(api, key, job_id):
    c = connect(api, timeout=10)
    c.sendall(("GET /v1/jobs/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
               % (job_id, key)).encode())
    st, h, rest = head_of(c)
    return c, st, h, rest


def test_stream_caps_per_key(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_SSE_PER_KEY": "2", "TOKBENCH_WAIT_PER_KEY": "2",
                             "TOKBENCH_SSE_PING_S": "1"})
    ep = new_endpoint(api, s["alpha"], "limits-ep")
    job = submit(api, s["alpha"], ep["id"])  # no worker: it stays queued
    a = [sse_open(api, s["alpha"], job["id"]) for _ in range(2)]
    assert all(st == 200 for _, st, _, _ in a), [x[1] for x in a]
    c, st, h, rest = sse_open(api, s["alpha"], job["id"])
    assert st == 429 and h["content-type"] == "application/problem+json", (st, h)
    assert int(h["retry-after"]) >= 1
    c.settimeout(5)
    while len(rest) < int(h.get("content-length", "0")):
        rest += c.recv(4096)
    p = json.loads(rest)
    assert p["limit"] == "TOKBENCH_SSE_PER_KEY" and "TOKBENCH_SSE_PER_KEY=2" in p["detail"], p
    c.close()
    # the cap is the key's: another key of the same project still streams
    b, st, _, _ = sse_open(api, s["alpha2"], job["id"])
    assert st == 200
    b.close()
    # a stream given back frees its place (seen at the next ping)
    a.pop()[0].close()
    def again():
        c2, st2, _, _ = sse_open(api, s["alpha"], job["id"])
        c2.close()
        return st2 == 200
    wait_until(again, 10, what="an SSE place again")
    for x in a:
        x[0].close()
    # long-polls: two wait, the third is refused at once
    out = []
    def poll():
        out.append(api.req("GET", "/v1/jobs/%s?wait=3&since=0" % job["id"], s["alpha"], timeout=20)[0])
    ts = [threading.Thread(target=poll) for _ in range(2)]
    for t in ts:
        t.start()
    time.sleep(0.8)
    st, h, p = api.json("GET", "/v1/jobs/%s?wait=3&since=0" % job["id"], s["alpha"])
    assert st == 429 and p["limit"] == "TOKBENCH_WAIT_PER_KEY" and "retry-after" in h, (st, p)
    for t in ts:
        t.join()
    assert out == [200, 200], out
    # after they ended, the key may wait again; a plain GET never counted
    assert api.req("GET", "/v1/jobs/%s?wait=1&since=0" % job["id"], s["alpha"])[0] == 200
    assert api.req("GET", "/v1/jobs/%s" % job["id"], s["alpha"])[0] == 200


def test_metrics_labels_bounded(ctx):
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_METRICS_TOKEN": "scrape-me"})
    for i in range(60):
        c = connect(api)
        c.sendall(("JUNK%d /random/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                   % (i, i)).encode())
        recv_all(c)
        c.close()
        api.req("GET", "/nope/%d" % i)
    st, _, body = api.req("GET", "/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert st == 200
    text = body.decode()
    series = [l for l in text.splitlines() if l.startswith("tokbench_http_requests_total{")]
    methods = set(re.findall(r'method="([^"]*)"', "\n".join(series)))
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}, methods
    assert "other" in methods
    assert len(series) < 20, series
    assert not any("JUNK" in l or "/random/" in l or "/nope/" in l for l in text.splitlines())


# ------------------------------- issue 27, finding 1: limits per project

def child_keys(api, admin, n):
    keys = []
    for i in range(n):
        st, _, k = api.json("POST", "/v1/keys", admin, {"name": "child-%d" % i,
                                                         "scopes": ["read"]})
        assert st == 201, (st, k)
        keys.append(k["key"])
    return keys


def test_request_rate_per_project_across_child_keys(ctx):
    """Ten child keys of one project, each well within its own rate, share
    the project's: together they get no more than its burst plus its rate
    (they got ten times that: keys are free).  Another project is not
    slowed."""
    s = setup(ctx)
    pg = s["pg"]
    api = Api(ctx, pg, {"TOKBENCH_RATE_LIMIT": "50", "TOKBENCH_RATE_BURST": "60",
                        "TOKBENCH_RATE_LIMIT_PROJECT": "20", "TOKBENCH_RATE_BURST_PROJECT": "20"})
    admin = make_key(pg, "rate-p", "--admin")
    other = make_key(pg, "rate-q", "--admin")
    keys = child_keys(api, admin, 10)
    time.sleep(1.2)  # the project's bucket full again
    codes, lock = [], threading.Lock()

    def burst(k):
        for _ in range(30):
            st, h, body = api.req("GET", "/v1/jobs", k)
            with lock:
                codes.append((st, h, body))
    t0 = time.monotonic()
    ts = [threading.Thread(target=burst, args=(k,)) for k in keys]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - t0
    ok = sum(1 for c in codes if c[0] == 200)
    limited = [c for c in codes if c[0] == 429]
    assert len(codes) == 300 and ok + len(limited) == 300, [c[0] for c in codes]
    assert ok <= 20 + 20 * elapsed + 5, (ok, elapsed)
    p = json.loads(limited[0][2])
    assert p["limit"] == "TOKBENCH_RATE_LIMIT_PROJECT", p
    assert "TOKBENCH_RATE_LIMIT_PROJECT=20" in p["detail"] and int(limited[0][1]["retry-after"]) >= 1
    # another project has its own bucket
    assert api.req("GET", "/v1/jobs", other)[0] == 200
    api.proc.stop()


def test_stream_caps_per_project(ctx):
    """Event streams and long-polls are capped per project as well as per
    key: a second key of the project does not get a second allowance."""
    s = setup(ctx)
    pg = s["pg"]
    api = Api(ctx, pg, {"TOKBENCH_SSE_PER_KEY": "2", "TOKBENCH_SSE_PER_PROJECT": "3",
                        "TOKBENCH_WAIT_PER_KEY": "2", "TOKBENCH_WAIT_PER_PROJECT": "3",
                        "TOKBENCH_SSE_PING_S": "1"})
    admin = make_key(pg, "streams-p", "--admin")
    k1, k2 = child_keys(api, admin, 2)
    other = make_key(pg, "streams-q", "--admin")
    ep = new_endpoint(api, admin, "streams-ep")
    job = submit(api, admin, ep["id"])  # no worker: it stays queued
    open_ = [sse_open(api, k1, job["id"]) for _ in range(2)] + [sse_open(api, k2, job["id"])]
    assert [x[1] for x in open_] == [200, 200, 200]
    c, st, h, rest = sse_open(api, k2, job["id"])
    assert st == 429, (st, h)
    c.settimeout(5)
    while len(rest) < int(h.get("content-length", "0")):
        rest += c.recv(4096)
    p = json.loads(rest)
    assert p["limit"] == "TOKBENCH_SSE_PER_PROJECT" and "TOKBENCH_SSE_PER_PROJECT=3" in p["detail"], p
    c.close()
    # another project's job streams
    ep2 = new_endpoint(api, other, "streams-ep2")
    job2 = submit(api, other, ep2["id"])
    b, st, _, _ = sse_open(api, other, job2["id"])
    assert st == 200
    b.close()
    for x in open_:
        x[0].close()
    # long-polls: three of the project wait, the fourth (another key) is refused
    out = []

    def poll(k):
        out.append(api.req("GET", "/v1/jobs/%s?wait=3&since=0" % job["id"], k, timeout=20)[0])
    ts = [threading.Thread(target=poll, args=(k,)) for k in (k1, k1, k2)]
    wait_until(lambda: all(api.req("GET", "/v1/jobs/%s?wait=1&since=0" % job["id"], k)[0] == 200
                           for k in (k1, k2)), 15, what="stream places given back")
    for t in ts:
        t.start()
    time.sleep(0.8)
    st, h, p = api.json("GET", "/v1/jobs/%s?wait=3&since=0" % job["id"], admin)
    assert st == 429 and p["limit"] == "TOKBENCH_WAIT_PER_PROJECT" and "retry-after" in h, (st, p)
    for t in ts:
        t.join()
    assert out == [200, 200, 200], out
    api.proc.stop()


def test_keys_per_project_capped(ctx):
    """TOKBENCH_LIMIT_KEYS live keys per project (an admin key minted 40 in a
    row): the next is 429 naming the setting, also under concurrent
    creations; a revoked key frees its place; another project is not
    concerned."""
    s = setup(ctx)
    pg = s["pg"]
    api = Api(ctx, pg, {"TOKBENCH_LIMIT_KEYS": "6", "TOKBENCH_RATE_LIMIT": "0"})
    admin = make_key(pg, "keys-p", "--admin")
    out, lock = [], threading.Lock()

    def mint(i):
        r = api.json("POST", "/v1/keys", admin, {"name": "k%d" % i})
        with lock:
            out.append(r)
    ts = [threading.Thread(target=mint, args=(i,)) for i in range(12)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    made = [r[2] for r in out if r[0] == 201]
    refused = [r for r in out if r[0] != 201]
    assert len(made) == 5, [r[0] for r in out]  # the admin key is the sixth
    assert all(r[0] == 429 for r in refused), [r[0] for r in refused]
    p = refused[0][2]
    assert p["setting"] == "TOKBENCH_LIMIT_KEYS" and p["max"] == 6, p
    assert "TOKBENCH_LIMIT_KEYS=6" in p["detail"] and "retry-after" in refused[0][1], p
    n = pg.psql("SELECT count(*) FROM api_keys k JOIN projects p ON p.id = k.project_id "
                "WHERE p.name = 'keys-p' AND k.revoked_at IS NULL").strip()
    assert n == "6", n
    st, _, _ = api.json("DELETE", "/v1/keys/" + made[0]["id"], admin)
    assert st == 200
    st, _, k = api.json("POST", "/v1/keys", admin, {"name": "again"})
    assert st == 201, k
    other = make_key(pg, "keys-q", "--admin")
    st, _, k = api.json("POST", "/v1/keys", other, {"name": "q1"})
    assert st == 201, k
    api.proc.stop()


# --------------------------- issue 27, finding 2: a budget new clients enter

def test_busy_head_timeout_above_the_high_water_mark(ctx):
    """Above 3/4 of TOKBENCH_MAX_CONNECTIONS, a connection that has sent no
    request head gets TOKBENCH_HEADER_TIMEOUT_BUSY_S (1 s here) instead of
    TOKBENCH_HEADER_TIMEOUT_S (30 s): connections from many addresses that
    send nothing cannot hold the budget against new clients (they held it
    for the whole head timeout).  Below the mark nothing changes."""
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_MAX_CONNECTIONS": "40", "TOKBENCH_HEADER_TIMEOUT_S": "30",
                             "TOKBENCH_HEADER_TIMEOUT_BUSY_S": "1", "TOKBENCH_CONNECTIONS_RESERVE": "0",
                             "TOKBENCH_MAX_CONNECTIONS_PER_IP": "4"})
    time.sleep(0.5)  # the start-up check's connection gone
    idle = []
    for i in range(36):  # 9 addresses at their cap of 4
        idle.append(connect(api, "127.0.1.%d" % (i // 4 + 1)))
        time.sleep(0.02)
    time.sleep(3.5)
    kept = [c for c in idle if alive(c)]
    assert len(kept) == 30, len(kept)  # the 6 above the mark (30 of 40) were closed
    # a client with a key gets in and is answered at once
    t0 = time.monotonic()
    st, _, _ = api.json("GET", "/v1/jobs", s["alpha"])
    assert st == 200 and time.monotonic() - t0 < 1.0
    for c in idle:
        c.close()
    api.proc.stop()


def test_reserve_lets_a_new_client_in(ctx):
    """Many addresses each at their cap hold every connection the api may
    have, and never send a head; the busy head timeout is off, the head
    timeout 30 s.  At TOKBENCH_MAX_CONNECTIONS less
    TOKBENCH_CONNECTIONS_RESERVE the oldest connection without a request
    head is shut down, so a client with a key still gets in, and a
    long-poll in progress, the oldest connection of all, is never the one
    closed.  (Without the reserve the client is refused until a head
    timeout frees a place.)"""
    s = setup(ctx)
    api = Api(ctx, s["pg"], {"TOKBENCH_MAX_CONNECTIONS": "40", "TOKBENCH_HEADER_TIMEOUT_S": "30",
                             "TOKBENCH_HEADER_TIMEOUT_BUSY_S": "0",
                             "TOKBENCH_MAX_CONNECTIONS_PER_IP": "4",
                             "TOKBENCH_CONNECTIONS_RESERVE": "4",
                             "TOKBENCH_METRICS_TOKEN": "scrape-me"})
    ep = new_endpoint(api, s["alpha"], "reserve-ep")
    job = submit(api, s["alpha"], ep["id"])  # no worker: it stays queued
    time.sleep(0.5)  # the set-up's connections gone
    polled = []
    def poll():
        polled.append(api.req("GET", "/v1/jobs/%s?wait=8&since=0" % job["id"], s["alpha"],
                              timeout=30)[0])
    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.5)  # its head is in: the oldest connection, with a request in progress
    idle = []
    for i in range(44):  # 11 addresses at their cap of 4: more than the api may hold
        try:
            idle.append(connect(api, "127.0.2.%d" % (i // 4 + 1)))
        except OSError:
            pass
        time.sleep(0.02)
    time.sleep(0.5)
    kept = [c for c in idle if alive(c)]
    # at most the limit less the reserve (the long-poll one of them) stay open
    assert len(kept) <= 40 - 4, len(kept)
    st, _, _ = api.json("GET", "/v1/jobs", s["alpha"])
    assert st == 200, st
    t.join(30)
    assert polled == [200], polled  # the long-poll ran its whole wait and was answered
    st, _, body = api.req("GET", "/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert st == 200
    n = [float(l.split()[-1]) for l in body.decode().splitlines()
         if l.startswith("tokbench_api_connections_evicted_total")]
    assert n and n[0] >= 44 - 36, n
    for c in idle:
        c.close()
    api.proc.stop()
