/*
 * worker_spec: from a job (its spec as the API stored it) and its endpoint to
 * the engine's spec.  A table says which engine setting comes from which
 * member of the job spec; the API validates the job spec in full before it
 * queues the job, so this only carries values across.  Token lists written
 * as strings ("8K") are turned into integers, since that is how a user may
 * type them.
 */
#include <stdio.h>
#include <string.h>

#include "tb_crypto.h"
#include "worker.h"

struct spec_map {
  const char *engine;   /* the engine spec member */
  const char *job[3];   /* job spec members, first found wins */
  bool token_list;      /* [int|"8K"] -> [int] */
};

static const struct spec_map spec_maps[] = {
  { .engine = "model", .job = { "model" } },
  { .engine = "contexts", .job = { "contexts" }, .token_list = true },
  { .engine = "concurrency", .job = { "concurrency", "concurrencies" } },
  { .engine = "prefill_contexts", .job = { "prefill_contexts" }, .token_list = true },
  { .engine = "duration_s", .job = { "duration_s", "duration" } },
  { .engine = "max_output", .job = { "max_output", "max_output_tokens" } },
  { .engine = "kv_budget", .job = { "kv_budget", "kv_budget_override", "kv_override" } },
  { .engine = "settle_s", .job = { "settle_s" } },
  { .engine = "stall_timeout_s", .job = { "stall_timeout_s" } },
  { .engine = "first_token_timeout_s", .job = { "first_token_timeout_s" } },
  { .engine = "ready_timeout_s", .job = { "ready_timeout_s" } },
  { .engine = "drain_timeout_s", .job = { "drain_timeout_s" } },
  { .engine = "metrics_interval_s", .job = { "metrics_interval_s" } },
};

/* [8192, "8K"] -> [8192, 8192]; anything it cannot read is left as it is
 * (the engine then names the setting). */
static json_t *
token_list(const json_t *v)
{
  if (!json_is_array(v))
    return json_deep_copy(v);
  json_t *out = json_array();
  size_t i;
  const json_t *e;
  json_array_foreach(v, i, e) {
    int64_t t;
    if (json_is_string(e) && tb_parse_tokens(json_string_value(e), &t))
      json_array_append_new(out, json_integer(t));
    else
      json_array_append_new(out, json_deep_copy(e));
  }
  return out;
}

json_t *
worker_engine_spec(const json_t *job_spec, const struct tb_queue_endpoint *ep,
                   const char *run_id)
{
  json_t *spec = json_object();
  for (size_t i = 0; i < TB_ARRAY_LEN(spec_maps); i++) {
    const struct spec_map *m = &spec_maps[i];
    for (size_t k = 0; k < TB_ARRAY_LEN(m->job) && m->job[k] != NULL; k++) {
      const json_t *v = json_object_get(job_spec, m->job[k]);
      if (v == NULL || json_is_null(v))
        continue;
      json_object_set_new(spec, m->engine, m->token_list ? token_list(v) : json_deep_copy(v));
      break;
    }
  }
  json_object_set_new(spec, "base_url", json_string(ep->base_url ? ep->base_url : ""));
  json_object_set_new(spec, "run_id", json_string(run_id));
  json_t *e = json_object();
  if (ep->name != NULL)
    json_object_set_new(e, "name", json_string(ep->name));
  if (json_is_object(ep->hardware))
    json_object_set_new(e, "hardware", json_deep_copy(ep->hardware));
  json_t *eng = json_is_object(ep->engine) ? json_deep_copy(ep->engine) : json_object();
  if (ep->engine_hint != NULL && json_object_get(eng, "hint") == NULL)
    json_object_set_new(eng, "hint", json_string(ep->engine_hint));
  json_object_set_new(e, "engine", eng);
  if (ep->launch_command != NULL)
    json_object_set_new(e, "launch_command", json_string(ep->launch_command));
  json_object_set_new(spec, "endpoint", e);
  return spec;
}

char *
worker_run_id(const char *job_id, int attempt)
{
  unsigned char nonce[3] = { 0 };
  char hex[7];
  if (!tb_crypto_random(nonce, sizeof nonce)) {
    /* the clock is unique enough for a prompt tag */
    int64_t t = tb_time_real_us();
    memcpy(nonce, &t, sizeof nonce);
  }
  tb_hex_encode(nonce, sizeof nonce, hex);
  return tb_xasprintf("%s.%d.%s", job_id, attempt, hex);
}
