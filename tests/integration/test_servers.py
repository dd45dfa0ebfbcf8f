"""Discovery against each real engine's shapes (issue 12): a stand-in HTTP
server answers with the conformance fixtures of tests/fixtures/servers/
<engine>-<version>/ (models, server info, props, info, version, metrics),
and the api's probe (real tokbench-api, real PostgreSQL, libcurl over
loopback) must find the engine, its version, the KV budget, the max running
requests and the max length, each with the surface it came from, or say why
it is unknown.  The parsers themselves are unit-tested over the same files
(tests/unit/test_servers.c)."""
import http.server
import os
import threading

import harness
from test_api import keep, new_endpoint, setup

FIXTURES = os.path.join(harness.ROOT, "tests", "fixtures", "servers")
ROUTES = {"/v1/models": "models.json", "/get_server_info": "server_info.json",
          "/props": "props.json", "/info": "info.json", "/version": "version.json",
          "/metrics": "metrics.txt"}

# dir: (engine, version, kv budget, its source or reason, max running, max length)
EXPECT = {
    "vllm-0.7": ("vllm", "0.7.3", 1308272, "vllm:cache_config_info num_gpu_blocks x block_size",
                 None, 131072),
    "vllm-0.8": ("vllm", "0.8.5.post1", None, 'vllm:cache_config_info num_gpu_blocks="None"',
                 None, 40960),
    "vllm-2026": ("vllm", "0.26.1rc1.dev638", 917504, "vllm:cache_config_info kv_cache_size_tokens",
                  None, 262144),
    "sglang-0.3": ("sglang", None, 161721, "sglang:max_total_num_tokens (/metrics)", 4097, 8192),
    "sglang-0.5": ("sglang", "0.5.4.post1", 20480, "sglang /get_server_info max_total_num_tokens",
                   256, 32768),
    "llamacpp": ("llama.cpp", "b6915-2a2bd1f0", None, "llama.cpp publishes no KV budget", 4, 16384),
    "llamacpp-b11669": ("llama.cpp", "b11669-Debian", None, "llama.cpp publishes no KV budget",
                        4, 4096),
    "tgi-2.2": ("tgi", "2.2.0", 262144, "tgi /info max_batch_total_tokens", None, 4096),
    "tgi-3.3": ("tgi", "3.3.6", None, "tgi /info has no max_batch_total_tokens", None, 8192),
    "gateway": ("openai", None, None, "no capacity interface", None, None),
}


def serve(directory):
    """A stand-in server for one fixture directory; answers 404 to what the
    engine does not have.  Returns (server, base URL)."""
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = ROUTES.get(self.path)
            path = os.path.join(FIXTURES, directory, name) if name else None
            if path is None or not os.path.exists(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = open(path, "rb").read()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4" if name.endswith(".txt")
                             else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "http://127.0.0.1:%d" % srv.server_address[1]


def test_probe_each_engine(ctx):
    s = setup(ctx)
    api, admin = s["api"], s["admin"]
    for d, (engine, version, kv, kv_why, running, max_len) in sorted(EXPECT.items()):
        srv, url = serve(d)
        try:
            ep = new_endpoint(api, admin, "fx-" + d.replace(".", "-"), base_url=url)
            st, _, f = keep(api.json("POST", "/v1/endpoints/%s/probe" % ep["id"], admin, timeout=60))
        finally:
            srv.shutdown()
            srv.server_close()
        assert st == 200, (d, f)
        assert f["engine"] == engine, (d, f)
        assert f["version"] == version, (d, f)
        assert f["kv_budget_tokens"] == kv, (d, f)
        if kv is None:
            assert f["kv_budget_source"] == "none", (d, f)
            assert f["unknown"]["kv_budget_tokens"].startswith(kv_why), (d, f)
        else:
            assert f["kv_budget_source"] == kv_why, (d, f)
        assert f["max_running_requests"] == running, (d, f)
        assert (f["max_running_source"] == "none") == (running is None), (d, f)
        assert f["max_model_len"] == max_len, (d, f)
        assert ("max_model_len" in f["unknown"]) == (max_len is None), (d, f)
        assert f["metrics"] == (engine != "openai"), (d, f)
