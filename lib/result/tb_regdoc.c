/*
 * tb_regdoc: the "regressions" member of a result document, read and told.
 * See tb_regdoc.h.  Every member is read with its type checked: a document
 * written by hand or by an older version tells what it can.
 */
#include "result/tb_regdoc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_compare.h"
#include "result/tb_verdict.h"

/* A finite number, else NAN. */
static double
num(const json_t *v)
{
  double d = json_is_number(v) ? json_number_value(v) : NAN;
  return isfinite(d) ? d : NAN;
}

bool
tb_regdoc_regressed(const json_t *regressions, const json_t **cells)
{
  const json_t *c =
    json_is_object(regressions) ? json_object_get(regressions, "cells") : regressions;
  if (!json_is_array(c))
    c = NULL;
  if (cells != NULL)
    *cells = c;
  if (json_is_object(regressions))
    return json_is_true(json_object_get(regressions, "regressed"));
  return c != NULL && json_array_size(c) > 0;
}

/* "−6.1" with a real minus sign (U+2212), one decimal. */
static void
signed_pct(double x, char *buf, size_t len)
{
  if (x < 0)
    snprintf(buf, len, "\xe2\x88\x92%.1f", -x);
  else
    snprintf(buf, len, "+%.1f", x);
}

char *
tb_regdoc_why(const json_t *g)
{
  char where[64], label[32];
  const char *phase = json_string_value(json_object_get(g, "phase"));
  const char *metric = json_string_value(json_object_get(g, "metric"));
  const char *kind = json_string_value(json_object_get(g, "kind"));
  const char *cl = json_string_value(json_object_get(g, "context_label"));
  if (cl == NULL) {
    tb_format_tokens(json_integer_value(json_object_get(g, "context")), label, sizeof label);
    cl = label;
  }
  if (phase != NULL && strcmp(phase, "prefill") == 0)
    snprintf(where, sizeof where, "%.24s prefill", cl);
  else
    snprintf(where, sizeof where, "%.24s \xc3\x97 %lld", cl,
             (long long)json_integer_value(json_object_get(g, "concurrency")));
  if (kind != NULL && strcmp(kind, "lost") == 0) {
    const char *h = json_string_value(json_object_get(g, "head"));
    return tb_xasprintf("%s: lost (valid before, %.32s now)", where, h ? h : "invalid");
  }
  char chg[32], lo[32], hi[32];
  double c = num(json_object_get(g, "change_pct"));
  signed_pct(c, chg, sizeof chg);
  const char *m = metric ? metric : "?";
  if (json_is_true(json_object_get(g, "fallback")) ||
      !json_is_array(json_object_get(g, "ci95_pct")))
    return tb_xasprintf("%s %.32s: %s%% (against the last good run: too little history)", where, m,
                        isfinite(c) ? chg : "?");
  const json_t *ci = json_object_get(g, "ci95_pct");
  signed_pct(num(json_array_get(ci, 0)), lo, sizeof lo);
  signed_pct(num(json_array_get(ci, 1)), hi, sizeof hi);
  double p = num(json_object_get(g, "p"));
  char ptxt[32];
  if (p < 0.001)
    snprintf(ptxt, sizeof ptxt, "p < 0.001");
  else
    snprintf(ptxt, sizeof ptxt, "p = %.3f", p);
  json_int_t runs = json_integer_value(json_object_get(g, "earlier_runs"));
  json_int_t fresh = json_integer_value(json_object_get(g, "new_runs"));
  char newer[48] = "";
  if (fresh > 1)
    snprintf(newer, sizeof newer, ", over the last %lld runs", (long long)fresh);
  return tb_xasprintf("%s %.32s: %s%% (CI %s\xe2\x80\xa6%s%%, %s, %lld earlier run%s%s)", where, m,
                      chg, lo, hi, ptxt, (long long)runs, runs == 1 ? "" : "s", newer);
}

char *
tb_regdoc_headline(const json_t *r)
{
  if (r == NULL || json_is_null(r))
    return NULL;
  const json_t *cells = NULL;
  bool reg = tb_regdoc_regressed(r, &cells);
  size_t n = json_array_size(cells);
  const char *method = json_string_value(json_object_get(r, "method"));
  bool history = method != NULL && strcmp(method, "history") == 0;
  if (!json_is_object(r) || method == NULL) /* a bare array or an older object */
    return reg ? tb_xasprintf("Regressed: %zu regression%s.", n, n == 1 ? "" : "s")
               : tb_xstrdup("No regression.");
  double tol = num(json_object_get(r, history ? "min_effect" : "tolerance"));
  if (history) {
    json_int_t runs = json_integer_value(json_object_get(r, "history_runs"));
    if (!reg)
      return tb_xasprintf("No significant regression beyond %.1f%% against up to %lld earlier "
                          "run%s.",
                          tol * 100, (long long)runs, runs == 1 ? "" : "s");
    if (n == 0)
      return tb_xasprintf("Regressed: the matrix as a whole is significantly worse, beyond "
                          "%.1f%%, against up to %lld earlier runs.",
                          tol * 100, (long long)runs);
    return tb_xasprintf("Regressed: %zu significant regression%s beyond %.1f%% against up to "
                        "%lld earlier run%s.",
                        n, n == 1 ? "" : "s", tol * 100, (long long)runs, runs == 1 ? "" : "s");
  }
  if (json_is_null(json_object_get(r, "base_job_id")) && !reg)
    return tb_xasprintf("Too little history (fewer than %d earlier runs) and no earlier good "
                        "job to compare with.",
                        TB_VERDICT_MIN_HISTORY);
  if (!reg)
    return tb_xasprintf("Too little history (fewer than %d earlier runs): compared with the "
                        "last good job; no regression beyond %.1f%%.",
                        TB_VERDICT_MIN_HISTORY, tol * 100);
  return tb_xasprintf("Regressed (too little history, fewer than %d earlier runs: compared "
                      "with the last good job): %zu regression%s beyond %.1f%%.",
                      TB_VERDICT_MIN_HISTORY, n, n == 1 ? "" : "s", tol * 100);
}

/* "J per output token −3.2% (CI −4.1…−2.3%), better" of one matrix entry
 * into b (appended after sep); false when it tells nothing. */
static bool
efficiency_part(const struct tb_compare_metric *m, const json_t *e, const char *sep, char **b)
{
  const char *outcome = json_string_value(json_object_get(e, "outcome"));
  double c = num(json_object_get(e, "change_pct"));
  const json_t *ci = json_object_get(e, "ci95_pct");
  if (outcome == NULL || !isfinite(c) || strcmp(outcome, "too_little_history") == 0)
    return false;
  char chg[32], lo[32] = "?", hi[32] = "?";
  signed_pct(c, chg, sizeof chg);
  double l = num(json_array_get(ci, 0)), h = num(json_array_get(ci, 1));
  if (isfinite(l) && isfinite(h)) {
    signed_pct(l, lo, sizeof lo);
    signed_pct(h, hi, sizeof hi);
  }
  bool told_only = m->advisory && strcmp(outcome, "worse") == 0;
  char *next = tb_xasprintf("%s%s%s %s%% (CI %s\xe2\x80\xa6%s%%), %.20s%s", *b, sep, m->label, chg,
                            lo, hi, outcome, told_only ? " (told, never a regression)" : "");
  free(*b);
  *b = next;
  return true;
}

char *
tb_regdoc_efficiency(const json_t *r)
{
  const json_t *matrix = json_is_object(r) ? json_object_get(r, "matrix") : NULL;
  if (!json_is_object(matrix))
    return NULL;
  size_t nm, told = 0;
  const struct tb_compare_metric *m = tb_compare_verdict_metrics(&nm);
  char *b = tb_xstrdup("");
  for (size_t i = 0; i < nm; i++)
    if (m[i].efficiency &&
        efficiency_part(&m[i], json_object_get(matrix, m[i].name), told ? "; " : "", &b))
      told++;
  if (told == 0) {
    free(b);
    return NULL;
  }
  char *s = tb_xasprintf("Cost and energy against history (the matrix): %s.", b);
  free(b);
  return s;
}
