"""Signed results (issue 35, item 4): the api signs every finished job's
document as it serves it (lib/base/tb_sign over lib/base/tb_jcs), publishes
its keys at GET /v1/signing-keys, and `tokbench verify` tells a good
signature (0) from a bad one, an unknown or revoked key (1) and an
unreadable or unsigned file (2).  A real job is run on tokbench-sim, and
every leaf of its result (each number, string and bool of the cells and the
provenance, each element of a sample list) is changed in turn: each change
fails.  Keys rotate (a new key file, a new kid; the old still verifies) and
are revoked with `tokbench signing-keys revoke`."""
import base64
import hashlib
import json
import os
import stat
import subprocess
import time

import harness
from harness import http, wait_until


def es_number(d):
    """A number as ECMAScript's Number.prototype.toString (RFC 8785's form),
    from Python's shortest repr."""
    if isinstance(d, int) and abs(d) <= 2 ** 53:
        return str(d)
    d = float(d)
    if d == 0:
        return "0"
    r = repr(abs(d))
    m, e = (r.split("e") + ["0"])[:2]
    ip, fp = (m.split(".") + [""])[:2]
    allds = ip + fp
    lead = len(allds) - len(allds.lstrip("0"))
    n = len(ip) - lead + int(e)
    digits = allds.lstrip("0").rstrip("0") or "0"
    k = len(digits)
    s = "-" if d < 0 else ""
    if k <= n <= 21:
        return s + digits + "0" * (n - k)
    if 0 < n <= 21:
        return s + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return s + "0." + "0" * -n + digits
    x = n - 1
    return s + digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if x >= 0 else "-") + str(abs(x))


def jcs(v):
    """RFC 8785 for the values a job spec holds (ASCII member names)."""
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + jcs(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(jcs(x) for x in v) + "]"
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, (int, float)):
        return es_number(v)
    return json.dumps(v, ensure_ascii=False)

MASTER = "5b" * 32
SECRET = "sk-not-in-any-result-123"
SPEC = {"contexts": [512, "1k"], "concurrency": [1, 2], "prefill_contexts": [512],
        "duration_s": 0.3, "settle_s": 0.05, "max_output": 128}
S = {}


def cli(*args, env=None, timeout=60):
    return subprocess.run([harness.bin("tokbench")] + list(args), capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


def new_key(ctx, name):
    path = os.path.join(ctx.tmp, name)
    r = cli("signing-keys", "create", path)
    assert r.returncode == 0, r.stderr
    kid = r.stdout.strip()
    assert len(kid) == 16 and all(c in "0123456789abcdef" for c in kid), kid
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    return path, kid


def setup(ctx):
    if S:
        return S
    path, kid = new_key(ctx, "signing-1.pem")
    S.update(harness.service(ctx, MASTER, "sign", "w-sign",
                             api_env={"TOKBENCH_SIGNING_KEY_FILE": path}))
    S["kid"] = kid
    S["sim"] = ctx.sim("tiny")
    st, doc = call("POST", "/v1/endpoints", {
        "name": "sim-sign", "base_url": S["sim"].url,
        "launch_command": "vllm serve tiny --api-key " + SECRET,
        "telemetry_url": S["sim"].url + "/sim/dcgm/metrics",
        "hardware": {"gpu": "Simulated GPU", "count": 1}})
    assert st == 201, doc
    S["ep"] = doc["id"]
    return S


def call(method, path, body=None, timeout=15, key=True):
    h = {"Authorization": "Bearer " + S["key"]} if key else {}
    st, _, data = http(method, S["base"] + path, body, h, timeout)
    return st, (json.loads(data) if data else None)


def run_job(spec=SPEC, timeout=90):
    st, doc = call("POST", "/v1/jobs", dict(spec, endpoint_id=S["ep"]))
    assert st == 202, doc
    jid = doc["id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st, doc = call("GET", "/v1/jobs/%s?wait=5" % jid, timeout=20)
        if doc["state"] in ("succeeded", "failed", "cancelled"):
            return jid
    raise AssertionError("job %s did not finish: %s" % (jid, doc))


def fetch_result(ctx, jid, name):
    """The job's /result as a file, the bytes as served (curl -o)."""
    st, _, data = http("GET", S["base"] + "/v1/jobs/%s/result" % jid, None,
                       {"Authorization": "Bearer " + S["key"]}, 20)
    assert st == 200, data
    path = os.path.join(ctx.tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path, json.loads(data)


def verify(path, keys=None):
    return cli("verify", path, "--keys", keys or S["base"] + "/v1/signing-keys")


def keys_file(ctx, name="keys.json"):
    st, _, data = http("GET", S["base"] + "/v1/signing-keys", timeout=10)
    assert st == 200
    path = os.path.join(ctx.tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_signing_keys_route(ctx):
    setup(ctx)
    st, hd, data = http("GET", S["base"] + "/v1/signing-keys", timeout=10)  # no API key
    assert st == 200, data
    assert hd["content-type"].startswith("application/json")
    keys = json.loads(data)["keys"]
    assert [k["kid"] for k in keys] == [S["kid"]]
    k = keys[0]
    assert k["kty"] == "OKP" and k["crv"] == "Ed25519" and k["use"] == "sig"
    assert len(k["x"]) == 43 and "=" not in k["x"] and "revoked_at" not in k
    assert k["created_at"].endswith("Z") and "d" not in k   # never the private part
    # the private key appears in no log line either
    with open(os.path.join(ctx.tmp, "signing-1.pem")) as f:
        pem_body = f.read().splitlines()[1]
    assert pem_body not in S["api"].output()


def test_finished_result_verifies(ctx):
    setup(ctx)
    jid = run_job()
    S["job"] = jid
    path, doc = fetch_result(ctx, jid, "r.json")
    sig = doc["signature"]
    assert set(sig) == {"alg", "kid", "signed_at", "value"}
    assert sig["alg"] == "Ed25519" and sig["kid"] == S["kid"]
    assert sig["signed_at"].endswith("Z") and len(sig["value"]) == 86
    assert doc["state"] == "succeeded" and doc["cells"]
    r = verify(path)
    assert r.returncode == 0, r.stderr
    assert S["kid"] in r.stdout and sig["signed_at"] in r.stdout
    # the same with the set in a file, and the document re-indented
    kf = keys_file(ctx)
    pretty = os.path.join(ctx.tmp, "pretty.json")
    with open(pretty, "w") as f:
        json.dump(doc, f, indent=4, sort_keys=False)
    assert verify(pretty, kf).returncode == 0
    # the JSON report is the same signed document
    st, _, data = http("GET", S["base"] + "/v1/jobs/%s/report?format=json" % jid, None,
                       {"Authorization": "Bearer " + S["key"]}, 20)
    assert st == 200
    rep = os.path.join(ctx.tmp, "report.json")
    with open(rep, "wb") as f:
        f.write(data)
    assert verify(rep, kf).returncode == 0, data[:300]


def test_provenance_of_a_job(ctx):
    """Every fact of the block, each with its source, and who ran each cell."""
    setup(ctx)
    if "job" not in S:
        S["job"] = run_job()
    _, doc = fetch_result(ctx, S["job"], "prov.json")
    p = doc["provenance"]
    assert SECRET not in json.dumps(doc)
    # the build
    t = p["tokbench"]
    assert t["version"] == doc["tokbench_version"] and t["binary"] == "tokbench-worker"
    head = subprocess.run(["git", "-C", harness.ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode == 0:
        assert len(t["git_commit"]) == 40 and isinstance(t["git_dirty"], bool)
    assert t["compiler"].startswith(("gcc ", "clang "))
    for lib in ("openssl", "libcurl", "jansson", "libpq", "libmicrohttpd"):
        assert t["libraries"][lib] != "unknown", t
    # the hash of the job's spec as stored, in its RFC 8785 form
    spec = json.loads(S["pg"].psql("SELECT spec::text FROM jobs WHERE id = '%s'" % S["job"]))
    assert p["job_spec_sha256"] == hashlib.sha256(jcs(spec).encode()).hexdigest()
    # what discovery read, each with where from
    d = p["discovery"]
    assert d["engine"] == {"value": "vllm", "source": "GET /version"}, d["engine"]
    assert d["model"] == {"value": doc["model"]["served"], "source": "GET /v1/models"}
    assert d["max_model_len"]["value"] == doc["model"]["max_model_len"]
    assert d["kv_budget_tokens"]["value"] == doc["capacity"]["kv_budget_tokens"]
    assert "cache_config_info" in d["kv_budget_tokens"]["source"]
    assert d["max_running_requests"]["value"] == "unknown" and d["max_running_requests"]["source"]
    for k, f in d.items():
        assert set(f) == {"value", "source"} and f["source"], (k, f)
    assert p["simulator"]["value"] is True and "/sim/stats" in p["simulator"]["source"]
    assert p["launch_command"]["value"] == doc["launch_command"]
    assert "<redacted>" in p["launch_command"]["value"] or SECRET not in p["launch_command"]["value"]
    # the GPUs of the sim's dcgm-exporter telemetry
    g = p["gpu"]
    assert g["count"] >= 1 and g["driver"] == "550.90.07" and g["name"] != "unknown", g
    # every cell: the worker, its attempt, its clock offset to the database
    keys = [(c["phase"], c["context"], c["concurrency"]) for c in doc["cells"]]
    assert [(c["phase"], c["context"], c["concurrency"]) for c in p["cells"]] == keys
    for c in p["cells"]:
        assert c["worker"] == "w-sign" and c["attempt"] == 1, c
        assert isinstance(c["clock_offset_ms"], float) and abs(c["clock_offset_ms"]) < 1000, c
        assert 0 <= c["clock_uncertainty_ms"] < 1000 and "tb_clock" in c["clock_source"]


def test_cli_run_provenance(ctx):
    """tokbench run: no worker, no database: "cli" and unknown offsets."""
    setup(ctx)
    out = os.path.join(ctx.tmp, "cli.json")
    r = cli("run", "--url", S["sim"].url, "--contexts", "512", "--concurrency", "1",
            "--prefill-contexts", "512", "--duration", "0.3", "--settle", "0.05",
            "--max-output", "64", "--output", out, timeout=120)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        p = json.load(f)["provenance"]
    assert p["tokbench"]["binary"] == "tokbench run"
    assert len(p["job_spec_sha256"]) == 64 and p["simulator"]["value"] is True
    assert p["gpu"]["count"] == "unknown" and "telemetry_url" in p["gpu"]["source"]
    assert p["cells"] and all(c["worker"] == "cli" and c["clock_offset_ms"] == "unknown"
                              for c in p["cells"]), p["cells"]


def jcs_doc(v):
    """RFC 8785 of a whole result (names are ASCII; strings as JSON.stringify)."""
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + jcs_doc(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(jcs_doc(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return jcs(v)


def test_openssl_checks_it_too(ctx):
    """docs/verify.md's recipe: the canonical form made here in Python, the
    key and signature decoded from the JWK set and the block, and OpenSSL's
    own Ed25519 check: the service's signature holds without tokbench."""
    setup(ctx)
    if "job" not in S:
        S["job"] = run_job()
    _, doc = fetch_result(ctx, S["job"], "openssl.json")
    st, ks = call("GET", "/v1/signing-keys", key=False)
    x = [k["x"] for k in ks["keys"] if k["kid"] == doc["signature"]["kid"]][0]
    pad = lambda s: s + "=" * (-len(s) % 4)
    der = bytes.fromhex("302a300506032b6570032100") + base64.urlsafe_b64decode(pad(x))
    files = {n: os.path.join(ctx.tmp, "ossl-" + n) for n in ("pub.der", "sig.bin", "signed.bin")}
    with open(files["pub.der"], "wb") as f:
        f.write(der)
    with open(files["sig.bin"], "wb") as f:
        f.write(base64.urlsafe_b64decode(pad(doc["signature"]["value"])))
    bare = dict(doc)
    del bare["signature"]
    with open(files["signed.bin"], "wb") as f:
        f.write(jcs_doc(bare).encode())
    r = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey",
                        files["pub.der"], "-rawin", "-in", files["signed.bin"], "-sigfile",
                        files["sig.bin"]], capture_output=True, text=True)
    assert r.returncode == 0 and "Success" in r.stdout, r.stdout + r.stderr
    with open(files["signed.bin"], "ab") as f:   # one byte more: refused
        f.write(b" ")
    r = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey",
                        files["pub.der"], "-rawin", "-in", files["signed.bin"], "-sigfile",
                        files["sig.bin"]], capture_output=True, text=True)
    assert r.returncode != 0


def leaves(v, path=()):
    """Every leaf of v with its path (dict keys, list indices)."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield from leaves(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from leaves(x, path + (i,))
    else:
        yield path, v


def changed(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v + max(abs(v) * 1e-9, 1e-9)
    if isinstance(v, str):
        return v + "x"
    return 0  # null


def set_at(doc, path, value):
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


def test_every_single_change_fails(ctx):
    setup(ctx)
    if "job" not in S:
        S["job"] = run_job()
    _, doc = fetch_result(ctx, S["job"], "walk.json")
    kf = keys_file(ctx, "walk-keys.json")
    todo = [(p, v) for p, v in leaves(doc)
            if p and p[0] in ("cells", "provenance") and p[0] != "signature"]
    assert len(todo) > 100, len(todo)
    kinds = {type(v).__name__ for _, v in todo}
    assert {"int", "float", "str", "bool"} <= kinds, kinds
    assert any(p[0] == "provenance" for p, _ in todo)
    # the header's leaves too (every member outside the signature block)
    todo += [(p, v) for p, v in leaves(doc) if p and p[0] not in ("cells", "provenance",
                                                                   "signature")]
    failures = []
    procs = []
    for i, (p, v) in enumerate(todo):
        d = json.loads(json.dumps(doc))
        set_at(d, p, changed(v))
        f = os.path.join(ctx.tmp, "walk-%d.json" % i)
        with open(f, "w") as out:
            json.dump(d, out)
        procs.append((p, f, subprocess.Popen([harness.bin("tokbench"), "verify", f, "--keys", kf],
                                             stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)))
        if len(procs) >= 2 or i == len(todo) - 1:
            for q, g, pr in procs:
                if pr.wait(60) != 1:
                    failures.append((q, pr.returncode))
                os.unlink(g)
            procs = []
    assert not failures, failures[:20]
    print("# %d single-leaf changes, each refused" % len(todo))
    # the untouched document still verifies
    good = os.path.join(ctx.tmp, "walk-good.json")
    with open(good, "w") as out:
        json.dump(doc, out)
    assert verify(good, kf).returncode == 0


def test_a_shared_copy_verifies(ctx):
    """A share link's JSON is the stripped copy: it carries the original's
    signature in `shared`, is signed itself as served, verifies against the
    service's keys, and fails once a number or the original's signature in
    it is changed.  Its HTML page says who signed."""
    setup(ctx)
    if "job" not in S:
        S["job"] = run_job()
    st, doc = call("POST", "/v1/jobs/%s/shares" % S["job"], {})
    assert st == 201, doc
    st, _, data = http("GET", S["base"] + "/s/%s.json" % doc["token"], None, {}, 20)
    assert st == 200, data[:300]
    shared = json.loads(data)
    assert shared["signature"]["kid"] == S["kid"], shared.get("signature")
    assert shared["shared"]["original_signature"]["kid"] == S["kid"]
    assert SECRET not in data.decode() and S["sim"].url not in data.decode()
    path = os.path.join(ctx.tmp, "shared.json")
    with open(path, "wb") as f:
        f.write(data)
    kf = keys_file(ctx, "shared-keys.json")
    r = verify(path, kf)
    assert r.returncode == 0, r.stdout + r.stderr
    assert S["kid"] in r.stdout
    num = next(p for p, v in leaves(shared) if p[0] == "cells" and isinstance(v, float))
    for what, p in (("a cell's number", num),
                    ("the original's signature", ("shared", "original_signature", "value")),
                    ("what was left out", ("shared", "read_only"))):
        d = json.loads(data)
        v = d
        for k in p:
            v = v[k]
        set_at(d, p, changed(v))
        bad = os.path.join(ctx.tmp, "shared-bad.json")
        with open(bad, "w") as f:
            json.dump(d, f)
        assert verify(bad, kf).returncode == 1, what
    st, _, html = http("GET", S["base"] + "/s/%s" % doc["token"], None, {}, 20)
    assert st == 200 and ("signed by this service, key " + S["kid"]) in html.decode()


def test_unreadable_and_unsigned(ctx):
    setup(ctx)
    kf = keys_file(ctx, "u-keys.json")
    bad = os.path.join(ctx.tmp, "not-json.json")
    with open(bad, "w") as f:
        f.write("{not json")
    assert verify(bad, kf).returncode == 2
    assert verify(os.path.join(ctx.tmp, "missing.json"), kf).returncode == 2
    unsigned = os.path.join(ctx.tmp, "unsigned.json")
    with open(unsigned, "w") as f:
        json.dump({"schema": "tokbench.result/v1", "cells": []}, f)
    r = verify(unsigned, kf)
    assert r.returncode == 2 and "no signature" in r.stderr
    # duplicate names are refused, not read either way
    dup = os.path.join(ctx.tmp, "dup.json")
    with open(dup, "w") as f:
        f.write('{"status": "complete", "status": "failed", "signature": {}}')
    assert verify(dup, kf).returncode == 2
    # keys that cannot be read: 2
    assert verify(unsigned, os.path.join(ctx.tmp, "no-keys.json")).returncode == 2


def test_unknown_kid_fails(ctx):
    setup(ctx)
    if "job" not in S:
        S["job"] = run_job()
    path, doc = fetch_result(ctx, S["job"], "kid.json")
    # a key set without that key
    other, _ = new_key(ctx, "unrelated.pem")
    empty = os.path.join(ctx.tmp, "empty-keys.json")
    with open(empty, "w") as f:
        json.dump({"keys": []}, f)
    r = verify(path, empty)
    assert r.returncode == 1 and "not among" in r.stderr
    # a set that names the kid on another key: refused (the kid is its x's)
    st, _, data = http("GET", S["base"] + "/v1/signing-keys", timeout=10)
    k = json.loads(data)["keys"][0]
    k["x"] = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"  # RFC 8037's key
    liar = os.path.join(ctx.tmp, "liar-keys.json")
    with open(liar, "w") as f:
        json.dump({"keys": [k]}, f)
    assert verify(path, liar).returncode == 1


def test_cancelled_and_imported(ctx):
    setup(ctx)
    # a job cancelled before any worker took it: signed too (no stored result)
    S["worker"].signal(19)  # SIGSTOP: the job stays queued
    try:
        st, doc = call("POST", "/v1/jobs", dict(SPEC, endpoint_id=S["ep"]))
        assert st == 202, doc
        jid = doc["id"]
        st, _ = call("POST", "/v1/jobs/%s/cancel" % jid)
        assert st in (200, 202)
        wait_until(lambda: call("GET", "/v1/jobs/" + jid)[1]["state"] == "cancelled", 20,
                   what="cancelled")
    finally:
        S["worker"].signal(18)  # SIGCONT
    path, doc = fetch_result(ctx, jid, "cancelled.json")
    assert doc["status"] == "cancelled" and doc["signature"]["kid"] == S["kid"]
    assert verify(path).returncode == 0
    # its provenance: what the api knows (the spec), the rest unknown and why
    p = doc["provenance"]
    spec = json.loads(S["pg"].psql("SELECT spec::text FROM jobs WHERE id = '%s'" % jid))
    assert p["job_spec_sha256"] == hashlib.sha256(jcs(spec).encode()).hexdigest()
    assert p["tokbench"]["binary"] == "tokbench-api"
    assert p["discovery"]["engine"]["value"] == "unknown"
    assert "no discovery" in p["discovery"]["engine"]["source"]
    # a running (or queued) job's document is not signed: it is not a result yet
    # an import is not signed by this service
    st, doc = call("POST", "/v1/results", {"endpoint_id": S["ep"], "result": {
        "schema": "tokbench.result/v1", "status": "complete", "cells": []}})
    assert st == 201, doc
    st, res = call("GET", "/v1/jobs/%s/result" % doc["job_id"])
    assert st == 200 and "signature" not in res, res
    # nor does one keep the signature it came with (another job's, or
    # another service's: it would not hold for this job's document)
    signed_path, signed = fetch_result(ctx, S["job"] if "job" in S else run_job(), "to-import.json")
    assert "signature" in signed
    st, doc = call("POST", "/v1/results", {"endpoint_id": S["ep"], "result": signed})
    assert st == 201, doc
    st, res = call("GET", "/v1/jobs/%s/result" % doc["job_id"])
    assert st == 200 and "signature" not in res and res["cells"], res


def test_rotation_and_revocation(ctx):
    setup(ctx)
    if "job" not in S:
        S["job"] = run_job()
    old_path, old_doc = fetch_result(ctx, S["job"], "old.json")
    assert old_doc["signature"]["kid"] == S["kid"]
    # a looser mode is refused: the api does not start
    loose, _ = new_key(ctx, "loose.pem")
    os.chmod(loose, 0o644)
    bad = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": S["pg"].url, "TOKBENCH_LISTEN_PORT": str(harness.free_port()),
        "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_SIGNING_KEY_FILE": loose})
    wait_until(lambda: not bad.alive(), 20, what="api refuses a loose key file")
    assert bad.proc.returncode == 2 and "chmod 600" in bad.output()

    # rotation: the api restarted with a new key file signs with a new kid
    new_path, new_kid = new_key(ctx, "signing-2.pem")
    assert new_kid != S["kid"]
    assert S["api"].stop() == 0
    port = int(S["base"].rsplit(":", 1)[1])
    S["api"] = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": S["pg"].url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_MASTER_KEY": MASTER, "TOKBENCH_RATE_LIMIT": "0",
        "TOKBENCH_SIGNING_KEY_FILE": new_path})
    wait_until(lambda: S["api"].alive() and http("GET", S["base"] + "/readyz", timeout=2)[0] == 200,
               20, what="api up again")
    st, ks = call("GET", "/v1/signing-keys", key=False)
    assert [k["kid"] for k in ks["keys"]] == [S["kid"], new_kid]
    new_file, new_doc = fetch_result(ctx, S["job"], "new.json")
    assert new_doc["signature"]["kid"] == new_kid
    assert verify(new_file).returncode == 0
    assert verify(old_path).returncode == 0      # the old key still verifies

    # revocation, by the operator's CLI
    env = {"TOKBENCH_DATABASE_URL": S["pg"].url}
    r = cli("signing-keys", "revoke", S["kid"], env=env)
    assert r.returncode == 0, r.stderr
    assert cli("signing-keys", "revoke", "0123456789abcdef", env=env).returncode == 1
    assert cli("signing-keys", "revoke", "not-a-kid", env=env).returncode == 2
    r = cli("signing-keys", "list", env=env)
    assert r.returncode == 0 and S["kid"] in r.stdout and new_kid in r.stdout
    st, ks = call("GET", "/v1/signing-keys", key=False)
    old = [k for k in ks["keys"] if k["kid"] == S["kid"]][0]
    assert old["revoked_at"].endswith("Z")
    r = verify(old_path)
    assert r.returncode == 1 and "revoked" in r.stderr
    assert verify(new_file).returncode == 0

    # the api's own key revoked: it signs nothing more with it
    assert cli("signing-keys", "revoke", new_kid, env=env).returncode == 0
    _, doc = fetch_result(ctx, S["job"], "after.json")
    assert "signature" not in doc
    assert "revoked" in S["api"].output()
