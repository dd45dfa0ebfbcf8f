"""Issue 13, finding 9 (a, b): secrets at the edges.  A key file
(--api-key-file) or a config file that sets a secret is refused when group
or others may read it, with the fix named; `tokbench submit` warns on
stderr when it sends the key over plain http:// to a host that is not
loopback.  Real binaries; no database is needed before the refusals."""
import os
import subprocess

import harness


def write(ctx, name, text, mode):
    path = os.path.join(ctx.tmp, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def run(args, env=None, timeout=60):
    e = {"PATH": os.environ.get("PATH", "")}
    e.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, env=e, timeout=timeout)


def test_key_files_readable_by_others_are_refused(ctx):
    for mode in (0o644, 0o640, 0o604):
        kf = write(ctx, "key-%o" % mode, "sk-endpoint-secret\n", mode)
        r = run([harness.bin("tokbench"), "run", "--url", "http://127.0.0.1:9",
                 "--api-key-file", kf, "--contexts", "1k", "--concurrency", "1"])
        assert r.returncode != 0 and "chmod 600" in r.stderr, r.stderr
        assert "sk-endpoint-secret" not in r.stderr + r.stdout
        r = run([harness.bin("tokbench"), "submit", "--preset", "p", "--api",
                 "http://127.0.0.1:9", "--api-key-file", kf])
        assert r.returncode == 2 and "chmod 600" in r.stderr, r.stderr
    # mode 0600 passes the check (and fails later, for another reason)
    kf = write(ctx, "key-600", "tkb_" + "A" * 40 + "\n", 0o600)
    r = run([harness.bin("tokbench"), "submit", "--preset", "p", "--api",
             "http://127.0.0.1:%d" % harness.free_port(), "--api-key-file", kf])
    assert r.returncode == 2 and "chmod" not in r.stderr, r.stderr
    assert "warning" not in r.stderr  # loopback: no warning


def test_plain_http_to_another_host_warns(ctx):
    kf = write(ctx, "key", "tkb_" + "A" * 40 + "\n", 0o600)
    # 0.0.0.0 is not loopback by name; connecting to it fails at once here
    r = run([harness.bin("tokbench"), "submit", "--preset", "p", "--api",
             "http://0.0.0.0:1", "--api-key-file", kf])
    assert r.returncode == 2
    assert "warning" in r.stderr and "plain http://" in r.stderr, r.stderr
    assert "tkb_" not in r.stderr
    for url in ("http://localhost:1", "http://127.0.0.2:1", "http://[::1]:1",
                "https://0.0.0.0:1"):
        r = run([harness.bin("tokbench"), "submit", "--preset", "p", "--api", url,
                 "--api-key-file", kf])
        assert "warning" not in r.stderr, (url, r.stderr)


def test_config_file_with_a_secret_must_be_private(ctx):
    text = ("TOKBENCH_DATABASE_URL=postgresql://127.0.0.1:%d/x\nTOKBENCH_DB_WAIT_MS=0\n"
            % harness.free_port())
    for binary in ("tokbench-api", "tokbench-worker"):
        conf = write(ctx, binary + ".conf", text, 0o644)
        r = run([harness.bin(binary), "--config", conf], timeout=60,
                env={"TOKBENCH_LISTEN_PORT": str(harness.free_port())})
        assert r.returncode == 2, (binary, r.returncode, r.stderr)
        assert "TOKBENCH_DATABASE_URL" in r.stderr and "chmod 600" in r.stderr, r.stderr
        assert "postgresql://" not in r.stderr
        os.chmod(conf, 0o600)
        r = run([harness.bin(binary), "--config", conf], timeout=60,
                env={"TOKBENCH_LISTEN_PORT": str(harness.free_port())})
        assert "chmod" not in r.stderr and r.returncode == 1, r.stderr
    # a file that sets no secret may be read by all
    conf = write(ctx, "plain.conf", "TOKBENCH_LOG_LEVEL=info\n", 0o644)
    r = run([harness.bin("tokbench-api"), "--config", conf],
            env={"TOKBENCH_DATABASE_URL": "postgresql://127.0.0.1:%d/x" % harness.free_port(),
                 "TOKBENCH_DB_WAIT_MS": "0", "TOKBENCH_LISTEN_PORT": str(harness.free_port())})
    assert "chmod" not in r.stderr and r.returncode == 1, r.stderr
