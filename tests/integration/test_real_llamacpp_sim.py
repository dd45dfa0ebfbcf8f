"""tokbench-sim's llama.cpp flavour held to a live llama.cpp (issue 23, item
4): Debian's llama-server of make real-engine (b11669, harness.LlamaServer)
and `tokbench-sim --flavour llamacpp` (the alias of llamacpp-b11669) answer
the same requests, and the key structure of each answer is compared both
ways: /props, /v1/models, /slots idle and busy, /health, which routes exist,
error bodies, the /metrics families (type and HELP text), a streamed chat
completion as tokbench asks for it (lib/engine/tb_engine.c request_body:
include_usage and continuous_usage_stats), one without stream_options, and
a non-streamed one; then how each /metrics family moves while a request
runs and after it ends, and a busy slot's erase (held until it is idle,
then 200).  Whatever one side answers and the other does not
is a failure, unless sim/README.md lists it under DIFF_HEADING with its
reason (a line "- `ROUTE` `PATH`: reason"); a listed difference that no
longer shows is a failure too, so the list stays true.

The last test needs no live server: the flavour's timings come from the
simulator's own model clock (/sim/expected)."""
import json
import os
import re
import socket
import threading
import time

import harness
import timing
from harness import http

# make check leaves it out (scripts/run_tests.py): a real engine in a sid root.
SUITE = "full"

README = os.path.join(harness.ROOT, "sim", "README.md")
DIFF_HEADING = "### Differences from the live llama-server b11669"
# llama-server's own context per slot: -c 16384 -np 4; the sim the same
SLOTS, CTX = 4, 16384
SIM_ARGS = ["--max-running", str(SLOTS), "--max-model-len", str(CTX // SLOTS)]
# tokbench's request (tb_engine.c request_body)
TOKBENCH_SO = {"include_usage": True, "continuous_usage_stats": True}


def listed():
    """sim/README.md's list of known differences: {(route, path): reason}."""
    out, on = {}, False
    for line in open(README, encoding="utf-8"):
        if line.startswith("#"):
            on = line.strip() == DIFF_HEADING
            continue
        m = re.match(r"- `([^`]+)` `([^`]+)`: (.+)", line) if on else None
        if m:
            out[(m.group(1), m.group(2))] = m.group(3)
    return out


def pair(ctx):
    """The live server and the simulator, started once per module."""
    if not hasattr(ctx, "llama_pair"):
        live = ctx.llama(slots=SLOTS, ctx_len=CTX)
        sim = ctx.sim("tiny", "llamacpp", args=SIM_ARGS)
        ctx.llama_pair = (live, sim)
    return ctx.llama_pair


def kind(v):
    return ("null" if v is None else "bool" if isinstance(v, bool)
            else "number" if isinstance(v, (int, float)) else type(v).__name__)


def shape(v):
    """A JSON value's key structure: objects by key, arrays by the merged
    shape of their elements, scalars by kind."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        merged = None
        for x in v:
            merged = merge(merged, shape(x))
        return [merged]
    return kind(v)


def merge(a, b):
    """The union of two shapes (None: nothing seen yet)."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: merge(a.get(k), b.get(k)) for k in set(a) | set(b)}
    if isinstance(a, list) and isinstance(b, list):
        return [merge(a[0], b[0])]
    if a == b:
        return a
    return "|".join(sorted(set(str(a).split("|")) | set(str(b).split("|"))))


def diff(live, sim, path=""):
    """[(path, what)] where two shapes differ."""
    if isinstance(live, dict) and isinstance(sim, dict):
        out = []
        for k in sorted(set(live) | set(sim)):
            p = "%s.%s" % (path, k)
            if k not in sim:
                out.append((p, "live only"))
            elif k not in live:
                out.append((p, "sim only"))
            else:
                out += diff(live[k], sim[k], p)
        return out
    if isinstance(live, list) and isinstance(sim, list):
        if live[0] is None or sim[0] is None:  # an empty array matches any
            return []
        return diff(live[0], sim[0], path + "[]")
    if live != sim:
        return [(path or ".", "live %s, sim %s" % (json.dumps(live), json.dumps(sim)))]
    return []


def check(route, found):
    """Fails on a difference of route that README does not list, and on a
    difference listed for route that did not show."""
    known = listed()
    bad = ["%s %s: %s" % (route, p, what) for p, what in found
           if not any((route, q) in known for q in prefixes(p))]
    seen = {q for p, _ in found for q in prefixes(p)}
    stale = ["%s %s: listed in sim/README.md, not different" % (r, p) for (r, p) in known
             if r == route and p not in seen]
    assert not bad and not stale, "\n".join(bad + stale)


def prefixes(p):
    """usage.a.b[].c -> usage, usage.a, usage.a.b, usage.a.b[], usage.a.b[].c:
    a listed object covers its members."""
    out, cur = [], ""
    for part in re.findall(r"\.[^.\[]+|\[\]|[^.\[]+", p):
        cur += part
        out.append(cur)
    return out or [p]


def get_json(url):
    st, _, body = http("GET", url)
    assert st == 200, (url, st, body)
    return json.loads(body)


def test_documents(ctx):
    """/props, /v1/models, idle /slots, /health: the same keys, the same kinds."""
    live, sim = pair(ctx)
    for route in ("/props", "/v1/models", "/slots", "/health"):
        a, b = get_json(live.url + route), get_json(sim.url + route)
        check(route, diff(shape(a), shape(b)))
    # what tokbench's discovery reads agrees in value too
    a, b = get_json(live.url + "/props"), get_json(sim.url + "/props")
    assert a["total_slots"] == b["total_slots"] == SLOTS, (a["total_slots"], b["total_slots"])
    n_ctx = a["default_generation_settings"]["n_ctx"]
    assert n_ctx == b["default_generation_settings"]["n_ctx"] == CTX // SLOTS, n_ctx
    a, b = get_json(live.url + "/v1/models"), get_json(sim.url + "/v1/models")
    assert a["data"][0]["meta"]["n_ctx"] == b["data"][0]["meta"]["n_ctx"] == n_ctx
    a, b = get_json(live.url + "/slots"), get_json(sim.url + "/slots")
    assert len(a) == len(b) == SLOTS and {s["n_ctx"] for s in a + b} == {n_ctx}, (a, b)


# the routes whose existence is compared: (method, path); "exists" is any
# status but 404 (llama-server answers 404 to a wrong method too)
ROUTES = [("GET", p) for p in ("/health", "/v1/health", "/models", "/v1/models", "/props",
                               "/slots", "/metrics", "/lora-adapters", "/v1/nope")] + \
         [("POST", p) for p in ("/v1/chat/completions", "/v1/completions", "/completion",
                                "/tokenize", "/detokenize", "/apply-template", "/infill",
                                "/v1/embeddings", "/rerank", "/v1/messages", "/props")]


def test_routes_and_errors(ctx):
    """Which routes exist, and the error bodies a client reads: an unknown
    path, a bad request, a prompt that fills a slot's context."""
    live, sim = pair(ctx)
    found = []
    for method, path in ROUTES:
        a = http(method, live.url + path, {} if method == "POST" else None)[0] != 404
        b = http(method, sim.url + path, {} if method == "POST" else None)[0] != 404
        if a != b:
            found.append(("%s %s" % (method, path), "live only" if a else "sim only"))
    check("routes", found)
    big = {"messages": [{"role": "user", "content": "lorem ipsum dolor " * 4000}],
           "max_tokens": 4}
    errors = [("error 404", "GET", "/v1/nope", None),
              ("error 400", "POST", "/v1/chat/completions", {"messages": "x"}),
              ("error exceed_context_size_error", "POST", "/v1/chat/completions", big),
              # neither started with --slot-save-path: slot actions are 501
              ("error 501 slot action", "POST", "/slots/0?action=erase", None)]
    for route, method, path, body in errors:
        (sa, _, a), (sb, _, b) = (http(method, u + path, body) for u in (live.url, sim.url))
        assert sa == sb, (route, sa, sb, a, b)
        a, b = json.loads(a), json.loads(b)
        check(route, diff(shape(a), shape(b)))
        if route.endswith("slot action"):
            assert a == b, (a, b)
        if route.endswith("context_size_error"):
            assert a["error"]["type"] == b["error"]["type"], (a, b)
            assert a["error"]["n_ctx"] == b["error"]["n_ctx"] == CTX // SLOTS, (a, b)


def families(text):
    """Prometheus text -> {family: (type, help)}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"# (HELP|TYPE) (\S+) ?(.*)$", line)
        if m:
            t, h = out.get(m.group(2), (None, None))
            out[m.group(2)] = (m.group(3), h) if m.group(1) == "TYPE" else (t, m.group(3))
    return out


def test_metrics_families(ctx):
    """/metrics: the same families, each with the same type and HELP text."""
    live, sim = pair(ctx)
    a = families(http("GET", live.url + "/metrics")[2].decode())
    b = families(http("GET", sim.url + "/metrics")[2].decode())
    assert "llamacpp:requests_processing" in a, a
    found = []
    for fam in sorted(set(a) | set(b)):
        if fam not in b or fam not in a:
            found.append((fam, "live only" if fam in a else "sim only"))
        elif a[fam] != b[fam]:
            found.append((fam, "live %s, sim %s" % (a[fam], b[fam])))
    check("/metrics", found)


def chat(url, max_tokens, stream, so=None, tag="x"):
    body = {"model": "tiny", "max_tokens": max_tokens, "stream": stream, "ignore_eos": True,
            "messages": [{"role": "user", "content": "[BENCH_%s] hello world" % tag}]}
    if so is not None:
        body["stream_options"] = so
    st, _, raw = http("POST", url + "/v1/chat/completions", body, timeout=60)
    assert st == 200, raw
    return raw


def events(raw):
    """A stream's JSON chunks, and whether [DONE] ended it."""
    out, done = [], False
    for line in raw.decode().split("\n"):
        if line.startswith("data: [DONE]"):
            done = True
        elif line.startswith("data:"):
            out.append(json.loads(line[5:]))
    return out, done


def stream_parts(raw):
    """{part: shape}: the role chunk, the token chunks (merged), the finish
    chunk and, when there is one, the usage chunk after it; and the order
    of the parts."""
    chunks, done = events(raw)
    parts, order = {}, []
    for ch in chunks:
        chs = ch.get("choices") or []
        delta = chs[0].get("delta", {}) if chs else {}
        name = ("usage" if not chs else "finish" if chs[0].get("finish_reason")
                else "role" if "role" in delta else "token")
        parts[name] = merge(parts.get(name), shape(ch))
        if not order or order[-1] != name:
            order.append(name)
    return parts, order + (["[DONE]"] if done else [])


def test_streams(ctx):
    """A streamed chat as tokbench sends it, one without stream_options and
    a non-streamed one: every chunk's keys, the finish and the final chunk,
    their order; the answer's keys."""
    live, sim = pair(ctx)
    for route, so in (("stream", TOKBENCH_SO), ("stream without stream_options", None)):
        (pa, oa), (pb, ob) = (stream_parts(chat(u, 8, True, so)) for u in (live.url, sim.url))
        assert oa == ob, (route, oa, ob)
        found = []
        for part in sorted(set(pa) | set(pb)):
            found += [("%s%s" % (part, p), w) for p, w in diff(pa.get(part, {}), pb.get(part, {}))]
        check(route, found)
    a, b = (json.loads(chat(u, 8, False)) for u in (live.url, sim.url))
    check("/v1/chat/completions", diff(shape(a), shape(b)))


def in_flight(url, max_tokens, during, words=40):
    """Starts a streamed request of max_tokens (its prompt `words` times
    "lorem ipsum"); once its first token came, calls during(); returns
    (what during returned, the raw stream)."""
    body = {"model": "tiny", "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
            "stream_options": TOKBENCH_SO,
            "messages": [{"role": "user", "content": "[BENCH_flight] " + "lorem ipsum " * words}]}
    got, started = {}, threading.Event()

    def run():
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=120)
        c.request("POST", "/v1/chat/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        raw = b""
        while True:
            line = r.readline()
            if not line:
                break
            raw += line
            if b'"content":"' in line or b'"content": "' in line:
                started.set()
        got["raw"] = raw
        started.set()
        c.close()

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(60), "no first token"
    out = during()
    t.join(120)
    return out, got["raw"]


def test_slots_busy(ctx):
    """/slots while a request runs: a busy slot carries its task and
    progress, on both."""
    live, sim = pair(ctx)
    (a, _), (b, _) = (in_flight(u, 100, lambda u=u: get_json(u + "/slots"))
                      for u in (live.url, sim.url))
    assert any(s["is_processing"] for s in a) and any(s["is_processing"] for s in b), (a, b)
    check("/slots busy", diff(shape(a), shape(b)))


def test_slot_erase_held(ctx):
    """POST /slots/0?action=erase while slot 0 streams, on a live server
    started with --slot-save-path and on the simulator with it (one slot
    each, so the stream is slot 0's): neither refuses it; each holds it and
    answers 200 {"id_slot", "n_erased"} once the slot is idle (llama.cpp's
    tools/server/server-context.cpp defers SERVER_TASK_TYPE_SLOT_ERASE
    while the slot is_processing).  Right after the answer /slots shows no
    slot busy: an answer sent while the stream ran would find it busy (the
    stream has hundreds of tokens left when the erase goes out).  An erase
    held and hung up on gets no answer but is still done when the slot is
    idle: the next erase finds nothing (n_erased 0 on b11669, and so on
    the simulator)."""
    live = ctx.llama(slots=1, ctx_len=CTX // SLOTS, args=["--slot-save-path", "/tmp"])
    sim = ctx.sim("tiny", "llamacpp", args=["--max-running", "1", "--max-model-len",
                                            str(CTX // SLOTS), "--slot-save-path", "/tmp"])
    for u in (live.url, sim.url):
        def erase(u=u):
            st, _, raw = http("POST", u + "/slots/0?action=erase", timeout=120)
            return st, raw, get_json(u + "/slots")
        (st, raw, slots), stream = in_flight(u, 400, erase)
        assert st == 200, (u, st, raw)
        doc = json.loads(raw)
        assert sorted(doc) == ["id_slot", "n_erased"] and doc["id_slot"] == 0, (u, doc)
        assert doc["n_erased"] > 0, (u, doc)  # the stream's tokens, erased after it
        assert not any(s["is_processing"] for s in slots), (u, slots)
        assert b"data: [DONE]" in stream, u

        def hang_up(u=u):
            port = int(u.rsplit(":", 1)[1])
            k = socket.create_connection(("127.0.0.1", port), timeout=10)
            k.sendall(b"POST /slots/0?action=erase HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 0\r\n\r\n")
            time.sleep(0.3)
            k.close()
        in_flight(u, 400, hang_up)
        # no answer went out, but the erase was done once the slot was idle
        st, _, raw = http("POST", u + "/slots/0?action=erase", timeout=60)
        assert st == 200 and json.loads(raw) == {"id_slot": 0, "n_erased": 0}, (u, st, raw)


def samples(text):
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines()
            if l and not l.startswith("#")}


def moves(url):
    """How each /metrics family moves around one request of 300 tokens: read
    before, while it decodes (twice, 0.3 s apart), after it ended, and right
    after that.  Counters: (moved while decoding, moved at the end); gauges:
    (non-zero while decoding, non-zero after, non-zero on the next read).
    Its prompt is longer than any sequence the module sent before, so that
    n_tokens_max (the longest sequence seen, raised at every step: b11669's
    server_metrics::on_decoded) moves from the first step on: with the
    short prompt of the other tests it moved only once this sequence passed
    the last one's length, before or after the second read as the machine's
    speed had it (CI saw live (True, True), sim (False, True))."""
    m = lambda: samples(http("GET", url + "/metrics")[2].decode())  # noqa: E731
    reads = []

    def during():
        reads.append(m())
        time.sleep(0.3)
        reads.append(m())

    _, raw = in_flight(url, 300, during, words=200)
    assert events(raw)[1], raw[-300:]
    after = m()
    after2 = m()
    out = {}
    types = families(http("GET", url + "/metrics")[2].decode())
    for fam, (t, _) in types.items():
        if t == "counter":
            out[fam] = (reads[1][fam] != reads[0][fam], after[fam] != reads[1][fam])
        else:
            out[fam] = (reads[1][fam] != 0, after[fam] != 0, after2[fam] != 0)
    return out


def test_metrics_semantics(ctx):
    """Each family moves as the live one does: tokens_predicted_total only
    when a request ends, prompt_tokens_total once its prompt is evaluated,
    n_decode_total with every step; the throughput gauges over what ended
    since the last read."""
    live, sim = pair(ctx)
    a, b = moves(live.url), moves(sim.url)
    assert a["llamacpp:tokens_predicted_total"] == (False, True), a
    found = [(fam, "live %s, sim %s" % (a.get(fam), b.get(fam)))
             for fam in sorted(set(a) | set(b)) if a.get(fam) != b.get(fam)]
    check("/metrics moves", found)


@timing.timing_test
def test_sim_timings_model_clock(ctx):
    """The flavour's timings are its model's: prompt_ms the prefill,
    predicted_per_token_ms the decode step, within 5% of /sim/expected;
    the stream's own times agree (TTFT no shorter than prompt_ms)."""
    sim = ctx.sim("tiny", "llamacpp", timing=True)
    exp = get_json(sim.url + "/sim/expected?context=2000&concurrency=1&max_tokens=64")
    body = {"model": "tiny", "max_tokens": 64, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "[BENCH_clock] " + "abcd " * 1980}]}
    t0 = time.monotonic()
    st, _, raw = http("POST", sim.url + "/v1/chat/completions", body, timeout=60)
    assert st == 200, raw
    chunks, done = events(raw)
    final = chunks[-1]
    t, u = final["timings"], final["usage"]
    assert done and t["predicted_n"] == u["completion_tokens"] == 64, final
    assert t["prompt_n"] + t["cache_n"] == u["prompt_tokens"], final
    assert abs(t["prompt_n"] - 2000) < 20, t
    want = exp["prefill_ttft_ms"] * t["prompt_n"] / 2000
    slack = 0.05 + timing.allowance()  # the simulator's clock: it keeps its model with a CPU
    assert abs(t["prompt_ms"] - want) <= slack * want + 0.5, (t, exp)
    assert abs(t["predicted_per_token_ms"] - exp["tbt_ms"]) <= slack * exp["tbt_ms"], (t, exp)
    assert abs(t["predicted_ms"] - 63 * t["predicted_per_token_ms"]) < 0.01, t
    assert abs(t["predicted_per_second"] * t["predicted_per_token_ms"] - 1000) < 0.01, t
    wall_ms = (time.monotonic() - t0) * 1000
    assert wall_ms >= t["prompt_ms"] + t["predicted_ms"], (wall_ms, t)
    # the same request again: its prompt comes from the prefix cache
    st, _, raw = http("POST", sim.url + "/v1/chat/completions", body, timeout=60)
    t2 = events(raw)[0][-1]["timings"]
    assert t2["cache_n"] > 0 and t2["prompt_n"] + t2["cache_n"] == u["prompt_tokens"], t2
