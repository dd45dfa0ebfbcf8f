"""tokbench-worker and the PostgreSQL queue (lib/db/tb_queue.c), issue 5.

Jobs are inserted with SQL (the contract with the api: INSERT a queued job,
then NOTIFY tb_jobs_queued '<id>'), run by real workers against tokbench-sim
(tiny profile, short cells), and checked in the database: states, attempts,
leases, stored cells against the expected matrix, events.
"""
import functools
import json
import os
import signal
import subprocess
import time

import harness
from harness import wait_until

# A short matrix: 2 prefill cells + 2 x 2 decode cells.
SHORT = {"contexts": [512, 1024], "concurrency": [1, 2], "prefill_contexts": [512, 1024],
         "duration_s": 0.3, "settle_s": 0.05, "max_output": 256}
# A longer one (12 cells, ~1 s each) for jobs that must still run when poked.
LONG = {"contexts": [512, 1024, 2048], "concurrency": [1, 2, 4],
        "prefill_contexts": [512, 1024, 2048], "duration_s": 0.8, "settle_s": 0.05,
        "max_output": 256}

MASTER_KEY = "5c" * 32

SEAL_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "base/tb_crypto.h"
int main(int argc, char **argv) {
  unsigned char key[TB_CRYPTO_KEY_LEN];
  if (argc != 4 || !tb_crypto_parse_key(argv[1], key)) return 2;
  char *s = tb_crypto_seal(key, argv[2], argv[3]);
  if (s == NULL) return 1;
  printf("%s\n", s);
  free(s);
  return 0;
}
"""


def expected_cells(spec):
    keys = {("prefill", c, 1) for c in spec["prefill_contexts"]}
    keys |= {("decode", c, n) for c in spec["contexts"] for n in spec["concurrency"]}
    return keys


class T:
    """Per-test helpers; the workers a test starts are stopped when it ends."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.pg = ctx.postgres()
        self.procs = []
        if not getattr(ctx, "worker_migrated", False):
            subprocess.run([harness.bin("tokbench"), "migrate"], check=True, capture_output=True,
                           env=dict(os.environ, TOKBENCH_DATABASE_URL=self.pg.url))
            ctx.worker_migrated = True
        self.project = self.q("INSERT INTO projects (name) VALUES ('p-' || gen_random_uuid()) "
                              "RETURNING id")

    def q(self, sql):
        return self.pg.psql(sql).strip()

    def worker(self, name, **env):
        e = {"TOKBENCH_DATABASE_URL": self.pg.url, "TOKBENCH_WORKER_ID": name,
             "TOKBENCH_LEASE_S": "3", "TOKBENCH_HEARTBEAT_S": "1", "TOKBENCH_POLL_S": "1",
             "TOKBENCH_MASTER_KEY": MASTER_KEY}
        e.update({k: str(v) for k, v in env.items()})
        p = self.ctx.process("tokbench-worker", [], env=e)
        self.procs.append(p)
        wait_until(lambda: '"msg":"worker ready"' in p.output() or not p.alive(), 20,
                   what="worker ready")
        assert p.alive(), p.output()
        return p

    def endpoint(self, sim, sealed=None, group=None):
        return self.q("INSERT INTO endpoints (project_id, name, base_url, api_key_sealed, "
                      "hardware, exclusive_group) VALUES ('%s', 'e-' || gen_random_uuid(), '%s', %s, "
                      "'{\"gpu\": \"sim\", \"count\": 1}', %s) RETURNING id"
                      % (self.project, sim.url, "'%s'" % sealed if sealed else "NULL",
                         "'%s'" % group if group else "NULL"))

    def submit(self, endpoint, spec, priority=0, max_attempts=3, busy_key=None):
        row = self.q("WITH j AS (INSERT INTO jobs (project_id, endpoint_id, spec, priority, "
                     "max_attempts, busy_key) VALUES ('%s', '%s', '%s', %d, %d, '%s') RETURNING id) "
                     "SELECT id, pg_notify('tb_jobs_queued', id::text) FROM j"
                     % (self.project, endpoint, json.dumps(spec), priority, max_attempts,
                        busy_key or endpoint))
        return row.split("|")[0]

    def job(self, jid):
        cols = ["state", "attempts", "lease_owner", "cells_done", "cells_total", "error",
                "cancel_requested"]
        row = self.q("SELECT row_to_json(j) FROM (SELECT %s FROM jobs WHERE id = '%s') j"
                     % (", ".join(cols), jid))
        return json.loads(row)

    def state(self, jid):
        return self.q("SELECT state FROM jobs WHERE id = '%s'" % jid)

    def wait_state(self, jid, states, timeout=60):
        if isinstance(states, str):
            states = (states,)
        return wait_until(lambda: self.state(jid) in states, timeout, interval=0.05,
                          what="job %s in %s (now %s)" % (jid, states, self.state(jid)))

    def cells(self, jid):
        rows = self.q("SELECT phase, context, concurrency FROM job_cells WHERE job_id = '%s'" % jid)
        out = []
        for line in rows.splitlines():
            p, c, n = line.split("|")
            out.append((p, int(c), int(n)))
        return out

    def cells_done(self, jid):
        return int(self.q("SELECT count(*) FROM job_cells WHERE job_id = '%s'" % jid))

    def events(self, jid, kind=None):
        rows = self.q("SELECT kind, data FROM job_events WHERE job_id = '%s'%s ORDER BY id"
                      % (jid, " AND kind = '%s'" % kind if kind else ""))
        return [(line.split("|", 1)[0], json.loads(line.split("|", 1)[1]))
                for line in rows.splitlines()]

    def close(self, check):
        """Stops the workers; with check, each still running must exit 0
        (under the sanitizers that includes the leak check)."""
        bad = []
        for p in self.procs:
            was_alive = p.alive()
            rc = p.stop()
            if check and was_alive and rc != 0:
                bad.append(p.output()[-4000:])
        assert not bad, "worker exit status not 0:\n" + "\n".join(bad)


def isolated(fn):
    @functools.wraps(fn)
    def run(ctx):
        t = T(ctx)
        ok = False
        try:
            fn(t)
            ok = True
        finally:
            t.close(check=ok)
    return run


def assert_complete(t, jid, spec, stored_by_sql=0):
    """Every cell of the matrix stored exactly once, in cells and result."""
    got = t.cells(jid)
    assert len(got) == len(set(got)), got
    assert set(got) == expected_cells(spec), (sorted(got), sorted(expected_cells(spec)))
    res = json.loads(t.q("SELECT result FROM jobs WHERE id = '%s'" % jid))
    keys = [(c["phase"], c["context"], c["concurrency"]) for c in res["cells"]]
    assert sorted(keys) == sorted(expected_cells(spec)), keys
    # one 'cell' event per stored cell: nothing stored twice
    assert len(t.events(jid, "cell")) == len(got) - stored_by_sql
    j = t.job(jid)
    assert j["cells_done"] == len(got) and j["cells_total"] == len(got), j
    return res


def seal(ctx, key, endpoint_id, master=MASTER_KEY):
    exe = os.path.join(ctx.tmp, "seal")
    if not os.path.exists(exe):
        src = os.path.join(ctx.tmp, "seal.c")
        with open(src, "w") as f:
            f.write(SEAL_C)
        lib = os.path.join(harness.ROOT, "lib")
        subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-I" + lib, "-o", exe, src,
                        os.path.join(lib, "base", "tb_crypto.c"), os.path.join(lib, "base", "tb_util.c"),
                        "-lcrypto"], check=True)
    return subprocess.check_output([exe, master, key, endpoint_id]).decode().strip()


# ---------------------------------------------------------------- the flow

@isolated
def test_job_runs_end_to_end_with_a_sealed_key(t):
    secret = "sk-worker-test-0123456789"
    sim = t.ctx.sim("tiny", args=["--api-key", secret])
    ep = t.endpoint(sim)
    t.q("UPDATE endpoints SET api_key_sealed = '%s', launch_command = 'vllm serve x --api-key %s' "
        "WHERE id = '%s'" % (seal(t.ctx, secret, ep), secret, ep))
    w = t.worker("w-flow")
    jid = t.submit(ep, SHORT)
    t.wait_state(jid, "succeeded", 60)
    res = assert_complete(t, jid, SHORT)
    assert res["status"] == "complete", res
    assert all(c["status"] == "valid" for c in res["cells"]), res["cells"]
    j = t.job(jid)
    assert j["attempts"] == 1 and j["lease_owner"] is None and j["error"] is None, j
    header = json.loads(t.q("SELECT header FROM jobs WHERE id = '%s'" % jid))
    assert header["hardware"]["gpu"] == "sim" and header["run_id"].startswith(jid + ".1.")
    assert "<redacted>" in header["launch_command"] and secret not in header["launch_command"]
    states = [d["state"] for _, d in t.events(jid, "state")]
    assert states == ["running", "succeeded"], states
    prog = t.events(jid, "progress")
    assert prog and prog[0][1]["cells_total"] == 6 and "current_cell" in prog[0][1]
    cell_ev = t.events(jid, "cell")
    assert cell_ev[-1][1]["cells_done"] == 6 and cell_ev[0][1]["cell"]["phase"] == "prefill"
    assert secret not in w.output()
    assert secret not in t.q("SELECT row_to_json(j)::text FROM jobs j WHERE id = '%s'" % jid)
    # The job's own end is no lost lease: the heartbeat, woken by the end's
    # notification before the job was let go, logged one (worker_beat_ending).
    wait_until(lambda: '"msg":"job finished"' in w.output(), 10, what="job finished logged")
    time.sleep(0.5)
    assert '"msg":"lease lost"' not in w.output(), w.output()[-2000:]


@isolated
def test_job_with_repeats(t):
    """repeats: 2 through the service (issue 14): the spec reaches the
    engine, the passes show in the progress, and every valid cell stored is
    the combination of its two measurements, with its interval."""
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    t.worker("w-repeats")
    spec = dict(SHORT, repeats=2)
    jid = t.submit(ep, spec)
    t.wait_state(jid, "succeeded", 90)
    res = assert_complete(t, jid, spec)
    assert res["settings"]["repeats"] == 2, res["settings"]
    for c in res["cells"]:
        assert c["status"] == "valid" and c["repeats"] == 2, c
        assert [r["repeat"] for r in c["repeat_runs"]] == [1, 2], c
        if c["phase"] == "decode":
            lo, hi = c["total_tps_ci95"]
            assert lo <= c["total_tps"] <= hi, c
    passes = {d["current_cell"].get("repeat") for _, d in t.events(jid, "progress")}
    assert passes == {1, 2}, passes


@isolated
def test_rate_job_with_a_shared_prefix(t):
    """A job of rate cells only (issue 15), with a shared-prefix workload:
    the worker stores its cells (phase rate, sql/0011), the result says how
    much of the prompts the server's cache held, and the report renders."""
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    t.worker("w-rate")
    spec = {"rates": [10], "rate_requests": 8, "arrival": "constant", "input_tokens": "200",
            "output_tokens": "4", "prefix": {"tokens": 1000, "suffixes": 2}}
    jid = t.submit(ep, spec)
    t.wait_state(jid, "succeeded", 90)
    assert t.cells(jid) == [("rate", t.cells(jid)[0][1], 1)], t.cells(jid)
    res = json.loads(t.q("SELECT result FROM jobs WHERE id = '%s'" % jid))
    (c,) = res["cells"]
    assert c["phase"] == "rate" and c["status"] == "valid" and c["completed"] == 8, c
    assert c["prefix_cache"]["requests"] == 8 and c["prefix_cache"]["cached_tokens"] >= 6 * 992, c
    assert res["settings"]["rate"]["workload"] == {"kind": "shared_prefix", "prefix_tokens": 1000,
                                                   "suffixes": 2}, res["settings"]


@isolated
def test_conversation_job_with_a_concurrency_sweep(t):
    """A job of conversations swept over concurrency: the worker stores each
    closed-loop probe (its users in the cell), the result holds the sweep
    over concurrency and each cell's turns, and the report renders them."""
    sim = t.ctx.sim("tiny", args=["--max-running", "2"])
    ep = t.endpoint(sim)
    t.worker("w-conv")
    spec = {"rate_duration_s": 1, "input_tokens": "100", "output_tokens": "8",
            "conversation": {"turns": 2, "think_time_s": 0.05},
            "slo": {"ttft_ms": 60000},
            "sweep": {"attainment_pct": 90, "over": "concurrency", "max_concurrency": 2,
                      "max_probes": 2}}
    jid = t.submit(ep, spec)
    t.wait_state(jid, "succeeded", 90)
    res = json.loads(t.q("SELECT result FROM jobs WHERE id = '%s'" % jid))
    sw = res["sweep"]
    assert sw["over"] == "concurrency" and [p["users"] for p in sw["probes"]] == [1, 2], sw
    assert sw["found_concurrency"] == 2 and sw["outcome"] == "at_max_concurrency", sw
    assert [c["users"] for c in res["cells"]] == [1, 2], res["cells"]
    for c in res["cells"]:
        assert c["load"] == "closed" and c["status"] == "valid", c
        assert len(c["turns"]) == 2 and c["conversations"]["completed"] >= 1, c
        assert c["turns"][1]["cached_pct"] > 0, c  # the second turn found the first cached
    assert res["settings"]["rate"]["workload"]["kind"] == "multi_turn", res["settings"]
    assert len(t.cells(jid)) == 2, t.cells(jid)
    path = os.path.join(t.ctx.tmp, "conv-result.json")
    with open(path, "w") as f:
        json.dump(res, f)
    p = subprocess.run([harness.bin("tokbench"), "report", path, "--format", "md"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Highest concurrency" in p.stdout and "Cell 2: conversations" in p.stdout, p.stdout


@isolated
def test_wrong_master_key_fails_the_job_with_the_reason(t):
    sim = t.ctx.sim("tiny", args=["--api-key", "sk-x"])
    ep = t.endpoint(sim)
    t.q("UPDATE endpoints SET api_key_sealed = '%s' WHERE id = '%s'" % (seal(t.ctx, "sk-x", ep), ep))
    t.worker("w-badkey", TOKBENCH_MASTER_KEY="ab" * 32)
    jid = t.submit(ep, SHORT)
    t.wait_state(jid, "failed", 30)
    assert "does not open" in t.job(jid)["error"]


@isolated
def test_global_failure_fails_the_job_with_the_reason(t):
    """A server that ends every stream early (issue 12): nothing can be
    measured, so the engine stops at the first decode cell, and the job ends
    failed with that one line as its error, after one attempt, with the cells
    measured until then stored."""
    sim = t.ctx.sim("tiny", args=["--early-stop", "40"])
    ep = t.endpoint(sim)
    t.worker("w-early")
    jid = t.submit(ep, SHORT)
    t.wait_state(jid, "failed", 60)
    j = t.job(jid)
    assert "ends streams early" in j["error"] and "asked 256 tokens, got 40" in j["error"], j
    assert j["attempts"] == 1, j
    res = json.loads(t.q("SELECT result FROM jobs WHERE id = '%s'" % jid))
    assert res["status"] == "failed" and "ends streams early" in res["error"], res
    decode = [c for c in res["cells"] if c["phase"] == "decode"]
    assert len(decode) == 1 and decode[0]["status"] == "error", res["cells"]
    assert ("decode", 512, 1) in t.cells(jid) and len(t.cells(jid)) == len(res["cells"])


# ------------------------------------------------- claims and busy endpoints

@isolated
def test_two_workers_two_endpoints_while_a_busy_endpoint_waits(t):
    s1, s2 = t.ctx.sim("tiny"), t.ctx.sim("tiny")
    e1, e2 = t.endpoint(s1), t.endpoint(s2)
    t.worker("w-a")
    t.worker("w-b")
    spec = dict(SHORT, duration_s=0.6)
    a1 = t.submit(e1, spec, priority=5)
    a2 = t.submit(e1, spec, priority=5)
    b = t.submit(e2, spec)
    # While a1 runs, a2 (same endpoint) waits even though a worker is free.
    t.wait_state(a1, "running", 20)
    t.wait_state(b, "running", 20)
    assert t.state(a2) == "queued"
    for j in (a1, a2, b):
        t.wait_state(j, "succeeded", 90)
    times = {j: t.q("SELECT extract(epoch from started_at) || '|' || extract(epoch from finished_at) "
                    "FROM jobs WHERE id = '%s'" % j).split("|") for j in (a1, a2, b)}
    times = {j: (float(s), float(f)) for j, (s, f) in times.items()}
    assert times[a2][0] >= times[a1][1], times           # one at a time on e1
    assert times[b][0] < times[a1][1] and times[a1][0] < times[b][1], times  # in parallel
    for j in (a1, a2, b):
        assert t.job(j)["attempts"] == 1
        assert [d["state"] for _, d in t.events(j, "state")] == ["running", "succeeded"]
        assert_complete(t, j, spec)


@isolated
def test_exclusive_group_is_one_busy_key(t):
    s1, s2 = t.ctx.sim("tiny"), t.ctx.sim("tiny")
    e1, e2 = t.endpoint(s1, group="rack-1"), t.endpoint(s2, group="rack-1")
    t.worker("w-g1")
    t.worker("w-g2")
    j1 = t.submit(e1, SHORT, busy_key="rack-1")
    j2 = t.submit(e2, SHORT, busy_key="rack-1")
    for j in (j1, j2):
        t.wait_state(j, "succeeded", 60)
    s = {j: [float(x) for x in t.q("SELECT extract(epoch from started_at) || '|' || "
                                   "extract(epoch from finished_at) FROM jobs WHERE id = '%s'"
                                   % j).split("|")] for j in (j1, j2)}
    first, second = sorted((j1, j2), key=lambda j: s[j][0])
    assert s[second][0] >= s[first][1], s


@isolated
def test_skip_locked_never_runs_a_job_twice(t):
    # Three servers, four endpoints on each in one exclusive group (as four
    # names of one GPU server): two jobs never measure one server at once,
    # which the engine rightly refuses to call ready (running != C).
    sims = [t.ctx.sim("tiny") for _ in range(3)]
    one = {"contexts": [512], "concurrency": [1], "prefill_contexts": [], "duration_s": 0.1,
           "settle_s": 0.0, "max_output": 64}
    eps = [t.endpoint(sims[i % 3], group="srv-%d" % (i % 3)) for i in range(12)]
    for i in range(3):
        t.worker("w-s%d" % i)
    jobs = [t.submit(e, one, priority=i % 3, busy_key="srv-%d" % (i % 3))
            for i, e in enumerate(eps)]
    for j in jobs:
        t.wait_state(j, ("succeeded", "failed"), 60)
    owners = set()
    for j in jobs:
        assert t.job(j)["attempts"] == 1, t.job(j)
        ev = t.events(j, "state")
        assert [d["state"] for _, d in ev] == ["running", "succeeded"], ev
        owners.add(ev[0][1]["worker"])
        assert t.cells(j) == [("decode", 512, 1)]
    assert len(owners) >= 2, owners


# ------------------------------------------------------ cancel and signals

@isolated
def test_cancel_reaches_a_running_job_within_2s(t):
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    t.worker("w-cancel", TOKBENCH_HEARTBEAT_S="2", TOKBENCH_LEASE_S="15")
    jid = t.submit(ep, LONG)
    wait_until(lambda: t.cells_done(jid) >= 2, 30, what="two cells")
    t0 = time.monotonic()
    # the api's cancel: set the flag and notify
    t.q("UPDATE jobs SET cancel_requested = true WHERE id = '%s'; NOTIFY tb_job_changed, '%s'"
        % (jid, jid))
    t.wait_state(jid, "cancelled", 10)
    took = time.monotonic() - t0
    assert took < 2.0, took
    j = t.job(jid)
    assert j["error"] == "cancelled on request" and j["lease_owner"] is None, j
    n = t.cells_done(jid)
    assert 2 <= n < len(expected_cells(LONG))
    res = json.loads(t.q("SELECT result FROM jobs WHERE id = '%s'" % jid))
    assert res["status"] == "cancelled" and len(res["cells"]) == n


@isolated
def test_sigterm_hands_the_job_back(t):
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    w1 = t.worker("w-term")
    jid = t.submit(ep, LONG)
    wait_until(lambda: t.cells_done(jid) >= 2, 30, what="two cells")
    t0 = time.monotonic()
    w1.signal(signal.SIGTERM)
    w1.proc.wait(15)
    assert w1.proc.returncode == 0, w1.output()
    assert time.monotonic() - t0 < 5
    j = t.job(jid)
    assert j["state"] == "queued" and j["attempts"] == 0 and j["lease_owner"] is None, j
    kept = t.cells(jid)
    assert len(kept) >= 2
    ev = t.events(jid, "state")
    assert ev[-1][1]["state"] == "queued" and ev[-1][1]["reason"] == "worker stopping", ev
    t.worker("w-term-2")
    t.wait_state(jid, "succeeded", 60)
    assert_complete(t, jid, LONG)
    assert t.job(jid)["attempts"] == 1
    assert set(kept) <= set(t.cells(jid))


@isolated
def test_sigkill_mid_job_resumes_elsewhere_without_loss_or_doubles(t):
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    w1 = t.worker("w-kill-1")
    jid = t.submit(ep, LONG)
    wait_until(lambda: t.cells_done(jid) >= 3, 30, what="three cells")
    w1.proc.kill()
    w1.proc.wait()
    stored = set(t.cells(jid))
    t.worker("w-kill-2")
    # The lease (3 s) expires, then w-kill-2 claims the job again (attempt 2).
    t.wait_state(jid, "succeeded", 90)
    res = assert_complete(t, jid, LONG)
    j = t.job(jid)
    assert j["attempts"] == 2, j
    assert stored <= set(t.cells(jid))
    ev = t.events(jid, "state")
    assert [(d["state"], d["worker"]) for _, d in ev] == [
        ("running", "w-kill-1"), ("running", "w-kill-2"), ("succeeded", "w-kill-2")], ev
    # the stored cells of attempt 1 were not measured again
    assert res["run_id"].startswith(jid + ".2.")


@isolated
def test_attempts_limit_fails_the_job_with_the_reason(t):
    sim = t.ctx.sim("tiny")
    e1, e2 = t.endpoint(sim), t.endpoint(sim)
    # Two jobs whose worker died (expired leases): one has no attempts left,
    # the other has one more and is resumed from its stored cell.
    dead = t.submit(e1, SHORT, max_attempts=2)
    more = t.submit(e2, SHORT, max_attempts=2)
    t.q("UPDATE jobs SET state = 'running', attempts = 2, lease_owner = 'ghost', "
        "lease_expires_at = now() - interval '1 second', started_at = now() WHERE id = '%s'" % dead)
    t.q("UPDATE jobs SET state = 'running', attempts = 1, lease_owner = 'ghost', "
        "lease_expires_at = now() - interval '1 second', started_at = now() WHERE id = '%s'" % more)
    t.q("INSERT INTO job_cells (job_id, phase, context, concurrency, cell) VALUES ('%s', "
        "'prefill', 512, 1, '{\"phase\": \"prefill\", \"context\": 512, \"context_label\": \"512\", "
        "\"concurrency\": 1, \"status\": \"valid\", \"marker\": \"attempt-1\"}')" % more)
    t.q("UPDATE jobs SET cells_done = 1 WHERE id = '%s'" % more)
    t.worker("w-att")
    t.wait_state(dead, "failed", 20)
    j = t.job(dead)
    assert "attempt 2 of 2 lost its lease" in j["error"] and "ghost" in j["error"], j
    assert j["attempts"] == 2 and j["lease_owner"] is None
    assert t.events(dead, "state")[-1][1]["state"] == "failed"
    t.wait_state(more, "succeeded", 60)
    assert t.job(more)["attempts"] == 2
    res = assert_complete(t, more, SHORT, stored_by_sql=1)
    kept = [c for c in res["cells"] if c["phase"] == "prefill" and c["context"] == 512]
    assert kept[0].get("marker") == "attempt-1", kept  # resumed, not re-measured


@isolated
def test_late_writes_of_a_worker_that_lost_its_lease_change_nothing(t):
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    w = t.worker("w-fenced")
    jid = t.submit(ep, LONG)
    wait_until(lambda: t.cells_done(jid) >= 2, 30, what="two cells")
    # Another worker took the job over (as a claim after an expiry would).
    t.q("UPDATE jobs SET lease_owner = 'thief', attempts = attempts + 1, "
        "lease_expires_at = now() + interval '1 hour' WHERE id = '%s'" % jid)
    n = t.cells_done(jid)
    before = t.q("SELECT row_to_json(j)::text FROM (SELECT state, lease_owner, attempts, cells_done, "
                 "header, result, error, finished_at FROM jobs WHERE id = '%s') j" % jid)
    nev = len(t.events(jid))
    wait_until(lambda: '"msg":"job dropped: lease lost"' in w.output(), 15, what="worker drops job")
    time.sleep(1.5)
    assert t.cells_done(jid) == n
    assert t.q("SELECT row_to_json(j)::text FROM (SELECT state, lease_owner, attempts, cells_done, "
               "header, result, error, finished_at FROM jobs WHERE id = '%s') j" % jid) == before
    assert len(t.events(jid)) == nev
    # The fenced-out worker goes on with other work.
    other = t.submit(t.endpoint(sim), SHORT)
    t.wait_state(other, "succeeded", 60)


@isolated
def test_postgres_restart_mid_job_loses_nothing(t):
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    w = t.worker("w-pg", TOKBENCH_LEASE_S="15", TOKBENCH_HEARTBEAT_S="2")
    jid = t.submit(ep, LONG)
    wait_until(lambda: t.cells_done(jid) >= 2, 30, what="two cells")
    t.pg.stop()
    time.sleep(4)  # cells measured meanwhile stay in the worker's memory
    t.pg.start()
    t.wait_state(jid, "succeeded", 90)
    assert_complete(t, jid, LONG)
    assert t.job(jid)["attempts"] == 1
    assert w.alive()
    assert "database away: cells kept in memory" in w.output()


@isolated
def test_chaos_kills_and_restarts_lose_and_double_nothing(t):
    """Workers SIGKILLed and SIGTERMed at random while 4 jobs run: every job
    ends succeeded with its matrix stored exactly once."""
    import random
    rnd = random.Random(5)
    sims = [t.ctx.sim("tiny"), t.ctx.sim("tiny")]
    spec = dict(SHORT, duration_s=0.5)
    # two endpoints a server, one busy key a server (as in test_skip_locked)
    jobs = [t.submit(t.endpoint(sims[i % 2], group="chaos-%d" % (i % 2)), spec, max_attempts=20,
                     busy_key="chaos-%d" % (i % 2)) for i in range(4)]
    seq = [0]

    def start():
        seq[0] += 1
        return t.worker("w-chaos-%d" % seq[0])
    live = [start() for _ in range(3)]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(rnd.uniform(1.0, 2.5))
        if all(t.state(j) == "succeeded" for j in jobs):
            break
        victim = live.pop(rnd.randrange(len(live)))
        if rnd.random() < 0.7:
            victim.kill()
        else:
            victim.signal(signal.SIGTERM)
            victim.proc.wait(15)
            assert victim.proc.returncode == 0, victim.output()[-3000:]
        live.append(start())
    for j in jobs:
        t.wait_state(j, "succeeded", 120)
        assert_complete(t, j, spec)
        ev = t.events(j, "state")
        assert ev[-1][1]["state"] == "succeeded"
    print("# chaos: %d workers started, attempts %s"
          % (seq[0], [t.job(j)["attempts"] for j in jobs]))


@isolated
def test_postgres_down_longer_than_the_lease_with_a_second_worker(t):
    """The lease expires while PostgreSQL is down; when it is back, either
    the first worker keeps the job (its heartbeat renews the lease) or the
    second claims it and re-measures what the first could not store: in
    both cases every cell is stored once."""
    sim = t.ctx.sim("tiny")
    ep = t.endpoint(sim)
    t.worker("w-long-1")
    jid = t.submit(ep, LONG)
    wait_until(lambda: t.cells_done(jid) >= 2, 30, what="two cells")
    t.worker("w-long-2")
    t.pg.stop()
    time.sleep(6)  # twice the lease
    t.pg.start()
    t.wait_state(jid, "succeeded", 120)
    assert_complete(t, jid, LONG)
    owners = [d["worker"] for _, d in t.events(jid, "state") if d["state"] == "running"]
    print("# runs: %s, attempts %d" % (owners, t.job(jid)["attempts"]))
    assert t.job(jid)["attempts"] == len(owners)
