/*
 * sim_inspect: see sim_inspect.h for what it does.
 */
#include "sim_inspect.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_http.h"
#include "sim_out.h"

void
sim_inspect_expected(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  char v[64];
  int64_t ctx = 0, conc = 1, mt = 4096;
  if (!sim_http_query(r->query, "context", v, sizeof(v)) || !tb_parse_tokens(v, &ctx) || ctx < 1 ||
      ctx > (1LL << 40)) {
    sim_out_reply_error(s, &c->o, 400, "context=<tokens> is required (e.g. 8192 or 8K)",
                        r->keep_alive);
    return;
  }
  if (sim_http_query(r->query, "concurrency", v, sizeof(v)) &&
      !tb_parse_i64(v, 1, 1000000, &conc)) {
    sim_out_reply_error(s, &c->o, 400, "concurrency must be an integer >= 1", r->keep_alive);
    return;
  }
  if (sim_http_query(r->query, "max_tokens", v, sizeof(v)) && !tb_parse_tokens(v, &mt)) {
    sim_out_reply_error(s, &c->o, 400, "max_tokens must be a token count", r->keep_alive);
    return;
  }
  int64_t cached = 0;
  if (sim_http_query(r->query, "cached_tokens", v, sizeof(v)) &&
      (!tb_parse_tokens(v, &cached) || cached > ctx)) {
    sim_out_reply_error(s, &c->o, 400, "cached_tokens must be a token count <= context",
                        r->keep_alive);
    return;
  }
  json_t *doc = sim_profile_expected(s->p, ctx, conc, mt, s->cfg->time_scale);
  /* the TTFT of a prompt whose first cached_tokens the prefix cache holds */
  json_object_set_new(
    doc, "prefix_ttft_ms",
    json_real(sim_profile_prefix_ms(s->p, (double)conc, (double)ctx, (double)cached) /
              s->cfg->time_scale));
  json_object_set_new(doc, "spec_k", json_integer(s->cfg->spec_k));
  sim_power_expected(s->p, doc);
  json_object_set_new(
    doc, "chunk_interval_ms",
    json_real(json_number_value(json_object_get(doc, "tbt_ms")) * s->cfg->spec_k));
  sim_out_reply_json(s, &c->o, 200, doc, r->keep_alive);
}

/* GET /sim/dcgm/metrics: the GPUs' telemetry as dcgm-exporter serves it
 * (sim_power.h). */
void
sim_inspect_dcgm(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  size_t len = 0;
  char *text = sim_power_metrics(s, now_ns(), &len);
  sim_out_reply_raw(s, &c->o, 200, "text/plain; version=0.0.4; charset=utf-8", text, len,
                    r->keep_alive);
  free(text);
}

/* GET /sim/noise: what the noise model applies (sim_noise.h). */
void
sim_inspect_noise(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, sim_noise_json(&s->noise), r->keep_alive);
}

void
sim_inspect_stats(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *doc = json_pack(
    "{s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
    "s:I, s:f}",
    "requests", (json_int_t)s->st.requests, "tokens_generated", (json_int_t)s->st.tokens_generated,
    "completed", (json_int_t)s->st.completed, "aborted", (json_int_t)s->st.aborted, "tokens_sent",
    (json_int_t)s->st.tokens_sent, "active", s->running, "running", s->running, "waiting", s->q_n,
    "batch", s->batch_n, "prompt_tokens", (json_int_t)s->st.prompt_tokens, "cache_hits",
    (json_int_t)s->st.cache_hits, "cache_misses", (json_int_t)s->st.cache_misses,
    "kv_reserved_tokens", (json_int_t)s->kv_used, "kv_budget_tokens", (json_int_t)s->p->kv_budget,
    "steps", (json_int_t)s->st.steps, "late_steps", (json_int_t)s->st.late_steps, "errors",
    (json_int_t)s->st.errors, "connections", (json_int_t)s->nconns, "connections_total",
    (json_int_t)s->st.conns_total, "max_late_ms", (double)s->st.max_late_ns / 1e6);
  json_object_set_new(doc, "cache_partial_hits",
                      json_integer((json_int_t)s->st.cache_partial_hits));
  json_object_set_new(doc, "prefix_query_tokens",
                      json_integer((json_int_t)s->st.prefix_query_tokens));
  json_object_set_new(doc, "prefix_hit_tokens", json_integer((json_int_t)s->st.prefix_hit_tokens));
  json_object_set_new(doc, "prefix_cache_blocks", json_integer(sim_cache_blocks(s->blocks)));
  json_object_set_new(doc, "cache_reset_calls", json_integer((json_int_t)s->st.cache_reset_calls));
  json_object_set_new(doc, "held_erases", json_integer(s->held_n));
  sim_out_reply_json(s, &c->o, 200, doc, r->keep_alive);
}

/* GET /sim/requests[?since=SEQ]: the requests that ended, oldest first, as
 * the server saw them (at most the last SIM_REQLOG); "next" is the since of
 * the following call. */
void
sim_inspect_requests(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  char v[32];
  int64_t since = 0;
  if (sim_http_query(r->query, "since", v, sizeof(v)) && !tb_parse_i64(v, 0, INT64_MAX, &since)) {
    sim_out_reply_error(s, &c->o, 400, "since must be an integer >= 0", r->keep_alive);
    return;
  }
  uint64_t first = s->log_seq > SIM_REQLOG ? s->log_seq - SIM_REQLOG : 0;
  if ((uint64_t)since > first)
    first = (uint64_t)since;
  json_t *list = json_array();
  for (uint64_t q = first; q < s->log_seq; q++) {
    const struct reqlog *e = &s->log[q % SIM_REQLOG];
    json_array_append_new(
      list, json_pack(
              "{s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "seq", (json_int_t)e->seq, "id",
              e->id, "arrival_ns", (json_int_t)e->arrival_ns, "admitted_ns",
              (json_int_t)e->admitted_ns, "first_token_ns", (json_int_t)e->first_token_ns, "end_ns",
              (json_int_t)e->end_ns, "prompt_tokens", (json_int_t)e->prompt, "cached_tokens",
              (json_int_t)e->cached_tokens, "output_tokens", (json_int_t)e->output, "end", e->end));
  }
  sim_out_reply_json(s, &c->o, 200,
                     json_pack("{s:I, s:o}", "next", (json_int_t)s->log_seq, "requests", list),
                     r->keep_alive);
}
