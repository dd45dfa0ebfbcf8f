/*
 * tb_discover: endpoint discovery.  See tb_discover.h.
 *
 * Order: /v1/models must answer (it is the one interface every server has,
 * and the one --api-key guards); then SGLang's server info, llama.cpp's
 * /props, TGI's /info and vLLM's /version until one answers in its engine's
 * shape, then /metrics.  Each probe is a short blocking call; a probe that
 * fails only means "not this engine".  Each figure keeps the surface it came
 * from, and tb_discover_finish says why the others are unknown.
 */
#include "engine/tb_discover.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tb_http.h"
#include "net/tb_prom.h"

#define PROBE_TIMEOUT_MS 10000L
#define SMALL_BODY_MAX (1024u * 1024u)

const char *
tb_discover_kind_name(enum tb_engine_kind k)
{
  switch (k) {
  case TB_KIND_VLLM: return "vllm";
  case TB_KIND_SGLANG: return "sglang";
  case TB_KIND_LLAMACPP: return "llama.cpp";
  case TB_KIND_TGI: return "tgi";
  default: return "openai";
  }
}

/* GET path; the body (status 200 only) as a new NUL-terminated copy, or NULL. */
static char *
get_body(const struct tb_discover *d, const char *path, const char *api_key, size_t cap,
         long *status, size_t *len, char *errbuf, size_t errlen)
{
  char *url = tb_xasprintf("%s%s", d->base_url, path);
  struct tb_http_resp r;
  char *body = NULL;
  *status = 0;
  *len = 0;
  if (tb_http_call("GET", url, api_key, NULL, 0, PROBE_TIMEOUT_MS, cap, &r) != 0) {
    snprintf(errbuf, errlen, "%s", r.err);
    goto out;
  }
  *status = r.status;
  if (r.status == 200) {
    body = tb_xmalloc(r.len + 1);
    memcpy(body, r.body, r.len);
    body[r.len] = '\0';
    *len = r.len;
  }
out:
  tb_http_resp_free(&r);
  free(url);
  return body;
}

/* A positive count from a JSON member (integer, or a real that is one), else
 * -1.  Peers send anything: a huge or fractional real is not a count. */
static int64_t
int_member(const json_t *o, const char *key)
{
  const json_t *v = json_object_get(o, key);
  if (json_is_integer(v) && json_integer_value(v) > 0)
    return json_integer_value(v);
  if (json_is_real(v)) {
    double x = json_real_value(v);
    if (x >= 1 && x < 9.0e15 && x == floor(x))
      return (int64_t)x;
  }
  return -1;
}

/* Surfaces (where a figure came from) and reasons (why it is unknown).
 * Static strings: the result header keeps the pointers. */
#define SRC_NONE "none"
#define SG_SI "sglang /get_server_info "
#define VLLM_CCI "vllm:cache_config_info "

/* The engine that a surface shows, unless one is known already.  A bare
 * {"version": ...} at /version is weak evidence of vLLM: another engine's
 * metrics prefix wins over it. */
static void
set_kind(struct tb_discover *d, enum tb_engine_kind k)
{
  if (d->kind == TB_KIND_OPENAI ||
      (d->kind == TB_KIND_VLLM && strcmp(d->version_source, "vllm /version") == 0)) {
    if (d->kind != k && d->kind == TB_KIND_VLLM)
      d->version_source = "/version";
    d->kind = k;
  }
}

static void
set_version(struct tb_discover *d, const char *v, const char *source)
{
  if (v == NULL || *v == '\0')
    return;
  free(d->version);
  d->version = tb_xstrndup(v, 200);
  d->version_source = source;
}

/* One figure found: n (nothing when it is no count) from the surface
 * source; its reason for being unknown (NULL: it has none) cleared. */
static void
set_figure(int64_t *value, const char **from, const char **unknown, int64_t n, const char *source)
{
  if (n <= 0)
    return;
  *value = n;
  *from = source;
  if (unknown != NULL)
    *unknown = "";
}

static void
set_kv(struct tb_discover *d, int64_t kv, const char *source)
{
  set_figure(&d->kv_budget, &d->kv_source, &d->kv_unknown, kv, source);
}

static void
set_running(struct tb_discover *d, int64_t n, const char *source)
{
  set_figure(&d->max_running, &d->max_running_source, &d->max_running_unknown, n, source);
}

static void
set_max_len(struct tb_discover *d, int64_t n, const char *source)
{
  set_figure(&d->max_model_len, &d->max_model_len_source, NULL, n, source);
}

bool
tb_discover_parse_models(struct tb_discover *d, const char *body, size_t len, const char *model,
                         char **err)
{
  json_t *models = json_loadb(body, len, 0, NULL);
  const json_t *data = json_object_get(models, "data");
  const json_t *pick = NULL;
  size_t i;
  const json_t *m;
  json_array_foreach (data, i, m) {
    const char *id = json_string_value(json_object_get(m, "id"));
    if (id == NULL)
      continue;
    if (model == NULL || strcmp(model, id) == 0) {
      pick = m;
      break;
    }
  }
  if (pick == NULL) {
    *err = models == NULL ? tb_xasprintf("%s: GET /v1/models is not JSON", d->base_url)
           : model        ? tb_xasprintf("model %.200s is not served by %s", model, d->base_url)
                          : tb_xasprintf("%s serves no model", d->base_url);
    json_decref(models);
    return false;
  }
  free(d->model);
  d->model = tb_xstrdup(json_string_value(json_object_get(pick, "id")));
  d->max_model_len = -1;
  set_max_len(d, int_member(pick, "max_model_len"), "/v1/models max_model_len");
  json_decref(models);
  return true;
}

bool
tb_discover_parse_server_info(struct tb_discover *d, const char *body, size_t len)
{
  json_t *si = json_loadb(body, len, 0, NULL);
  if (!json_is_object(si) || (json_object_get(si, "max_total_num_tokens") == NULL &&
                              json_object_get(si, "max_running_requests") == NULL &&
                              !json_is_array(json_object_get(si, "internal_states")))) {
    json_decref(si);
    return false;
  }
  d->kind = TB_KIND_SGLANG;
  json_decref(d->server_info);
  d->server_info = si;
  set_version(d, json_string_value(json_object_get(si, "version")), SG_SI "version");
  /* KV budget: the scheduler's pool, else (0.5) the first rank's capacity. */
  const json_t *states = json_object_get(si, "internal_states");
  const json_t *st0 = json_array_get(states, 0);
  int64_t kv = int_member(si, "max_total_num_tokens");
  if (kv > 0)
    set_kv(d, kv, SG_SI "max_total_num_tokens");
  else
    set_kv(d, int_member(json_object_get(st0, "memory_usage"), "token_capacity"),
           SG_SI "internal_states memory_usage.token_capacity");
  /* Max running: 0.5's effective limit per data-parallel rank (what the
   * scheduler really admits; the top-level server argument may be null),
   * times dp_size; else the top-level server argument. */
  int64_t per_dp = -1;
  size_t i;
  const json_t *st;
  json_array_foreach (states, i, st) {
    int64_t v = int_member(st, "effective_max_running_requests_per_dp");
    if (v > per_dp)
      per_dp = v;
  }
  int64_t dp = int_member(si, "dp_size");
  if (dp < 1)
    dp = 1;
  if (per_dp > 0 && per_dp <= INT64_MAX / dp)
    set_running(d, per_dp * dp,
                SG_SI "internal_states effective_max_running_requests_per_dp x dp_size");
  else
    set_running(d, int_member(si, "max_running_requests"), SG_SI "max_running_requests");
  if (d->max_model_len < 0)
    set_max_len(d, int_member(si, "context_length"), SG_SI "context_length");
  d->tokenize_text_only = true;
  return true;
}

bool
tb_discover_parse_props(struct tb_discover *d, const char *body, size_t len)
{
  json_t *p = json_loadb(body, len, 0, NULL);
  const json_t *dgs = json_object_get(p, "default_generation_settings");
  bool ok = json_is_object(p) && (json_is_object(dgs) || json_object_get(p, "total_slots") != NULL);
  if (ok) {
    d->kind = TB_KIND_LLAMACPP;
    set_version(d, json_string_value(json_object_get(p, "build_info")),
                "llama.cpp /props build_info");
    /* n_ctx of a slot is the real limit of one request; /v1/models has only
     * the training context (meta.n_ctx_train). */
    int64_t n_ctx = int_member(dgs, "n_ctx");
    if (n_ctx <= 0) /* older builds put it at the top level */
      n_ctx = int_member(p, "n_ctx");
    set_max_len(d, n_ctx, "llama.cpp /props default_generation_settings.n_ctx");
    set_running(d, int_member(p, "total_slots"), "llama.cpp /props total_slots");
  }
  json_decref(p);
  return ok;
}

bool
tb_discover_parse_info(struct tb_discover *d, const char *body, size_t len)
{
  json_t *in = json_loadb(body, len, 0, NULL);
  const char *router = json_string_value(json_object_get(in, "router"));
  bool ok = json_is_object(in) && json_is_string(json_object_get(in, "model_id")) &&
            (json_object_get(in, "max_total_tokens") != NULL ||
             (router != NULL && strcmp(router, "text-generation-router") == 0));
  if (ok) {
    d->kind = TB_KIND_TGI;
    set_version(d, json_string_value(json_object_get(in, "version")), "tgi /info version");
    set_max_len(d, int_member(in, "max_total_tokens"), "tgi /info max_total_tokens");
    set_kv(d, int_member(in, "max_batch_total_tokens"), "tgi /info max_batch_total_tokens");
    set_running(d, int_member(in, "max_batch_size"), "tgi /info max_batch_size");
  }
  json_decref(in);
  return ok;
}

bool
tb_discover_parse_version(struct tb_discover *d, const char *body, size_t len)
{
  json_t *ver = json_loadb(body, len, 0, NULL);
  const char *vs = json_string_value(json_object_get(ver, "version"));
  if (vs != NULL) {
    d->kind = TB_KIND_VLLM;
    set_version(d, vs, "vllm /version");
  }
  json_decref(ver);
  return vs != NULL;
}

/* vLLM's cache_config_info, one series per engine (data parallel: each has
 * its own KV cache, so the budget is their sum). */
struct cci {
  int64_t kv_tokens, blocks_tokens, max_seqs;
  unsigned series, none_blocks;
  bool all_kv, all_blocks;
};

static int64_t
label_value(const char *labels, size_t n, const char *label, bool *is_none)
{
  char buf[64];
  *is_none = false;
  if (!tb_prom_find_label(labels, n, label, buf, sizeof buf))
    return -1;
  if (strcmp(buf, "None") == 0) {
    *is_none = true;
    return -1;
  }
  int64_t v;
  if (tb_parse_i64(buf, 1, INT64_MAX, &v))
    return v;
  char *end = NULL;
  double x = strtod(buf, &end);
  if (end == buf || *end != '\0' || !(x >= 1 && x < 9.0e15) || x != floor(x))
    return -1;
  return (int64_t)x;
}

static bool
cci_cb(void *cls, const char *name, size_t name_len, const char *labels, size_t labels_len,
       double value)
{
  struct cci *c = cls;
  static const char want[] = "vllm:cache_config_info";
  (void)value;
  if (name_len != sizeof want - 1 || memcmp(name, want, name_len) != 0)
    return true;
  c->series++;
  bool none;
  int64_t kv = label_value(labels, labels_len, "kv_cache_size_tokens", &none);
  if (kv > 0 && c->kv_tokens <= INT64_MAX - kv)
    c->kv_tokens += kv;
  else
    c->all_kv = false;
  int64_t blocks = label_value(labels, labels_len, "num_gpu_blocks", &none);
  if (none)
    c->none_blocks++;
  bool bs_none;
  int64_t bs = label_value(labels, labels_len, "block_size", &bs_none);
  if (blocks > 0 && bs > 0 && blocks <= INT64_MAX / bs &&
      c->blocks_tokens <= INT64_MAX - blocks * bs)
    c->blocks_tokens += blocks * bs;
  else
    c->all_blocks = false;
  int64_t seqs = label_value(labels, labels_len, "max_num_seqs", &none);
  if (seqs > c->max_seqs)
    c->max_seqs = seqs;
  return true;
}

static void
vllm_metrics(struct tb_discover *d, const char *text, size_t len)
{
  struct cci c = { .all_kv = true, .all_blocks = true, .max_seqs = -1 };
  if (tb_prom_parse(text, len, cci_cb, &c) < 0 || c.series == 0) {
    if (d->kv_budget < 0)
      d->kv_unknown = "no vllm:cache_config_info in /metrics";
    return;
  }
  if (d->kv_budget < 0) {
    /* kv_cache_size_tokens first: since mid-2026 block_size is the smallest
     * block size over the KV-cache groups, so blocks x block_size can be
     * far below the real capacity. */
    if (c.all_kv)
      set_kv(d, c.kv_tokens, VLLM_CCI "kv_cache_size_tokens");
    else if (c.all_blocks)
      set_kv(d, c.blocks_tokens, VLLM_CCI "num_gpu_blocks x block_size");
    else if (c.none_blocks > 0)
      d->kv_unknown = VLLM_CCI "num_gpu_blocks=\"None\"";
    else
      d->kv_unknown = VLLM_CCI "has no kv_cache_size_tokens nor num_gpu_blocks";
  }
  if (d->max_running < 0)
    set_running(d, c.max_seqs, VLLM_CCI "max_num_seqs");
}

/* A gauge's sum as a count, or -1 (absent, below 1, not whole-sized). */
static int64_t
gauge_count(const char *text, size_t len, const char *name)
{
  double v;
  return tb_prom_sum(text, len, name, &v) && v >= 1 && v < 9.0e15 ? (int64_t)v : -1;
}

/* SGLang <= 0.3 published its capacity as gauges (label name=). */
static void
sglang_metrics(struct tb_discover *d, const char *text, size_t len)
{
  d->tokenize_text_only = true;
  if (d->kv_budget < 0)
    set_kv(d, gauge_count(text, len, "sglang:max_total_num_tokens"),
           "sglang:max_total_num_tokens (/metrics)");
  if (d->max_running < 0)
    set_running(d, gauge_count(text, len, "sglang:max_running_requests"),
                "sglang:max_running_requests (/metrics)");
  if (d->max_model_len < 0)
    set_max_len(d, gauge_count(text, len, "sglang:context_len"), "sglang:context_len (/metrics)");
}

/* The engine whose series a /metrics has: by their prefix, TGI's (which
 * has none) by its batch gauge; TB_KIND_OPENAI for none. */
static enum tb_engine_kind
metrics_kind(const char *text, size_t len)
{
  static const struct {
    const char *prefix;
    enum tb_engine_kind kind;
  } prefixes[] = {
    { "vllm:", TB_KIND_VLLM },
    { "sglang:", TB_KIND_SGLANG },
    { "llamacpp:", TB_KIND_LLAMACPP },
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(prefixes); i++)
    if (tb_prom_has_prefix(text, len, prefixes[i].prefix))
      return prefixes[i].kind;
  double v;
  return tb_prom_sum(text, len, "tgi_batch_current_size", &v) ? TB_KIND_TGI : TB_KIND_OPENAI;
}

void
tb_discover_parse_metrics(struct tb_discover *d, const char *text, size_t len)
{
  enum tb_engine_kind k = metrics_kind(text, len);
  if (k != TB_KIND_OPENAI) {
    set_kind(d, k);
    if (d->kind == k) {
      /* the load gauges (load_names) say whether it publishes its load */
      double running, waiting;
      d->has_metrics = tb_discover_parse_load(k, text, len, &running, &waiting);
      if (k == TB_KIND_VLLM)
        vllm_metrics(d, text, len);
      else if (k == TB_KIND_SGLANG)
        sglang_metrics(d, text, len);
    }
  }
  /* Anything else is a gateway's or an exporter's own /metrics: no engine
   * gauges, so has_metrics stays false and readiness is the client's. */
  if (!d->has_metrics)
    d->metrics_unknown = "/metrics has no running/waiting gauges of an engine (a gateway's "
                         "or an exporter's own)";
}

/* Why the KV budget and the running limit are unknown when no surface gave
 * them, by engine; the last row is any other's (a generic server). */
static const struct {
  enum tb_engine_kind kind;
  const char *kv, *running;
} unknown_why[] = {
  { TB_KIND_VLLM, "no /metrics (vllm:cache_config_info)", "vLLM does not publish --max-num-seqs" },
  { TB_KIND_SGLANG, "sglang: no max_total_num_tokens in /get_server_info or /metrics",
    "sglang: max_running_requests null and no internal_states limit" },
  { TB_KIND_LLAMACPP,
    "llama.cpp publishes no KV budget (each of total_slots slots holds n_ctx tokens)",
    "llama.cpp /props without total_slots" },
  { TB_KIND_TGI, "tgi /info has no max_batch_total_tokens (TGI >= 2.3)",
    "tgi /info max_batch_size null (max_concurrent_requests limits admission, not running "
    "requests)" },
  { TB_KIND_OPENAI, "no capacity interface (generic OpenAI-compatible server)",
    "no capacity interface (generic OpenAI-compatible server)" },
};

void
tb_discover_finish(struct tb_discover *d)
{
  if (d->kind == TB_KIND_VLLM)
    d->has_tokenize = true;
  else if (d->kind != TB_KIND_SGLANG)
    d->tokenize_text_only = false;
  /* llama.cpp's /tokenize takes text and applies no chat template; its
   * /apply-template (PR ggml-org/llama.cpp#11489, January 2025) gives the
   * prompt the template makes, whose tokens are what the server sees. */
  d->apply_template = d->kind == TB_KIND_LLAMACPP;
  size_t w = 0;
  while (w + 1 < TB_ARRAY_LEN(unknown_why) && unknown_why[w].kind != d->kind)
    w++;
  if (d->kv_budget < 0 && *d->kv_unknown == '\0')
    d->kv_unknown = unknown_why[w].kv;
  if (d->max_running < 0 && *d->max_running_unknown == '\0')
    d->max_running_unknown = unknown_why[w].running;
}

void
tb_discover_init(struct tb_discover *d, const char *base_url)
{
  memset(d, 0, sizeof *d);
  size_t bl = strlen(base_url);
  while (bl > 0 && base_url[bl - 1] == '/')
    bl--;
  d->base_url = tb_xstrndup(base_url, bl);
  d->max_model_len = d->kv_budget = d->max_running = -1;
  d->kv_source = d->max_running_source = d->max_model_len_source = SRC_NONE;
  d->version_source = SRC_NONE;
  d->engine_source = "no engine's own surface answered (/get_server_info, /server_info, /props, "
                     "/info, /version, /metrics): a generic OpenAI-compatible server";
  d->simulator = -1;
  snprintf(d->simulator_source, sizeof d->simulator_source, "GET /sim/stats was not asked");
  d->kv_unknown = d->max_running_unknown = "";
  d->metrics_unknown = "no /metrics";
}

int
tb_discover_run(const char *base_url, const char *api_key, const char *model, struct tb_discover *d,
                char **err)
{
  tb_discover_init(d, base_url);
  char eb[256] = "";
  long st;
  size_t len;

  char *body = get_body(d, "/v1/models", api_key, SMALL_BODY_MAX, &st, &len, eb, sizeof eb);
  if (body == NULL) {
    if (st == 0)
      *err = tb_xasprintf("endpoint %s unreachable: %s", d->base_url, eb);
    else if (st == 401 || st == 403)
      *err = tb_xasprintf("endpoint %s refused the API key (HTTP %ld)", d->base_url, st);
    else
      *err = tb_xasprintf("endpoint %s: GET /v1/models answered HTTP %ld", d->base_url, st);
    return -1;
  }
  bool ok = tb_discover_parse_models(d, body, len, model, err);
  free(body);
  if (!ok)
    return -1;

  /* One probe per engine, each skipped once the engine is known: SGLang's
   * server info, llama.cpp's /props, TGI's /info, vLLM's /version. */
  static const struct {
    const char *path, *source;
    bool (*parse)(struct tb_discover *, const char *, size_t);
  } probes[] = {
    { "/get_server_info", "GET /get_server_info", tb_discover_parse_server_info },
    { "/server_info", "GET /server_info", tb_discover_parse_server_info },
    { "/props", "GET /props", tb_discover_parse_props },
    { "/info", "GET /info", tb_discover_parse_info },
    { "/version", "GET /version", tb_discover_parse_version },
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(probes) && d->kind == TB_KIND_OPENAI; i++) {
    body = get_body(d, probes[i].path, api_key, SMALL_BODY_MAX, &st, &len, eb, sizeof eb);
    if (body != NULL && probes[i].parse(d, body, len) && d->kind != TB_KIND_OPENAI)
      d->engine_source = probes[i].source;
    free(body);
  }
  /* Metrics: the load gauges, vLLM's KV budget, SGLang 0.3's capacity. */
  enum tb_engine_kind before = d->kind;
  body = get_body(d, "/metrics", api_key, TB_PROM_BODY_MAX, &st, &len, eb, sizeof eb);
  if (body != NULL)
    tb_discover_parse_metrics(d, body, len);
  else if (st == 401 || st == 403)
    d->metrics_unknown = "/metrics refused the API key";
  free(body);
  if (d->kind != before)
    d->engine_source = "GET /metrics (the engine's series prefix)";
  /* tokbench-sim serves /sim/stats to anyone: the endpoint's key is not sent */
  eb[0] = '\0';
  body = get_body(d, "/sim/stats", NULL, SMALL_BODY_MAX, &st, &len, eb, sizeof eb);
  tb_discover_parse_sim(d, st, body, len, eb);
  free(body);
  tb_discover_finish(d);
  return 0;
}

void
tb_discover_parse_sim(struct tb_discover *d, long status, const char *body, size_t len,
                      const char *err)
{
  if (status == 0) {
    d->simulator = -1;
    snprintf(d->simulator_source, sizeof d->simulator_source, "GET /sim/stats failed: %.150s",
             err != NULL && *err != '\0' ? err : "no answer");
    return;
  }
  if (status != 200 || body == NULL) {
    d->simulator = 0;
    snprintf(d->simulator_source, sizeof d->simulator_source,
             "GET /sim/stats answered HTTP %ld (tokbench-sim answers 200 to anyone)", status);
    return;
  }
  json_t *j = json_loadb(body, len, 0, NULL);
  static const char *const counters[] = { "steps", "late_steps", "kv_reserved_tokens",
                                          "kv_budget_tokens", "tokens_generated" };
  bool sim = json_is_object(j);
  for (size_t i = 0; sim && i < TB_ARRAY_LEN(counters); i++)
    sim = json_is_integer(json_object_get(j, counters[i]));
  json_decref(j);
  d->simulator = sim ? 1 : 0;
  snprintf(d->simulator_source, sizeof d->simulator_source, "%s",
           sim ? "GET /sim/stats answered with tokbench-sim's counters (steps, late_steps, "
                 "kv_reserved_tokens, kv_budget_tokens, tokens_generated)"
               : "GET /sim/stats answered 200 without tokbench-sim's counters");
}

json_t *
tb_discover_identity(const struct tb_discover *d)
{
  return json_pack("{s:s, s:s, s:o, s:s}", "engine_source", d->engine_source, "model_source",
                   "GET /v1/models", "simulator",
                   d->simulator < 0 ? json_string("unknown") : json_boolean(d->simulator > 0),
                   "simulator_source", d->simulator_source);
}

void
tb_discover_free(struct tb_discover *d)
{
  free(d->base_url);
  free(d->version);
  free(d->model);
  json_decref(d->server_info);
  memset(d, 0, sizeof *d);
}

json_t *
tb_discover_to_json(const struct tb_discover *d)
{
  json_t *o = json_object();
  json_object_set_new(o, "url", json_string(d->base_url));
  json_object_set_new(o, "engine", json_string(tb_discover_kind_name(d->kind)));
  json_object_set_new(o, "version", d->version ? json_string(d->version) : json_null());
  json_object_set_new(o, "model", json_string(d->model));
  json_object_set_new(o, "max_model_len",
                      d->max_model_len > 0 ? json_integer(d->max_model_len) : json_null());
  json_object_set_new(o, "kv_budget_tokens",
                      d->kv_budget > 0 ? json_integer(d->kv_budget) : json_null());
  json_object_set_new(o, "kv_budget_source", json_string(d->kv_source));
  json_object_set_new(o, "max_running_requests",
                      d->max_running > 0 ? json_integer(d->max_running) : json_null());
  json_object_set_new(o, "metrics", json_boolean(d->has_metrics));
  json_object_set_new(o, "tokenize",
                      json_string(d->has_tokenize         ? "chat"
                                  : d->tokenize_text_only ? "text"
                                  : d->apply_template     ? "template"
                                                          : "none"));
  json_t *pv = tb_discover_provenance(d);
  json_object_update(o, pv);
  json_decref(pv);
  return o;
}

json_t *
tb_discover_provenance(const struct tb_discover *d)
{
  json_t *o = json_object();
  json_object_set_new(o, "max_running_source", json_string(d->max_running_source));
  json_object_set_new(o, "max_model_len_source", json_string(d->max_model_len_source));
  json_object_set_new(o, "version_source", json_string(d->version_source));
  json_t *unk = json_object();
  if (d->kv_budget <= 0 && *d->kv_unknown != '\0')
    json_object_set_new(unk, "kv_budget_tokens", json_string(d->kv_unknown));
  if (d->max_running <= 0 && *d->max_running_unknown != '\0')
    json_object_set_new(unk, "max_running_requests", json_string(d->max_running_unknown));
  if (d->max_model_len <= 0)
    json_object_set_new(unk, "max_model_len",
                        json_string("/v1/models has no max_model_len and no engine "
                                    "surface gave one"));
  json_object_set_new(o, "unknown", unk);
  return o;
}

/* The load gauges of each engine, newest names first: {running, waiting}. */
static const struct {
  enum tb_engine_kind kind;
  const char *running, *waiting;
} load_names[] = {
  { TB_KIND_VLLM, "vllm:num_requests_running", "vllm:num_requests_waiting" },
  { TB_KIND_SGLANG, "sglang:num_running_reqs", "sglang:num_queue_reqs" },
  { TB_KIND_SGLANG, "sglang:num_requests_running", "sglang:num_requests_waiting" }, /* <= 0.3 */
  { TB_KIND_LLAMACPP, "llamacpp:requests_processing", "llamacpp:requests_deferred" },
  { TB_KIND_TGI, "tgi_batch_current_size", "tgi_queue_size" },
};

bool
tb_discover_parse_load(enum tb_engine_kind kind, const char *text, size_t len, double *running,
                       double *waiting)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(load_names); i++) {
    if (load_names[i].kind != kind || !tb_prom_sum(text, len, load_names[i].running, running))
      continue;
    if (!tb_prom_sum(text, len, load_names[i].waiting, waiting))
      *waiting = 0;
    return true;
  }
  return false;
}

int
tb_discover_load(const struct tb_discover *d, const char *api_key, double *running, double *waiting)
{
  if (!d->has_metrics)
    return -1;
  char *url = tb_xasprintf("%s/metrics", d->base_url);
  struct tb_http_resp r;
  int rc = -1;
  if (tb_http_call("GET", url, api_key, NULL, 0, 5000L, TB_PROM_BODY_MAX, &r) == 0 &&
      r.status == 200 && tb_discover_parse_load(d->kind, r.body, r.len, running, waiting))
    rc = 0;
  tb_http_resp_free(&r);
  free(url);
  return rc;
}
