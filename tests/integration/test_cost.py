"""Cost and energy per token (issue 26): an endpoint's gpu, price_per_hour,
currency and telemetry_url (sql/0012_endpoint_cost.sql, service/api_spec.c),
stored, returned, changed and refused; an import priced from its labels
(tb_cost_apply_labels); tokbench-sim's dcgm-exporter-shaped telemetry
(sim/sim_power.c) against its own model; and jobs against the simulator with
telemetry: J per output token and cost per million tokens held to the
simulator's truth (/sim/expected's power) within 2%, an injected throttle
flagged (lib/result/tb_cost.c, lib/engine/tb_telemetry.c).

The truth of a decode window: the simulator's energy is idle_w x gpus x
seconds + j_per_decode_token x tokens generated + j_per_prefill_token x
prompt tokens prefilled (prefix-cache hits excluded), so over a window of
measured_s seconds in which the client counted output_tokens (the server
generated as many, to a chunk per stream at the window's edges) and
prefilled no cold prompt (the scout warmed the prompt), J per output token
is j_per_decode_token + idle_w x measured_s / output_tokens.
"""
import json
import os
import re
import subprocess
import time
import urllib.parse

import harness
import timing
from harness import http, wait_until

MASTER = "7c" * 32
FIX = os.path.join(harness.ROOT, "tests", "fixtures")
SPEC = {"contexts": [512], "concurrency": [2, 4], "prefill_contexts": [],
        "duration_s": 3, "settle_s": 0.2, "max_output": 2048}

STATE = {}


def setup(ctx):
    if STATE:
        return STATE
    pg = ctx.postgres()
    port = harness.free_port()
    api = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_RATE_LIMIT": "0"})
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: api.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    keys = []
    for p in ("cost-a", "cost-b", "cost-p"):
        r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", p, "--admin"],
                           env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        keys.append(r.stdout.strip())
    STATE.update(pg=pg, base=base, key=keys[0], other=keys[1], api=api, _ctx=ctx, pkey=keys[2])
    return STATE


def call(s, method, path, body=None, key=None, timeout=10):
    st, h, data = http(method, s["base"] + path, body,
                       {"Authorization": "Bearer " + (key or s["key"])}, timeout)
    return st, (json.loads(data) if data else None)


def worker(s):
    if "worker" not in s:
        s["worker"] = s["_ctx"].process("tokbench-worker", [], env={
            "TOKBENCH_DATABASE_URL": s["pg"].url, "TOKBENCH_MASTER_KEY": MASTER,
            "TOKBENCH_WORKER_ID": "w-cost", "TOKBENCH_LEASE_S": "15",
            "TOKBENCH_HEARTBEAT_S": "2"})
        wait_until(lambda: '"msg":"worker ready"' in s["worker"].output(), 20,
                   what="worker ready")
    return s["worker"]


def test_endpoint_cost_fields(ctx):
    s = setup(ctx)
    body = {"name": "h200", "base_url": "http://127.0.0.1:9",
            "gpu": {"name": "H200", "count": 2}, "price_per_hour": 7.5, "currency": "EUR",
            "telemetry_url": "http://127.0.0.1:9400/metrics"}
    st, ep = call(s, "POST", "/v1/endpoints", body)
    assert st == 201, ep
    assert ep["gpu"] == {"name": "H200", "count": 2}
    assert ep["price_per_hour"] == 7.5 and ep["currency"] == "EUR"
    assert ep["telemetry_url"] == "http://127.0.0.1:9400/metrics"
    st, one = call(s, "GET", "/v1/endpoints/" + ep["id"])
    assert st == 200 and one["price_per_hour"] == 7.5 and one["gpu"]["count"] == 2
    # another project does not see it
    st, _ = call(s, "GET", "/v1/endpoints/" + ep["id"], key=s["other"])
    assert st == 404
    # a patch changes what it names; null clears
    st, pt = call(s, "PATCH", "/v1/endpoints/" + ep["id"], {"price_per_hour": 9})
    assert st == 200 and pt["price_per_hour"] == 9 and pt["currency"] == "EUR", pt
    st, pt = call(s, "PATCH", "/v1/endpoints/" + ep["id"],
                  {"gpu": None, "currency": None, "telemetry_url": None})
    assert st == 200, pt
    assert pt["gpu"] is None and pt["currency"] is None and pt["telemetry_url"] is None
    assert pt["price_per_hour"] == 9
    # bad values are named
    for bad, field in (({"price_per_hour": -1}, "price_per_hour"),
                       ({"currency": "usd"}, "currency"), ({"currency": "EURO"}, "currency"),
                       ({"gpu": {"name": "x", "count": 0}}, "gpu.count"),
                       ({"gpu": {"name": "x", "cores": 3}}, "gpu.cores"),
                       ({"telemetry_url": "file:///etc/passwd"}, "telemetry_url")):
        st, p = call(s, "PATCH", "/v1/endpoints/" + ep["id"], bad)
        assert st == 422, (bad, p)
        assert any(e["field"] == field for e in p["errors"]), (bad, p)


def test_telemetry_url_under_the_egress_policy(ctx):
    """The api with its default egress policy refuses a loopback
    telemetry_url as it refuses such a base_url."""
    pg = ctx.postgres(fresh=True)
    port = harness.free_port()
    api = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_RATE_LIMIT": "0", "TOKBENCH_EGRESS_ALLOW": ""})
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: api.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    r = subprocess.run([harness.bin("tokbench"), "keys", "create", "--project", "eg", "--admin"],
                       env=dict(os.environ, TOKBENCH_DATABASE_URL=pg.url), capture_output=True,
                       text=True, timeout=60)
    key = r.stdout.strip()
    st, h, data = http("POST", base + "/v1/endpoints",
                       {"name": "e", "base_url": "https://gpu.example.com",
                        "telemetry_url": "http://127.0.0.1:9400/metrics"},
                       {"Authorization": "Bearer " + key})
    p = json.loads(data)
    assert st == 422 and "telemetry_url" in p["detail"], p
    assert p["errors"][0]["field"] == "telemetry_url"


def test_import_priced_from_labels(ctx):
    s = setup(ctx)
    st, ep = call(s, "POST", "/v1/endpoints", {"name": "imp", "base_url": "http://127.0.0.1:9"})
    assert st == 201
    with open(os.path.join(FIX, "llm_inference_bench_vllm.json")) as f:
        doc = json.load(f)
    st, r = call(s, "POST", "/v1/results", {
        "endpoint_id": ep["id"], "result": doc,
        "labels": {"gpu": "H200", "gpu_count": "2", "price_per_hour": "7.2", "currency": "USD"}})
    assert st == 201, r
    st, res = call(s, "GET", "/v1/jobs/%s/result" % r["job_id"])
    assert res["cost"]["price_per_hour"] == 7.2 and res["cost"]["gpu"]["count"] == 2
    n = 0
    for c in res["cells"]:
        if c["phase"] != "decode" or c["status"] != "valid":
            assert "efficiency" not in c
            continue
        e = c["efficiency"]
        want = 7.2 * c["measured_s"] / 3600 / c["output_tokens"] * 1e6
        assert abs(e["cost_per_m_output_tokens"] - want) <= 1e-9 * want, (e, want)
        assert abs(e["tps_per_gpu"] - c["total_tps"] / 2) < 1e-9
        n += 1
    assert n > 10
    # the report carries the section; the CSV its columns
    st, h, md = http("GET", s["base"] + "/v1/jobs/%s/report?format=md" % r["job_id"], None,
                     {"Authorization": "Bearer " + s["key"]})
    assert st == 200 and b"### Cost and energy" in md
    st, h, csv = http("GET", s["base"] + "/v1/jobs/%s/report?format=csv" % r["job_id"], None,
                      {"Authorization": "Bearer " + s["key"]})
    head = csv.split(b"\r\n")[0].split(b",")
    assert b"cost_per_m_output_tokens" in head and b"j_per_output_token" in head
    # without labels: no cost, no columns (the CSV as it was)
    st, r2 = call(s, "POST", "/v1/results", {"endpoint_id": ep["id"], "result": doc})
    st, h, csv = http("GET", s["base"] + "/v1/jobs/%s/report?format=csv" % r2["job_id"], None,
                      {"Authorization": "Bearer " + s["key"]})
    assert b"cost_per_m_output_tokens" not in csv.split(b"\r\n")[0]


def dcgm(url):
    st, h, data = http("GET", url + "/sim/dcgm/metrics")
    assert st == 200
    out = {}
    for line in data.decode().splitlines():
        m = re.match(r'(DCGM_FI_DEV_\w+)\{gpu="(\d+)",UUID="(GPU-[^"]+)"[^}]*\} (\S+)$', line)
        if m:
            out.setdefault(m.group(1), {})[int(m.group(2))] = float(m.group(4))
    return out


def test_sim_telemetry_shape_and_truth(ctx):
    """The simulator's telemetry: the dcgm-exporter names, one series per GPU
    (the vLLM H200 profile has two), the counter in mJ growing at idle by
    idle_w x gpus, the reasons' idle bit, an injected throttle's bit."""
    sim = ctx.sim("vllm-h200x2-step3p7", args=["--throttle", "0x4@t=1.5"])
    exp = json.loads(http("GET", sim.url + "/sim/expected?context=1024&concurrency=4")[2])
    pw = exp["power"]
    assert pw["gpus"] == 2 and pw["idle_w"] > 0
    a = dcgm(sim.url)
    for k in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
              "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP",
              "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"):
        assert sorted(a[k]) == [0, 1], (k, a)
    assert a["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"][0] == 1  # idle
    t0 = time.monotonic()
    time.sleep(1.0)
    b = dcgm(sim.url)
    dt = time.monotonic() - t0
    mj = sum(b["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].values()) - \
        sum(a["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].values())
    assert abs(mj / 1e3 / dt - pw["idle_w"]) < 0.1 * pw["idle_w"], (mj, dt, pw)
    time.sleep(0.7)
    c = dcgm(sim.url)
    assert int(c["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"][1]) & 4
    assert c["DCGM_FI_DEV_SM_CLOCK"][0] < a["DCGM_FI_DEV_SM_CLOCK"][0] or \
        c["DCGM_FI_DEV_SM_CLOCK"][0] < pw["sm_clock_mhz"]


def wait_job(s, jid, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st, doc = call(s, "GET", "/v1/jobs/%s?wait=5" % jid, timeout=15)
        assert st == 200, doc
        if doc["state"] in ("succeeded", "failed", "cancelled"):
            return doc
    raise AssertionError("job %s did not end" % jid)


def run_job(s, ep, spec, labels):
    st, doc = call(s, "POST", "/v1/jobs", dict(spec, endpoint_id=ep, labels=labels))
    assert st == 202, doc
    job = wait_job(s, doc["id"])
    assert job["state"] == "succeeded", job
    st, res = call(s, "GET", "/v1/jobs/%s/result" % doc["id"])
    assert st == 200
    return doc["id"], res


def frontier_of(points, higher_y):
    """The frontier as docs/reports.md defines it, computed here: a point is
    off it when another's 95% intervals lie wholly beyond its own on both
    axes (x higher; y higher, or lower for a cost)."""
    def beyond(q, p, k, higher):
        return q[k][0] > p[k][1] if higher else q[k][1] < p[k][0]
    return [not any(q is not p and beyond(q, p, "x", True) and beyond(q, p, "y", higher_y)
                    for q in points) for p in points]


def test_pareto_three_configurations(ctx):
    """GET /v1/pareto over jobs of three simulated configurations (1, 2 and 4
    GPUs at three prices): its points are the jobs' valid decode cells, its
    frontier the one computed here from the jobs' own results, and the SLO
    question answered with its evidence; an SLO nothing meets says so."""
    worker(setup(ctx))
    s = dict(STATE)
    s["key"] = s["pkey"]  # a project of its own: the report's frontier is the project's
    confs = (("tiny", 1, 2.0), ("vllm-h200x2-step3p7", 2, 7.0),
             ("sglang-rtxpro6000x4-step3p7", 4, 5.0))
    spec = {"contexts": [512], "concurrency": [1, 4, 16], "prefill_contexts": [],
            "duration_s": 1.0, "settle_s": 0.1, "max_output": 2048}
    docs = {}
    for prof, gpus, price in confs:
        sim = ctx.sim(prof)
        st, ep = call(s, "POST", "/v1/endpoints", {
            "name": "pareto-" + prof, "base_url": sim.url, "gpu": {"name": prof, "count": gpus},
            "price_per_hour": price})
        assert st == 201, ep
        jid, res = run_job(s, ep["id"], spec, {"pareto": "three"})
        docs[jid] = (res, gpus, price)
    q = "/v1/pareto?labels=" + json.dumps({"pareto": "three"}).replace(" ", "")
    st, ans = call(s, "GET", q)
    assert st == 200, ans
    assert ans["jobs"] == 3 and ans["y"] == "tps_per_gpu" and ans["best"] is None
    # the points, computed here from the results
    mine = []
    for jid, (res, gpus, price) in docs.items():
        for c in res["cells"]:
            if c["phase"] != "decode" or c["status"] != "valid":
                continue
            lo, hi = c["total_tps_ci95"]
            n = c["concurrency"]
            mine.append({"job": jid, "conc": n, "x": (lo / n, hi / n), "y": (lo / gpus, hi / gpus),
                         "tps": c["total_tps"], "ttft": c["ttft_ms"]["p50"]})
    # tiny's KV budget holds 16 x (512 + 2048) tokens no more: over capacity
    assert len(mine) == 8, mine
    got = {(p["job_id"], p["concurrency"]): p for p in ans["points"]}
    assert len(got) == len(ans["points"]) == 8
    for m, on in zip(mine, frontier_of(mine, True)):
        p = got[(m["job"], m["conc"])]
        assert abs(p["x"] - m["tps"] / m["conc"]) < 1e-6 * m["tps"]
        assert abs(p["y_ci95"][0] - m["y"][0]) < 1e-6 * m["tps"]
        assert p["frontier"] is on, (p, m)
    assert ans["frontier"] == sum(frontier_of(mine, True))
    assert 1 <= ans["frontier"] < 8
    # each job's HTML report places its cells against the others' frontier
    fr = frontier_of(mine, True)
    for jid in docs:
        st, h, html = http("GET", s["base"] + "/v1/jobs/%s/report" % jid, None,
                           {"Authorization": "Bearer " + s["key"]})
        assert st == 200 and b'id="frontier-place"' in html
        own = [on for m, on in zip(mine, fr) if m["job"] == jid]
        m = re.search(rb"(\d+) of this job's (\d+) decode cells are on the frontier of the "
                      rb"project's (\d+) other", html)
        assert m and (int(m.group(1)), int(m.group(2)), int(m.group(3))) == \
            (sum(own), len(own), 2), (m and m.groups(), own)
        assert html.count(b'fill="#d32f2f"') == len(own)
    # the SLO question: the most tok/s per GPU at 4 requests at once or
    # more, TTFT p50 under the median of those cells' TTFTs
    cand = [m for m in mine if m["conc"] >= 4]
    limit = sorted(m["ttft"] for m in cand)[len(cand) // 2]
    meet = [m for m in cand if m["ttft"] <= limit]
    best = max(meet, key=lambda m: m["tps"] / dict((j, g) for j, (_, g, _) in docs.items())[m["job"]])
    st, ans = call(s, "GET", q + "&concurrency=4&ttft_p50_ms=%r" % limit)
    b = ans["best"]
    assert b["answer"] == "found" and b["meeting"] == len(meet), b
    assert (b["best"]["job_id"], b["best"]["concurrency"]) == (best["job"], best["conc"])
    assert b["evidence"][0]["job_id"] == best["job"] and "y_ci95" in b["evidence"][0]
    st, ans = call(s, "GET", q + "&concurrency=4&ttft_p50_ms=0.001")
    assert ans["best"]["answer"] == "no configuration yet" and ans["best"]["best"] is None
    # another project sees none of it; an endpoint of another project is 404
    st, other = call(s, "GET", q, key=s["other"])
    assert st == 200 and other["points"] == [] and other["jobs"] == 0
    st, _ = call(s, "GET", "/v1/pareto?endpoint_id=" + next(iter(
        [p["endpoint_id"] for p in got.values()])), key=s["other"])
    assert st == 404
    st, p = call(s, "GET", "/v1/pareto?y=speed")
    assert st == 422 or st == 400, p


@timing.timing_test
def test_job_energy_and_cost_hold_to_the_simulator(ctx):
    """A job against tokbench-sim with its telemetry registered: every valid
    decode cell's J per output token within 2% of the simulator's truth
    (j_per_decode_token + idle_w x measured_s / output_tokens: the energy
    its model spent over the window), from the energy counter, its average
    power likewise; cost per million output tokens within 2% of the price
    over /sim/expected's tok/s; GPU utilisation and SM clock as the
    simulator serves them under load; the throttle check passed."""
    s = setup(ctx)
    worker(s)
    sim = ctx.sim("tiny")
    price = 3.6
    st, ep = call(s, "POST", "/v1/endpoints", {
        "name": "sim-energy-" + os.urandom(3).hex(), "base_url": sim.url, "gpu": {"name": "Simulated GPU", "count": 1},
        "price_per_hour": price, "currency": "EUR",
        "telemetry_url": sim.url + "/sim/dcgm/metrics"})
    assert st == 201, ep
    jid, res = run_job(s, ep["id"], SPEC, {"energy": "1"})
    assert res["cost"] == {"gpu": {"name": "Simulated GPU", "count": 1}, "price_per_hour": price,
                           "currency": "EUR", "telemetry": "dcgm"}, res["cost"]
    assert "telemetry_url" not in json.dumps(res)
    n = 0
    for c in res["cells"]:
        if c["phase"] != "decode" or c["status"] != "valid":
            continue
        e = c["efficiency"]
        exp = json.loads(http("GET", sim.url + "/sim/expected?context=%d&concurrency=%d&max_tokens=%d"
                              % (c["context"], c["concurrency"], SPEC["max_output"]))[2])
        pw = exp["power"]
        truth = pw["j_per_decode_token"] + pw["idle_w"] * c["measured_s"] / c["output_tokens"]
        assert e["energy_source"] == "energy_counter", e
        print("# C=%d J/token %.4f truth %.4f (%+.2f%%); cost %.4f" % (
            c["concurrency"], e["j_per_output_token"], truth,
            100 * (e["j_per_output_token"] / truth - 1), e["cost_per_m_output_tokens"]))
        assert abs(e["j_per_output_token"] - truth) <= (0.02 + timing.allowance()) * truth, (e, truth, c["concurrency"])
        w = truth * c["output_tokens"] / c["measured_s"]
        assert abs(e["avg_power_w"] - w) <= (0.02 + timing.allowance()) * w, (e, w)
        lo, hi = e["j_per_output_token_ci95"]
        assert lo <= e["j_per_output_token"] <= hi
        # the cost truth: the price over the tokens the simulator itself counted
        # in the window (its generation counter, the cell's server series);
        # the model's tok/s (/sim/expected) is that only while the machine
        # keeps up, so it is the check's second witness, with more room
        stps = c["server_series"]["summary"]["server_tps"]
        want = price / 3600 / stps * 1e6
        assert abs(e["cost_per_m_output_tokens"] - want) <= 0.02 * want, (e, want)
        model = price / 3600 / exp["total_tok_s"] * 1e6
        assert abs(e["cost_per_m_output_tokens"] - model) <= (0.05 + timing.allowance()) * model, (e, model)
        assert e["currency"] == "EUR" and e["gpus"] == 1
        assert e["gpu_util_pct"]["mean"] > 0 and e["sm_clock_mhz"]["mean"] == pw["sm_clock_mhz"]
        assert e["telemetry_samples"] >= 2
        assert c["checks"]["gpu_throttled"] is False, c["checks"]
        n += 1
    assert n == 2
    # the report shows it; the CSV has the columns
    st, h, md = http("GET", s["base"] + "/v1/jobs/%s/report?format=md" % jid, None,
                     {"Authorization": "Bearer " + s["key"]})
    assert b"### Cost and energy" in md and b"energy counter" in md and b"EUR" in md


def test_injected_throttle_is_flagged(ctx):
    """tokbench run against a simulator whose GPUs report a SW power cap
    (--throttle 0x4): every valid decode cell fails gpu_throttled, naming
    sw_power_cap; the same run without it passes."""
    out = {}
    for thr in (True, False):
        sim = ctx.sim("tiny", args=["--throttle", "0x4"] if thr else [])
        path = os.path.join(ctx.tmp, "run-%s.json" % thr)
        r = subprocess.run([harness.bin("tokbench"), "run", "--url", sim.url, "--contexts", "512",
                            "--concurrency", "4", "--prefill-contexts", "512", "--duration", "2",
                            "--settle", "0.2", "--max-output", "2048",
                            "--gpu", "Sim:1", "--price-per-hour", "2",
                            "--telemetry-url", sim.url + "/sim/dcgm/metrics",
                            "--output", path, "--quiet", "--table"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, TOKBENCH_EGRESS_ALLOW="loopback"))
        assert r.returncode == 0, r.stderr
        with open(path) as f:
            out[thr] = (json.load(f), r.stdout)
    doc, table = out[True]
    cells = [c for c in doc["cells"] if c["phase"] == "decode" and c["status"] == "valid"]
    assert cells
    for c in cells:
        ch = c["checks"]
        assert ch["gpu_throttled"] is True and ch["ok"] is False, ch
        assert any("sw_power_cap" in f for f in ch["failed"]), ch
        assert c["efficiency"]["clock_event_reasons"] == ["sw_power_cap"]
        assert c["efficiency"]["sm_clock_mhz"]["mean"] < 1980
    assert "Cost and energy" in table and "yes: sw_power_cap" in table, table
    doc, table = out[False]
    for c in doc["cells"]:
        if c["phase"] == "decode" and c["status"] == "valid":
            assert c["checks"]["gpu_throttled"] is False, c["checks"]


@timing.timing_test
def test_rate_cell_energy(ctx):
    """A rate cell (tb_rate) gets its energy too: J per output token between
    the simulator's truth without prefill (j_per_decode_token + idle_w x
    measured_s / output tokens) and with every prompt token prefilled cold
    (+ j_per_prefill_token x prompt tokens / output tokens), 2% either side."""
    sim = ctx.sim("tiny")
    path = os.path.join(ctx.tmp, "rate.json")
    r = subprocess.run([harness.bin("tokbench"), "run", "--url", sim.url, "--rates", "4",
                        "--rate-duration", "3", "--input-tokens", "256", "--output-tokens", "128",
                        "--price-per-hour", "1.8", "--gpu", "Sim:1",
                        "--telemetry-url", sim.url + "/sim/dcgm/metrics",
                        "--output", path, "--quiet", "--jsonl"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with open(path) as f:
        doc = json.load(f)
    cells = [c for c in doc["cells"] if c["phase"] == "rate" and c["status"] == "valid"]
    assert len(cells) == 1, doc["cells"]
    c = cells[0]
    e = c["efficiency"]
    pw = json.loads(http("GET", sim.url + "/sim/expected?context=256&concurrency=1")[2])["power"]
    lo = pw["j_per_decode_token"] + pw["idle_w"] * c["measured_s"] / c["output_tokens"]
    hi = lo + pw["j_per_prefill_token"] * c["prompt_tokens_mean"] * c["requests_started"] / \
        c["output_tokens"]
    assert e["energy_source"] == "energy_counter"
    slack = 0.02 + timing.allowance()  # the simulator keeps its model only on a CPU
    assert (1 - slack) * lo <= e["j_per_output_token"] <= (1 + slack) * hi, (e, lo, hi)
    want = 1.8 * c["measured_s"] / 3600 / c["output_tokens"] * 1e6
    assert abs(e["cost_per_m_output_tokens"] - want) < 1e-6 * want
    assert c["checks"]["gpu_throttled"] is False


def test_verdict_judges_cost_and_energy(ctx):
    """The verdict against history (tb_regress) judges J per output token
    (more is a regression of the server) and cost per million tokens
    (cheaper is better; dearer is told, never a regression: a price change
    is not the server's).  A real job on the simulator with telemetry, five
    copies of it within 0.4% as its history (POST /v1/results, judged as
    they come), then a head with 8% more joules per token, and one at a 20%
    higher price: their verdicts, GET /v1/series of the energy, and the
    Markdown report."""
    s = setup(ctx)
    worker(s)
    sim = ctx.sim("tiny")
    st, ep = call(s, "POST", "/v1/endpoints", {
        "name": "sim-verdict-energy", "base_url": sim.url, "gpu": {"name": "Sim", "count": 1},
        "price_per_hour": 2.0, "currency": "USD",
        "telemetry_url": sim.url + "/sim/dcgm/metrics"})
    assert st == 201, ep
    spec = dict(SPEC, concurrency=[2], duration_s=1.5)
    first, res = run_job(s, ep["id"], spec, {"suite": "energy-verdict"})
    assert [c for c in res["cells"] if c.get("efficiency", {}).get("j_per_output_token")], res

    def imported(j, c):
        d = json.loads(json.dumps(res))
        d.pop("regressions", None)
        for cell in d["cells"]:
            e = cell.get("efficiency")
            if cell.get("status") == "valid" and e:
                e["j_per_output_token"] *= j
                e.pop("j_per_output_token_ci95", None)
                for k in ("cost_per_m_output_tokens", "cost_per_m_tokens"):
                    if k in e:
                        e[k] *= c
                        e.pop(k + "_ci95", None)
        st, r = call(s, "POST", "/v1/results", {"endpoint_id": ep["id"], "result": d,
                                                "labels": {"suite": "energy-verdict"}})
        assert st == 201, r
        return r["regressions"]

    for f in (1.002, 0.997, 1.004, 0.999, 1.001):
        reg = imported(f, 2 - f)
    assert reg["method"] == "history" and reg["regressed"] is False, reg

    def verdict(reg, metric):
        return [v for v in reg["verdicts"] if v["metric"] == metric and v["phase"] == "decode"]

    assert all(v["outcome"] == "same" for v in verdict(reg, "j_per_output_token")), reg
    # 8% more energy per token: a regression, told with its interval
    reg = imported(1.08, 1.0)
    assert reg["regressed"] is True, reg
    worse = [g for g in reg["cells"] if g["metric"] == "j_per_output_token"]
    assert worse and all(7 < g["change_pct"] < 9 and g["ci95_pct"][0] > 0 for g in worse), reg
    assert not [g for g in reg["cells"] if g["metric"].startswith("cost_")], reg
    # 20% dearer at the same energy: cost worse, no regression
    reg = imported(1.0, 1.2)
    assert reg["regressed"] is False, reg
    assert all(v["outcome"] == "worse" for v in verdict(reg, "cost_per_m_output_tokens")), reg
    assert reg["matrix"]["cost_per_m_output_tokens"]["outcome"] == "worse", reg["matrix"]
    # the energy's series
    st, ser = call(s, "GET", "/v1/series?endpoint_id=%s&labels=%s&context=512&concurrency=2"
                   "&metric=j_per_output_token"
                   % (ep["id"], urllib.parse.quote(json.dumps({"suite": "energy-verdict"}))))
    assert st == 200 and len(ser["points"]) == 8 and ser["better"] == "lower", ser
    # the report of the last import tells it under the verdict
    jid = s["pg"].psql("SELECT id FROM jobs ORDER BY created_at DESC LIMIT 1").strip()
    st, h, md = http("GET", s["base"] + "/v1/jobs/%s/report?format=md" % jid, None,
                     {"Authorization": "Bearer " + s["key"]})
    assert st == 200 and b"Cost and energy against history (the matrix): " in md, md[:3000]
    assert b"worse (told, never a regression)" in md
