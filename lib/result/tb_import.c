/*
 * tb_import: our result documents (checked) and llm-inference-bench's JSON
 * (converted) into "tokbench.result/v1".  See tb_import.h for both shapes and
 * the conversion rules.
 *
 * Both paths read every member through small typed getters (a member of the
 * wrong type is "absent"), and build the output with json_*_new so ownership
 * never leaks on an early exit: the one owned object is freed at "out".
 */
#include "result/tb_import.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "base/tb_redact.h"
#include "result/tb_result.h"

/* ---------------------------------------------------------------- setters */

static void
set_num(json_t *o, const char *k, double v)
{
  if (isfinite(v))
    json_object_set_new(o, k, json_real(v));
}

static void
set_str(json_t *o, const char *k, const char *v)
{
  if (v != NULL)
    json_object_set_new(o, k, json_string(v));
}

/* Largest context or concurrency we accept (2^40 tokens is absurd already). */
#define AXIS_MAX TB_RESULT_AXIS_MAX
/* Axis entries read from metadata (contexts, concurrency levels). */
#define AXIS_ENTRIES_MAX 64u

/* ------------------------------------------------------------ detection */

enum tb_import_source
tb_import_detect(const json_t *in)
{
  if (!json_is_object(in))
    return TB_IMPORT_UNKNOWN;
  const char *schema = tb_json_str(in, "schema");
  if (schema != NULL && strncmp(schema, "tokbench.result/", 16) == 0)
    return TB_IMPORT_TOKBENCH;
  if (json_is_object(json_object_get(in, "metadata")) &&
      (json_is_array(json_object_get(in, "results")) ||
       json_is_object(json_object_get(in, "prefill"))))
    return TB_IMPORT_LLM_INFERENCE_BENCH;
  return TB_IMPORT_UNKNOWN;
}

/* ---------------------------------------------------------- our format */

static json_t *
import_ours(const json_t *in, char **err)
{
  if (!tb_result_check(in, TB_IMPORT_MAX_CELLS, err))
    return NULL;
  json_t *out = json_deep_copy(in);
  if (out == NULL)
    *err = tb_xstrdup("could not copy the document");
  return out;
}

/* ------------------------------------------------ llm-inference-bench */

static json_t *
ms_pct(const json_t *r, const char *prefix)
{
  static const char *const p[] = { "p50", "p90", "p99" };
  json_t *o = json_object();
  for (size_t i = 0; i < 3; i++) {
    char k[64];
    snprintf(k, sizeof k, "%s_%s", prefix, p[i]);
    double s = tb_json_num(r, k);
    json_object_set_new(o, p[i], isfinite(s) && s > 0 ? json_real(s * 1e3) : json_null());
  }
  return o;
}

static bool
int_array(const json_t *a, json_t *out, int64_t min)
{
  size_t i;
  const json_t *v;
  if (!json_is_array(a))
    return false;
  json_array_foreach (a, i, v) {
    if (json_array_size(out) >= AXIS_ENTRIES_MAX)
      break;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > AXIS_MAX)
      continue;
    bool dup = false;
    for (size_t k = 0; k < json_array_size(out) && !dup; k++)
      dup = json_integer_value(json_array_get(out, k)) == json_integer_value(v);
    if (!dup)
      json_array_append_new(out, json_integer(json_integer_value(v)));
  }
  return true;
}

static json_t *
result_cell(const json_t *r, int64_t max_output, size_t *skipped)
{
  int64_t ctx, conc;
  if (!json_is_object(r) || !tb_json_int(r, "context_tokens", &ctx) ||
      !tb_json_int(r, "concurrency", &conc) || ctx < 0 || ctx > AXIS_MAX || conc < 1 ||
      conc > AXIS_MAX) {
    (*skipped)++;
    return NULL;
  }
  json_t *c = tb_result_cell_new("decode", ctx, conc);
  double tps = tb_json_num(r, "aggregate_tps");
  bool cap = json_is_true(json_object_get(r, "capacity_limited"));
  int64_t nerr = 0;
  if (!tb_json_int(r, "num_errors", &nerr))
    nerr = 0;
  if (!isfinite(tps) || tps < 0 || cap) {
    if (cap) {
      double run = tb_json_num(r, "avg_running_reqs");
      bool measured = isfinite(tps) && tps >= 0;
      char *why = isfinite(run) && run > 0
                    ? tb_xasprintf("capacity-limited: the server ran %.1f of %" PRId64
                                   " requests at once, the rest queued%s",
                                   run, conc,
                                   measured ? "; measured anyway (total_tps_capacity_limited)" : "")
                    : tb_xasprintf("%" PRId64 " x (%" PRId64 " + %" PRId64
                                   ") tokens exceed the server's KV cache",
                                   conc, ctx, max_output);
      json_object_set_new(c, "status", json_string("over_capacity"));
      json_object_set_new(c, "reason", json_string(why));
      free(why);
      if (measured) {
        /* Kept as the tool keeps it: the raw figure in the document, the
         * tables showing the cell as capacity-limited, not as a figure. */
        set_num(c, "total_tps_capacity_limited", tps);
        if (isfinite(run) && run > 0) {
          set_num(c, "avg_active", run);
          json_object_set_new(c, "avg_active_source", json_string("server"));
        }
      }
    } else {
      json_object_set_new(c, "status", json_string("skipped"));
      json_object_set_new(c, "reason", json_string("not run by llm-inference-bench"));
    }
    return c;
  }
  if (tps == 0 && nerr > 0) {
    char *why = tb_xasprintf("%" PRId64 " request error%s, no output", nerr, nerr == 1 ? "" : "s");
    json_object_set_new(c, "status", json_string("error"));
    json_object_set_new(c, "reason", json_string(why));
    free(why);
    return c;
  }
  json_object_set_new(c, "status", json_string("valid"));
  set_num(c, "total_tps", tps);
  double per = tb_json_num(r, "per_request_avg_tps");
  set_num(c, "per_request_tps", isfinite(per) && per > 0 ? per : tps / (double)conc);
  json_object_set_new(c, "ttft_ms", ms_pct(r, "ttft"));
  json_object_set_new(c, "tbt_ms", ms_pct(r, "inter_token_latency"));
  double act = tb_json_num(r, "avg_running_reqs");
  if (isfinite(act) && act > 0) {
    set_num(c, "avg_active", act);
    json_object_set_new(c, "avg_active_source", json_string("server"));
  } else if (isfinite(act = tb_json_num(r, "effective_concurrency")) && act > 0) {
    set_num(c, "avg_active", act);
    json_object_set_new(c, "avg_active_source", json_string("client"));
  }
  int64_t n;
  if (tb_json_int(r, "completed_request_count", &n) || tb_json_int(r, "num_completed", &n))
    json_object_set_new(c, "completed", json_integer(n));
  if ((tb_json_int(r, "total_tokens", &n) && n > 0) || tb_json_int(r, "client_output_tokens", &n))
    json_object_set_new(c, "output_tokens", json_integer(n));
  double win = tb_json_num(r, "measurement_seconds");
  if (!(isfinite(win) && win > 0))
    win = tb_json_num(r, "wall_time");
  set_num(c, "measured_s", win);
  json_object_set_new(c, "token_source", json_string("usage"));
  const char *agg = tb_json_str(r, "aggregate_source");
  set_str(c, "aggregate_source", agg);
  if (nerr > 0)
    json_object_set_new(c, "errors", json_integer(nerr));
  return c;
}

static json_t *
prefill_cell(const char *key, const json_t *p, size_t *skipped)
{
  int64_t ctx;
  if (!tb_parse_i64(key, 0, AXIS_MAX, &ctx) || !json_is_object(p)) {
    (*skipped)++;
    return NULL;
  }
  json_t *c = tb_result_cell_new("prefill", ctx, 1);
  double ttft = tb_json_num(p, "ttft_seconds");
  if (!isfinite(ttft))
    ttft = tb_json_num(p, "client_ttft_seconds");
  int64_t pt = 0;
  bool has_pt = tb_json_int(p, "prompt_tokens", &pt) && pt > 0;
  double tps = tb_json_num(p, "tok_per_sec");
  if (json_is_true(json_object_get(p, "skipped")) || !(isfinite(ttft) && ttft > 0)) {
    /* Not measured: no row (a prefill cell is valid or error). */
    json_decref(c);
    (*skipped)++;
    return NULL;
  }
  json_object_set_new(c, "status", json_string("valid"));
  if (has_pt) {
    json_object_set_new(c, "prompt_tokens", json_integer(pt));
    json_object_set_new(c, "prompt_tokens_source", json_string("usage"));
  }
  json_object_set_new(c, "ttft_ms", json_real(ttft * 1e3));
  set_num(c, "prompt_tps", has_pt ? (double)pt / ttft : tps);
  int64_t n;
  json_object_set_new(c, "completed", json_integer(tb_json_int(p, "samples", &n) && n > 0 ? n : 1));
  return c;
}

/* Cells under construction, sorted by (phase, context, concurrency, order
 * of arrival) so that duplicates sit together and the first one wins. */
struct pcell {
  json_t *c; /* owned */
  int phase; /* 0 prefill, 1 decode */
  int64_t ctx, conc;
  size_t seq;
};

static int
pcell_cmp(const void *a, const void *b)
{
  const struct pcell *x = a, *y = b;
  int c = tb_result_key_cmp(x->phase, x->ctx, x->conc, y->phase, y->ctx, y->conc);
  return c != 0 ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void
pcell_push(struct pcell *v, size_t *n, json_t *c)
{
  v[*n].c = c;
  v[*n].phase = strcmp(tb_json_str(c, "phase"), "prefill") == 0 ? 0 : 1;
  v[*n].ctx = json_integer_value(json_object_get(c, "context"));
  v[*n].conc = json_integer_value(json_object_get(c, "concurrency"));
  v[*n].seq = *n;
  (*n)++;
}

/* The document's header from the tool's metadata: schema, run, endpoint,
 * engine, hardware, model and launch command, in the result's order. */
static void
lib_header(json_t *doc, const json_t *md)
{
  int64_t iv;
  json_object_set_new(doc, "schema", json_string(TB_RESULT_SCHEMA));
  json_object_set_new(doc, "tokbench_version", json_string(TB_VERSION));
  const char *ts = tb_json_str(md, "timestamp");
  json_object_set_new(doc, "run_id", json_string(ts ? ts : "imported"));
  json_object_set_new(doc, "started_at", ts ? json_string(ts) : json_null());
  json_object_set_new(doc, "finished_at", json_null());

  json_t *ep = json_object();
  json_object_set_new(ep, "url",
                      json_string(tb_json_str(md, "server") ? tb_json_str(md, "server") : ""));
  json_object_set_new(ep, "name", json_null());
  json_object_set_new(doc, "endpoint", ep);

  json_t *eng = json_object();
  /* The schema's engine names: vllm, sglang, else openai (the tool says
   * "openai_proxy" for a generic OpenAI-compatible server). */
  const char *en = tb_json_str(md, "engine");
  json_object_set_new(
    eng, "name",
    json_string(en && (strcmp(en, "vllm") == 0 || strcmp(en, "sglang") == 0) ? en : "openai"));
  const char *ev = tb_json_str(md, "engine_version");
  json_object_set_new(eng, "version", ev ? json_string(ev) : json_null());
  json_object_set_new(doc, "engine", eng);

  const json_t *hw = json_object_get(md, "hardware");
  if (json_is_object(hw)) {
    json_object_set_new(doc, "hardware", json_deep_copy(hw));
  } else if (tb_json_str(md, "gpu_name") != NULL) {
    json_t *h = json_object();
    set_str(h, "gpu", tb_json_str(md, "gpu_name"));
    if (tb_json_int(md, "gpu_count", &iv) && iv > 0)
      json_object_set_new(h, "gpu_count", json_integer(iv));
    json_object_set_new(doc, "hardware", h);
  } else {
    json_object_set_new(doc, "hardware", json_null());
  }

  json_t *model = json_object();
  json_object_set_new(model, "served",
                      tb_json_str(md, "model") ? json_string(tb_json_str(md, "model"))
                                               : json_null());
  set_str(model, "revision", tb_json_str(md, "model_revision"));
  json_object_set_new(model, "max_model_len",
                      tb_json_int(md, "max_model_len", &iv) && iv > 0 ? json_integer(iv)
                                                                      : json_null());
  json_object_set_new(doc, "model", model);

  const char *lc = tb_json_str(md, "launch_command");
  if (lc == NULL)
    lc = tb_json_str(md, "server_command");
  char *red = lc ? tb_redact_command(lc) : NULL;
  json_object_set_new(doc, "launch_command", red ? json_string(red) : json_null());
  free(red);
}

/* The capacity object; the KV budget in tokens into *budget (0: none). */
static json_t *
lib_capacity(const json_t *md, int64_t *budget)
{
  int64_t iv;
  if (!(tb_json_int(md, "kv_cache_budget", budget) && *budget > 0) &&
      !(tb_json_int(md, "kv_budget", budget) && *budget > 0)) {
    *budget = 0;
    if (tb_json_int(md, "max_total_tokens", &iv) && iv > 0)
      *budget = iv;
  }
  json_t *cap = json_object();
  json_object_set_new(cap, "kv_budget_tokens", *budget > 0 ? json_integer(*budget) : json_null());
  json_object_set_new(cap, "source", json_string(*budget > 0 ? "override" : "none"));
  json_object_set_new(cap, "max_running_requests",
                      tb_json_int(md, "max_running_requests", &iv) && iv > 0 ? json_integer(iv)
                                                                             : json_null());
  return cap;
}

/* The settings object (its arrays contexts, concurrency and the empty
 * prefill_contexts, borrowed into *ctxs, *concs, *pctxs). */
static json_t *
lib_settings(const json_t *md, int64_t max_output, json_t **ctxs, json_t **concs, json_t **pctxs)
{
  json_t *st = json_object();
  *ctxs = json_array();
  *concs = json_array();
  *pctxs = json_array();
  int_array(json_object_get(md, "context_lengths"), *ctxs, 0);
  int_array(json_object_get(md, "concurrency_levels"), *concs, 1);
  json_object_set_new(st, "contexts", *ctxs);
  json_object_set_new(st, "concurrency", *concs);
  json_object_set_new(st, "prefill_contexts", *pctxs);
  double dur = tb_json_num(md, "duration_per_test");
  json_object_set_new(st, "duration_s", isfinite(dur) ? json_real(dur) : json_null());
  json_object_set_new(st, "max_output", max_output > 0 ? json_integer(max_output) : json_null());
  const char *dm = tb_json_str(md, "decode_mode");
  json_object_set_new(
    st, "decode_test",
    json_string(dm && strcmp(dm, "request-count") == 0 ? "request_count" : "fixed_duration"));
  const char *pm = tb_json_str(md, "prefill_mode");
  json_object_set_new(
    st, "prefill_mode",
    json_string(pm == NULL || strcmp(pm, "integrated_decode_scout") == 0 ? "decode_warmup" : pm));
  return st;
}

/* Sorts v[0..*n) and drops repeated keys (the first of a key wins, the
 * others counted in *skipped). */
static void
sort_unique(struct pcell *v, size_t *n, size_t *skipped)
{
  qsort(v, *n, sizeof *v, pcell_cmp);
  size_t m = 0;
  for (size_t i = 0; i < *n; i++) {
    if (m > 0 && v[m - 1].phase == v[i].phase && v[m - 1].ctx == v[i].ctx &&
        v[m - 1].conc == v[i].conc) {
      json_decref(v[i].c);
      (*skipped)++;
      continue;
    }
    v[m++] = v[i];
  }
  *n = m;
}

/* Whether the sorted v[0..m) holds key. */
static bool
sorted_has(const struct pcell *v, size_t m, const struct pcell *key)
{
  for (size_t lo = 0, hi = m; lo < hi;) {
    size_t mid = (lo + hi) / 2;
    struct pcell t = v[mid];
    t.seq = 0;
    int c = pcell_cmp(&t, key);
    if (c == 0)
      return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* What the matrix of a document holds besides its results. */
struct lib_matrix {
  const json_t *ctxs, *concs;
  int64_t max_output, budget;
};

/* The rest of the matrix, cells the tool left out of results: over
 * capacity, or skipped (counted in the return).  Pushed after v's sorted
 * m cells while they fit in vcap. */
static size_t
fill_matrix(const struct lib_matrix *mx, struct pcell *v, size_t *n, size_t vcap)
{
  size_t missing = 0, i, j, m = *n;
  const json_t *x, *y;
  json_array_foreach (mx->ctxs, i, x) {
    json_array_foreach (mx->concs, j, y) {
      struct pcell key = { .phase = 1,
                           .ctx = json_integer_value(x),
                           .conc = json_integer_value(y) };
      if (sorted_has(v, m, &key))
        continue;
      json_t *c = tb_result_cell_new("decode", key.ctx, key.conc);
      if (tb_result_over_capacity(key.conc, key.ctx, mx->max_output, mx->budget)) {
        char *why = tb_xasprintf("%" PRId64 " x (%" PRId64 " + %" PRId64
                                 ") tokens exceed the KV budget of %" PRId64,
                                 key.conc, key.ctx, mx->max_output, mx->budget);
        json_object_set_new(c, "status", json_string("over_capacity"));
        json_object_set_new(c, "reason", json_string(why));
        free(why);
      } else {
        json_object_set_new(c, "status", json_string("skipped"));
        json_object_set_new(c, "reason", json_string("not in the imported results"));
        missing++;
      }
      if (*n < vcap)
        pcell_push(v, n, c);
      else
        json_decref(c);
    }
  }
  return missing;
}

/* Every cell of the document, in order: prefill entries, results and the
 * rest of the matrix; the prefill contexts into pctxs.  The cells missing
 * from the results into *missing, the entries dropped into *skipped. */
static json_t *
lib_cells(const json_t *prefill, const json_t *results, const struct lib_matrix *mx, json_t *pctxs,
          size_t *missing, size_t *skipped)
{
  size_t nres = json_is_array(results) ? json_array_size(results) : 0;
  size_t npre = json_is_object(prefill) ? json_object_size(prefill) : 0;
  size_t vcap = npre + nres + (size_t)AXIS_ENTRIES_MAX * AXIS_ENTRIES_MAX + 1;
  struct pcell *v = tb_xcalloc(vcap, sizeof *v);
  size_t n = 0;
  if (json_is_object(prefill)) {
    const char *k;
    const json_t *p;
    json_object_foreach ((json_t *)prefill, k, p) {
      json_t *c = prefill_cell(k, p, skipped);
      if (c != NULL)
        pcell_push(v, &n, c);
    }
  }
  for (size_t i = 0; i < nres; i++) {
    json_t *c = result_cell(json_array_get(results, i), mx->max_output, skipped);
    if (c != NULL)
      pcell_push(v, &n, c);
  }
  sort_unique(v, &n, skipped);
  *missing = fill_matrix(mx, v, &n, vcap);
  qsort(v, n, sizeof *v, pcell_cmp);
  json_t *cells = json_array();
  for (size_t i = 0; i < n; i++) {
    if (v[i].phase == 0)
      json_array_append_new(pctxs, json_integer(v[i].ctx));
    json_array_append_new(cells, v[i].c);
  }
  free(v);
  return cells;
}

static json_t *
import_lib(const json_t *in, char **err)
{
  const json_t *md = json_object_get(in, "metadata");
  const json_t *results = json_object_get(in, "results");
  const json_t *prefill = json_object_get(in, "prefill");
  size_t nres = json_is_array(results) ? json_array_size(results) : 0;
  size_t npre = json_is_object(prefill) ? json_object_size(prefill) : 0;
  if (nres + npre > TB_IMPORT_MAX_CELLS) {
    *err = tb_xasprintf("too many results (at most %u)", TB_IMPORT_MAX_CELLS);
    return NULL;
  }
  json_t *doc = json_object();
  lib_header(doc, md);
  struct lib_matrix mx = { 0 };
  json_object_set_new(doc, "capacity", lib_capacity(md, &mx.budget));
  if (!tb_json_int(md, "max_tokens", &mx.max_output) || mx.max_output < 0)
    mx.max_output = 0;
  json_t *ctxs, *concs, *pctxs;
  json_object_set_new(doc, "settings", lib_settings(md, mx.max_output, &ctxs, &concs, &pctxs));
  mx.ctxs = ctxs;
  mx.concs = concs;
  size_t skipped = 0, missing = 0;
  json_t *cells = lib_cells(prefill, results, &mx, pctxs, &missing, &skipped);
  json_object_set_new(doc, "status", json_string(missing > 0 ? "partial" : "complete"));
  json_object_set_new(doc, "error", json_null());
  json_object_set_new(doc, "cells", cells);
  json_t *imp = json_object();
  json_object_set_new(imp, "tool", json_string("llm-inference-bench"));
  json_object_set_new(imp, "version",
                      tb_json_str(md, "version") ? json_string(tb_json_str(md, "version"))
                                                 : json_null());
  json_object_set_new(imp, "format", json_string("benchmark_results.json"));
  json_object_set_new(imp, "skipped_entries", json_integer((json_int_t)skipped));
  json_object_set_new(doc, "imported_from", imp);
  return doc;
}

/* ---------------------------------------------------------------- entry */

json_t *
tb_import(const json_t *in, enum tb_import_source *src, char **err)
{
  *err = NULL;
  enum tb_import_source s = tb_import_detect(in);
  if (src)
    *src = s;
  switch (s) {
  case TB_IMPORT_TOKBENCH: return import_ours(in, err);
  case TB_IMPORT_LLM_INFERENCE_BENCH: return import_lib(in, err);
  default:
    *err = tb_xstrdup("not a result document: neither tokbench's (schema "
                      "tokbench.result/v1) nor llm-inference-bench's (metadata + results)");
    return NULL;
  }
}

json_t *
tb_import_load_buffer(const char *buf, size_t len, enum tb_import_source *src, char **err)
{
  *err = NULL;
  if (len > TB_IMPORT_MAX_BYTES) {
    *err = tb_xasprintf("document larger than %u bytes", TB_IMPORT_MAX_BYTES);
    return NULL;
  }
  json_error_t je;
  json_t *in = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
  if (in == NULL) {
    *err = tb_xasprintf("invalid JSON at line %d: %s", je.line, je.text);
    return NULL;
  }
  json_t *out = tb_import(in, src, err);
  json_decref(in);
  return out;
}

json_t *
tb_import_load_file(const char *path, enum tb_import_source *src, char **err)
{
  *err = NULL;
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (f == NULL) {
    *err = tb_xasprintf("%s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = tb_xmalloc(cap);
  json_t *out = NULL;
  for (;;) {
    if (len == cap) {
      if (cap > TB_IMPORT_MAX_BYTES) {
        *err = tb_xasprintf("%s: larger than %u bytes", path, TB_IMPORT_MAX_BYTES);
        goto out;
      }
      cap *= 2;
      buf = tb_xrealloc(buf, cap);
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) {
      if (ferror(f)) {
        *err = tb_xasprintf("%s: read error", path);
        goto out;
      }
      break;
    }
  }
  if (len > TB_IMPORT_MAX_BYTES) {
    *err = tb_xasprintf("%s: larger than %u bytes", path, TB_IMPORT_MAX_BYTES);
    goto out;
  }
  out = tb_import_load_buffer(buf, len, src, err);
  if (out == NULL && *err != NULL) {
    char *e = tb_xasprintf("%s: %s", path, *err);
    free(*err);
    *err = e;
  }
out:
  free(buf);
  if (f != stdin)
    fclose(f);
  return out;
}
