"""tokbench-sim's flavours against the servers they stand in for (issue 12):
each flavour answers with the key structure of its conformance fixture
(tests/fixtures/servers/<engine>-<version>/: routes present or absent, JSON
keys, metric families and their label names, stream framing, chunk keys),
and `tokbench run` against each finds the engine, its version, the KV
budget, the max running requests and the max length with the surface each
came from (or says why unknown), and measures."""
import concurrent.futures
import json
import os
import re
import socket
import subprocess

import harness
from harness import http

FIXTURES = os.path.join(harness.ROOT, "tests", "fixtures", "servers")

# flavour: its fixture directory
FLAVOURS = {
    "vllm-0.7": "vllm-0.7", "vllm-0.8": "vllm-0.8", "vllm-0.10": "vllm-0.10",
    "vllm-0.11": "vllm-0.11", "vllm-2026": "vllm-2026", "sglang-0.3": "sglang-0.3",
    "sglang-0.4": "sglang-0.4", "sglang-0.5": "sglang-0.5", "llamacpp-b6915": "llamacpp",
    "llamacpp-b11669": "llamacpp-b11669", "tgi-2.2": "tgi-2.2", "tgi-3.3": "tgi-3.3",
    "gateway": "gateway",
}
ROUTES = {"/v1/models": "models.json", "/get_server_info": "server_info.json",
          "/props": "props.json", "/info": "info.json", "/version": "version.json",
          "/metrics": "metrics.txt", "/slots": "slots.json"}


def fixture(d, name):
    p = os.path.join(FIXTURES, d, name)
    return open(p, "rb").read() if os.path.exists(p) else None


def families(text):
    """Prometheus text -> {sample name: set of label names}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+\S+$", line)
        assert m, "not a sample line: %r" % line
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        out.setdefault(m.group(1), set()).update(labels)
    return out


def sse_lines(raw):
    """Raw stream bytes -> (crlf, [lines]) without the line ends."""
    text = raw.decode()
    return "\r\n" in text, text.replace("\r\n", "\n").split("\n")


def stream_shape(raw):
    """What a stream's structure is: data prefix, comment kinds, the keys of
    its chunks, where the usage and the finish are."""
    crlf, lines = sse_lines(raw)
    shape = {"crlf": crlf, "nospace": False, "space": False, "comments": set(),
             "top": set(), "choice": set(), "delta": set(), "usage_only_chunk": False,
             "usage_on_finish": False, "done": False, "role_chunk": False}
    for ln in lines:
        if ln.startswith(":"):
            c = ln[1:].strip()
            if not c.startswith("t="):
                shape["comments"].add("bare" if c == "" else "ping" if c.startswith("ping") else c)
            continue
        if not ln.startswith("data:"):
            continue
        shape["space" if ln.startswith("data: ") else "nospace"] = True
        data = ln[5:].lstrip(" ")
        if data == "[DONE]":
            shape["done"] = True
            continue
        ch = json.loads(data)
        shape["top"] |= set(ch)
        chs = ch.get("choices")
        if chs == [] and ch.get("usage"):
            shape["usage_only_chunk"] = True
        for c in chs or []:
            shape["choice"] |= set(c)
            d = c.get("delta") or {}
            shape["delta"] |= set(d)
            if set(d) <= {"role", "content"} and d.get("role") and not d.get("content"):
                shape["role_chunk"] = True
            if c.get("finish_reason") and ch.get("usage"):
                shape["usage_on_finish"] = True
    return shape


def chat(url, stream_options, headers=None):
    """A streamed chat completion of 3 tokens; the raw body (chunked decoded)."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3, "stream": True, "ignore_eos": True}
    if stream_options:
        body["stream_options"] = stream_options
    st, _, raw = http("POST", url + "/v1/chat/completions", body, headers=headers)
    assert st == 200, raw
    return raw


def test_fixture_shapes(ctx):
    for fl, d in sorted(FLAVOURS.items()):
        want_stream = fixture(d, "stream.txt")
        ws = stream_shape(want_stream)
        args = ["--time-scale", "50"]
        if ws["delta"] & {"reasoning", "reasoning_content"}:
            args += ["--reasoning", "auto", "--reasoning-tokens", "1"]
        sim = ctx.sim("tiny", fl, args=args)
        # routes: present exactly where the fixture has a file
        for path, name in sorted(ROUTES.items()):
            want = fixture(d, name)
            st, _, got = http("GET", sim.url + path)
            assert (st == 200) == (want is not None), (fl, path, st)
            if want is None:
                continue
            if name.endswith(".txt"):
                fw, fg = families(want.decode()), families(got.decode())
                for fam, labels in fw.items():
                    assert fam in fg, (fl, "metric family missing", fam)
                    assert fg[fam] == labels, (fl, fam, "labels", fg[fam], labels)
                continue
            jw, jg = json.loads(want), json.loads(got)
            if path == "/slots":  # captured busy; an idle slot has a subset of the keys
                assert len(jg) >= 1 and set(jg[0]) <= set(jw[0]), (fl, jg[0])
                continue
            if path == "/v1/models":
                jw, jg = jw["data"][0], jg["data"][0]
                assert (jg.get("meta") is not None) == (jw.get("meta") is not None), fl
                if jw.get("meta"):
                    assert set(jg["meta"]) == set(jw["meta"]), (fl, jg["meta"])
            assert set(jg) == set(jw), (fl, path, sorted(set(jg) ^ set(jw)))
            for k, v in jw.items():  # null where the server has null (SGLang 0.5's arguments)
                assert (v is None) == (jg[k] is None), (fl, path, k, jg[k])
            if "internal_states" in jw:
                assert len(jg["internal_states"]) == len(jw["internal_states"]), fl
                assert set(jg["internal_states"][0]) == set(jw["internal_states"][0]), fl
            if "default_generation_settings" in jw:
                assert set(jg["default_generation_settings"]) == \
                    set(jw["default_generation_settings"]), fl
        # the stream: ask for what the fixture shows (usage on every chunk
        # when its first chunk has it)
        first = [l for l in sse_lines(want_stream)[1] if l.startswith("data:")][0]
        cont = json.loads(first[5:].lstrip()).get("usage") is not None
        so = {"include_usage": True}
        if cont:
            so["continuous_usage_stats"] = True
        gs = stream_shape(chat(sim.url, so))
        for k in ws:
            assert gs[k] == ws[k], (fl, "stream", k, gs[k], ws[k])
        # the in-band error event (TGI)
        want_err = fixture(d, "stream_error.txt")
        if want_err is not None:
            raw = chat(sim.url, None, headers={"X-Sim-Fault": "error=1"})
            we = [json.loads(l[5:]) for l in sse_lines(want_err)[1] if '"error"' in l]
            ge = [json.loads(l[5:].lstrip()) for l in sse_lines(raw)[1] if '"error"' in l]
            assert len(ge) == 1 and set(ge[0]) == set(we[0]), (fl, raw)
            assert type(ge[0]["error"]) is type(we[0]["error"]), (fl, ge)
            if isinstance(we[0]["error"], dict):
                assert set(ge[0]["error"]) == set(we[0]["error"]), (fl, ge)
            assert b"[DONE]" not in raw, raw
        sim.proc.stop()


def test_stamps_only_when_asked(ctx):
    """`: t=` comments are off by default (a third-party client that does
    not skip comments must not see them), on with X-Tokbench-Stamps: 1 or
    --stamps; --no-stamps is still accepted."""
    plain = ctx.sim("tiny", "vllm", args=["--no-stamps"])
    raw = chat(plain.url, None)
    assert b": t=" not in raw and b"\n:" not in raw, raw
    raw = chat(plain.url, None, headers={"X-Tokbench-Stamps": "1"})
    assert raw.count(b": t=") == raw.count(b"data: "), raw
    stamped = ctx.sim("tiny", "vllm", args=["--stamps"])
    raw = chat(stamped.url, None)
    assert raw.count(b": t=") == raw.count(b"data: "), raw


# flavour: (engine, version, kv budget, its source or why unknown, max running,
# its source, max length, its source)
KV = 24576  # the tiny profile's
EXPECT = {
    "vllm-0.7": ("vllm", "0.7.3", KV, "vllm:cache_config_info num_gpu_blocks x block_size",
                 None, "vLLM does not publish", 8192, "/v1/models max_model_len"),
    "vllm-0.8": ("vllm", "0.8.5.post1", None, 'vllm:cache_config_info num_gpu_blocks="None"',
                 None, "vLLM does not publish", 8192, "/v1/models max_model_len"),
    "vllm-0.10": ("vllm", "0.10.1.1", KV, "vllm:cache_config_info num_gpu_blocks x block_size",
                  None, "vLLM does not publish", 8192, "/v1/models max_model_len"),
    "vllm-0.11": ("vllm", "0.11.0", KV, "vllm:cache_config_info num_gpu_blocks x block_size",
                  None, "vLLM does not publish", 8192, "/v1/models max_model_len"),
    # num_gpu_blocks x block_size is 3,072 here: kv_cache_size_tokens must win
    "vllm-2026": ("vllm", "0.26.1rc1.dev638", KV, "vllm:cache_config_info kv_cache_size_tokens",
                  None, "vLLM does not publish", 8192, "/v1/models max_model_len"),
    "vllm": ("vllm", "0.1.0", KV, "vllm:cache_config_info kv_cache_size_tokens",
             None, "vLLM does not publish", 8192, "/v1/models max_model_len"),
    "sglang-0.3": ("sglang", None, KV, "sglang:max_total_num_tokens (/metrics)",
                   16, "sglang:max_running_requests (/metrics)", 8192,
                   "sglang:context_len (/metrics)"),
    "sglang-0.4": ("sglang", "0.4.6.post5", KV, "sglang /get_server_info max_total_num_tokens",
                   16, "sglang /get_server_info max_running_requests", 8192,
                   "/v1/models max_model_len"),
    "sglang": ("sglang", "0.1.0", KV, "sglang /get_server_info max_total_num_tokens",
               16, "sglang /get_server_info max_running_requests", 8192,
               "/v1/models max_model_len"),
    "sglang-0.5": ("sglang", "0.5.4.post1", KV, "sglang /get_server_info max_total_num_tokens",
                   16, "sglang /get_server_info internal_states effective_max_running_requests"
                   "_per_dp x dp_size", 8192, "/v1/models max_model_len"),
    "llamacpp-b6915": ("llama.cpp", "b6915-2a2bd1f0", None, "llama.cpp publishes no KV budget",
                       16, "llama.cpp /props total_slots", 8192,
                       "llama.cpp /props default_generation_settings.n_ctx"),
    "llamacpp-b11669": ("llama.cpp", "b11669-Debian", None, "llama.cpp publishes no KV budget",
                        16, "llama.cpp /props total_slots", 8192,
                        "llama.cpp /props default_generation_settings.n_ctx"),
    "llamacpp": ("llama.cpp", "b11669-Debian", None, "llama.cpp publishes no KV budget",
                 16, "llama.cpp /props total_slots", 8192,
                 "llama.cpp /props default_generation_settings.n_ctx"),
    "tgi-2.2": ("tgi", "2.2.0", KV, "tgi /info max_batch_total_tokens", None,
                "tgi /info max_batch_size null", 8192, "tgi /info max_total_tokens"),
    "tgi-3.3": ("tgi", "3.3.6", None, "tgi /info has no max_batch_total_tokens", None,
                "tgi /info max_batch_size null", 8192, "tgi /info max_total_tokens"),
    "gateway": ("openai", None, None, "no capacity interface", None, "no capacity interface",
                None, None),
    "openai": ("openai", None, None, "no capacity interface", None, "no capacity interface",
               None, None),
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_one(ctx, flavour):
    """tokbench run against one flavour: 4K context at 1 and 8 at once, 256
    tokens out, reasoning first: C = 8 needs 8 x 4352 > 24,576 tokens of KV, so it is Over
    capacity where the budget is known (and not run where it is not: the
    server would only queue it).  Returns (flavour, rc, header, cells, err)."""
    kv_known = EXPECT[flavour][2] is not None
    # the first 8 tokens of each answer in the flavour's reasoning field(s)
    sim = harness.Sim(ctx, "tiny", flavour, args=["--time-scale", "20", "--reasoning", "auto",
                                                  "--reasoning-tokens", "8"])
    argv = [harness.bin("tokbench"), "run", "--url", sim.url, "--jsonl",
            "--contexts", "4k", "--concurrency", "1,8" if kv_known else "1,2",
            "--prefill-contexts", "4k", "--duration", "0.4", "--settle", "0.1",
            "--max-output", "256"]
    p = subprocess.run(argv, capture_output=True, timeout=120)
    sim.proc.stop()
    lines = [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]
    header = lines[0] if lines and "schema" in lines[0] else None
    cells = [l for l in lines if "phase" in l]
    return flavour, p.returncode, header, cells, p.stderr.decode()


def test_run_each_flavour(ctx):
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda f: run_one(ctx, f), sorted(EXPECT)))
    for fl, rc, header, cells, err in results:
        engine, version, kv, kv_src, run, run_src, mlen, mlen_src = EXPECT[fl]
        assert rc == 0, (fl, err)
        assert header["engine"]["name"] == engine, (fl, header["engine"])
        assert header["engine"].get("version") == version, (fl, header["engine"])
        cap = header["capacity"]
        assert cap["kv_budget_tokens"] == kv, (fl, cap)
        if kv is None:
            assert cap["source"] == "none" and cap["unknown"]["kv_budget_tokens"].startswith(kv_src), (fl, cap)
        else:
            assert cap["source"] == kv_src, (fl, cap)
        assert cap["max_running_requests"] == run, (fl, cap)
        if run is None:
            assert cap["unknown"]["max_running_requests"].startswith(run_src), (fl, cap)
        else:
            assert cap["max_running_source"] == run_src, (fl, cap)
        if mlen is None:
            assert "max_model_len" in cap["unknown"], (fl, cap)
        else:
            assert cap["max_model_len_source"] == mlen_src, (fl, cap)
        st = [(c["phase"], c["concurrency"], c["status"]) for c in cells]
        want = [("prefill", 1, "valid"), ("decode", 1, "valid"),
                ("decode", 8, "over_capacity") if kv else ("decode", 2, "valid")]
        assert st == want, (fl, st, [c.get("reason") for c in cells])
        for c in cells:
            if c["status"] != "valid":
                continue
            if c["phase"] == "prefill":
                assert c["prompt_tokens"] > 0 and c["ttft_ms"] > 0, (fl, c)
            else:
                assert c["total_tps"] > 0 and c["output_tokens"] > 0, (fl, c)
                # continuous usage where the flavour gives it, else counted chunks
                assert c["token_source"] in ("usage", "chunks"), (fl, c)
