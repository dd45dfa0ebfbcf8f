"""api/openapi.yaml covers the routes of the routing table (service/api_routes.c).

Strict for the families of issue 5 (health, keys, endpoints, jobs); the routes
of other families are listed as a note until their owners add them."""
import os
import re

import harness


def test_every_route_is_in_the_openapi_contract(ctx):
    src = open(os.path.join(harness.ROOT, "service", "api_routes.c")).read()
    rows = re.findall(r'\.method = "([A-Z]+)", \.path = "([^"]+)"[^}]*?\.fn = (\w+)', src, re.S)
    mine = re.compile(r"tb_api_(healthz|readyz|keys_\w+|endpoints_\w+|"
                      r"jobs_(submit|list|get|cancel|result|events))$")
    routes = [(m, p) for m, p, fn in rows if mine.match(fn)]
    others = [(m, p) for m, p, fn in rows if not mine.match(fn)]
    assert len(routes) >= 17
    spec = open(os.path.join(harness.ROOT, "api", "openapi.yaml")).read()
    assert spec.startswith("openapi: 3.1")
    # path blocks: "  /path:" then indented method keys until the next path
    blocks = {}
    current = None
    for line in spec.splitlines():
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            current = m.group(1)
            blocks[current] = set()
            continue
        if line.startswith("components:"):
            current = None
        m = re.match(r"^    (get|post|patch|delete|put|options):", line)
        if current and m:
            blocks[current].add(m.group(1).upper())
    missing = [(meth, p) for meth, p in routes
               if p.replace("{name}", "{id}") not in blocks and p not in blocks
               or meth not in blocks.get(p, set())]
    assert not missing, missing
    later = [(m, p) for m, p in others if m not in blocks.get(p, set())]
    if later:
        print("# not yet in api/openapi.yaml (other families): %s" % later)
