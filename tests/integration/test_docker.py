"""docker/: the image built and run for real, and what can be checked
without building it.

- test_image_built_and_run: scripts/docker-test.sh (make docker-test) builds
  docker/Dockerfile with podman from a local debootstrap base (no registry),
  checks with ldd that the runtime image carries every library the binaries
  link against, and runs the README's quick-start job to succeeded through
  api, worker and sim containers; SKIP where the machine cannot run
  containers (TB_DOCKER_TEST=0 skips it too).
- scripts/deps.sh is the one list: its build group is what the build stage
  installs (enough to compile: the owner of every .pc file the Makefile
  asks for), its runtime group what the runtime stage installs (the owner of
  every library the binaries link against); make deps installs build + dev.
- The build stage runs the Makefile's release build and the runtime stage
  copies exactly the binaries that build makes, and runs as a non-root user.
- compose.yaml parses as YAML and wires postgres, api, a scalable worker and
  a sim; the variables and options it passes are ones the binaries know.
- docker/entrypoint.sh migrates a real (throwaway) PostgreSQL and then execs
  its command; docker/healthcheck.sh tells a ready api from a closed port.
"""
import glob
import os
import re
import shlex
import subprocess
import time

import yaml  # python3-yaml (scripts/deps.sh)

import harness
from harness import wait_until

# make check leaves it out (scripts/run_tests.py): it builds the image from a
# debootstrap base, minutes of its own.
SUITE = "full"

DOCKER = os.path.join(harness.ROOT, "docker")
DOCKERFILE = os.path.join(DOCKER, "Dockerfile")
APPS = {"service": "tokbench-api", "worker": "tokbench-worker", "sim": "tokbench-sim",
        "cli": "tokbench"}


def dockerfile_stages():
    """[(stage name, [(instruction, argument text)])], continuations joined."""
    lines, cur = [], ""
    with open(DOCKERFILE) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not cur and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            lines.append(cur + line)
            cur = ""
    assert not cur, "dangling line continuation"
    stages = []
    for line in lines:
        instr, _, arg = line.strip().partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", arg.strip(), re.I)
            assert m, line
            stages.append((m.group(2) or m.group(1), [("FROM", m.group(1))]))
        else:
            assert stages, "instruction before FROM: " + line
            stages[-1][1].append((instr, arg.strip()))
    return stages


def makefile_targets():
    with open(os.path.join(harness.ROOT, "Makefile")) as f:
        return set(re.findall(r"^([a-zA-Z][\w-]*):", f.read(), re.M))


def deps_list(*groups):
    """The packages of scripts/deps.sh's groups (its --list)."""
    out = subprocess.check_output([os.path.join(harness.ROOT, "scripts", "deps.sh"), "--list"]
                                  + list(groups), text=True)
    return out.split()


def package_of(path):
    """The Debian package that owns a file (merged /usr: either spelling)."""
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0]
    raise AssertionError("no package owns " + path)


def deps_runs(stage, group):
    """The stage's RUN lines that install scripts/deps.sh's GROUP."""
    return [a for i, a in stage if i == "RUN" and re.search(r"deps\.sh %s(\s|$)" % group, a)]


def test_deps_groups_are_one_list(ctx):
    """make deps installs build + dev; the build group holds what compiling
    needs (make, the compiler, pkg-config and the package of every .pc file
    the Makefile asks pkg-config for), and no test tool."""
    default = deps_list()
    assert set(deps_list("build", "dev")) == set(default), default
    build = set(deps_list("build"))
    assert {"build-essential", "pkg-config"} <= build, build
    assert not build & {"postgresql", "valgrind", "chromium", "clang", "wrk", "libcmocka-dev"}, build
    with open(os.path.join(harness.ROOT, "Makefile")) as f:
        mk = f.read()
    pkgs = re.search(r"^PKGS\s*:=\s*(.*)$", mk, re.M).group(1).split()
    for pc in pkgs:
        path = subprocess.check_output(["pkg-config", "--variable=pcfiledir", pc], text=True).strip()
        owner = package_of(os.path.join(path, pc + ".pc"))
        assert owner in build, "%s.pc comes from %s, not in deps.sh build" % (pc, owner)
    assert "@scripts/deps.sh\n" in mk, "make deps runs scripts/deps.sh with no group"
    assert {"podman", "runc", "debootstrap", "buildah", "podman-compose"} <= set(deps_list("docker"))
    r = subprocess.run([os.path.join(harness.ROOT, "scripts", "deps.sh"), "--list", "nosuch"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown group" in r.stderr, r


def test_build_stage_installs_the_build_group_and_runs_make(ctx):
    stages = dockerfile_stages()
    assert len(stages) >= 2, "multi-stage build"
    build_name, build = stages[0]
    assert build[0][1] in ("debian:12", "debian:bookworm"), build[0]
    runs = [a for i, a in build if i == "RUN"]
    assert deps_runs(build, "build"), "the build stage installs deps.sh's build group: %s" % runs
    assert not deps_runs(build, "dev") and not any("make deps" in r for r in runs), runs
    makes = [shlex.split(r.replace('"$JOBS"', "2")) for r in runs if r.startswith("make ")]
    assert makes, "the build stage runs make"
    targets = makefile_targets()
    for argv in makes:
        for a in argv[1:]:
            assert a in targets or re.match(r"^(MODE|SANITIZE)=\w+$|^-j\d*$", a), \
                "make %s: not a Makefile target or knob" % a
    assert any("MODE=release" in argv for argv in makes), makes
    # What the release build makes is what the runtime stage copies.
    plan = subprocess.run(["make", "-n", "-B", "MODE=release", "all"], cwd=harness.ROOT,
                          capture_output=True, text=True, check=True).stdout
    built = set(re.findall(r"-o build-rel/bin/(\S+)", plan))
    expect = {b for d, b in APPS.items() if os.path.exists(os.path.join(harness.ROOT, d, "main.c"))}
    assert built == expect, (built, expect)
    runtime = stages[-1][1]
    copied = set()
    for instr, arg in runtime:
        if instr == "COPY" and arg.startswith("--from=%s " % build_name):
            copied |= set(re.findall(r"/src/build-rel/bin/(\S+)", arg))
    assert copied == built, (copied, built)
    # Every source directory the release build reads is copied into the stage.
    copied_dirs = set()
    for instr, arg in build:
        if instr == "COPY":
            copied_dirs |= {w.rstrip("/") for w in shlex.split(arg)[:-1]}
    read = set(re.findall(r"^\S*?(?:gcc|cc)\b.*?-c -o \S+ (\w+)/", plan, re.M))
    read |= {"scripts", "sql", "Makefile", "VERSION"}
    assert read <= copied_dirs, "the build stage does not copy %s" % (read - copied_dirs)


def test_runtime_stage_has_the_libraries_and_a_user(ctx):
    """Every library the binaries link against comes from a package of
    deps.sh's runtime group, which the runtime stage installs.  (The image
    itself is checked with ldd by make docker-test: test_image_built_and_run.)"""
    stages = dockerfile_stages()
    runtime = stages[-1][1]
    assert runtime[0][1] in ("debian:12-slim", "debian:bookworm-slim"), runtime[0]
    assert deps_runs(runtime, "runtime"), "the runtime stage installs deps.sh's runtime group"
    pkgs = set(deps_list("runtime"))
    # every direct NEEDED library of every binary comes from one of them
    needed = {}  # soname -> path the loader finds
    for b in APPS.values():
        path = harness.bin(b)
        if not os.path.exists(path):
            continue
        out = subprocess.check_output(["readelf", "-d", path]).decode()
        names = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out))
        ldd = subprocess.check_output(["ldd", path]).decode()
        for n in names:
            m = re.search(r"^\s*%s => (\S+)" % re.escape(n), ldd, re.M)
            assert m, "%s: %s not found by the loader" % (b, n)
            needed[n] = m.group(1)
    needed = {n: p for n, p in needed.items() if not re.match(r"lib(asan|ubsan)\.", n)}
    assert needed, "no binaries to inspect"
    base = {"libc6", "libgcc-s1"}  # in debian:12-slim already
    for lib, path in sorted(needed.items()):
        owner = package_of(path)
        assert owner in pkgs or owner in base, \
            "%s (package %s) is not in deps.sh's runtime group" % (lib, owner)
    users = [a for i, a in runtime if i == "USER"]
    assert users and not users[-1].split(":")[0] in ("root", "0"), users
    entry = [a for i, a in runtime if i == "ENTRYPOINT"]
    assert entry and "entrypoint.sh" in entry[-1]
    # the build context filter keeps local build outputs out
    with open(DOCKERFILE + ".dockerignore") as f:
        ignored = set(f.read().split())
    assert {"bin", "build", "build-san", "build-rel", "var", ".git"} <= ignored


def runtime_env(runtime):
    """The ENV of a stage: {name: value} (KEY=VALUE forms, quotes removed)."""
    env = {}
    for instr, arg in runtime:
        if instr == "ENV":
            for w in shlex.split(arg):
                k, eq, v = w.partition("=")
                assert eq, "ENV %s: use KEY=VALUE" % arg
                env[k] = v
    return env


def test_runtime_stage_serves_the_web_page(ctx):
    """The web/ files are copied into the image and TOKBENCH_WEB_DIR names
    them; the api knows the key (--help) and serves / from the directory it
    names, as it would in the container."""
    stages = dockerfile_stages()
    build_name, _ = stages[0]
    runtime = stages[-1][1]
    env = runtime_env(runtime)
    web_dir = env.get("TOKBENCH_WEB_DIR")
    assert web_dir and web_dir.startswith("/"), env
    copies = [shlex.split(a) for i, a in runtime if i == "COPY"]
    # from the build context (web/ needs no build) or from the build stage
    dests = [c[-1].rstrip("/") for c in copies
             if (c[0] == "--from=%s" % build_name and "/src/web/" in c[1:-1])
             or (not c[0].startswith("--") and "web/" in c[:-1])]
    assert dests == [web_dir.rstrip("/")], (copies, web_dir)
    assert os.path.exists(os.path.join(harness.ROOT, "web", "index.html"))
    h = help_text("tokbench-api")
    assert h is not None and "TOKBENCH_WEB_DIR" in h, h
    # The api serves / from the directory the variable names (a copy of web/
    # somewhere else than the repository, as in the image).
    # (a cluster of its own: the entrypoint test wants the module one bare)
    pg = ctx.postgres(fresh=True)
    copy = os.path.join(ctx.tmp, "share", "tokbench", "web")
    os.makedirs(copy)
    for n in os.listdir(os.path.join(harness.ROOT, "web")):
        src = os.path.join(harness.ROOT, "web", n)
        if os.path.isfile(src):
            with open(src, "rb") as f, open(os.path.join(copy, n), "wb") as g:
                g.write(f.read())
    with open(os.path.join(copy, "index.html"), "ab") as g:
        g.write(b"<!-- served from TOKBENCH_WEB_DIR -->\n")
    port = harness.free_port()
    proc = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_DB_WAIT_MS": "5000", "TOKBENCH_MASTER_KEY": "5c" * 32,
        "TOKBENCH_WEB_DIR": copy})
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and harness.http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    st, _, body = harness.http("GET", base + "/", timeout=10)
    assert st == 200 and b"served from TOKBENCH_WEB_DIR" in body, st
    assert proc.stop() == 0, proc.output()


def help_text(name):
    r = subprocess.run([harness.bin(name), "--help"], capture_output=True, text=True)
    return r.stdout + r.stderr if r.returncode == 0 else None


def test_compose_parses_and_wires_the_services(ctx):
    with open(os.path.join(DOCKER, "compose.yaml")) as f:
        doc = yaml.safe_load(f)
    svc = doc["services"]
    assert {"postgres", "api", "worker", "sim"} <= set(svc)
    for name in ("api", "worker", "sim"):
        b = svc[name]["build"]
        assert b["dockerfile"] == "docker/Dockerfile" and b["context"] == ".."
    # the worker scales: no fixed name, no published port
    assert "container_name" not in svc["worker"] and "ports" not in svc["worker"]
    for name in ("postgres", "api", "sim"):
        assert "healthcheck" in svc[name], name
    assert svc["api"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # the variables each service gets are keys its binary declares
    for name, binary in (("api", "tokbench-api"), ("worker", "tokbench-worker")):
        cmd = svc[name]["command"]
        assert cmd[0] == binary
        h = help_text(binary)
        if h is None:
            continue  # binary not built with --help yet
        for k in svc[name]["environment"]:
            assert k in h, "%s: %s is not one of its keys" % (binary, k)
    sim_cmd = svc["sim"]["command"]
    assert sim_cmd[0] == "tokbench-sim"
    h = help_text("tokbench-sim")
    for a in sim_cmd[1:]:
        if a.startswith("--"):
            assert a in h, "tokbench-sim has no option " + a
    prof = sim_cmd[sim_cmd.index("--profile") + 1]
    assert os.path.exists(os.path.join(harness.ROOT, "sim", "profiles", prof + ".json"))
    # the healthcheck and entrypoint scripts it names exist and are executable
    for s in ("entrypoint.sh", "healthcheck.sh"):
        p = os.path.join(DOCKER, s)
        assert os.access(p, os.X_OK), p


def entry_env(pg_url, **extra):
    env = dict(os.environ)
    env["PATH"] = harness.BIN_DIR + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["TOKBENCH_DATABASE_URL"] = pg_url
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.update(extra)
    return env


def test_entrypoint_migrates_then_execs(ctx):
    pg = ctx.postgres()
    n_sql = len(glob.glob(os.path.join(harness.ROOT, "sql", "*.sql")))
    ep = os.path.join(DOCKER, "entrypoint.sh")
    # a plain command does not migrate unless asked
    r = subprocess.run([ep, "sh", "-c", "echo ran"], env=entry_env(pg.url), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ran", r
    assert pg.psql("SELECT to_regclass('tb_schema_version') IS NULL").strip() == "t"
    r = subprocess.run([ep, "sh", "-c", "echo ran"], env=entry_env(pg.url, TOKBENCH_MIGRATE="1"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ran", r
    applied = int(pg.psql("SELECT count(*) FROM tb_schema_version"))
    assert 1 <= applied <= n_sql
    assert '"component":"entrypoint"' in r.stderr
    assert '"msg":"migrations: %d applied' % applied in r.stderr, r.stderr
    # twice is harmless: nothing more applied
    r = subprocess.run([ep, "true"], env=entry_env(pg.url, TOKBENCH_MIGRATE="1"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    assert '"msg":"migrations: 0 applied' in r.stderr, r.stderr
    assert int(pg.psql("SELECT count(*) FROM tb_schema_version")) == applied
    # no database URL: usage error; a database that never answers: 1 after the wait
    env = entry_env(pg.url)
    del env["TOKBENCH_DATABASE_URL"]
    r = subprocess.run([ep, "tokbench-worker"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    dead = "postgresql://nobody@127.0.0.1:%d/x?connect_timeout=1" % harness.free_port()
    t0 = time.monotonic()
    r = subprocess.run([ep, "tokbench-api"], env=entry_env(dead, TOKBENCH_DB_WAIT_S="1"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    assert time.monotonic() - t0 < 30


def test_entrypoint_execs_the_api_and_healthcheck_sees_it(ctx):
    pg = ctx.postgres()
    port = harness.free_port()
    ep = os.path.join(DOCKER, "entrypoint.sh")
    hc = os.path.join(DOCKER, "healthcheck.sh")
    log = open(os.path.join(ctx.tmp, "entrypoint-api.log"), "wb")
    p = subprocess.Popen([ep], env=entry_env(pg.url, TOKBENCH_LISTEN_PORT=str(port),
                                             TOKBENCH_DB_WAIT_MS="2000"),
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop():
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()
    ctx.cleanups.append(stop)
    wait_until(lambda: subprocess.run([hc, str(port), "/readyz"]).returncode == 0, 30,
               what="healthcheck.sh on the api")
    # exec: the entrypoint's own process became tokbench-api
    exe = os.readlink("/proc/%d/exe" % p.pid)
    assert os.path.basename(exe) == "tokbench-api", exe
    assert subprocess.run([hc, str(port), "/no-such-path"]).returncode == 1
    assert subprocess.run([hc, str(harness.free_port())]).returncode == 1
    # SIGTERM reaches the api itself and it exits cleanly
    p.terminate()
    assert p.wait(20) == 0


def test_healthcheck_sees_the_sim(ctx):
    sim = ctx.sim()
    hc = os.path.join(DOCKER, "healthcheck.sh")
    assert subprocess.run([hc, str(sim.port), "/health"]).returncode == 0


def test_image_built_and_run(ctx):
    """make docker-test, where this machine can run containers."""
    if os.environ.get("TB_DOCKER_TEST") == "0":
        raise harness.Skip("docker-test: TB_DOCKER_TEST=0")
    if harness.VALGRIND:
        raise harness.Skip("docker-test: not under valgrind (the image holds its own build)")
    script = os.path.join(harness.ROOT, "scripts", "docker-test.sh")
    probe = subprocess.run([script, "--probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise harness.Skip("docker-test: this machine cannot run containers: %s"
                           % probe.stdout.strip())
    log = os.path.join(ctx.tmp, "docker-test.log")
    with open(log, "w") as f:
        r = subprocess.run([script], stdout=f, stderr=subprocess.STDOUT, timeout=1800)
    with open(log) as f:
        out = f.read()
    for line in out.splitlines():
        if line.startswith("docker-test:"):
            print("# " + line, flush=True)
    assert r.returncode == 0, out[-6000:]
    assert "every library found (ldd)" in out, out[-3000:]
    last = out.strip().splitlines()[-1]
    assert re.match(r"docker-test: job \S+ succeeded", last), last
