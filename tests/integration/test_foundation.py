"""Foundation: the PostgreSQL harness, migrations, health probes, config."""
import glob
import json
import os
import signal
import subprocess

import harness
from harness import http, wait_until, wait_http

SQL_FILES = sorted(glob.glob(os.path.join(harness.ROOT, "sql", "*.sql")))


def start_api(ctx, pg, extra_env=None):
    port = harness.free_port()
    env = {"TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
           "TOKBENCH_DB_WAIT_MS": "2000"}
    env.update(extra_env or {})
    proc = ctx.process("tokbench-api", [], env=env)
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api /healthz")
    return proc, base


def test_pg_harness_keeps_data_across_restart(ctx):
    pg = ctx.postgres(fresh=True)
    pg.psql("CREATE TABLE t (x int); INSERT INTO t VALUES (42)")
    pg.stop()
    pg.start()
    assert pg.psql("SELECT x FROM t").strip() == "42"
    # the socket directory is private to the cluster's owner
    run = os.path.join(os.path.realpath(pg.dir), "run")
    assert (os.stat(run).st_mode & 0o077) == 0


def test_health_and_ready(ctx):
    pg = ctx.postgres()
    _, base = start_api(ctx, pg)
    st, h, body = http("GET", base + "/healthz")
    assert st == 200 and json.loads(body)["status"] == "ok"
    assert h["content-type"].startswith("application/json")
    st, _, _ = http("GET", base + "/readyz")
    assert st == 200


def test_readyz_follows_the_database(ctx):
    pg = ctx.postgres(fresh=True)
    _, base = start_api(ctx, pg)
    assert http("GET", base + "/readyz")[0] == 200
    pg.stop()
    st, h, body = http("GET", base + "/readyz", timeout=15)
    assert st == 503
    assert h["content-type"] == "application/problem+json"
    assert json.loads(body)["status"] == 503
    assert http("GET", base + "/healthz")[0] == 200  # alive, not ready
    pg.start()
    wait_until(lambda: http("GET", base + "/readyz", timeout=15)[0] == 200, 20,
               what="readyz after restart")


def test_migrations_apply_once(ctx):
    pg = ctx.postgres(fresh=True)
    proc, _ = start_api(ctx, pg)
    rows = pg.psql("SELECT version, name FROM tb_schema_version ORDER BY version").split()
    assert len(rows) == len(SQL_FILES) and len(SQL_FILES) >= 1
    names = [r.split("|")[1] for r in rows]
    assert names == [os.path.basename(f)[:-4] for f in SQL_FILES]
    assert proc.stop() == 0
    assert '"migrations_applied":%d' % len(SQL_FILES) in proc.output()
    # A second start applies nothing and changes nothing.
    before = pg.psql("SELECT version, applied_at FROM tb_schema_version ORDER BY 1")
    proc2, _ = start_api(ctx, pg)
    assert proc2.stop() == 0
    assert '"migrations_applied":0' in proc2.output()
    assert pg.psql("SELECT version, applied_at FROM tb_schema_version ORDER BY 1") == before


def test_migrate_command_is_idempotent(ctx):
    pg = ctx.postgres(fresh=True)
    env = dict(os.environ, TOKBENCH_DATABASE_URL=pg.url)
    r1 = subprocess.run([harness.bin("tokbench"), "migrate"], env=env, capture_output=True, text=True)
    assert r1.returncode == 0, r1.stderr
    r2 = subprocess.run([harness.bin("tokbench"), "migrate"], env=env, capture_output=True, text=True)
    assert r2.returncode == 0, r2.stderr
    n = int(pg.psql("SELECT count(*) FROM tb_schema_version"))
    assert n == len(SQL_FILES)
    assert "0 applied" in r2.stdout


def test_bad_config_is_a_clear_error(ctx):
    r = subprocess.run([harness.bin("tokbench-api")], capture_output=True, text=True,
                       env={"PATH": os.environ.get("PATH", "")}, timeout=30)
    assert r.returncode == 2 and "TOKBENCH_DATABASE_URL" in r.stderr
    r = subprocess.run([harness.bin("tokbench-api")], capture_output=True, text=True, timeout=30,
                       env={"TOKBENCH_DATABASE_URL": "postgresql:///x", "TOKBENCH_LISTEN_PORT": "99999"})
    assert r.returncode != 0 and "TOKBENCH_LISTEN_PORT" in r.stderr
    conf = os.path.join(ctx.tmp, "api.conf")
    with open(conf, "w") as f:
        f.write("TOKBENCH_LISTEN_PORT=8080\nTOKBENCH_TYPO=1\n")
    r = subprocess.run([harness.bin("tokbench-api"), "--config", conf], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "TOKBENCH_TYPO" in r.stderr and "line 2" in r.stderr
    r = subprocess.run([harness.bin("tokbench-api"), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "TOKBENCH_LISTEN_PORT" in r.stdout


def test_unreachable_database_fails_start(ctx):
    port = harness.free_port()
    r = subprocess.run([harness.bin("tokbench-api")], capture_output=True, text=True, timeout=60,
                       env={"TOKBENCH_DATABASE_URL": "postgresql://127.0.0.1:%d/x" % harness.free_port(),
                            "TOKBENCH_LISTEN_PORT": str(port), "TOKBENCH_DB_WAIT_MS": "300"})
    assert r.returncode == 1 and "cannot connect to the database" in r.stderr


def test_sigterm_stops_cleanly(ctx):
    pg = ctx.postgres()
    proc, _ = start_api(ctx, pg)
    proc.signal(signal.SIGTERM)
    proc.proc.wait(20)
    assert proc.proc.returncode == 0
    assert '"msg":"stopping"' in proc.output()


def blocked_since_main(pid, timeout=30.0):
    """Waits until process pid blocks SIGTERM (the first thing main does)."""
    import time
    deadline = time.monotonic() + timeout
    bit = 1 << (signal.SIGTERM - 1)
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("SigBlk:") and int(line.split()[1], 16) & bit:
                        return
        except FileNotFoundError:
            raise AssertionError("the api exited before main blocked its signals")
        time.sleep(0.002)
    raise AssertionError("the api did not block SIGTERM within %.0f s" % timeout)


def test_signal_during_start_up_is_not_lost(ctx):
    """SIGTERM while the api is still starting (connecting, migrating,
    starting threads) stops it cleanly once it is up: no hang, exit 0."""
    import time
    pg = ctx.postgres()
    for delay in (0.05, 0.15, 0.3):
        port = harness.free_port()
        proc = ctx.process("tokbench-api", [], env={
            "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port)})
        # A signal that lands before main() runs (the loader, the sanitizers'
        # set-up: long on a loaded machine) kills any program; start-up, for
        # this test, begins when main has blocked SIGTERM, as /proc shows.
        blocked_since_main(proc.proc.pid)
        time.sleep(delay)
        proc.signal(signal.SIGINT)
        proc.signal(signal.SIGTERM)
        proc.proc.wait(30)
        assert proc.proc.returncode == 0, (delay, proc.output()[-2000:])
