/*
 * tb_discover: what an endpoint is.  Served model and max_model_len
 * (/v1/models), the engine (SGLang: /get_server_info or /server_info, or
 * sglang: metrics; llama.cpp: /props; TGI: /info; vLLM: /version and vllm:
 * metrics; else a generic OpenAI-compatible server), its version, the KV
 * budget in tokens and the max running requests, and which helper
 * interfaces it has (metrics, tokenize, abort).
 *
 * Every figure records the surface it came from ("vllm:cache_config_info
 * kv_cache_size_tokens", "sglang /get_server_info internal_states ...",
 * "llama.cpp /props total_slots"), and a figure left unknown records why
 * (vLLM 0.8's num_gpu_blocks="None", TGI 3's /info without a batch budget).
 * docs/engine.md has the table of engines × versions × surfaces; the
 * fixtures in tests/fixtures/servers/ hold each shape.
 */
#ifndef TB_DISCOVER_H
#define TB_DISCOVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_util.h"

enum tb_engine_kind {
  TB_KIND_OPENAI = 0,
  TB_KIND_VLLM,
  TB_KIND_SGLANG,
  TB_KIND_LLAMACPP,
  TB_KIND_TGI,
};

struct tb_discover {
  char *base_url; /* without trailing '/' */
  enum tb_engine_kind kind;
  char *version;         /* NULL when unknown */
  char *model;           /* served model id */
  int64_t max_model_len; /* -1 when unknown */
  int64_t kv_budget;     /* tokens; -1 when unknown */
  int64_t max_running;   /* -1 when unknown */
  /* Where each figure came from, or why it is unknown: static strings,
   * never NULL after tb_discover_init ("none" / "" when nothing is said). */
  const char *kv_source;          /* e.g. "vllm:cache_config_info
                                   * kv_cache_size_tokens"; "none" */
  const char *kv_unknown;         /* why kv_budget is unknown, or "" */
  const char *max_running_source; /* "none" when unknown */
  const char *max_running_unknown;
  const char *max_model_len_source;
  const char *version_source;
  /* Which answer named the engine ("GET /props"; a generic server: none
   * did, and this says so), static (issue 35's provenance). */
  const char *engine_source;
  /* Whether the endpoint is tokbench-sim: 1 when GET /sim/stats answers
   * with the simulator's own counters (it always serves them, without a
   * key, whatever its flavour), 0 when it answers otherwise, -1 unknown
   * (the call failed); simulator_source says which. */
  int simulator;
  char simulator_source[192];
  /* Why readiness cannot use the server's running/waiting gauges, when
   * has_metrics is false ("no /metrics", "/metrics has no running/waiting
   * gauges ..."): readiness is then the client's, and each cell says so. */
  const char *metrics_unknown;
  bool has_metrics;
  bool has_tokenize;       /* vLLM shape (chat messages) */
  bool tokenize_text_only; /* SGLang shape */
  bool apply_template;     /* llama.cpp: POST /apply-template, then /tokenize
                           * {content} of the prompt it gives */
  json_t *server_info;     /* SGLang's server info (new ref) or NULL */
};

/* Discovers base_url.  model: wanted model (NULL: the first served).
 * Returns 0, or -1 with *err a new one-line message (caller frees). */
int tb_discover_run(const char *base_url, const char *api_key, const char *model,
                    struct tb_discover *d, char **err) TB_MUST_CHECK;
void tb_discover_free(struct tb_discover *d);
/* Name of the engine kind: "vllm", "sglang", "llama.cpp", "tgi", "openai". */
const char *tb_discover_kind_name(enum tb_engine_kind k);
/* The probe document (new reference). */
json_t *tb_discover_to_json(const struct tb_discover *d);
/* What discovery says of the endpoint itself, with the source of each
 * (new reference): engine_source, model_source, simulator (true, false or
 * "unknown") and simulator_source.  For a result's provenance
 * (lib/result/tb_provenance). */
json_t *tb_discover_identity(const struct tb_discover *d);
/* Parses GET /sim/stats's answer (status 200, body; or status 0 and err
 * for a failed call) into simulator and simulator_source.  Pure. */
void tb_discover_parse_sim(struct tb_discover *d, long status, const char *body, size_t len,
                           const char *err);
/* Where the figures came from, as members for the result's capacity
 * object (new reference): max_running_source, max_model_len_source,
 * version_source, and "unknown": {figure: reason} for each unknown one. */
json_t *tb_discover_provenance(const struct tb_discover *d);

/*
 * The parsers behind tb_discover_run, one per answer, pure (for tests and
 * fuzzing).  Whatever a peer sends, they only fill what they can read:
 * counts are positive integers or absent (-1).  d starts from
 * tb_discover_init.
 */
void tb_discover_init(struct tb_discover *d, const char *base_url);
/* GET /v1/models: the model (wanted, or the first) and its max_model_len;
 * false with *err (caller frees) when there is none. */
bool tb_discover_parse_models(struct tb_discover *d, const char *body, size_t len,
                              const char *model, char **err) TB_MUST_CHECK;
/* SGLang's server info; true when it is one (kind, version, KV budget,
 * max running requests: 0.5's internal_states[].
 * effective_max_running_requests_per_dp × dp_size before the top-level
 * max_running_requests, context length). */
bool tb_discover_parse_server_info(struct tb_discover *d, const char *body, size_t len);
/* llama.cpp's GET /props; true when it is one (kind, build, n_ctx of a
 * slot as the max length, total_slots as the max running requests). */
bool tb_discover_parse_props(struct tb_discover *d, const char *body, size_t len);
/* TGI's GET /info; true when it is one (kind, version, max_total_tokens,
 * before 2.3 max_batch_total_tokens as the KV budget, max_batch_size). */
bool tb_discover_parse_info(struct tb_discover *d, const char *body, size_t len);
/* vLLM's GET /version; true when it is one. */
bool tb_discover_parse_version(struct tb_discover *d, const char *body, size_t len);
/* GET /metrics: vLLM's cache_config_info (KV budget: kv_cache_size_tokens,
 * else num_gpu_blocks × block_size; "None" is unknown), SGLang ≤ 0.3's
 * capacity gauges, and whether the text has the running gauge of the
 * engine (has_metrics; a gateway's own /metrics does not). */
void tb_discover_parse_metrics(struct tb_discover *d, const char *text, size_t len);
/* After every probe: the interfaces the engine has (tokenize) and the
 * reasons for what stayed unknown.  Pure; tb_discover_run calls it. */
void tb_discover_finish(struct tb_discover *d);

/* Samples running and waiting requests from /metrics (blocking, short
 * timeout).  -1 when the endpoint has no metrics or the call failed. */
int tb_discover_load(const struct tb_discover *d, const char *api_key, double *running,
                     double *waiting) TB_MUST_CHECK;
/* Parses the running/waiting gauges out of a metrics text for kind. */
bool tb_discover_parse_load(enum tb_engine_kind kind, const char *text, size_t len, double *running,
                            double *waiting) TB_MUST_CHECK;

#endif
