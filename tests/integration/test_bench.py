"""Every `make bench-*` target at a small size, so that none can rot unseen.

`make bench` (bench/run.sh: every bench/bench_*.sh) and `make bench-shards`
(bench/bench_shards.sh) run here against the release binaries of make test
(TB_REL_BIN_DIR), with windows of a second or two and few streams, and
BENCH_FLOORS=0: a speed floor missed on this loaded machine is printed but
does not fail (speed is measured by make bench, never asserted in a test);
a bench that cannot build, start, run its job or print its table fails.
`make bench-verdicts` is bench/bench_verdicts.sh, which bench/run.sh runs;
`make bench-history` is bench/bench_history.sh (400 jobs here, not 100,000);
`make bench-schedules` is bench/bench_schedules.sh (one slot here, not ten).
Each check names the figure its bench must print: a bench whose row went
missing, or printed "failed", fails here.
Before this module, bench_engine and bench_firehose had stopped linking
(libtokbench.a had taken zlib) and bench_shards died of "Argument list too
long" (a cell on python3's command line); nothing ran them.
"""
import os
import subprocess

import harness

# make check leaves it out (scripts/run_tests.py): minutes of benchmarks.
SUITE = "full"

SMALL = {
    "BENCH_FLOORS": "0",
    "BENCH_ENGINE_CFGS": "128:1 128:1:epoll 128:1:curl",
    "BENCH_SECONDS": "1", "BENCH_BASE_RUNS": "1", "BENCH_SERIES_RUNS": "1",
    "SIM_BENCH_SECONDS": "1", "SIM_BENCH_RUNS": "1", "SIM_BENCH_SCENARIOS": "128:20",
    "BENCH_FIREHOSE_STREAMS": "16", "BENCH_OAI_ITERS": "20000", "BENCH_OAI_RUNS": "1",
    "BENCH_API_SECONDS": "1", "BENCH_API_JOBS": "2", "BENCH_QUEUE_JOBS": "5",
    "BENCH_PROBE_N": "20", "BENCH_LIMITS_N": "20", "BENCH_LIMITS_SECONDS": "1",
    "BENCH_RATE_RPS": "20", "BENCH_RATE_SECONDS": "2",
    "BENCH_SHARDS_COUNTS": "1 2", "BENCH_SHARDS_STREAMS": "32", "BENCH_SHARDS_RATE": "20",
    "BENCH_HISTORY_JOBS": "400", "BENCH_HISTORY_SECONDS": "1", "BENCH_HISTORY_CONNS": "10",
    "BENCH_HISTORY_TEMPLATES": "1", "BENCH_HISTORY_CELL_S": "0.2",
    "BENCH_SCHED_SLOTS": "1",
}

# bench: a line each must print (its table's figures)
FIGURES = {
    "bench_sim": "sim_tokens_per_s ",
    "bench_engine": "median on ",
    "bench_firehose": "SSE events / CPU-second",
    "bench_oai": "chunk scanner, CPU ns per chunk",
    "bench_api": "GET /v1/jobs/{id}",
    "bench_queue": "submit-to-start:",
    "bench_probe": "healthz under",
    "bench_verdicts": "verdict_false_alarm_rate ",
    "bench_limits": "1,000 clients / 100 clients throughput",
    "bench_rate": "floors (issue 15)",
}


def is_positive(text):
    try:
        return float(text) > 0
    except ValueError:
        return False


def uring_allowed():
    """False where this kernel refuses io_uring to us (the bench then reads by epoll)."""
    try:
        return open("/proc/sys/kernel/io_uring_disabled").read().strip() == "0"
    except OSError:
        return True


def rel_bin_dir():
    d = os.environ.get("TB_REL_BIN_DIR") or os.environ.get("TB_BIN_DIR", "bin")
    if not os.path.isfile(os.path.join(harness.ROOT, d, "tokbench-api")):
        raise harness.Skip("no release binaries in %s (make MODE=release)" % d)
    return d


def run(script, timeout):
    env = dict(os.environ, TB_BIN_DIR=rel_bin_dir(), **SMALL)
    r = subprocess.run([os.path.join(harness.ROOT, "bench", script)], cwd=harness.ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def sections(out):
    """bench/run.sh's output by "== name" section."""
    got, name = {}, None
    for line in out.splitlines():
        if line.startswith("== "):
            name = line[3:].strip()
            got[name] = []
        elif name:
            got[name].append(line)
    return got


def test_make_bench_small(ctx):
    rc, out = run("run.sh", 1500)
    got = sections(out)
    for name, figure in FIGURES.items():
        assert name in got, "%s did not run:\n%s" % (name, out[-3000:])
        text = "\n".join(got[name])
        assert "%s.sh: failed" % name not in text, "%s failed:\n%s" % (name, text[-3000:])
        assert figure in text, "%s printed no %r:\n%s" % (name, figure, text[-3000:])
    # issue 36: the engine's rows name their transport; io_uring's row beside
    # epoll's (or, where the kernel refuses it, epoll twice)
    rows = [ln.split() for ln in got["bench_engine"] if ln[:1].isdigit()]
    # a row: streams, transport, scale, model/s, tok/s (what the engine counted), ...
    named = {(r[0], r[1]) for r in rows if len(r) > 4 and is_positive(r[4])}
    want = "io_uring" if uring_allowed() else "epoll"
    for mode in (want, "epoll", "curl"):
        assert ("128", mode) in named, (mode, got["bench_engine"])
    assert rc == 0, out[-3000:]


def test_make_bench_shards_small(ctx):
    rc, out = run("bench_shards.sh", 900)
    assert rc == 0, out[-3000:]
    assert "no valid cell" not in out, out[-3000:]
    tables, rows = [], None
    for line in out.splitlines():
        if line.startswith(("shards ", "rate ")):
            rows = []
            tables.append(rows)
        elif rows is not None and line[:1].isdigit():
            rows.append(line.split())
    assert len(tables) == 2, out[-3000:]
    decode, rate = tables
    # a row per shard count in each table: the decode cell's tokens/s near
    # the model's, the rate cell's requests offered
    assert [r[0] for r in decode] == ["1", "2"] == [r[0] for r in rate], out[-3000:]
    for r in decode:
        assert float(r[2]) > 0 and 0.5 < float(r[3]) < 1.5, r
    for r in rate:
        assert float(r[2]) > 0 and float(r[3]) > 0, r


def test_make_bench_schedules_small(ctx):
    """One slot of an every-minute schedule with two api replicas and two
    workers: one job, run, and its table row."""
    rc, out = run("bench_schedules.sh", 300)
    assert rc == 0, out[-3000:]
    rows = [ln.split() for ln in out.splitlines() if ln[:2] == "20"]
    assert len(rows) == 1, out[-3000:]
    assert rows[0][2] == "1" and rows[0][3] == "succeeded", rows
    assert rows[0][4].startswith("worker-") and rows[0][6] in ("1", "2"), rows
    assert "every slot fired exactly once" in out, out[-3000:]


HISTORY_ROUTES = ("get", "get_many", "result", "report", "list", "list_filtered", "series", "series_matrix",
                  "pareto", "compare")


def test_make_bench_history_small(ctx):
    rc, out = run("bench_history.sh", 900)
    assert rc == 0, out[-3000:]
    assert "seeded 401 jobs" in out, out[-3000:]  # the template and its 400 clones
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.split()}
    for r in HISTORY_ROUTES:
        # route, empty p50 ms p99 ms req/s, full p50 ms p99 ms req/s, ratio
        row = rows.get(r)
        assert row is not None and len(row) == 12, (r, out[-3000:])
        assert all(is_positive(row[i]) for i in (1, 3, 5, 6, 8, 10, 11)), (r, row)
    # the plans of the routes' statements, with the statements named
    plans = [ln for ln in out.splitlines() if ln.startswith("plan ")]
    assert len(plans) >= 10, out[-3000:]
    assert any("FROM series_points" in p for p in plans), out[-3000:]  # the matrix
    assert any("SELECT j.state, j.result::text" in p for p in plans), out[-3000:]  # /result
    assert "plans written to" in out, out[-3000:]
