"""Integration test harness: real binaries, a throwaway PostgreSQL cluster,
tokbench-sim, real HTTP over loopback.

A test module defines functions ``test_<name>(ctx)``.  ``ctx`` is one Context
per module (see runner.py): the processes and clusters it starts are torn down
when the module ends, whether its tests passed, failed or raised.

Standard library only.
"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import http.client as httpclient
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN_DIR = os.path.join(ROOT, os.environ.get("TB_BIN_DIR", "bin"))
VALGRIND = os.environ.get("TB_VALGRIND") == "1"
# An uninstrumented (release) build beside the sanitizer build: tests whose
# figures are timings run the simulator and the measuring client from it,
# since ASan slows both by more than the tolerances they check.  The same
# sources run instrumented in every other test.
REL_BIN_DIR = os.environ.get("TB_REL_BIN_DIR")
INSTRUMENTED = "san" in BIN_DIR or VALGRIND
TIMING_EXACT = bool(REL_BIN_DIR) or not INSTRUMENTED


class Skip(Exception):
    """Raised by a test that cannot run on this machine; runner.py prints it
    as TAP "ok N - name # SKIP reason" and scripts/run-tests.sh counts it as
    skipped, not passed."""


def bin(name):
    """Path of one of our binaries (honours TB_BIN_DIR)."""
    return os.path.join(BIN_DIR, name)


def timing_bin(name):
    """Path of a binary for timing-exact tests (uninstrumented when there is
    such a build, else the usual one)."""
    if REL_BIN_DIR:
        return os.path.join(ROOT, REL_BIN_DIR, name)
    return bin(name)


# Modules run two at a time (scripts/run_tests.py): each runner gets a slot
# (TB_PORT_SLOT of TB_PORT_SLOTS) and its own share of 10000-31999, below the
# kernel's ephemeral ports, so two modules never pick the same free port
# between the check here and the server's own bind.
PORT_LO, PORT_HI = 10000, 32000


def free_port():
    """A TCP port free on 127.0.0.1 right now (in this runner's slot)."""
    slots = int(os.environ.get("TB_PORT_SLOTS", "0") or 0)
    if slots <= 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    span = (PORT_HI - PORT_LO) // slots
    lo = PORT_LO + span * int(os.environ.get("TB_PORT_SLOT", "0"))
    for _ in range(1000):
        port = lo + random.randrange(span)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in %d-%d" % (lo, lo + span - 1))


def http(method, url, body=None, headers=None, timeout=10):
    """One HTTP request.  body: bytes, str, or a JSON-able object.
    Returns (status, headers with lower-case names, body bytes)."""
    u = urllib.parse.urlsplit(url)
    conn = httpclient.HTTPConnection(u.hostname, u.port, timeout=timeout)
    hdrs = dict(headers or {})
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
        hdrs.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode()
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    try:
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def http_json(method, url, body=None, headers=None, timeout=10):
    """Like http(), with the body decoded as JSON (None when empty)."""
    st, h, data = http(method, url, body, headers, timeout)
    return st, h, (json.loads(data) if data else None)


def wait_until(pred, timeout=10.0, interval=0.05, what="condition"):
    """Polls pred() until it returns a true value; returns it or raises.
    what names the condition in the error: a string, or a function called
    then (to say how things stood when the wait ran out)."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last_exc = e
        time.sleep(interval)
    if callable(what):
        what = what()
    raise AssertionError("timed out waiting for %s (%s)" % (what, last_exc))


def wait_http(url, timeout=15.0, status=None):
    """Waits until url answers over HTTP (any status, or the one given)."""
    def ok():
        st, _, _ = http("GET", url, timeout=2)
        return status is None or st == status
    return wait_until(ok, timeout, what=url)


class Process:
    """A started binary with its output in a log file."""

    def __init__(self, ctx, name, args, env=None, log_name=None, timing=False):
        self.name = name
        self.log_path = os.path.join(ctx.tmp, log_name or ("%s-%d.log" % (name, len(ctx.cleanups))))
        argv = [timing_bin(name) if timing else bin(name)] + list(args)
        if VALGRIND and not (timing and REL_BIN_DIR):
            argv = ["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
                    "--errors-for-leak-kinds=definite"] + argv
        full_env = dict(os.environ)
        if name in ("tokbench-api", "tokbench-worker"):
            # the egress policy refuses loopback by default (docs/deploy.md);
            # every endpoint of the tests is on 127.0.0.1, like make run's sim
            full_env.setdefault("TOKBENCH_EGRESS_ALLOW", "loopback")
        full_env.update(env or {})
        full_env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=full_env, cwd=ROOT, start_new_session=True)
        ctx.cleanups.append(self.stop)

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, timeout=20):
        """SIGTERM, then SIGKILL; returns the exit code."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
        return self.proc.returncode

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


class Postgres:
    """A throwaway cluster (scripts/tb-pg) in ctx.tmp on a free port."""

    def __init__(self, ctx, name="pg"):
        self.dir = os.path.join(ctx.tmp, name)
        self.port = free_port()
        self._tbpg("init")
        self.start()
        self.url = subprocess.check_output(
            [os.path.join(ROOT, "scripts", "tb-pg"), "url", self.dir, str(self.port)]).decode().strip()
        ctx.cleanups.append(self.stop)

    def _tbpg(self, *args):
        subprocess.run([os.path.join(ROOT, "scripts", "tb-pg"), args[0], self.dir] + list(args[1:]),
                       check=True, stdout=subprocess.DEVNULL)

    def start(self):
        self._tbpg("start", str(self.port))

    def stop(self):
        self._tbpg("stop")

    def psql(self, sql):
        """Runs SQL with psql; returns stdout (tuples only, unaligned)."""
        return subprocess.check_output(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-Atq",
                                        "-d", self.url, "-c", sql]).decode()


class Sim:
    """tokbench-sim on a free port."""

    def __init__(self, ctx, profile="tiny", flavour="vllm", args=(), env=None, timing=False):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        prof = profile if os.path.sep in profile else os.path.join(ROOT, "sim", "profiles", profile + ".json")
        self.proc = Process(ctx, "tokbench-sim",
                            ["--port", str(self.port), "--profile", prof, "--flavour", flavour] + list(args),
                            env=env, timing=timing)
        wait_until(self._up, 15, what="tokbench-sim on %d" % self.port)

    def _up(self):
        if not self.proc.alive():
            raise AssertionError("tokbench-sim exited:\n" + self.proc.output())
        st, _, _ = http("GET", self.url + "/health", timeout=2)
        return st in (200, 401)


class LlamaServer:
    """Debian's llama-server on CPU with the tiny model of make real-engine
    (scripts/real-engine.sh), on a free port.  Raises Skip, with the
    script's reason, where the machine cannot run it."""

    def __init__(self, ctx, slots=4, ctx_len=16384, threads=1, args=()):
        script = os.path.join(ROOT, "scripts", "real-engine.sh")
        probe = subprocess.run([script, "--probe"], capture_output=True, text=True)
        if probe.returncode != 0:
            raise Skip("cannot run llama.cpp here: " + (probe.stdout or probe.stderr).strip())
        prep = subprocess.run([script, "--prepare"], capture_output=True, text=True, timeout=900)
        if prep.returncode != 0:
            raise AssertionError("real-engine.sh --prepare failed:\n" + prep.stdout + prep.stderr)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.slots = slots
        self.log_path = os.path.join(ctx.tmp, "llama-server-%d.log" % len(ctx.cleanups))
        self.log = open(self.log_path, "wb")
        argv = [script, "--port", str(self.port), "--slots", str(slots), "--ctx", str(ctx_len),
                "--threads", str(threads), "--"] + list(args)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT,
                                     start_new_session=True)
        ctx.cleanups.append(self.stop)
        wait_until(self._up, 120, what="llama-server on %d" % self.port)

    def _up(self):
        if self.proc.poll() is not None:
            raise AssertionError("llama-server exited:\n" + self.output())
        st, _, _ = http("GET", self.url + "/health", timeout=2)
        return st == 200

    def output(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if not self.log.closed:
            self.log.close()


def make_key(pg, project, *args):
    """A key of project made with `tokbench keys create` (args: "--admin",
    "--scope", ...), checked to be a key."""
    r = subprocess.run([bin("tokbench"), "keys", "create", "--project", project] + list(args),
                       env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    key = r.stdout.strip()
    assert key.startswith("tkb_") and len(key) == 44 and "\n" not in key
    return key


class Api:
    """tokbench-api on a free port over pg, with master as its master key,
    no rate limit and debug logs (env adds or overrides settings); up when
    the ready path answers 200."""

    def __init__(self, ctx, pg, master, env=None, ready="/readyz"):
        self.port = free_port()
        e = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(self.port),
             "TOKBENCH_MASTER_KEY": master, "TOKBENCH_RATE_LIMIT": "0",
             "TOKBENCH_LOG_LEVEL": "debug"}
        e.update(env or {})
        self.proc = ctx.process("tokbench-api", [], env=e)
        self.base = "http://127.0.0.1:%d" % self.port
        wait_until(lambda: self.proc.alive() and http("GET", self.base + ready, timeout=2)[0] == 200,
                   20, what="api up")

    def req(self, method, path, key=None, body=None, headers=None, timeout=10):
        h = dict(headers or {})
        if key:
            h["Authorization"] = "Bearer " + key
        return http(method, self.base + path, body, h, timeout)

    def json(self, method, path, key=None, body=None, headers=None, timeout=10):
        st, hd, data = self.req(method, path, key, body, headers, timeout)
        return st, hd, (json.loads(data) if data else None)

    def stop(self):
        assert self.proc.stop() == 0, self.proc.output()[-3000:]


def service(ctx, master, project, worker_id, api_env=None, worker_env=None):
    """tokbench-api on a free port and one tokbench-worker over the module's
    cluster, and an admin key of project made with `tokbench keys create`:
    {pg, api, base, key, worker}."""
    pg = ctx.postgres()
    port = free_port()
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
           "TOKBENCH_MASTER_KEY": master, "TOKBENCH_RATE_LIMIT": "0"}
    env.update(api_env or {})
    api = ctx.process("tokbench-api", [], env=env)
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: api.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    r = subprocess.run([bin("tokbench"), "keys", "create", "--project", project, "--admin"],
                       env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_MASTER_KEY": master,
           "TOKBENCH_WORKER_ID": worker_id, "TOKBENCH_LEASE_S": "15", "TOKBENCH_HEARTBEAT_S": "2"}
    env.update(worker_env or {})
    worker = ctx.process("tokbench-worker", [], env=env)
    wait_until(lambda: '"msg":"worker ready"' in worker.output(), 20, what="worker ready")
    return {"pg": pg, "api": api, "base": base, "key": r.stdout.strip(), "worker": worker}


class Context:
    """Per-module fixture: a temporary directory and everything started in it."""

    def __init__(self, name):
        self.tmp = tempfile.mkdtemp(prefix="tb-%s-" % name)
        os.chmod(self.tmp, 0o755)  # the postgres user must reach its cluster
        self.cleanups = []
        self._pg = None

    def sim(self, profile="tiny", flavour="vllm", args=(), env=None, timing=False):
        """tokbench-sim; timing=True for tests that hold timings to a tolerance."""
        return Sim(self, profile, flavour, args, env, timing)

    def llama(self, **kw):
        """llama-server (LlamaServer): raises Skip where it cannot run."""
        return LlamaServer(self, **kw)

    def postgres(self, fresh=False):
        """The module's cluster (one per module unless fresh=True)."""
        if fresh:
            return Postgres(self, "pg-%d" % len(self.cleanups))
        if self._pg is None:
            self._pg = Postgres(self)
        return self._pg

    def process(self, name, args, env=None):
        return Process(self, name, args, env)

    def close(self, keep=False):
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - teardown must go on
                print("# cleanup error: %s" % e)
        self.cleanups = []
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
