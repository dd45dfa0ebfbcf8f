"""The README, tried as a new user would: `make run`'s script brings the
service up on its embedded default, the quick-start lines run verbatim and
end with a finished job and its report, and Ctrl-C stops everything, the
database included; a second start finds the data again."""
import json
import os
import re
import signal
import subprocess

import harness
from harness import http, wait_until


def quickstart():
    with open(os.path.join(harness.ROOT, "README.md")) as f:
        text = f.read()
    m = re.search(r"<!-- quickstart -->\s*```sh\n(.*?)```\s*<!-- /quickstart -->", text, re.S)
    assert m, "README has no quick-start block"
    return m.group(1)


class Stack:
    """scripts/run.sh (what `make run` runs after deps and the build) on free
    ports, its var/ in the test's directory."""

    def __init__(self, ctx, var):
        self.port, self.pg_port, self.sim_port = (harness.free_port() for _ in range(3))
        env = dict(os.environ, TB_BIN_DIR=harness.BIN_DIR, TB_VAR_DIR=var,
                   TOKBENCH_LISTEN_PORT=str(self.port), TOKBENCH_PG_PORT=str(self.pg_port),
                   TOKBENCH_SIM_PORT=str(self.sim_port))
        env.pop("TOKBENCH_DATABASE_URL", None)
        self.log = open(os.path.join(ctx.tmp, "run-%d.log" % self.port), "wb")
        self.proc = subprocess.Popen(["scripts/run.sh"], cwd=harness.ROOT, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        ctx.cleanups.append(self.stop)
        self.base = "http://127.0.0.1:%d" % self.port
        wait_until(lambda: self.output().count("tokbench is running") >= 1, 60,
                   what="make run's banner")

    def output(self):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        """Ctrl-C: SIGINT to the whole process group, as a terminal does."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


def test_make_run_quickstart_and_ctrl_c(ctx):
    var = os.path.join(ctx.tmp, "var")
    stack = Stack(ctx, var)
    banner = stack.output()
    key = open(os.path.join(var, "admin.key")).read().strip()
    assert key.startswith("tkb_") and key in banner
    assert http("GET", stack.base + "/healthz")[0] == 200
    assert http("GET", stack.base + "/readyz")[0] == 200
    # The quick start, verbatim but for the port, from a directory whose var/
    # is this stack's.
    work = os.path.join(ctx.tmp, "user")
    os.makedirs(work)
    os.symlink(var, os.path.join(work, "var"))
    script = quickstart().replace("127.0.0.1:8080", "127.0.0.1:%d" % stack.port)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert '"state":"succeeded"' in out, out
    assert "## Speed test matrix" in out and "### Sustained decode" in out, out
    # the share link's Markdown, fetched with no key, is the report again
    assert out.count("## Speed test matrix") == 2, out
    assert "event: state" in out or '"state"' in out
    doc = open(os.path.join(work, "result.json")).read()
    assert '"cells"' in doc and '"valid"' in doc
    # the schedule it made, planned for 03:00 in Berlin
    assert '{"cron":"0 3 * * *","timezone":"Europe/Berlin","next_run_at":"' in out, out
    # issue 35: make run's key (var/signing.key) signed it, and the README's
    # verify line says so
    v = subprocess.run([harness.bin("tokbench"), "verify", os.path.join(work, "result.json"),
                        "--keys", stack.base + "/v1/signing-keys"], capture_output=True, text=True,
                       timeout=60)
    assert v.returncode == 0 and "good signature" in v.stdout, v.stdout + v.stderr
    assert oct(os.stat(os.path.join(var, "signing.key")).st_mode & 0o777) == "0o600"
    # Ctrl-C stops everything, the database included.
    assert stack.stop() == 0
    out = stack.output()
    assert "tokbench: stopped" in out
    assert http_down(stack.base)
    st = subprocess.run([os.path.join(harness.ROOT, "scripts", "tb-pg"), "status",
                         os.path.join(var, "pg")])
    assert st.returncode != 0, "the cluster still runs after Ctrl-C"
    # The next start finds its data (and its key) again.
    stack2 = Stack(ctx, var)
    assert key in stack2.output()
    # the demo endpoint follows the simulator to its new port
    st, _, body = http("GET", stack2.base + "/v1/endpoints",
                       headers={"Authorization": "Bearer " + key})
    eps = [e for e in json.loads(body)["endpoints"] if e["name"] == "demo-sim"]
    assert len(eps) == 1 and eps[0]["base_url"].endswith(":%d" % stack2.sim_port), eps
    st, _, body = http("GET", stack2.base + "/v1/jobs?label=try:quickstart",
                       headers={"Authorization": "Bearer " + key})
    assert st == 200 and b"succeeded" in body, body
    assert stack2.stop() == 0


def http_down(base):
    try:
        http("GET", base + "/healthz", timeout=2)
        return False
    except OSError:
        return True
