"""Shards of a cell (issue 24): one decode cell driven by several worker
processes, started together, merged exactly.

Jobs are inserted with SQL as test_worker does and run by real workers
against tokbench-sim (the bench profile: one step of 20 ms / time scale at
any batch, so C streams give C x 50 x scale tokens/s, the simulator's
truth, /sim/expected).  Checked in the database:

- the merged cell's percentiles are identical to a recomputation from the
  samples the shards stored (cell_shards.samples, decoded here from the
  TBS1 format of lib/result/tb_samples.h and put through the same type-7
  quantile as lib/base/tb_stats.c), its tokens/s within 2% of the
  simulator's truth, its shards where they ran with their start skew;
- killing a shard's worker mid-cell fails that attempt ("lost its lease")
  and the cell is measured again whole: stored once, by a merged attempt.
"""
import json
import os
import re
import signal
import subprocess
import time

import harness
from harness import wait_until
from test_worker import T


def varint(b, at):
    x, shift = 0, 0
    while True:
        c = b[at]
        at += 1
        x |= (c & 0x7F) << shift
        if not c & 0x80:
            return x, at
        shift += 7


def series(b, at):
    n, at = varint(b, at)
    prev, vals = 0, []
    for _ in range(n):
        z, at = varint(b, at)
        prev += (z >> 1) ^ -(z & 1)
        vals.append(prev)
    return vals, at


RATE_COUNTERS = ["scheduled", "errors", "dropped", "pr_sum", "pr_n", "cached_sum",
                 "cached_prompt_sum", "cached_n", "conv_started", "conv_completed",
                 "conv_abandoned", "conv_dropped", "arrivals_us", "last_end_us"]


def decode_rate(b, at):
    """A rate cell's section after the decode document: 14 counters, eight
    series (LAG, START, END, SCHED, and per request OK, TTFT + 1, TPOT + 1,
    tokens), the turns (six counters, TTFT), the first error."""
    n, at = varint(b, at)
    assert n == len(RATE_COUNTERS), n
    out = {}
    for k in RATE_COUNTERS:
        out[k], at = varint(b, at)
    out["series"] = []
    for _ in range(8):
        vals, at = series(b, at)
        out["series"].append(vals)
    nt, at = varint(b, at)
    out["turns"] = []
    for _ in range(nt):
        t = {}
        for k in ("sent", "ok", "pr_sum", "pr_n", "cached_sum", "cached_prompt_sum"):
            t[k], at = varint(b, at)
        t["ttft"], at = series(b, at)
        out["turns"].append(t)
    n, at = varint(b, at)
    err = bytearray()
    for _ in range(n):
        c, at = varint(b, at)
        err.append(c)
    out["first_error"] = err.decode()
    return out, at


def decode_tbs1(b):
    """lib/result/tb_samples.h's encoding: magic, slice width, slices, ten
    counters, four series of zig-zag deltas (TTFT, TPOT, E2E, GAP), and a
    rate cell's section when bytes follow."""
    assert b[:4] in (b"TBS1", b"TBS2"), b[:4]
    at = 4
    srv = None
    if b[:4] == b"TBS2":  # the server's timings first: five counts, seven series of values
        srv = []
        for _ in range(5):
            v, at = varint(b, at)
            srv.append(v)
        for _ in range(7):
            n, at = varint(b, at)
            vals = []
            for _ in range(n):
                z, at = varint(b, at)
                vals.append((z >> 1) ^ -(z & 1))
            srv.append(vals)
    width, at = varint(b, at)
    n, at = varint(b, at)
    slices = []
    for _ in range(n):
        v, at = varint(b, at)
        slices.append(v)
    counters = []
    for _ in range(10):
        v, at = varint(b, at)
        counters.append(v)
    series = []
    for _ in range(4):
        n, at = varint(b, at)
        prev, vals = 0, []
        for _ in range(n):
            z, at = varint(b, at)
            prev += (z >> 1) ^ -(z & 1)
            vals.append(prev)
        series.append(vals)
    rate = None
    if at < len(b):
        rate, at = decode_rate(b, at)
    assert at == len(b)
    return {"width_us": width, "slices": slices, "tokens": counters[0],
            "completed": counters[1], "started": counters[2], "good": counters[3],
            "series": series, "rate": rate, "srv": srv}


def quantile(vals, q):
    """tb_stats_quantile: type 7 on the sorted values."""
    v = sorted(vals)
    if q <= 0:
        return float(v[0])
    if q >= 1:
        return float(v[-1])
    pos = q * float(len(v) - 1)
    lo = int(pos)
    frac = pos - float(lo)
    if lo + 1 >= len(v):
        return float(v[lo])
    return float(v[lo]) + frac * float(v[lo + 1] - v[lo])


SCALE = 4  # 8 streams x 50 x 4 = 1,600 tokens/s
SPEC = {"contexts": [1024], "concurrency": [8], "prefill_contexts": [], "duration_s": 3,
        "settle_s": 0.3, "max_output": 4096, "shards": 2}


def shard_workers(t, n, **env):
    e = {"TOKBENCH_SHARD_LEASE_S": "2", "TOKBENCH_SHARD_BARRIER_S": "30",
         "TOKBENCH_SHARD_LEAD_MS": "300"}
    e.update(env)
    # every worker this module started, by name: a worker of an earlier
    # test still runs and may hold a shard of a later one
    out = t.ctx.__dict__.setdefault("shard_workers", {})
    for i in range(n):
        name = "w%d-%s" % (i, os.urandom(2).hex())
        out[name] = t.worker(name, **e)
    return out


def wait_live(t, n):
    """Until n workers have written their row (sql/0015_workers.sql)."""
    wait_until(lambda: int(t.q("SELECT count(*) FROM workers "
                               "WHERE seen_at > now() - interval '30 s'")) >= n,
               30, what="%d live workers" % n)


def merged_samples(t, jid, kind="decode"):
    """The stored samples of the job's merged barrier, decoded."""
    rows = t.q("SELECT s.shard || '|' || encode(s.samples, 'hex') FROM cell_shards s JOIN "
               "cell_barriers b USING (job_id, cell_key, attempt) WHERE s.job_id = '%s' AND "
               "b.state = 'merged' AND s.cell_key LIKE '%%/%s/%%' ORDER BY s.shard" % (jid, kind))
    out = []
    for line in rows.splitlines():
        _, hexs = line.split("|")
        out.append(decode_tbs1(bytes.fromhex(hexs)))
    return out


def decode_cell(t, jid):
    return json.loads(t.q("SELECT cell FROM job_cells WHERE job_id = '%s' AND phase = 'decode'"
                          % jid))


PRICE = 3.6  # per hour: a sharded cell is priced from its merged tokens (issue 26)


def priced(t, ep):
    t.q("UPDATE endpoints SET price_per_hour = %s, currency = 'EUR' WHERE id = '%s'"
        % (PRICE, ep))


def check_price(cell):
    """The merged cell's cost: the price over its window and merged tokens."""
    e = cell["efficiency"]
    want = PRICE * cell["measured_s"] / 3600 / cell["output_tokens"] * 1e6
    assert abs(e["cost_per_m_output_tokens"] - want) <= 1e-6 * want, (e, want, cell["measured_s"])
    assert e["currency"] == "EUR" and "j_per_output_token" not in e, e


def test_sharded_cell_merges_exactly(ctx):
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    priced(t, ep)
    shard_workers(t, 3)
    jid = t.submit(ep, SPEC)
    t.wait_state(jid, "succeeded", timeout=120)
    cell = decode_cell(t, jid)
    check_price(cell)
    assert cell["status"] == "valid", cell
    assert cell["shards"]["count"] == 2, cell["shards"]
    assert {w["worker"] for w in cell["shards"]["where"]} <= {
        r for r in t.q("SELECT DISTINCT worker FROM cell_shards WHERE job_id = '%s'"
                       % jid).splitlines()}
    assert cell["shards"]["skew_max_ms"] <= cell["shards"]["skew_limit_ms"], cell["shards"]
    shards = merged_samples(t, jid)
    assert len(shards) == 2
    ttft = [v for s in shards for v in s["series"][0]]
    tpot = [v for s in shards for v in s["series"][1]]
    e2e = [v for s in shards for v in s["series"][2]]
    gaps = [v for s in shards for v in s["series"][3]]
    for p, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        # the writer's units: TTFT and TPOT through ns, e2e and gaps from us
        assert cell["ttft_ms"][p] == quantile([v * 1000 for v in ttft], q) / 1e6, p
        assert cell["tbt_ms"][p] == quantile([v * 1000 for v in tpot], q) / 1e6, p
        if e2e:
            assert cell["e2e_ms"][p] == quantile(e2e, q) / 1e3, p
        assert cell["itl_ms"][p] == quantile(gaps, q) / 1e3, p
    assert cell["output_tokens"] == sum(s["tokens"] for s in shards)
    # the common timeline: one slice width, the summed slices are the window's tokens
    assert len({s["width_us"] for s in shards}) == 1
    assert sum(sum(s["slices"]) for s in shards) == cell["output_tokens"]
    _, _, body = harness.http("GET", sim.url + "/sim/expected?context=1024&concurrency=8")
    truth = json.loads(body)["total_tok_s"]
    assert abs(cell["total_tps"] - truth) / truth < 0.02, (cell["total_tps"], truth)


def test_killed_shard_measures_the_cell_again_whole(ctx):
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    ws = shard_workers(t, 3)
    spec = dict(SPEC, duration_s=6)
    jid = t.submit(ep, spec)
    # a shard's worker, once the barrier has started
    wait_until(lambda: t.q("SELECT count(*) FROM cell_barriers WHERE job_id = '%s' AND "
                           "state = 'started'" % jid) == "1", 60, what="barrier started")
    victim = t.q("SELECT worker FROM cell_shards WHERE job_id = '%s' AND attempt = 1 "
                 "ORDER BY shard LIMIT 1" % jid)
    ws[victim].kill()
    shard_workers(t, 1)  # a replacement, so that two shards can run again
    t.wait_state(jid, "succeeded", timeout=180)
    assert t.cells_done(jid) == 1
    rows = t.q("SELECT attempt || '|' || state || '|' || coalesce(reason, '') FROM "
               "cell_barriers WHERE job_id = '%s' ORDER BY attempt" % jid).splitlines()
    assert rows[0].startswith("1|failed|shard ") and "lost its lease" in rows[0], rows
    assert rows[-1].split("|")[1] == "merged", rows
    cell = decode_cell(t, jid)
    assert cell["status"] == "valid", cell
    assert cell["shards"]["count"] == 2


def check_identical(cell, shards):
    """The cell's percentiles against the stored samples, recomputed here."""
    ttft = [v for s in shards for v in s["series"][0]]
    gaps = [v for s in shards for v in s["series"][3]]
    for p, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert cell["ttft_ms"][p] == quantile([v * 1000 for v in ttft], q) / 1e6, p
        assert cell["itl_ms"][p] == quantile(gaps, q) / 1e3, p


def test_shards_need_live_workers_at_submit(ctx):
    """Issue 34 item 3: with one worker, a job of 2 shards (which could never
    fill its barrier) is refused at submit, 422 naming both numbers, and
    holds no worker: the other project's job runs at once.  With three live
    workers the same job is taken and merged; a worker that stops removes
    its row, and the count drops with it.  Two projects, its own cluster."""
    pg = harness.Postgres(ctx, name="pg-admission")
    subprocess.run([harness.bin("tokbench"), "migrate"], check=True, capture_output=True,
                   env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url))
    secret = "sk-admission-SECRET-34"
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE), "--api-key", secret])
    port = harness.free_port()
    api = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_MASTER_KEY": "5c" * 32, "TOKBENCH_RATE_LIMIT": "0",
        "TOKBENCH_EGRESS_ALLOW": "loopback"})
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: api.alive() and harness.http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")

    def project(name):
        r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", name,
                            "--admin"], env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        hdr = {"Authorization": "Bearer " + r.stdout.strip()}

        def call(method, path, body=None):
            st, _, data = harness.http(method, base + path, body, hdr, 10)
            return st, (json.loads(data) if data else None)
        st, ep = call("POST", "/v1/endpoints", {"name": name, "base_url": sim.url,
                                                "api_key": secret})
        assert st == 201, ep
        return call, ep["id"]

    def worker(name):
        p = ctx.process("tokbench-worker", [], env={
            "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_WORKER_ID": name,
            "TOKBENCH_LEASE_S": "3", "TOKBENCH_HEARTBEAT_S": "1", "TOKBENCH_POLL_S": "1",
            "TOKBENCH_MASTER_KEY": "5c" * 32, "TOKBENCH_SHARD_BARRIER_S": "30",
            "TOKBENCH_SHARD_LEAD_MS": "300", "TOKBENCH_EGRESS_ALLOW": "loopback"})
        wait_until(lambda: '"msg":"worker ready"' in p.output() or not p.alive(), 20,
                   what="worker ready")
        assert p.alive(), p.output()
        return p

    def live():
        return int(pg.psql("SELECT count(*) FROM workers").strip())

    def done(call, jid, timeout):
        wait_until(lambda: call("GET", "/v1/jobs/" + jid)[1]["state"] in
                   ("succeeded", "failed", "cancelled"), timeout, what="job " + jid)
        return call("GET", "/v1/jobs/" + jid)[1]["state"]

    big, big_ep = project("hostile")
    small, small_ep = project("quiet")
    first = worker("solo")
    wait_until(lambda: live() == 1, 20, what="the worker's row")
    st, doc = big("POST", "/v1/jobs", dict(SPEC, endpoint_id=big_ep))
    assert st == 422, (st, doc)
    assert doc["type"].endswith("job-too-large") and doc["limit"] == "live_workers", doc
    assert doc["value"] == 2 and doc["max"] == 0, doc
    assert "shards 2 needs 3 live workers" in doc["detail"] and "1 seen" in doc["detail"], doc
    # nothing queued for it, so the other project's job runs at once
    st, jobs = big("GET", "/v1/jobs")
    assert st == 200 and not jobs["jobs"], jobs
    st, job = small("POST", "/v1/jobs", {"endpoint_id": small_ep, "contexts": [1024],
                                         "concurrency": [1], "prefill_contexts": [],
                                         "duration_s": 1, "settle_s": 0})
    assert st in (201, 202), job
    t0 = time.monotonic()
    assert done(small, job["id"], 60) == "succeeded"
    assert time.monotonic() - t0 < 30  # not behind a 30 s barrier
    # three live workers: the job of 2 shards is taken and merged
    more = [worker("more-%d" % i) for i in range(2)]
    wait_until(lambda: live() == 3, 20, what="three workers' rows")
    st, job = big("POST", "/v1/jobs", dict(SPEC, endpoint_id=big_ep))
    assert st in (201, 202), (st, job)
    assert done(big, job["id"], 120) == "succeeded"
    st, res = big("GET", "/v1/jobs/%s/result" % job["id"])
    cell = next(c for c in res["cells"] if c.get("phase") == "decode")
    assert cell["status"] == "valid" and cell["shards"]["count"] == 2, cell
    # a worker that stops takes its row with it: two live, refused again
    more[0].stop()
    assert live() == 2
    st, doc = big("POST", "/v1/jobs", dict(SPEC, endpoint_id=big_ep))
    assert st == 422 and "2 seen" in doc["detail"], (st, doc)
    first.stop()
    more[1].stop()


def test_sharded_job_through_the_api(ctx):
    """POST /v1/jobs with shards: the api takes 2 and "auto", refuses 0 and
    "AUTO" naming the field (problem+json); the endpoint's API key is sealed
    by the api and opened by every shard's worker; /result shows the merged
    cell with where its shards ran."""
    t = T(ctx)
    secret = "sk-shards-SECRET-24"
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE), "--api-key", secret])
    master = "5c" * 32  # test_worker's MASTER_KEY: the workers' T.worker passes it
    port = harness.free_port()
    api = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": t.pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_MASTER_KEY": master, "TOKBENCH_RATE_LIMIT": "0",
        "TOKBENCH_EGRESS_ALLOW": "loopback"})
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: api.alive() and harness.http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    import subprocess
    r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", "shards",
                        "--admin"], env=dict(os.environ, TOKBENCH_DATABASE_URL=t.pg.url),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    hdr = {"Authorization": "Bearer " + r.stdout.strip()}

    def call(method, path, body=None):
        st, h, data = harness.http(method, base + path, body, hdr, 10)
        return st, h, (json.loads(data) if data else None)

    st, _, ep = call("POST", "/v1/endpoints", {"name": "sharded", "base_url": sim.url,
                                               "api_key": secret})
    assert st == 201, ep
    for bad in (0, "AUTO", 65):
        st, h, doc = call("POST", "/v1/jobs", dict(SPEC, endpoint_id=ep["id"], shards=bad))
        assert st == 422, (bad, st, doc)
        assert {k.lower(): v for k, v in h.items()}["content-type"].startswith(
            "application/problem+json")
        assert "shards" in json.dumps(doc), doc
    # a trace cell is not sharded: refused naming shards, and why
    st, h, doc = call("POST", "/v1/jobs", {"endpoint_id": ep["id"], "shards": 2,
                                           "trace": {"format": "mooncake"}})
    assert st == 422, (st, doc)
    assert {k.lower(): v for k, v in h.items()}["content-type"].startswith(
        "application/problem+json")
    assert "a trace cell cannot be sharded" in json.dumps(doc), doc
    st, _, job = call("POST", "/v1/jobs", dict(SPEC, endpoint_id=ep["id"], shards="auto"))
    assert st in (201, 202), job
    assert job.get("spec", {}).get("shards", "auto") == "auto", job
    call("POST", "/v1/jobs/%s/cancel" % job["id"])
    # shards 2 needs 3 live workers at submit (one holds the job)
    shard_workers(t, 3)
    wait_live(t, 3)
    st, _, job = call("POST", "/v1/jobs", dict(SPEC, endpoint_id=ep["id"]))
    assert st in (201, 202), job
    wait_until(lambda: call("GET", "/v1/jobs/" + job["id"])[2]["state"] in
               ("succeeded", "failed"), 120, what="sharded job done")
    st, _, res = call("GET", "/v1/jobs/%s/result" % job["id"])
    assert st == 200, res
    cell = next(c for c in res["cells"] if c.get("phase") == "decode")
    assert cell["status"] == "valid", cell
    assert cell["shards"]["count"] == 2
    check_identical(cell, merged_samples(t, job["id"]))
    # issue 35: the provenance names the job's worker, and each shard's with
    # its wall-clock offset to the database (the workers share this host)
    prov = next(c for c in res["provenance"]["cells"] if c["phase"] == "decode")
    assert isinstance(prov["clock_offset_ms"], float) and prov["worker"] != "unknown", prov
    assert [s["shard"] for s in prov["shards"]] == [0, 1], prov
    for s in prov["shards"]:
        assert s["worker"] != prov["worker"] and abs(s["clock_offset_ms"]) < 1000, prov


RATE_SPEC = {"rates": [30], "rate_duration_s": 4, "arrival": "poisson", "seed": 11,
             "input_tokens": "uniform:100-400", "output_tokens": "uniform:16-64",
             "drain_timeout_s": 5}


def rate_cell(t, jid):
    return json.loads(t.q("SELECT cell FROM job_cells WHERE job_id = '%s' AND phase = 'rate'"
                          % jid))


def sim_log_since(sim, since):
    st, _, log = harness.http_json("GET", sim.url + "/sim/requests?since=%d" % since)
    assert st == 200
    return log


def test_sharded_rate_cell_is_the_one_schedule(ctx):
    """A rate cell of Poisson arrivals (seed 11, 30/s for 4 s, prompt and
    output lengths drawn per request) driven by 3 shards: the union of the
    arrivals the shards stored is exactly the schedule one process runs for
    the same seed (its samples' sched_ms), and so are the length draws (the
    same output tokens in all); the merged percentiles are identical to a
    recomputation from the stored samples; tokens/s within 2% of the
    simulator's own log of the cell's requests."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    priced(t, ep)
    shard_workers(t, 4)
    since = sim_log_since(sim, 0)["next"]
    jid = t.submit(ep, dict(RATE_SPEC, shards=3))
    t.wait_state(jid, "succeeded", timeout=120)
    cell = rate_cell(t, jid)
    check_price(cell)
    assert cell["status"] == "valid", cell
    assert cell["shards"]["count"] == 3, cell["shards"]
    assert cell["shards"]["skew_max_ms"] <= cell["shards"]["skew_limit_ms"], cell["shards"]
    # no per-request arrays (docs/deploy.md says why); the server's series
    # by the job's worker over the shards' span from t0 (issue 34, item 5)
    assert "samples" not in cell, sorted(cell["samples"])
    ss = cell["server_series"]
    assert ss["t_s"] and all(0 <= x <= cell["measured_s"] + 0.01 for x in ss["t_s"]), ss["t_s"]
    assert max(ss["running"]) >= 1, ss
    # the checks of its figures, judged on the union and that watch
    ck = cell["checks"]
    assert ck["ok"] == (ck["failed"] == []), ck  # the lag's may fail on a loaded machine
    assert abs(ck["schedule_lag_p99_ms"] - cell["schedule_lag_ms"]["p99"]) < 1e-3, ck
    assert abs(ck["interarrival_cv"] - cell["interarrival_cv"]) < 1e-3, ck
    assert ck["dropped"] == 0 and ck["interarrival_cv_expected"] == 1.0, ck
    assert ck["drained_before"] is True and ck["drained_after"] is True, ck
    assert "client_cpu_share" not in ck, ck  # each shard's own, not the job's worker's
    shards = merged_samples(t, jid, "rate")
    assert len(shards) == 3 and all(s["rate"] for s in shards)
    log = [r for r in sim_log_since(sim, since)["requests"] if r["end"] == "completed"]
    # the single process, same seed
    since1 = sim_log_since(sim, 0)["next"]
    jone = t.submit(ep, RATE_SPEC)
    t.wait_state(jone, "succeeded", timeout=120)
    one = rate_cell(t, jone)
    assert one["status"] == "valid" and "shards" not in one, one
    want = sorted(round(v * 1000) for v in one["samples"]["sched_ms"])
    got = sorted(v for s in shards for v in s["rate"]["series"][3])
    assert got == want, (len(got), len(want))
    # each shard took the arrivals i = k (mod 3) of that schedule
    for k, s in enumerate(shards):
        assert sorted(s["rate"]["series"][3]) == want[k::3], k
    assert cell["requests"] == one["requests"] == len(want)
    assert cell["completed"] == len(want) and cell["errors"] == 0, cell
    assert cell["output_tokens"] == one["output_tokens"], (cell["output_tokens"],
                                                           one["output_tokens"])
    ttft = [v * 1000 for s in shards for v in s["series"][0]]
    tpot = [v * 1000 for s in shards for v in s["series"][1]]
    e2e = [v * 1000 for s in shards for v in s["series"][2]]
    gaps = [v * 1000 for s in shards for v in s["series"][3]]
    lag = [v * 1000 for s in shards for v in s["rate"]["series"][0]]
    for p, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        for name, vals in (("ttft_ms", ttft), ("tpot_ms", tpot), ("e2e_ms", e2e),
                           ("tbt_ms", gaps)):
            assert cell[name][p] == quantile(vals, q) / 1e6, (name, p)
    assert cell["schedule_lag_ms"]["p99"] == quantile(lag, 0.99) / 1e6
    assert cell["schedule_lag_ms"]["max"] == max(lag) / 1e6
    assert cell["output_tokens"] == sum(s["tokens"] for s in shards)
    assert cell["good"] == sum(s["good"] for s in shards)
    # the steady-state window (issue 25) of the union of the shards' requests
    st = cell["steady"]
    assert st["found"] and st["reference"] == "level", st
    assert st["peak_in_flight"] == cell["max_in_flight"], (st, cell["max_in_flight"])
    assert 0 <= st["start_s"] < st["end_s"] <= cell["measured_s"] + 1e-6, st
    assert st["requests"] <= cell["requests"] and one["steady"]["found"], (st, one["steady"])
    # each request whole, its series aligned: ok, TTFT + 1, TPOT + 1, tokens
    for s in shards:
        lag, start, end, _, ok, rttft, rtpot, rtok = s["rate"]["series"]
        assert len({len(lag), len(start), len(end), len(ok), len(rttft), len(rtpot),
                    len(rtok)}) == 1
        assert sum(ok) == s["completed"] and sum(rtok) == s["tokens"]
        assert sorted(v - 1 for v in rttft if v) == sorted(s["series"][0])
        assert sorted(v - 1 for v in rtpot if v) == sorted(s["series"][1])
        assert all(e >= b for b, e in zip(start, end))
    # the simulator's truth: its own log of the cell's requests
    assert len(log) == len(want), (len(log), len(want))
    assert sum(r["output_tokens"] for r in log) == cell["output_tokens"]
    span = (max(r["end_ns"] for r in log) - min(r["arrival_ns"] for r in log)) / 1e9
    truth = sum(r["output_tokens"] for r in log) / span
    assert abs(cell["total_tps"] - truth) / truth < 0.02, (cell["total_tps"], truth)
    assert abs(cell["offered_rps"] - one["offered_rps"]) / one["offered_rps"] < 0.02


CONVO_SPEC = {"rates": [6], "rate_requests": 12, "arrival": "poisson", "seed": 5,
              "input_tokens": "uniform:150-250", "output_tokens": "uniform:16-40",
              "conversation": {"turns": 3, "think_time_s": 0.2, "think": "exponential"},
              "drain_timeout_s": 5}


def test_sharded_conversations_by_number(ctx):
    """Conversations split by number (conversation j to shard j mod 3),
    every turn with its first: the union has the one process's
    conversations, turns, prompts and output tokens (the same seed: each
    conversation's draws seeded by its number), and each turn's TTFT
    percentiles are those of the union of the shards' stored TTFTs of that
    turn."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    shard_workers(t, 4)
    jid = t.submit(ep, dict(CONVO_SPEC, shards=3))
    t.wait_state(jid, "succeeded", timeout=120)
    cell = rate_cell(t, jid)
    assert cell["status"] == "valid", cell
    assert cell["shards"]["count"] == 3, cell["shards"]
    jone = t.submit(ep, CONVO_SPEC)
    t.wait_state(jone, "succeeded", timeout=120)
    one = rate_cell(t, jone)
    assert one["status"] == "valid", one
    assert cell["conversations"] == one["conversations"] == {
        "started": 12, "completed": 12, "abandoned": 0, "dropped": 0}, cell["conversations"]
    assert cell["requests"] == one["requests"] == 36
    assert cell["output_tokens"] == one["output_tokens"]
    assert cell["prompt_tokens_mean"] == one["prompt_tokens_mean"]
    shards = merged_samples(t, jid, "rate")
    # the conversations' arrivals: shard k has conversations k, k + 3, ...
    # (12 arrivals, 4 each), each at its own time of the one schedule
    firsts = [v for s in shards for v in s["rate"]["series"][3]]
    assert [len(s["rate"]["series"][3]) for s in shards] == [4, 4, 4]
    assert len(set(firsts)) == 12
    for tn, (mine, theirs) in enumerate(zip(cell["turns"], one["turns"])):
        assert mine["requests"] == theirs["requests"] == 12, (tn, mine)
        assert mine["prompt_tokens_mean"] == theirs["prompt_tokens_mean"], (tn, mine, theirs)
        ttft = [v * 1000 for s in shards for v in s["rate"]["turns"][tn]["ttft"]]
        for p, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            assert mine["ttft_ms"][p] == quantile(ttft, q) / 1e6, (tn, p)


def test_killed_rate_shard_measures_the_cell_again_whole(ctx):
    """A rate cell's shard killed mid-schedule: that attempt fails ("lost
    its lease"), the other shard stops, and the whole schedule is run again
    by both shards together; the merged cell holds one schedule's arrivals,
    never part of one attempt beside part of another."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    ws = fresh_workers(t, 3)
    jid = t.submit(ep, dict(RATE_SPEC, rate_duration_s=5, shards=2))
    wait_until(lambda: t.q("SELECT count(*) FROM cell_barriers WHERE job_id = '%s' AND "
                           "state = 'started'" % jid) == "1", 60, what="barrier started")
    time.sleep(1)  # mid-schedule
    victim = t.q("SELECT worker FROM cell_shards WHERE job_id = '%s' AND attempt = 1 "
                 "ORDER BY shard LIMIT 1" % jid)
    ws[victim].kill()
    shard_workers(t, 1)
    t.wait_state(jid, "succeeded", timeout=180)
    rows = t.q("SELECT attempt || '|' || state || '|' || coalesce(reason, '') FROM "
               "cell_barriers WHERE job_id = '%s' ORDER BY attempt" % jid).splitlines()
    assert rows[0].startswith("1|failed|shard ") and "lost its lease" in rows[0], rows
    assert rows[-1].split("|")[1] == "merged", rows
    cell = rate_cell(t, jid)
    assert cell["status"] == "valid", cell
    assert cell["shards"]["count"] == 2
    shards = merged_samples(t, jid, "rate")
    sched = sorted(v for s in shards for v in s["rate"]["series"][3])
    assert cell["requests"] == len(sched) == len(set(sched)), (cell["requests"], len(sched))
    for k, s in enumerate(shards):
        assert sorted(s["rate"]["series"][3]) == sched[k::2], k


def test_a_shard_with_no_arrival_of_its_own(ctx):
    """A sparse schedule (constant 1/s for 2 s: arrivals at 0 and 1 s) on 3
    shards: the third has no arrival, still walks the schedule, stores an
    empty share and the cell merges whole; counted requests cap the shards
    (rate_requests 2 with shards 3: 2 shards)."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    fresh_workers(t, 4)
    spec = dict(RATE_SPEC, rates=[1], rate_duration_s=2, arrival="constant", shards=3)
    jid = t.submit(ep, spec)
    t.wait_state(jid, "succeeded", timeout=120)
    cell = rate_cell(t, jid)
    assert cell["status"] == "valid" and cell["shards"]["count"] == 3, cell
    shards = merged_samples(t, jid, "rate")
    assert [len(s["rate"]["series"][3]) for s in shards] == [1, 1, 0], shards
    assert cell["requests"] == cell["completed"] == 2, cell
    spec = dict(RATE_SPEC, rates=[5], rate_requests=2, arrival="constant", shards=3)
    jid = t.submit(ep, spec)
    t.wait_state(jid, "succeeded", timeout=120)
    cell = rate_cell(t, jid)
    assert cell["status"] == "valid" and cell["shards"]["count"] == 2, cell
    assert cell["requests"] == 2, cell


def test_handed_back_job_meets_no_old_barrier(ctx):
    """The job's worker stopped (SIGTERM) mid-sharded-cell hands the job
    back, which keeps its attempt number; the worker that takes it next
    opens barriers of its own (the run's tag in their keys), so its one
    attempt at the cell (TOKBENCH_SHARD_ATTEMPTS=1) is not refused as a
    duplicate of the last run's, and the cell is measured whole."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    ws = fresh_workers(t, 3, TOKBENCH_SHARD_ATTEMPTS="1")
    jid = t.submit(ep, dict(SPEC, duration_s=4))
    wait_until(lambda: t.q("SELECT count(*) FROM cell_barriers WHERE job_id = '%s' AND "
                           "state = 'started'" % jid) == "1", 60, what="barrier started")
    coord = t.q("SELECT lease_owner FROM jobs WHERE id = '%s'" % jid)
    attempt = t.q("SELECT attempts FROM jobs WHERE id = '%s'" % jid)
    ws[coord].proc.send_signal(signal.SIGTERM)
    shard_workers(t, 1, TOKBENCH_SHARD_ATTEMPTS="1")
    t.wait_state(jid, "succeeded", timeout=180)
    assert t.q("SELECT attempts FROM jobs WHERE id = '%s'" % jid) == attempt  # handed back
    rows = t.q("SELECT cell_key || '|' || state FROM cell_barriers WHERE job_id = '%s' "
               "ORDER BY created_at" % jid).splitlines()
    assert len(rows) == 2 and rows[-1].endswith("|merged"), rows
    tags = {r.split("/")[0] for r in rows}
    assert len(tags) == 2 and all(x.startswith("a%s-" % attempt) for x in tags), rows
    cell = decode_cell(t, jid)
    assert cell["status"] == "valid" and cell["shards"]["count"] == 2, cell


def fresh_workers(t, n, **env):
    """n workers with env, and none of the earlier tests' (a job's worker
    decides "auto" by its own budget)."""
    for w in list(t.ctx.__dict__.get("shard_workers", {}).values()):
        w.kill()
    t.ctx.__dict__["shard_workers"] = {}
    return shard_workers(t, n, **env)


def test_auto_shards_by_the_workers_budget(ctx):
    """shards: "auto": a rate cell of 30/s with TOKBENCH_SHARD_MAX_RPS=12 gets
    ceil(30 / 12) = 3 shards, a decode cell of 8 streams with
    TOKBENCH_SHARD_MAX_STREAMS=3 ceil(8 / 3) = 3; each cell records what was
    asked and the budget that decided."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    fresh_workers(t, 4, TOKBENCH_SHARD_MAX_RPS="12", TOKBENCH_SHARD_MAX_STREAMS="3")
    spec = dict(RATE_SPEC, rate_duration_s=2, shards="auto", contexts=[1024], concurrency=[8],
                prefill_contexts=[], duration_s=2, settle_s=0.3, max_output=4096)
    jid = t.submit(ep, spec)
    t.wait_state(jid, "succeeded", timeout=180)
    rate = rate_cell(t, jid)
    assert rate["status"] == "valid", rate
    sh = rate["shards"]
    assert (sh["count"], sh["asked"], sh["max_rps"]) == (3, "auto", 12), sh
    assert "max_streams" not in sh
    dec = decode_cell(t, jid)
    assert dec["status"] == "valid", dec
    sh = dec["shards"]
    assert (sh["count"], sh["asked"], sh["max_streams"]) == (3, "auto", 3), sh
    assert dec["concurrency"] == 8
    shards = merged_samples(t, jid, "rate")
    assert len(shards) == 3
    assert sum(len(s["rate"]["series"][3]) for s in shards) == rate["requests"]


def test_sharded_repeats_each_measured_whole(ctx):
    """repeats 2 with shards 2: each pass's measurement of the cell is a
    barrier of its own (both shards together), merged exactly; the cell
    combines the two as any repeated cell does."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    fresh_workers(t, 3)
    jid = t.submit(ep, dict(SPEC, duration_s=2, repeats=2))
    t.wait_state(jid, "succeeded", timeout=180)
    rows = t.q("SELECT cell_key || '|' || state FROM cell_barriers WHERE job_id = '%s' "
               "ORDER BY cell_key" % jid).splitlines()
    assert [re.sub(r"^a1-[0-9a-f]{16}/", "a1/", r) for r in rows] == [
        "a1/decode/1024/8/r1|merged", "a1/decode/1024/8/r2|merged"], rows
    cell = decode_cell(t, jid)
    assert cell["status"] == "valid", cell
    runs = cell["repeat_runs"]
    assert [r["repeat"] for r in runs] == [1, 2], runs
    for r in runs:  # each repeat's shards stay with its run
        assert r["shards"]["count"] == 2, r
        assert r["shards"]["skew_max_ms"] <= r["shards"]["skew_limit_ms"], r
    _, _, body = harness.http("GET", sim.url + "/sim/expected?context=1024&concurrency=8")
    truth = json.loads(body)["total_tok_s"]
    assert abs(cell["total_tps"] - truth) / truth < 0.02, (cell["total_tps"], truth)


def test_a_shard_that_cannot_run_fails_its_barrier_with_why(ctx):
    """Shard workers whose egress policy refuses the endpoint (loopback not
    allowed): each fails its barrier at once with why, never reaching the
    endpoint, and the cell's error says which shard, which worker and why
    (not a lapsed lease)."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    ws = fresh_workers(t, 1, TOKBENCH_SHARD_ATTEMPTS="1")
    coord = list(ws)[0]
    jid = t.submit(ep, dict(RATE_SPEC, rate_duration_s=2, shards=2))
    wait_until(lambda: t.q("SELECT coalesce(lease_owner, '') FROM jobs WHERE id = '%s'"
                           % jid) == coord, 30, what="the job on the allowed worker")
    shard_workers(t, 2, TOKBENCH_EGRESS_ALLOW="")
    t.wait_state(jid, ("succeeded", "failed"), timeout=120)
    cell = rate_cell(t, jid)
    assert cell["status"] == "error", cell
    assert "sharded cell failed on every attempt: shard " in cell["reason"], cell["reason"]
    assert "this worker's egress policy refuses the endpoint" in cell["reason"], cell["reason"]
    assert "lost its lease" not in cell["reason"]
    row = t.q("SELECT state || '|' || reason FROM cell_barriers WHERE job_id = '%s'" % jid)
    assert row.startswith("failed|shard "), row
    assert t.q("SELECT count(*) FROM cell_shards WHERE job_id = '%s' AND state <> 'failed'"
               % jid) == "0"


def test_barrier_timeout_is_recorded(ctx):
    """Three shards asked, two workers (one holds the job): the barrier never
    fills, each attempt fails with its reason and releases its claim, and
    the cell ends an error saying so; the job still ends."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    fresh_workers(t, 2, TOKBENCH_SHARD_BARRIER_S="2", TOKBENCH_SHARD_ATTEMPTS="2")
    jid = t.submit(ep, dict(SPEC, shards=3))
    t.wait_state(jid, ("succeeded", "failed"), timeout=120)
    cell = decode_cell(t, jid)
    assert cell["status"] == "error", cell
    assert "sharded cell failed on every attempt: barrier timeout: 1 of 3 shards ready " \
           "after 2.0 s" in cell["reason"], cell["reason"]
    rows = t.q("SELECT attempt || '|' || state FROM cell_barriers WHERE job_id = '%s' "
               "ORDER BY attempt" % jid).splitlines()
    assert rows == ["1|failed", "2|failed"], rows
    assert t.q("SELECT count(*) FROM cell_shards WHERE job_id = '%s' AND state <> 'failed'"
               % jid) == "0"


def test_sharded_cell_has_every_field_of_a_whole_cell(ctx):
    """Issue 34, item 5: a sharded decode cell carries what the same cell
    measured whole carries: its samples, the server's series over the
    shards' common window (read by the job's worker on its own clock, t0
    mapped through its offset), the checks, the server's own timings of
    every shard's requests (llama.cpp's `timings`, merged as one place
    holding them all: tb_samples' TBS2 section) and its energy from the
    endpoint's telemetry over that window.  Both cells of the same
    simulator and spec; the sharded one's series spans its window and
    counts what its shards drove."""
    t = T(ctx)
    sim = ctx.sim(profile="bench", flavour="llamacpp", args=["--time-scale", str(SCALE)])
    ep = t.endpoint(sim)
    priced(t, ep)
    t.q("UPDATE endpoints SET telemetry_url = '%s/sim/dcgm/metrics' WHERE id = '%s'"
        % (sim.url, ep))
    shard_workers(t, 3)
    # requests end in the window; and a rate cell beside, sharded the same way
    spec = dict(SPEC, concurrency=[4], max_output=256, rates=[20], rate_duration_s=2,
                arrival="poisson", seed=5, output_tokens="uniform:16-48", drain_timeout_s=5)
    jid = t.submit(ep, spec)
    t.wait_state(jid, "succeeded", timeout=120)
    sharded = decode_cell(t, jid)
    jid2 = t.submit(ep, dict(spec, shards=1))
    t.wait_state(jid2, "succeeded", timeout=120)
    whole = decode_cell(t, jid2)
    assert sharded["status"] == whole["status"] == "valid", (sharded, whole)
    assert sharded["shards"]["count"] == 2, sharded["shards"]
    missing = sorted(set(whole) - set(sharded))
    assert missing == [], missing
    for k in ("checks", "server_series", "server_timings", "efficiency", "samples"):
        lost = sorted(set(whole[k]) - set(sharded[k]) - {"client_cpu_share"})
        assert lost == [], (k, lost)
    # the series: the window's, seen by one watch of the server
    ss = sharded["server_series"]
    assert ss["t_s"] and all(0 <= x <= spec["duration_s"] + 0.01 for x in ss["t_s"]), ss["t_s"]
    assert len(ss["t_s"]) >= spec["duration_s"] - 1, ss["t_s"]
    assert all(r == 4 for r in ss["running"]), ss["running"]
    assert sharded["checks"]["achieved_source"] == "server", sharded["checks"]
    assert sharded["checks"]["requested_concurrency"] == 4
    # the server's timings: every request of both shards, each counted
    # exactly as the server did
    st = sharded["server_timings"]
    assert st["source"] == "llama.cpp timings", st
    assert st["requests"] >= 1 and st["tokens_equal"] == st["requests"], st
    stored = merged_samples(t, jid)
    assert all(s["srv"] is not None and s["srv"][0] == 1 for s in stored), stored
    assert sum(s["srv"][1] for s in stored) == st["requests"], (st, [s["srv"][:5] for s in stored])
    # energy over the common window: J per token near the whole cell's
    e, ew = sharded["efficiency"], whole["efficiency"]
    assert e["j_per_output_token"] > 0, e
    assert abs(e["j_per_output_token"] - ew["j_per_output_token"]) <= \
        0.25 * ew["j_per_output_token"], (e, ew)
    # the rate cell: all but the per-request arrays (docs/deploy.md)
    rs, rw = rate_cell(t, jid), rate_cell(t, jid2)
    assert rs["shards"]["count"] == 2 and rs["status"] == rw["status"] == "valid", (rs, rw)
    missing = sorted(set(rw) - set(rs) - {"samples"})
    assert missing == [], missing
    assert rs["server_timings"]["requests"] == rs["completed"], (rs["server_timings"], rs)
    assert rs["server_timings"]["tokens_equal"] == rs["completed"], rs["server_timings"]
    assert rs["efficiency"]["j_per_output_token"] > 0, rs["efficiency"]
    assert rs["server_series"]["t_s"] and rs["checks"]["drained_after"] is True, rs["checks"]
