/*
 * tb_result: the result document.  See tb_result.h.
 *
 * Every builder here makes new JSON with json_*_new, so a caller owns
 * exactly what it is handed back; nothing here measures or reads a file.
 * The vocabulary of statuses lives here once: the engine writes from it,
 * import checks against it.
 */
#include "tb_result.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_json.h"

static const char *const doc_statuses[] = { "complete", "partial", "failed",
                                            "cancelled", "running", "queued" };
static const char *const cell_statuses[] = { "valid", "over_capacity", "skipped",
                                             "error" };

static bool
one_of(const char *s, const char *const *set, size_t n)
{
  for (size_t i = 0; s && i < n; i++)
    if (strcmp(s, set[i]) == 0)
      return true;
  return false;
}

bool
tb_result_doc_status_known(const char *s)
{
  return one_of(s, doc_statuses, TB_ARRAY_LEN(doc_statuses));
}

bool
tb_result_cell_status_known(const char *s)
{
  return one_of(s, cell_statuses, TB_ARRAY_LEN(cell_statuses));
}

bool
tb_result_over_capacity(int64_t conc, int64_t context, int64_t max_output,
                        int64_t budget)
{
  if (budget <= 0)
    return false;
  return conc * (context + max_output) > budget;
}

/* ------------------------------------------------------------------ cells */

json_t *
tb_result_cell_new(const char *phase, int64_t ctx, int64_t conc)
{
  char label[32];
  tb_format_tokens(ctx, label, sizeof label);
  json_t *c = json_object();
  json_object_set_new(c, "phase", json_string(phase));
  json_object_set_new(c, "context", json_integer(ctx));
  json_object_set_new(c, "context_label", json_string(label));
  json_object_set_new(c, "concurrency", json_integer(conc));
  return c;
}

void
tb_result_cell_set_status(json_t *cell, const char *status, const char *reason)
{
  json_object_set_new(cell, "status", json_string(status));
  if (reason != NULL)
    json_object_set_new(cell, "reason", json_string(reason));
}

const json_t *
tb_result_find_cell(const json_t *done, const char *phase, int64_t ctx,
                    int64_t conc)
{
  size_t i;
  const json_t *c;
  json_array_foreach(done, i, c) {
    const char *p = json_string_value(json_object_get(c, "phase"));
    if (p != NULL && strcmp(p, phase) == 0 &&
        json_integer_value(json_object_get(c, "context")) == ctx &&
        json_integer_value(json_object_get(c, "concurrency")) == conc)
      return c;
  }
  return NULL;
}

static json_t *
num_or_null(double v)
{
  return isfinite(v) ? json_real(v) : json_null();
}

/* p50/p90/p99 of a sample of nanoseconds, in milliseconds. */
static json_t *
pct_ms(struct tb_stats *s)
{
  return json_pack("{s:o, s:o, s:o}",
                   "p50", num_or_null(tb_stats_quantile(s, 0.5) / 1e6),
                   "p90", num_or_null(tb_stats_quantile(s, 0.9) / 1e6),
                   "p99", num_or_null(tb_stats_quantile(s, 0.99) / 1e6));
}

void
tb_result_cell_set_decode(json_t *cell, const struct tb_result_decode *d)
{
  double total = (double)d->output_tokens / d->measured_s;
  json_object_set_new(cell, "status", json_string("valid"));
  json_object_set_new(cell, "total_tps", json_real(total));
  json_object_set_new(cell, "per_request_tps", json_real(total / (double)d->conc));
  json_object_set_new(cell, "ttft_ms", pct_ms(d->ttft));
  json_object_set_new(cell, "tbt_ms", pct_ms(d->tbt));
  json_object_set_new(cell, "avg_active", json_real(d->avg_active));
  json_object_set_new(cell, "avg_active_source",
                      json_string(d->avg_active_server ? "server" : "client"));
  json_object_set_new(cell, "completed", json_integer(d->completed));
  json_object_set_new(cell, "requests_started", json_integer(d->started));
  json_object_set_new(cell, "output_tokens", json_integer(d->output_tokens));
  json_object_set_new(cell, "measured_s", json_real(d->measured_s));
  json_object_set_new(cell, "token_source",
                      json_string(d->chunk_source ? "chunks" : "usage"));
  json_object_set_new(cell, "kernel_stamped", json_real(d->kernel_stamped));
}

void
tb_result_cell_set_prefill(json_t *cell, int64_t prompt_tokens, bool from_usage,
                           double ttft_s)
{
  json_object_set_new(cell, "status", json_string("valid"));
  json_object_set_new(cell, "prompt_tokens", json_integer(prompt_tokens));
  json_object_set_new(cell, "prompt_tokens_source",
                      json_string(from_usage ? "usage" : "tokenizer"));
  json_object_set_new(cell, "ttft_ms", json_real(ttft_s * 1e3));
  json_object_set_new(cell, "prompt_tps",
                      json_real(ttft_s > 0 ? (double)prompt_tokens / ttft_s : 0));
  json_object_set_new(cell, "completed", json_integer(1));
}

/* ----------------------------------------------------------------- header */

static json_t *
int_list(const int64_t *v, size_t n)
{
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_integer(v[i]));
  return a;
}

/* The members every document begins with. */
static void
set_preamble(json_t *doc, const char *run_id, int64_t started_us)
{
  char ts[40];
  tb_time_rfc3339(started_us, ts, sizeof ts);
  json_object_set_new(doc, "schema", json_string(TB_RESULT_SCHEMA));
  json_object_set_new(doc, "tokbench_version", json_string(TB_VERSION));
  json_object_set_new(doc, "run_id", run_id ? json_string(run_id) : json_null());
  json_object_set_new(doc, "started_at", json_string(ts));
}

json_t *
tb_result_header_new(const struct tb_result_header *hd)
{
  json_t *h = json_object();
  const json_t *ep = hd->endpoint;
  set_preamble(h, hd->run_id, hd->started_us);
  json_t *epo = json_object();
  json_object_set_new(epo, "url", json_string(hd->url));
  const char *name = json_string_value(json_object_get(ep, "name"));
  json_object_set_new(epo, "name", name ? json_string(name) : json_null());
  json_object_set_new(h, "endpoint", epo);
  json_t *eng = json_object();
  const json_t *hint = json_object_get(ep, "engine");
  if (json_is_object(hint))
    json_object_update(eng, (json_t *)hint);
  json_object_set_new(eng, "name", json_string(hd->engine));
  json_object_set_new(eng, "version", hd->engine_version
                                          ? json_string(hd->engine_version)
                                          : json_null());
  json_object_set_new(h, "engine", eng);
  const json_t *hw = json_object_get(ep, "hardware");
  json_object_set_new(h, "hardware",
                      json_is_object(hw) ? json_deep_copy(hw) : json_null());
  json_t *model = json_object();
  json_object_set_new(model, "served", json_string(hd->model));
  json_object_set_new(model, "max_model_len",
                      hd->max_model_len > 0 ? json_integer(hd->max_model_len)
                                            : json_null());
  json_object_set_new(h, "model", model);
  json_object_set_new(h, "launch_command", hd->launch_command
                                               ? json_string(hd->launch_command)
                                               : json_null());
  json_t *cap = json_object();
  json_object_set_new(cap, "kv_budget_tokens", hd->kv_budget > 0
                                                   ? json_integer(hd->kv_budget)
                                                   : json_null());
  json_object_set_new(cap, "source", json_string(hd->kv_source));
  json_object_set_new(cap, "max_running_requests",
                      hd->max_running > 0 ? json_integer(hd->max_running)
                                          : json_null());
  json_object_set_new(cap, "metrics", json_boolean(hd->metrics));
  if (json_is_object(hd->provenance)) {
    json_t *pv = json_deep_copy(hd->provenance);
    if (hd->kv_budget > 0) /* the job's override */
      json_object_del(json_object_get(pv, "unknown"), "kv_budget_tokens");
    json_object_update(cap, pv);
    json_decref(pv);
  }
  json_object_set_new(h, "capacity", cap);
  json_t *st = json_object();
  json_object_set_new(st, "contexts", int_list(hd->contexts, hd->n_contexts));
  json_object_set_new(st, "concurrency",
                      int_list(hd->concurrency, hd->n_concurrency));
  json_object_set_new(st, "prefill_contexts", int_list(hd->prefill, hd->n_prefill));
  json_object_set_new(st, "duration_s", json_real(hd->duration_s));
  json_object_set_new(st, "max_output", json_integer(hd->max_output));
  json_object_set_new(st, "settle_s", json_real(hd->settle_s));
  json_object_set_new(st, "decode_test", json_string("fixed_duration"));
  json_object_set_new(st, "prefill_mode", json_string("decode_warmup"));
  json_object_set_new(h, "settings", st);
  return h;
}

/* ----------------------------------------------------------------- status */

const char *
tb_result_status_of_cells(const json_t *cells)
{
  size_t i;
  const json_t *c;
  json_array_foreach(cells, i, c) {
    const char *cs = json_string_value(json_object_get(c, "status"));
    if (cs != NULL && strcmp(cs, "error") == 0)
      return "partial";
  }
  return "complete";
}

json_t *
tb_result_finish(json_t *doc, const char *run_id, int64_t started_us,
                 const char *status, const char *error, json_t *cells)
{
  if (doc == NULL) {
    doc = json_object();
    set_preamble(doc, run_id, started_us);
  }
  char ts[40];
  tb_time_rfc3339(tb_time_real_us(), ts, sizeof ts);
  json_object_set_new(doc, "finished_at", json_string(ts));
  json_object_set_new(doc, "status", json_string(status));
  json_object_set_new(doc, "error", error ? json_string(error) : json_null());
  json_object_set_new(doc, "cells", cells);
  return doc;
}

/* ------------------------------------------------------------------ check */

/* Figures that must be numbers when present (null allowed). */
static const char *const num_members[] = { "total_tps", "per_request_tps", "prompt_tps",
                                           "avg_active", "measured_s" };
static const char *const int_members[] = { "prompt_tokens", "completed", "output_tokens",
                                           "requests_started" };

static bool
check_cell(const json_t *c, size_t i, char **err)
{
  if (!json_is_object(c)) {
    *err = tb_xasprintf("cells[%zu] is not an object", i);
    return false;
  }
  const char *ph = tb_json_str(c, "phase");
  if (ph == NULL || (strcmp(ph, "prefill") != 0 && strcmp(ph, "decode") != 0)) {
    *err = tb_xasprintf("cells[%zu].phase must be \"prefill\" or \"decode\"", i);
    return false;
  }
  const json_t *ctx = json_object_get(c, "context");
  if (!json_is_integer(ctx) || json_integer_value(ctx) < 0 ||
      json_integer_value(ctx) > TB_RESULT_AXIS_MAX) {
    *err = tb_xasprintf("cells[%zu].context must be an integer >= 0", i);
    return false;
  }
  const json_t *conc = json_object_get(c, "concurrency");
  if (conc == NULL ? strcmp(ph, "decode") == 0
                   : (!json_is_integer(conc) || json_integer_value(conc) < 1 ||
                      json_integer_value(conc) > TB_RESULT_AXIS_MAX)) {
    *err = tb_xasprintf("cells[%zu].concurrency must be an integer >= 1", i);
    return false;
  }
  if (!tb_result_cell_status_known(tb_json_str(c, "status"))) {
    *err = tb_xasprintf("cells[%zu].status must be valid, over_capacity, skipped or error", i);
    return false;
  }
  for (size_t k = 0; k < TB_ARRAY_LEN(num_members); k++) {
    const json_t *v = json_object_get(c, num_members[k]);
    if (v != NULL && !json_is_null(v) && !json_is_number(v)) {
      *err = tb_xasprintf("cells[%zu].%s must be a number", i, num_members[k]);
      return false;
    }
  }
  for (size_t k = 0; k < TB_ARRAY_LEN(int_members); k++) {
    const json_t *v = json_object_get(c, int_members[k]);
    if (v != NULL && !json_is_null(v) && !json_is_integer(v)) {
      *err = tb_xasprintf("cells[%zu].%s must be an integer", i, int_members[k]);
      return false;
    }
  }
  static const char *const pct[] = { "ttft_ms", "tbt_ms" };
  for (size_t k = 0; k < 2; k++) {
    const json_t *v = json_object_get(c, pct[k]);
    if (v == NULL || json_is_null(v) || json_is_number(v))
      continue;
    if (!json_is_object(v)) {
      *err = tb_xasprintf("cells[%zu].%s must be a number or {p50, p90, p99}", i, pct[k]);
      return false;
    }
    static const char *const p[] = { "p50", "p90", "p99" };
    for (size_t j = 0; j < 3; j++) {
      const json_t *x = json_object_get(v, p[j]);
      if (x != NULL && !json_is_null(x) && !json_is_number(x)) {
        *err = tb_xasprintf("cells[%zu].%s.%s must be a number", i, pct[k], p[j]);
        return false;
      }
    }
  }
  return true;
}

bool
tb_result_check(const json_t *doc, size_t max_cells, char **err)
{
  const char *schema = tb_json_str(doc, "schema");
  if (schema == NULL || strcmp(schema, TB_RESULT_SCHEMA) != 0) {
    *err = tb_xasprintf("unsupported schema (want %s)", TB_RESULT_SCHEMA);
    return false;
  }
  const json_t *cells = json_object_get(doc, "cells");
  if (!json_is_array(cells)) {
    *err = tb_xstrdup("cells must be an array");
    return false;
  }
  if (json_array_size(cells) > max_cells) {
    *err = tb_xasprintf("too many cells (at most %zu)", max_cells);
    return false;
  }
  const json_t *st = json_object_get(doc, "status");
  if (st != NULL && !tb_result_doc_status_known(json_string_value(st))) {
    *err = tb_xstrdup("status must be complete, partial, failed, cancelled or running");
    return false;
  }
  static const char *const objs[] = { "endpoint", "engine", "hardware", "model",
                                      "capacity", "settings" };
  for (size_t k = 0; k < TB_ARRAY_LEN(objs); k++) {
    const json_t *v = json_object_get(doc, objs[k]);
    if (v != NULL && !json_is_null(v) && !json_is_object(v)) {
      *err = tb_xasprintf("%s must be an object", objs[k]);
      return false;
    }
  }
  size_t i;
  const json_t *c;
  json_array_foreach(cells, i, c) {
    if (!check_cell(c, i, err))
      return false;
  }
  return true;
}
