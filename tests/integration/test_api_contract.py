"""api/openapi.yaml and the routing table (service/api_routes.c) agree, both ways.

- Every row of the static routes[] table (method, path) is an operation of
  the contract, and every operation of the contract is a row of the table:
  a route added without its contract, or a contract path nobody serves,
  fails here.
- Each operation says what it answers: responses with a content type (or a
  204/304 without a body), 4xx/5xx answers as application/problem+json, a
  JSON requestBody on the routes that take one (json_body in the table), no
  security on the public routes (scope-less rows) other than their own, and
  every $ref resolves.
- The running api agrees on the public/keyed split: a keyed route without a
  key answers 401 problem+json; a path the contract lacks answers 404.
- The JobSpec schema is the job spec's field table (lib/spec/tb_spec.c, printed by
  `tokbench spec-table`): the same fields both ways, types, bounds, defaults.
"""
import json
import os
import re
import subprocess

import yaml  # python3-yaml (scripts/deps.sh)

import harness
from harness import http, wait_until

METHODS = ("get", "put", "post", "delete", "patch", "options", "head")


def routing_table():
    """[(METHOD, path, row text)] from the static routes[] of api_routes.c."""
    src = open(os.path.join(harness.ROOT, "service", "api_routes.c")).read()
    m = re.search(r"static const struct tb_api_route routes\[\] = \{(.*?)\n\};", src, re.S)
    assert m, "routes[] not found in service/api_routes.c"
    rows = []
    for row in re.findall(r"\{\s*(\.method\s*=.*?\.fn\s*=\s*\w+)\s*\}", m.group(1), re.S):
        meth = re.search(r'\.method\s*=\s*"([A-Z]+)"', row)
        path = re.search(r'\.path\s*=\s*"([^"]+)"', row)
        assert meth and path, row
        rows.append((meth.group(1), path.group(1), row))
    assert len(rows) >= 40, rows
    return rows


def contract():
    with open(os.path.join(harness.ROOT, "api", "openapi.yaml")) as f:
        text = f.read()
    assert text.startswith("openapi: 3.1")
    return yaml.safe_load(text)


def operations(spec):
    return {(meth.upper(), path): op
            for path, item in spec["paths"].items()
            for meth, op in item.items() if meth in METHODS}


def resolve(spec, node):
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        cur = spec
        for part in ref[2:].split("/"):
            assert part in cur, "unresolved $ref " + ref
            cur = cur[part]
        node = cur
        seen += 1
        assert seen < 16, "$ref loop at " + ref
    return node


def all_refs(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                out.append(v)
            else:
                all_refs(v, out)
    elif isinstance(node, list):
        for v in node:
            all_refs(v, out)
    return out


def test_routes_and_contract_agree_both_ways(ctx):
    routes = {(m, p) for m, p, _ in routing_table()}
    ops = set(operations(contract()))
    unrouted = sorted(ops - routes)
    missing = sorted(routes - ops)
    assert not missing, "routes without a contract in api/openapi.yaml: %s" % missing
    assert not unrouted, "contract operations no route serves: %s" % unrouted


def test_every_ref_resolves(ctx):
    spec = contract()
    for ref in all_refs(spec, []):
        resolve(spec, {"$ref": ref})


def test_operations_describe_bodies_and_problems(ctx):
    spec = contract()
    ops = operations(spec)
    table = {(m, p): row for m, p, row in routing_table()}
    global_security = spec.get("security")
    bad = []  # every finding at once, not the first only

    def check(cond, what):
        if not cond:
            bad.append(what)

    for (meth, path), op in sorted(ops.items()):
        where = "%s %s" % (meth, path)
        row = table.get((meth, path), "")
        check(op.get("summary"), where + ": summary")
        responses = {str(k): v for k, v in (op.get("responses") or {}).items()}
        check(responses, where + ": responses")
        check(any(code.startswith("2") for code in responses), where + ": a 2xx")
        for code, resp in responses.items():
            resp = resolve(spec, resp)
            check(resp.get("description"), "%s %s: description" % (where, code))
            if code in ("204", "304"):
                check("content" not in resp, "%s %s: no body" % (where, code))
                continue
            content = resp.get("content") or {}
            check(content, "%s %s: content" % (where, code))
            if code[0] in "45":
                check(list(content) == ["application/problem+json"],
                      "%s %s: errors are application/problem+json" % (where, code))
                if "application/problem+json" in content:
                    schema = resolve(spec, content["application/problem+json"]["schema"])
                    check({"type", "title", "status"} <= set(schema.get("required", [])),
                          where + ": Problem schema")
            for media in content.values():
                check("schema" in media, "%s %s: schema" % (where, code))
        if ".json_body = true" in row:
            body = op.get("requestBody") or {}
            check(body.get("required"), where + ": a required requestBody")
            check("application/json" in (body.get("content") or {}), where + ": JSON body")
            check("415" in responses and "413" in responses, where + ": 413 and 415 for the body")
            check("422" in responses or "400" in responses, where + ": 400/422 for the body")
        public = ".scope" not in row
        security = op.get("security", global_security)
        if public:
            check(security is not None and all(s != {"bearer": []} for s in security),
                  where + ": a public route must not ask for the API key")
        else:
            check(security == [{"bearer": []}], where + ": needs the bearer key")
            check("401" in responses, where + ": 401")
        names = set(re.findall(r"\{(\w+)\}", path))
        params = [resolve(spec, p) for p in
                  (spec["paths"][path].get("parameters") or []) + (op.get("parameters") or [])]
        declared = {p["name"] for p in params if p.get("in") == "path"}
        check(names == declared, "%s: path parameters %s declared %s" % (where, names, declared))
    assert not bad, "\n".join(bad)


def test_running_api_matches_the_public_split(ctx):
    pg = ctx.postgres()
    port = harness.free_port()
    proc = ctx.process("tokbench-api", [], env={
        "TOKBENCH_DATABASE_URL": pg.url, "TOKBENCH_LISTEN_PORT": str(port),
        "TOKBENCH_DB_WAIT_MS": "5000", "TOKBENCH_MASTER_KEY": "3d" * 32,
        "TOKBENCH_RATE_LIMIT": "0"})
    base = "http://127.0.0.1:%d" % port
    wait_until(lambda: proc.alive() and http("GET", base + "/healthz", timeout=2)[0] == 200,
               20, what="api up")
    uuid = "0e7e4b2a-4524-4bd4-9cd9-a930e616e5be"
    for meth, path, row in routing_table():
        if ".scope" not in row:
            continue
        url = base + path.replace("{id}", uuid).replace("{name}", "x")
        body = b"{}" if meth in ("POST", "PUT", "PATCH") else None
        st, h, data = http(meth, url, body, {"Content-Type": "application/json"}, timeout=10)
        assert st == 401, (meth, path, st, data)
        ctype = {k.lower(): v for k, v in h.items()}.get("content-type", "")
        assert ctype.startswith("application/problem+json"), (meth, path, ctype)
        assert json.loads(data)["status"] == 401
    st, _, _ = http("GET", base + "/v1/not-in-the-contract", timeout=10)
    assert st == 404
    assert proc.stop() == 0, proc.output()


def spec_table():
    """The job spec's field table (lib/spec/tb_spec.c) as `tokbench spec-table` prints it."""
    p = subprocess.run([harness.bin("tokbench"), "spec-table"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def schema_problems(field, prop, spec):
    """What differs between one row of the table and its schema property."""
    bad = []
    outer = prop
    if field.get("auto"):
        # an integer or the string "auto": the integer's rules on its branch
        branches = prop.get("oneOf", [])
        if {"const": "auto"} not in branches:
            bad.append("%s: no {const: auto} branch" % field["name"])
        prop = next((o for o in branches if o.get("type") == "integer"), {})

    def want(key, value, node=prop):
        if node.get(key) != value:
            bad.append("%s: %s is %r, the table says %r" % (field["name"], key, node.get(key), value))

    t = field["type"]
    lo, hi = field.get("min"), field.get("max")
    if t == "uuid":
        want("type", "string")
        want("format", "uuid")
    elif t == "string":
        want("type", "string")
        want("minLength", int(lo))
        want("maxLength", int(hi))
    elif t == "ident":
        want("type", "string")
        want("pattern", "^[A-Za-z0-9._-]{%d,%d}$" % (lo, hi))
    elif t in ("integer", "number"):
        want("type", t)
        want("minimum", lo)
        want("maximum", hi)
    elif t in ("tokens", "integers"):
        want("type", "array")
        want("minItems", field["min_items"])
        want("maxItems", field["max_items"])
        want("uniqueItems", True)
        items = resolve(spec, prop.get("items", {}))
        if t == "tokens":
            items = next((o for o in items.get("oneOf", []) if o.get("type") == "integer"), {})
        want("type", "integer", items)
        want("minimum", lo, items)
        want("maximum", hi, items)
    elif t == "numbers":
        want("type", "array")
        want("minItems", field["min_items"])
        want("maxItems", field["max_items"])
        want("uniqueItems", True)
        items = resolve(spec, prop.get("items", {}))
        want("type", "number", items)
        want("minimum", lo, items)
        want("maximum", hi, items)
    elif t == "object":
        want("type", "object")
        want("additionalProperties", False)
        subs = prop.get("properties", {})
        names = [f["name"] for f in field["fields"]]
        if sorted(names) != sorted(subs):
            bad.append("%s: members %s, the table says %s" % (field["name"], sorted(subs), sorted(names)))
        for f in field["fields"]:
            if f["name"] in subs:
                bad += schema_problems(f, subs[f["name"]], spec)
    elif t == "labels":
        want("type", "object")
        want("maxProperties", field["max_items"])
    elif t == "urls":
        want("type", "array")
        want("maxItems", field["max_items"])
    else:
        bad.append("%s: type %s has no rule here" % (field["name"], t))
    if outer.get("default") != field["default"]:
        bad.append("%s: default is %r, the table says %r" % (field["name"], outer.get("default"),
                                                            field["default"]))
    return bad


def test_job_spec_schema_is_the_spec_table(ctx):
    """api/openapi.yaml's JobSpec and lib/spec/tb_spec.c's table: the same fields,
    both ways, with the same types, bounds, defaults and required set."""
    spec = contract()
    schema = spec["components"]["schemas"]["JobSpec"]
    props = schema["properties"]
    table = spec_table()
    names = [f["name"] for f in table]
    assert len(names) >= 19, names
    assert not set(names) - set(props), "in the table, not in JobSpec: %s" % (set(names) - set(props))
    assert not set(props) - set(names), "in JobSpec, not in the table: %s" % (set(props) - set(names))
    assert schema.get("additionalProperties") is False
    assert sorted(schema.get("required", [])) == sorted(f["name"] for f in table if f["required"])
    bad = []
    for f in table:
        bad += schema_problems(f, props[f["name"]], spec)
    assert not bad, "\n".join(bad)
    # the one bug this contract fixed: the api's kv_budget is what the engine runs
    kv = next(f for f in table if f["name"] == "kv_budget")
    assert kv["max"] == 1e12


def test_run_flags_are_the_spec_table(ctx):
    """`tokbench run` takes each engine setting of the table as a flag, with the
    table's ranges: a value the api would refuse is refused before any
    connection (exit 2, naming the field)."""
    table = spec_table()
    p = subprocess.run([harness.bin("tokbench"), "run", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0
    for f in table:
        if f["engine"]:
            assert f["cli"] and (f["cli"] + " ") in p.stdout, f
    too_big = {"--kv-budget": "2000000000000", "--concurrency": "1,5000", "--duration": "3601",
               "--max-output": "1048577", "--metrics-interval": "0.001"}
    for flag, value in too_big.items():
        name = next(f["name"] for f in table if f["cli"] == flag)
        p = subprocess.run([harness.bin("tokbench"), "run", "--url", "http://127.0.0.1:9", flag, value],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and name in p.stderr, (flag, p.returncode, p.stderr)
