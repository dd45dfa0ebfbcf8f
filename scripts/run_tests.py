#!/usr/bin/env python3
"""Runs the tests (scripts/run-tests.sh is its entry): the cmocka unit tests
(TB_UNIT_DIR) and the integration modules (tests/integration/test_*.py)
against the binaries in TB_BIN_DIR, and prints each job's TAP when the job
ends, then "N passed, N failed" (", N skipped" when a test could not run on
this machine: TAP "# SKIP").  Exit status 1 on any failure.

Two phases, so that the run takes what the machine has without bending a
timing:
1. the unit binaries and every module's plain tests (those not decorated
   @timing.timing_test), TB_JOBS at a time (default 2), longest first by
   tests/integration/durations.txt (what a full run here measured; a job it
   does not name counts as 30 s), each runner in its own port slot
   (harness.free_port);
2. the timing tests, one module at a time with nothing else running, as
   their tolerances were set.
A module with both kinds runs in both phases, each time in a fresh Context.

Settings (environment):
  TB_TESTS=pattern   only the files whose name contains pattern
  TB_SUITE=check     make check: no timing tests, no module that sets
                     SUITE = "full" (a container, a real engine, the
                     benches: the reason stands beside it), and none whose
                     plain tests took over TB_CHECK_MAX_S (45) seconds in
                     durations.txt (each is named when the run starts)
  TB_JOBS=N          jobs at once in phase 1 (1: one at a time; default 2,
                     3 for make check, which runs nothing timed)
  TB_VALGRIND=1      unit binaries under valgrind (the harness does the rest)
  TB_DURATIONS_OUT=f write each job's seconds to f, durations.txt's format
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTEG = os.path.join(ROOT, "tests", "integration")
DURATIONS = os.path.join(INTEG, "durations.txt")
sys.path.insert(0, INTEG)
import runner  # noqa: E402

VALGRIND = ["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite"]


class Job:
    """One process to run: a unit binary or one kind of a module's tests."""

    def __init__(self, key, title, argv, timing=False):
        self.key, self.title, self.argv, self.timing = key, title, argv, timing
        self.est = 0.0
        self.proc = self.out = self.slot = None
        self.t0 = self.secs = 0.0
        self.rc = 0


def durations():
    """durations.txt: "key seconds" per line, # comments."""
    out = {}
    try:
        with open(DURATIONS, encoding="utf-8") as f:
            for line in f:
                parts = line.split("#")[0].split()
                if len(parts) == 2:
                    out[parts[0]] = float(parts[1])
    except OSError:
        pass
    return out


def unit_jobs(pattern):
    udir = os.path.join(ROOT, os.environ.get("TB_UNIT_DIR", "build-san/tests"))
    vg = VALGRIND if os.environ.get("TB_VALGRIND") == "1" else []
    jobs = []
    for name in sorted(os.listdir(udir)) if os.path.isdir(udir) else []:
        path = os.path.join(udir, name)
        if name.startswith("test_") and os.access(path, os.X_OK) and pattern in path:
            jobs.append(Job("unit:" + name, "unit: " + name, vg + [path]))
    return jobs


def module_jobs(pattern, suite, est, left_out):
    py = sys.executable or "python3"
    cap = float(os.environ.get("TB_CHECK_MAX_S", "45") or 45)
    jobs = []
    for name in sorted(os.listdir(INTEG)):
        path = os.path.join("tests", "integration", name)
        if not (name.startswith("test_") and name.endswith(".py")) or pattern not in path:
            continue
        mod, tests = runner.collect(os.path.join(ROOT, path))
        if suite == "check" and getattr(sys.modules.get(mod), "SUITE", None) == "full":
            left_out.append("%s (SUITE = \"full\")" % name)
            continue
        if suite == "check" and est.get(name + ":plain", 0) > cap:
            left_out.append("%s (%.0f s)" % (name, est[name + ":plain"]))
            continue
        kinds = {runner.is_timing(fn) for _, fn in tests} or {False}
        for timing in sorted(kinds):
            if timing and suite == "check":
                continue
            kind = "timing" if timing else "plain"
            argv = [py, os.path.join(INTEG, "runner.py"), path, "--only", kind]
            jobs.append(Job("%s:%s" % (name, kind), "integration: %s (%s)" % (name, kind),
                            argv, timing))
    return jobs


def start(job, slot, slots):
    env = dict(os.environ, TB_PORT_SLOT=str(slot), TB_PORT_SLOTS=str(slots))
    job.out = tempfile.TemporaryFile(mode="w+")
    job.slot, job.t0 = slot, time.monotonic()
    job.proc = subprocess.Popen(job.argv, cwd=ROOT, env=env, stdout=job.out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def finish(job, log):
    """Prints the job's TAP (a crash that printed no "not ok" counts as a
    failure of its own) and keeps it for the summary."""
    job.rc = job.proc.returncode
    job.secs = time.monotonic() - job.t0
    job.out.seek(0)
    text = job.out.read()
    job.out.close()
    if job.rc != 0 and not any(l.startswith("not ok") for l in text.splitlines()):
        text += "not ok - %s exited with status %d\n" % (job.key, job.rc)
    chunk = "# %s (%.1f s)\n%s" % (job.title, job.secs, text)
    if not chunk.endswith("\n"):
        chunk += "\n"
    sys.stdout.write(chunk)
    sys.stdout.flush()
    log.append(job)
    return text


def run_pool(jobs, width, log, texts):
    """Runs jobs, width at a time, in the order given."""
    width = max(width, 1)
    pending, running, free = list(jobs), [], list(range(width))
    while pending or running:
        while pending and free:
            job = pending.pop(0)
            start(job, free.pop(0), width)
            running.append(job)
        done = [j for j in running if j.proc.poll() is not None]
        for j in done:
            running.remove(j)
            free.append(j.slot)
            texts.append(finish(j, log))
        if not done:
            time.sleep(0.1)


def main():
    pattern = os.environ.get("TB_TESTS", "")
    suite = os.environ.get("TB_SUITE", "all")
    width = int(os.environ.get("TB_JOBS", "3" if suite == "check" else "2") or 2)
    est = durations()
    left_out = []
    jobs = unit_jobs(pattern) + module_jobs(pattern, suite, est, left_out)
    if left_out:
        print("# make check leaves to make test: " + ", ".join(left_out), flush=True)
    for j in jobs:
        j.est = est.get(j.key, 5.0 if j.key.startswith("unit:") else 30.0)
    plain = sorted((j for j in jobs if not j.timing), key=lambda j: -j.est)
    timed = [j for j in jobs if j.timing]
    log, texts = [], []
    t0 = time.monotonic()
    run_pool(plain, width, log, texts)
    t1 = time.monotonic()
    run_pool(timed, 1, log, texts)
    t2 = time.monotonic()
    lines = "".join(texts).splitlines()
    skipped = sum(1 for l in lines if l.startswith("ok ") and "# SKIP" in l)
    passed = sum(1 for l in lines if l.startswith("ok ")) - skipped
    failed = sum(1 for l in lines if l.startswith("not ok"))
    slow = sorted(log, key=lambda j: -j.secs)[:8]
    print("# time: %.0f s (%d at once: %.0f s; timing tests alone: %.0f s); slowest: %s"
          % (t2 - t0, width, t1 - t0, t2 - t1,
             ", ".join("%s %.0f s" % (j.key, j.secs) for j in slow)))
    out = os.environ.get("TB_DURATIONS_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            for j in sorted(log, key=lambda j: j.key):
                f.write("%s %.1f\n" % (j.key, j.secs))
    if skipped:
        print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    else:
        print("%d passed, %d failed" % (passed, failed))
    bad = failed or any(j.rc != 0 for j in log) or passed == 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
