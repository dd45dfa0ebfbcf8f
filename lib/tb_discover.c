/*
 * tb_discover: endpoint discovery.  See tb_discover.h.
 *
 * Order: /v1/models must answer (it is the one interface every server has,
 * and the one --api-key guards); then SGLang's server info, then vLLM's
 * /version and /metrics.  Each probe is a short blocking call; a probe that
 * fails only means "not this engine".
 */
#include "tb_discover.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_http.h"
#include "tb_prom.h"

#define PROBE_TIMEOUT_MS 10000L
#define SMALL_BODY_MAX (1024u * 1024u)

const char *
tb_discover_kind_name(enum tb_engine_kind k)
{
  switch (k) {
  case TB_KIND_VLLM:
    return "vllm";
  case TB_KIND_SGLANG:
    return "sglang";
  default:
    return "openai";
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

/* A positive count from a label value ("61440" or vLLM's "61440.0"), else -1. */
static int64_t
label_count(const char *text, size_t len, const char *metric, const char *label)
{
  char buf[64];
  if (!tb_prom_label(text, len, metric, label, buf, sizeof buf))
    return -1;
  int64_t v;
  if (tb_parse_i64(buf, 1, INT64_MAX, &v))
    return v;
  char *end = NULL;
  double x = strtod(buf, &end);
  if (end == buf || *end != '\0' || !(x >= 1 && x < 9.0e15) || x != floor(x))
    return -1;
  return (int64_t)x;
}

bool
tb_discover_parse_models(struct tb_discover *d, const char *body, size_t len,
                         const char *model, char **err)
{
  json_t *models = json_loadb(body, len, 0, NULL);
  const json_t *data = json_object_get(models, "data");
  const json_t *pick = NULL;
  size_t i;
  const json_t *m;
  json_array_foreach(data, i, m) {
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
  d->max_model_len = int_member(pick, "max_model_len");
  json_decref(models);
  return true;
}

bool
tb_discover_parse_server_info(struct tb_discover *d, const char *body, size_t len)
{
  json_t *si = json_loadb(body, len, 0, NULL);
  if (!json_is_object(si) || (json_object_get(si, "max_total_num_tokens") == NULL &&
                              json_object_get(si, "max_running_requests") == NULL)) {
    json_decref(si);
    return false;
  }
  d->kind = TB_KIND_SGLANG;
  json_decref(d->server_info);
  d->server_info = si;
  const char *ver = json_string_value(json_object_get(si, "version"));
  if (ver != NULL) {
    free(d->version);
    d->version = tb_xstrndup(ver, 200);
  }
  int64_t kv = int_member(si, "max_total_num_tokens");
  if (kv > 0) {
    d->kv_budget = kv;
    d->kv_source = "server_info";
  }
  d->max_running = int_member(si, "max_running_requests");
  if (d->max_model_len < 0)
    d->max_model_len = int_member(si, "context_length");
  d->tokenize_text_only = true;
  return true;
}

bool
tb_discover_parse_version(struct tb_discover *d, const char *body, size_t len)
{
  json_t *ver = json_loadb(body, len, 0, NULL);
  const char *vs = json_string_value(json_object_get(ver, "version"));
  if (vs != NULL) {
    d->kind = TB_KIND_VLLM;
    free(d->version);
    d->version = tb_xstrndup(vs, 200);
  }
  json_decref(ver);
  return vs != NULL;
}

void
tb_discover_parse_metrics(struct tb_discover *d, const char *text, size_t len)
{
  if (tb_prom_has_prefix(text, len, "vllm:")) {
    d->kind = TB_KIND_VLLM;
    d->has_metrics = true;
    int64_t kv = label_count(text, len, "vllm:cache_config_info", "kv_cache_size_tokens");
    if (kv > 0) {
      d->kv_budget = kv;
      d->kv_source = "metrics";
    } else {
      int64_t blocks = label_count(text, len, "vllm:cache_config_info", "num_gpu_blocks");
      int64_t bs = label_count(text, len, "vllm:cache_config_info", "block_size");
      if (blocks > 0 && bs > 0 && blocks <= INT64_MAX / bs) {
        d->kv_budget = blocks * bs;
        d->kv_source = "metrics";
      }
    }
    int64_t seqs = label_count(text, len, "vllm:cache_config_info", "max_num_seqs");
    if (seqs > 0)
      d->max_running = seqs;
  } else if (d->kind == TB_KIND_SGLANG && tb_prom_has_prefix(text, len, "sglang:")) {
    d->has_metrics = true;
  }
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
  d->kv_source = "none";
}

int
tb_discover_run(const char *base_url, const char *api_key, const char *model,
                struct tb_discover *d, char **err)
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

  /* SGLang */
  static const char *const si_paths[] = { "/get_server_info", "/server_info" };
  for (size_t i = 0; i < TB_ARRAY_LEN(si_paths) && d->kind != TB_KIND_SGLANG; i++) {
    body = get_body(d, si_paths[i], api_key, SMALL_BODY_MAX, &st, &len, eb, sizeof eb);
    if (body != NULL)
      (void)tb_discover_parse_server_info(d, body, len);
    free(body);
  }
  /* vLLM */
  if (d->kind != TB_KIND_SGLANG) {
    body = get_body(d, "/version", api_key, SMALL_BODY_MAX, &st, &len, eb, sizeof eb);
    if (body != NULL)
      (void)tb_discover_parse_version(d, body, len);
    free(body);
  }
  /* Metrics: present, and for vLLM the KV budget. */
  body = get_body(d, "/metrics", api_key, TB_PROM_BODY_MAX, &st, &len, eb, sizeof eb);
  if (body != NULL)
    tb_discover_parse_metrics(d, body, len);
  free(body);

  if (d->kind == TB_KIND_VLLM)
    d->has_tokenize = true;
  else if (d->kind != TB_KIND_SGLANG)
    d->tokenize_text_only = false;
  return 0;
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
  json_object_set_new(o, "version",
                      d->version ? json_string(d->version) : json_null());
  json_object_set_new(o, "model", json_string(d->model));
  json_object_set_new(o, "max_model_len", d->max_model_len > 0
                                              ? json_integer(d->max_model_len)
                                              : json_null());
  json_object_set_new(o, "kv_budget_tokens",
                      d->kv_budget > 0 ? json_integer(d->kv_budget)
                                       : json_null());
  json_object_set_new(o, "kv_budget_source", json_string(d->kv_source));
  json_object_set_new(o, "max_running_requests",
                      d->max_running > 0 ? json_integer(d->max_running)
                                         : json_null());
  json_object_set_new(o, "metrics", json_boolean(d->has_metrics));
  json_object_set_new(o, "tokenize", json_string(
      d->has_tokenize ? "chat" : d->tokenize_text_only ? "text" : "none"));
  return o;
}

bool
tb_discover_parse_load(enum tb_engine_kind kind, const char *text, size_t len,
                       double *running, double *waiting)
{
  const char *rn = kind == TB_KIND_SGLANG ? "sglang:num_running_reqs"
                                          : "vllm:num_requests_running";
  const char *wn = kind == TB_KIND_SGLANG ? "sglang:num_queue_reqs"
                                          : "vllm:num_requests_waiting";
  if (!tb_prom_sum(text, len, rn, running))
    return false;
  if (!tb_prom_sum(text, len, wn, waiting))
    *waiting = 0;
  return true;
}

int
tb_discover_load(const struct tb_discover *d, const char *api_key,
                 double *running, double *waiting)
{
  if (!d->has_metrics)
    return -1;
  char *url = tb_xasprintf("%s/metrics", d->base_url);
  struct tb_http_resp r;
  int rc = -1;
  if (tb_http_call("GET", url, api_key, NULL, 0, 5000L, TB_PROM_BODY_MAX,
                   &r) == 0 &&
      r.status == 200 &&
      tb_discover_parse_load(d->kind, r.body, r.len, running, waiting))
    rc = 0;
  tb_http_resp_free(&r);
  free(url);
  return rc;
}
