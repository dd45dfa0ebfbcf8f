/*
 * tb_compare: cell-by-cell comparison of two result documents.  See
 * tb_compare.h for the comparison document.
 *
 * Cells are keyed by (phase, context, concurrency).  Both documents' cells
 * are collected into one array of keys, sorted, and walked once; each side is
 * looked up by binary search over its own sorted index, so a document with
 * many cells costs O(n log n), and a hostile one (duplicate keys, wrong
 * types) is read with every member type-checked: the first cell of a key
 * wins, anything malformed is skipped.
 */
#include "result/tb_compare.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_redact.h"
#include "result/tb_result.h"

/* One table: the performance metrics (N_METRICS), then cost and energy
 * (issue 26, tb_cost: N_EFF, compared where either side has them, never a
 * regression of their own).  The verdict against history judges the first
 * N_VERDICT: the performance metrics, the cost per million tokens and the
 * joules per output token (tps_per_gpu is total_tps over a constant). */
enum {
  N_METRICS = 5,
  N_EFF = 4,
  N_VERDICT = N_METRICS + 3
};

static const struct tb_compare_metric all_metrics[N_METRICS + N_EFF] = {
  { .name = "prompt_tps", .phase = "prefill", .label = "Prompt tok/s", .higher_better = true },
  { .name = "ttft_ms", .phase = "prefill", .label = "TTFT", .higher_better = false },
  { .name = "total_tps", .phase = "decode", .label = "Total tok/s", .higher_better = true },
  { .name = "ttft_p50_ms", .phase = "decode", .label = "TTFT (median)", .higher_better = false },
  { .name = "tbt_p50_ms",
    .phase = "decode",
    .label = "Time between tokens (median)",
    .higher_better = false },
  { .name = "cost_per_m_output_tokens",
    .phase = "decode",
    .label = "Cost per M output tokens",
    .higher_better = false,
    .efficiency = true,
    .advisory = true },
  { .name = "cost_per_m_tokens",
    .phase = "decode",
    .label = "Cost per M tokens",
    .higher_better = false,
    .efficiency = true,
    .advisory = true },
  { .name = "j_per_output_token",
    .phase = "decode",
    .label = "J per output token",
    .higher_better = false,
    .efficiency = true },
  { .name = "tps_per_gpu",
    .phase = "decode",
    .label = "tok/s per GPU",
    .higher_better = true,
    .efficiency = true },
};

static const struct tb_compare_metric *const metrics = all_metrics;
static const struct tb_compare_metric *const eff_metrics = all_metrics + N_METRICS;

const struct tb_compare_metric *
tb_compare_eff_metrics(size_t *n)
{
  *n = N_EFF;
  return eff_metrics;
}

const struct tb_compare_metric *
tb_compare_metrics(size_t *n)
{
  *n = N_METRICS;
  return metrics;
}

const struct tb_compare_metric *
tb_compare_verdict_metrics(size_t *n)
{
  *n = N_VERDICT;
  return all_metrics;
}

struct key {
  int phase; /* 0 prefill, 1 decode */
  int64_t ctx;
  int64_t conc;
  const json_t *cell; /* borrowed */
};

static int
key_cmp(const void *a, const void *b)
{
  const struct key *x = a, *y = b;
  return tb_result_key_cmp(x->phase, x->ctx, x->conc, y->phase, y->ctx, y->conc);
}

static bool
cell_key(const json_t *cell, struct key *k)
{
  if (!json_is_object(cell))
    return false;
  const char *ph = json_string_value(json_object_get(cell, "phase"));
  const json_t *ctx = json_object_get(cell, "context");
  const json_t *conc = json_object_get(cell, "concurrency");
  if (ph == NULL || !json_is_integer(ctx))
    return false;
  if (strcmp(ph, "prefill") == 0)
    k->phase = 0;
  else if (strcmp(ph, "decode") == 0)
    k->phase = 1;
  else
    return false;
  k->ctx = json_integer_value(ctx);
  k->conc = json_is_integer(conc) ? json_integer_value(conc) : 1;
  if (k->ctx <= 0 || k->conc <= 0)
    return false;
  k->cell = cell;
  return true;
}

/* Sorted keys of a document's cells, duplicates removed (first wins:
 * qsort is not stable, so the index in the array breaks ties). */
struct idx {
  struct key *k;
  size_t n;
};

struct keyi {
  struct key k;
  size_t i;
};

static int
keyi_cmp(const void *a, const void *b)
{
  const struct keyi *x = a, *y = b;
  int c = key_cmp(&x->k, &y->k);
  if (c != 0)
    return c;
  return x->i < y->i ? -1 : x->i > y->i;
}

static bool
build_idx(const json_t *doc, struct idx *out, char **err, const char *which)
{
  out->k = NULL;
  out->n = 0;
  const json_t *cells = json_object_get(doc, "cells");
  if (!json_is_object(doc) || !json_is_array(cells)) {
    *err = tb_xasprintf("%s is not a result document (no cells array)", which);
    return false;
  }
  size_t n = json_array_size(cells);
  if (n > TB_COMPARE_MAX_CELLS) {
    *err = tb_xasprintf("%s has %zu cells (at most %u)", which, n, TB_COMPARE_MAX_CELLS);
    return false;
  }
  struct keyi *tmp = tb_xcalloc(n ? n : 1, sizeof *tmp);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (cell_key(json_array_get(cells, i), &tmp[m].k))
      tmp[m++].i = i;
  qsort(tmp, m, sizeof *tmp, keyi_cmp);
  out->k = tb_xcalloc(m ? m : 1, sizeof *out->k);
  for (size_t i = 0; i < m; i++)
    if (out->n == 0 || key_cmp(&out->k[out->n - 1], &tmp[i].k) != 0)
      out->k[out->n++] = tmp[i].k;
  free(tmp);
  return true;
}

static const json_t *
idx_find(const struct idx *ix, const struct key *k)
{
  const struct key *f = bsearch(k, ix->k, ix->n, sizeof *ix->k, key_cmp);
  return f ? f->cell : NULL;
}

static double
num(const json_t *v)
{
  if (!json_is_number(v))
    return NAN;
  double d = json_number_value(v);
  return isfinite(d) ? d : NAN;
}

double
tb_compare_cell_value(const json_t *cell, const char *metric)
{
  if (!json_is_object(cell) || metric == NULL)
    return NAN;
  if (strcmp(metric, "total_tps") == 0 || strcmp(metric, "prompt_tps") == 0)
    return num(json_object_get(cell, metric));
  if (strcmp(metric, "ttft_ms") == 0 || strcmp(metric, "ttft_p50_ms") == 0) {
    const json_t *t = json_object_get(cell, "ttft_ms");
    return json_is_object(t) ? num(json_object_get(t, "p50")) : num(t);
  }
  if (strcmp(metric, "tbt_p50_ms") == 0) {
    const json_t *t = json_object_get(cell, "tbt_ms");
    return json_is_object(t) ? num(json_object_get(t, "p50")) : num(t);
  }
  for (size_t i = 0; i < N_EFF; i++)
    if (strcmp(metric, eff_metrics[i].name) == 0)
      return num(json_object_get(json_object_get(cell, "efficiency"), metric));
  return NAN;
}

double
tb_compare_geomean(const double *ratios, size_t n)
{
  double sum = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(ratios[i]) && ratios[i] > 0) {
      sum += log(ratios[i]);
      k++;
    }
  return k ? exp(sum / (double)k) : NAN;
}

static const char *
status_of(const json_t *cell)
{
  return cell ? json_string_value(json_object_get(cell, "status")) : NULL;
}

static bool
is_valid(const json_t *cell)
{
  const char *s = status_of(cell);
  return s != NULL && strcmp(s, "valid") == 0;
}

static json_t *
jnum(double d)
{
  return isfinite(d) ? json_real(d) : json_null();
}

static json_t *
jstr_or_null(const char *s)
{
  return s ? json_string(s) : json_null();
}

/* Copies of the header members a reader needs to tell the two runs apart. */
static json_t *
side_header(const json_t *doc)
{
  static const char *const keys[] = { "run_id",          "status",   "started_at",
                                      "finished_at",     "endpoint", "engine",
                                      "hardware",        "model",    "launch_command",
                                      "tokbench_version" };
  json_t *h = json_object();
  for (size_t i = 0; i < TB_ARRAY_LEN(keys); i++) {
    const json_t *v = json_object_get(doc, keys[i]);
    if (v != NULL)
      json_object_set_new(h, keys[i], json_deep_copy(v));
  }
  /* a document written before redaction shows no secret either */
  const char *lc = json_string_value(json_object_get(h, "launch_command"));
  if (lc != NULL) {
    char *red = tb_redact_command(lc);
    json_object_set_new(h, "launch_command", json_string(red));
    free(red);
  }
  return h;
}

static void
label_of(int64_t ctx, char *buf, size_t len)
{
  tb_format_tokens(ctx, buf, len);
}

/* "better", "worse" or "same" of head against base by their 95% intervals
 * (disjoint intervals only), null without both. */
static json_t *
ci_verdict(const json_t *bc, const json_t *hc, const struct tb_compare_metric *m)
{
  char key[96];
  snprintf(key, sizeof key, "%s_ci95", m->name);
  const json_t *b = json_object_get(json_object_get(bc, "efficiency"), key);
  const json_t *h = json_object_get(json_object_get(hc, "efficiency"), key);
  if (!json_is_array(b) || !json_is_array(h))
    return json_null();
  double bl = num(json_array_get(b, 0)), bh = num(json_array_get(b, 1));
  double hl = num(json_array_get(h, 0)), hh = num(json_array_get(h, 1));
  if (!isfinite(bl) || !isfinite(bh) || !isfinite(hl) || !isfinite(hh))
    return json_null();
  bool lower = hh<bl, higher = hl> bh;
  if (!lower && !higher)
    return json_string("same");
  return json_string(lower == !m->higher_better ? "better" : "worse");
}

/* The cell's efficiency comparison (NULL when neither side has one); the
 * ratios into eff_ratios for the summary. */
static json_t *
eff_compare(const json_t *bc, const json_t *hc, bool bv, bool hv, double **eff_ratios, size_t *neff)
{
  json_t *o = NULL;
  for (size_t m = 0; m < N_EFF; m++) {
    const char *n = eff_metrics[m].name;
    double b = bv ? num(json_object_get(json_object_get(bc, "efficiency"), n)) : NAN;
    double h = hv ? num(json_object_get(json_object_get(hc, "efficiency"), n)) : NAN;
    if (!isfinite(b) && !isfinite(h))
      continue;
    double r = (isfinite(b) && isfinite(h) && b > 0 && h > 0) ? h / b : NAN;
    if (o == NULL)
      o = json_object();
    json_object_set_new(o, n,
                        json_pack("{s:o, s:o, s:o, s:o}", "base", jnum(b), "head", jnum(h), "ratio",
                                  jnum(r), "by_interval", ci_verdict(bc, hc, &eff_metrics[m])));
    if (isfinite(r))
      eff_ratios[m][neff[m]++] = r;
  }
  return o;
}

/* What a comparison gathers over its cells. */
struct cmp_run {
  double tolerance;
  double *ratios[N_METRICS]; /* head / base of every cell valid on both sides */
  size_t nratio[N_METRICS];
  double *eff_ratios[N_EFF];
  size_t neff[N_EFF];
  bool any_eff;
  json_t *regs; /* the regressions */
};

/* The union of both sides' cell keys, in order (*na of them). */
static struct key *
union_keys(const struct idx *bi, const struct idx *hi, size_t *na)
{
  struct key *all = tb_xcalloc(bi->n + hi->n + 1, sizeof *all);
  size_t i = 0, j = 0;
  *na = 0;
  while (i < bi->n || j < hi->n) {
    int c = i >= bi->n ? 1 : j >= hi->n ? -1 : key_cmp(&bi->k[i], &hi->k[j]);
    if (c <= 0)
      all[(*na)++] = bi->k[i++];
    else
      all[(*na)++] = hi->k[j++];
    if (c == 0)
      j++;
  }
  return all;
}

/* A regression entry's cell members. */
static json_t *
reg_head(const char *phase, const struct key *k, const char *label)
{
  return json_pack("{s:s, s:I, s:s, s:I}", "phase", phase, "context", (json_int_t)k->ctx,
                   "context_label", label, "concurrency", (json_int_t)k->conc);
}

/* The phase's metrics of one cell ({base, head, ratio} each), their
 * ratios gathered and the worse ones past the tolerance in run->regs. */
static json_t *
cell_metrics(struct cmp_run *run, const struct key *k, const char *label, const json_t *bc,
             const json_t *hc)
{
  const char *phase = k->phase ? "decode" : "prefill";
  bool bv = is_valid(bc), hv = is_valid(hc);
  json_t *mo = json_object();
  for (size_t m = 0; m < N_METRICS; m++) {
    if (strcmp(metrics[m].phase, phase) != 0)
      continue;
    double b = bv ? tb_compare_cell_value(bc, metrics[m].name) : NAN;
    double h = hv ? tb_compare_cell_value(hc, metrics[m].name) : NAN;
    double r = (isfinite(b) && isfinite(h) && b > 0 && h > 0) ? h / b : NAN;
    json_object_set_new(
      mo, metrics[m].name,
      json_pack("{s:o, s:o, s:o}", "base", jnum(b), "head", jnum(h), "ratio", jnum(r)));
    if (!isfinite(r))
      continue;
    run->ratios[m][run->nratio[m]++] = r;
    bool worse = metrics[m].higher_better ? r < 1.0 - run->tolerance : r > 1.0 + run->tolerance;
    if (worse) {
      json_t *g = reg_head(phase, k, label);
      json_object_update_new(g, json_pack("{s:s, s:f, s:f, s:f, s:f, s:s}", "metric",
                                          metrics[m].name, "base", b, "head", h, "ratio", r,
                                          "change_pct", (r - 1.0) * 100.0, "kind", "worse"));
      json_array_append_new(run->regs, g);
    }
  }
  return mo;
}

/* One cell of the comparison; a cell valid before and an error or over
 * capacity now is a "lost" regression. */
static json_t *
compare_cell(struct cmp_run *run, const struct key *k, const json_t *bc, const json_t *hc)
{
  const char *phase = k->phase ? "decode" : "prefill";
  char label[32];
  label_of(k->ctx, label, sizeof label);
  bool bv = is_valid(bc), hv = is_valid(hc);
  const char *mark = bv && hv ? "both" : bv ? "base_only" : hv ? "head_only" : "neither";
  json_t *c = reg_head(phase, k, label);
  json_object_set_new(c, "base_status", jstr_or_null(status_of(bc)));
  json_object_set_new(c, "head_status", jstr_or_null(status_of(hc)));
  json_object_set_new(c, "mark", json_string(mark));
  json_object_set_new(c, "metrics", cell_metrics(run, k, label, bc, hc));
  const char *hs = status_of(hc);
  if (bv && hs != NULL && (strcmp(hs, "error") == 0 || strcmp(hs, "over_capacity") == 0)) {
    json_t *g = reg_head(phase, k, label);
    json_object_update_new(g,
                           json_pack("{s:s, s:s, s:s, s:n, s:n, s:s}", "metric", "status", "base",
                                     "valid", "head", hs, "ratio", "change_pct", "kind", "lost"));
    json_array_append_new(run->regs, g);
  }
  json_t *eo = k->phase ? eff_compare(bc, hc, bv, hv, run->eff_ratios, run->neff) : NULL;
  if (eo != NULL) {
    json_object_set_new(c, "efficiency", eo);
    run->any_eff = true;
  }
  return c;
}

/* The geometric mean of each metric's ratios. */
static json_t *
summary(const struct cmp_run *run)
{
  json_t *sum = json_object();
  for (size_t m = 0; m < N_METRICS; m++)
    json_object_set_new(sum, metrics[m].name,
                        json_pack("{s:o, s:I, s:s}", "geomean",
                                  jnum(tb_compare_geomean(run->ratios[m], run->nratio[m])), "cells",
                                  (json_int_t)run->nratio[m], "better",
                                  metrics[m].higher_better ? "higher" : "lower"));
  if (!run->any_eff)
    return sum;
  json_t *es = json_object();
  for (size_t m = 0; m < N_EFF; m++)
    json_object_set_new(es, eff_metrics[m].name,
                        json_pack("{s:o, s:I, s:s}", "geomean",
                                  jnum(tb_compare_geomean(run->eff_ratios[m], run->neff[m])),
                                  "cells", (json_int_t)run->neff[m], "better",
                                  eff_metrics[m].higher_better ? "higher" : "lower"));
  json_object_set_new(sum, "efficiency", es);
  return sum;
}

json_t *
tb_compare(const json_t *base, const json_t *head, double tolerance, char **err)
{
  *err = NULL;
  if (!(tolerance >= 0 && tolerance < 1)) {
    *err = tb_xstrdup("tolerance must be in [0, 1)");
    return NULL;
  }
  struct idx bi = { 0 }, hi = { 0 };
  if (!build_idx(base, &bi, err, "base") || !build_idx(head, &hi, err, "head")) {
    free(bi.k);
    free(hi.k);
    return NULL;
  }
  size_t na;
  struct key *all = union_keys(&bi, &hi, &na);
  struct cmp_run run = { .tolerance = tolerance, .regs = json_array() };
  for (size_t m = 0; m < N_METRICS; m++)
    run.ratios[m] = tb_xcalloc(na + 1, sizeof(double));
  for (size_t m = 0; m < N_EFF; m++)
    run.eff_ratios[m] = tb_xcalloc(na + 1, sizeof(double));
  json_t *cells = json_array();
  for (size_t k = 0; k < na; k++)
    json_array_append_new(
      cells, compare_cell(&run, &all[k], idx_find(&bi, &all[k]), idx_find(&hi, &all[k])));
  json_t *out = json_object();
  json_object_set_new(out, "schema", json_string(TB_COMPARE_SCHEMA));
  json_object_set_new(out, "tolerance", json_real(tolerance));
  json_object_set_new(out, "base", side_header(base));
  json_object_set_new(out, "head", side_header(head));
  json_object_set_new(out, "cells", cells);
  json_object_set_new(out, "summary", summary(&run));
  json_object_set_new(out, "regressed", json_boolean(json_array_size(run.regs) > 0));
  json_object_set_new(out, "regressions", run.regs);
  for (size_t m = 0; m < N_METRICS; m++)
    free(run.ratios[m]);
  for (size_t m = 0; m < N_EFF; m++)
    free(run.eff_ratios[m]);
  free(all);
  free(bi.k);
  free(hi.k);
  return out;
}
