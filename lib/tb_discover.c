/*
 * tb_discover: endpoint discovery.  See tb_discover.h.
 *
 * Order: /v1/models must answer (it is the one interface every server has,
 * and the one --api-key guards); then SGLang's server info, then vLLM's
 * /version and /metrics.  Each probe is a short blocking call; a probe that
 * fails only means "not this engine".
 */
#include "tb_discover.h"

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

static json_t *
get_json(const struct tb_discover *d, const char *path, const char *api_key,
         long *status, char *errbuf, size_t errlen)
{
  char *url = tb_xasprintf("%s%s", d->base_url, path);
  struct tb_http_resp r;
  json_t *j = NULL;
  *status = 0;
  if (tb_http_call("GET", url, api_key, NULL, 0, PROBE_TIMEOUT_MS,
                   SMALL_BODY_MAX, &r) != 0) {
    snprintf(errbuf, errlen, "%s", r.err);
    goto out;
  }
  *status = r.status;
  if (r.status == 200)
    j = json_loadb(r.body, r.len, 0, NULL);
out:
  tb_http_resp_free(&r);
  free(url);
  return j;
}

static int64_t
int_member(const json_t *o, const char *key)
{
  const json_t *v = json_object_get(o, key);
  if (json_is_integer(v) && json_integer_value(v) > 0)
    return json_integer_value(v);
  if (json_is_real(v) && json_real_value(v) > 0)
    return (int64_t)json_real_value(v);
  return -1;
}

static void
read_vllm_metrics(struct tb_discover *d, const char *text, size_t len)
{
  char buf[64];
  double v;
  if (tb_prom_label(text, len, "vllm:cache_config_info",
                    "kv_cache_size_tokens", buf, sizeof buf) &&
      atoll(buf) > 0) {
    d->kv_budget = atoll(buf);
    d->kv_source = "metrics";
  } else {
    char b2[64];
    if (tb_prom_label(text, len, "vllm:cache_config_info", "num_gpu_blocks",
                      buf, sizeof buf) &&
        tb_prom_label(text, len, "vllm:cache_config_info", "block_size", b2,
                      sizeof b2) &&
        atoll(buf) > 0 && atoll(b2) > 0) {
      d->kv_budget = atoll(buf) * atoll(b2);
      d->kv_source = "metrics";
    }
  }
  if (tb_prom_label(text, len, "vllm:cache_config_info", "max_num_seqs", buf,
                    sizeof buf) &&
      atoll(buf) > 0)
    d->max_running = atoll(buf);
  (void)v;
}

int
tb_discover_run(const char *base_url, const char *api_key, const char *model,
                struct tb_discover *d, char **err)
{
  memset(d, 0, sizeof *d);
  size_t bl = strlen(base_url);
  while (bl > 0 && base_url[bl - 1] == '/')
    bl--;
  d->base_url = tb_xstrndup(base_url, bl);
  d->max_model_len = d->kv_budget = d->max_running = -1;
  d->kv_source = "none";
  char eb[256] = "";
  long st;

  json_t *models = get_json(d, "/v1/models", api_key, &st, eb, sizeof eb);
  if (models == NULL) {
    if (st == 0)
      *err = tb_xasprintf("endpoint %s unreachable: %s", d->base_url, eb);
    else if (st == 401 || st == 403)
      *err = tb_xasprintf("endpoint %s refused the API key (HTTP %ld)",
                          d->base_url, st);
    else
      *err = tb_xasprintf("endpoint %s: GET /v1/models answered HTTP %ld",
                          d->base_url, st);
    return -1;
  }
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
    *err = model ? tb_xasprintf("model %s is not served by %s", model,
                                d->base_url)
                 : tb_xasprintf("%s serves no model", d->base_url);
    json_decref(models);
    return -1;
  }
  d->model = tb_xstrdup(json_string_value(json_object_get(pick, "id")));
  d->max_model_len = int_member(pick, "max_model_len");
  json_decref(models);

  /* SGLang */
  json_t *si = get_json(d, "/get_server_info", api_key, &st, eb, sizeof eb);
  if (si == NULL || !json_is_object(si)) {
    json_decref(si);
    si = get_json(d, "/server_info", api_key, &st, eb, sizeof eb);
  }
  if (si != NULL && json_is_object(si) &&
      (json_object_get(si, "max_total_num_tokens") != NULL ||
       json_object_get(si, "max_running_requests") != NULL)) {
    d->kind = TB_KIND_SGLANG;
    d->server_info = si;
    si = NULL;
    const char *ver = json_string_value(json_object_get(d->server_info,
                                                        "version"));
    if (ver != NULL)
      d->version = tb_xstrdup(ver);
    int64_t kv = int_member(d->server_info, "max_total_num_tokens");
    if (kv > 0) {
      d->kv_budget = kv;
      d->kv_source = "server_info";
    }
    d->max_running = int_member(d->server_info, "max_running_requests");
    if (d->max_model_len < 0)
      d->max_model_len = int_member(d->server_info, "context_length");
    d->tokenize_text_only = true;
  }
  json_decref(si);

  if (d->kind != TB_KIND_SGLANG) {
    json_t *ver = get_json(d, "/version", api_key, &st, eb, sizeof eb);
    const char *vs = json_string_value(json_object_get(ver, "version"));
    if (vs != NULL) {
      d->kind = TB_KIND_VLLM;
      d->version = tb_xstrdup(vs);
    }
    json_decref(ver);
  }

  /* Metrics: present, and for vLLM the KV budget. */
  char *url = tb_xasprintf("%s/metrics", d->base_url);
  struct tb_http_resp r;
  if (tb_http_call("GET", url, api_key, NULL, 0, PROBE_TIMEOUT_MS,
                   TB_PROM_BODY_MAX, &r) == 0 && r.status == 200) {
    if (strstr(r.body, "vllm:") != NULL) {
      d->kind = TB_KIND_VLLM;
      d->has_metrics = true;
      read_vllm_metrics(d, r.body, r.len);
    } else if (strstr(r.body, "sglang:") != NULL &&
               d->kind == TB_KIND_SGLANG) {
      d->has_metrics = true;
    }
  }
  tb_http_resp_free(&r);
  free(url);

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
