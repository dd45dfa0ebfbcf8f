/*
 * tb_table: a result document as the seed reports' plain-text tables, the
 * way `tokbench run` and `tokbench submit` show a finished job in a
 * terminal.  See tb_table.h for the contract.
 *
 * The numbers are tb_render's grouping; prompt tok/s is shown in truncated
 * thousands ("24.6K"), as the seeds' terminal tables do (the HTML and
 * Markdown reports round instead: tb_render_fmt_tps_short).
 */
#include "render/tb_table.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "render/tb_ratereport.h"
#include "render/tb_costview.h"
#include "render/tb_srvview.h"
#include "base/tb_redact.h"
#include "render/tb_render.h"
#include "result/tb_checks.h"
#include "base/tb_util.h"

/* v with the given decimals and thousands separators: "1,310.0". */
static void
fmt_thousands(double v, int decimals, char *buf, size_t len)
{
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.*f", decimals, v);
  tb_render_group(tmp, buf, len);
}

/* "24.6K" the way the seeds show prompt tok/s (thousands, truncated). */
static void
fmt_k(double v, char *buf, size_t len)
{
  if (v >= 1000) {
    double k = floor(v / 100.0) / 10.0;
    if (k == floor(k))
      snprintf(buf, len, "%.0fK", k);
    else
      snprintf(buf, len, "%.1fK", k);
  } else {
    snprintf(buf, len, "%.0f", v);
  }
}

/* " ± 11.9" (the half-width of cell[ci], as fmt_thousands with decimals,
 * or fmt_k when decimals < 0); "" without an interval. */
static void
pm(const json_t *c, const char *figure, const char *ci, int decimals, char *buf, size_t len)
{
  char h[48];
  double half = tb_render_ci_half(c, figure, ci);
  buf[0] = '\0';
  if (!isfinite(half))
    return;
  if (decimals < 0)
    fmt_k(half, h, sizeof h);
  else
    fmt_thousands(half, decimals, h, sizeof h);
  snprintf(buf, len, " \xc2\xb1 %s", h);
}

static double
p50(const json_t *o, const char *k)
{
  return tb_json_num(json_object_get(o, k), "p50");
}

static const char *
str(const json_t *o, const char *k)
{
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

/* The word for a cell status; anything not known reads "Error". */
static const char *
status_word(const char *st)
{
  const char *w = tb_render_status_text(st);
  return strcmp(w, "Unknown") == 0 ? "Error" : w;
}

/* The settings' list k as integers (json_integer_value: 0 for anything
 * else), in their order: a new array of *n (caller frees). */
static int64_t *
axis_of(const json_t *set, const char *k, size_t *n)
{
  const json_t *a = json_object_get(set, k);
  *n = json_array_size(a);
  int64_t *v = tb_xcalloc(*n + 1, sizeof *v);
  for (size_t i = 0; i < *n; i++)
    v[i] = json_integer_value(json_array_get(a, i));
  return v;
}

/* The decode matrix's cells: the first decode cell of each context and
 * concurrency, among cells. */
struct grid {
  const json_t *cells;
  const int64_t *ctx, *conc;
  bool any_cl;
};

static void
valid_cell(struct tb_render_buf *b, const json_t *c)
{
  char a[64], t[64], e[64];
  fmt_thousands(tb_json_num(c, "total_tps"), 1, a, sizeof a);
  fmt_thousands(p50(c, "ttft_ms"), 0, t, sizeof t);
  pm(c, "total_tps", "total_tps_ci95", 1, e, sizeof e);
  tb_render_printf(b, " %s%s · %s ms TTFT |", a, e, t);
}

static void
grid_cell(struct tb_render_buf *b, void *ctx, size_t r, size_t k)
{
  struct grid *g = ctx;
  const json_t *hit = NULL, *c;
  size_t i;
  json_array_foreach (g->cells, i, c) {
    if (strcmp(str(c, "phase"), "decode") == 0 &&
        json_integer_value(json_object_get(c, "context")) == g->ctx[r] &&
        json_integer_value(json_object_get(c, "concurrency")) == g->conc[k]) {
      hit = c;
      break;
    }
  }
  tb_render_md_result_cell(b, hit, valid_cell, &g->any_cl);
}

/* The decode matrix over the settings' contexts and concurrencies, in
 * their order (tb_render_md_matrix); whether a cell was capacity-limited. */
static bool
decode_matrix(FILE *f, const json_t *cells, const json_t *set)
{
  size_t nr, nc;
  int64_t *rows = axis_of(set, "contexts", &nr), *cols = axis_of(set, "concurrency", &nc);
  struct grid g = { cells, rows, cols, false };
  const struct tb_render_matrix m = { rows, cols, nr, nc, grid_cell, &g };
  struct tb_render_buf b = { 0 };
  tb_render_md_matrix(&b, &m, "---");
  if (b.p != NULL)
    fwrite(b.p, 1, b.len, f);
  free(b.p);
  free(rows);
  free(cols);
  return g.any_cl;
}

/* A cell's row of "All measurements" (not a rate cell's). */
static void
all_row(FILE *f, const json_t *c)
{
  char a[64], b[64];
  bool pf = strcmp(str(c, "phase"), "prefill") == 0;
  const char *st = str(c, "status");
  fprintf(f, "| %s | %s | %" PRId64 " | %s", pf ? "Prefill" : "Sustained decode",
          str(c, "context_label"), (int64_t)json_integer_value(json_object_get(c, "concurrency")),
          status_word(st));
  /* Every row has the header's 14 cells; the reason of a cell not
   * measured goes in the Note column, never in a column of its own. */
  if (strcmp(st, "valid") != 0) {
    fprintf(f, " | — | — | — | — | — | — | — | — | — | %s |\n", str(c, "reason"));
    return;
  }
  char note[TB_RENDER_NOTE_MAX];
  char e[64];
  if (pf) {
    fmt_k(tb_json_num(c, "prompt_tps"), a, sizeof a);
    fmt_thousands(tb_json_num(c, "ttft_ms"), 0, b, sizeof b);
    pm(c, "prompt_tps", "prompt_tps_ci95", -1, e, sizeof e);
    fprintf(f, " | %s%s | — | %s ms | — | — | %" PRId64 " | — | — | %s | %s |\n", a, e, b,
            json_is_integer(json_object_get(c, "completed"))
              ? (int64_t)json_integer_value(json_object_get(c, "completed"))
              : 1,
            str(c, "prompt_tokens_source"), tb_render_cell_note(c, note, sizeof note));
    return;
  }
  char t1[32], t2[32], t3[32], t4[32], t5[32];
  fmt_thousands(tb_json_num(c, "total_tps"), 1, t1, sizeof t1);
  pm(c, "total_tps", "total_tps_ci95", 1, e, sizeof e);
  fmt_thousands(tb_json_num(c, "per_request_tps"), 1, t2, sizeof t2);
  fmt_thousands(p50(c, "ttft_ms"), 0, t3, sizeof t3);
  fmt_thousands(tb_json_num(c, "output_tokens"), 0, t4, sizeof t4);
  snprintf(t5, sizeof t5, "%.1f", p50(c, "tbt_ms"));
  fprintf(f, " | %s%s | %s | %s ms | %s ms | %.1f (%s) | %" PRId64 " | %s | %.1f s | %s | %s |\n",
          t1, e, t2, t3, t5, tb_json_num(c, "avg_active"), str(c, "avg_active_source"),
          (int64_t)json_integer_value(json_object_get(c, "completed")), t4,
          tb_json_num(c, "measured_s"), str(c, "token_source"),
          tb_render_cell_note(c, note, sizeof note));
}

void
tb_table_print(FILE *f, const json_t *doc)
{
  const json_t *cells = json_object_get(doc, "cells");
  const json_t *eng = json_object_get(doc, "engine");
  const json_t *model = json_object_get(doc, "model");
  const json_t *cap = json_object_get(doc, "capacity");
  const json_t *set = json_object_get(doc, "settings");
  char a[64], b[64];
  fprintf(f, "Speed test matrix\n%s · %s · %s\n", str(model, "served"), str(eng, "name"),
          str(eng, "version"));
  fprintf(f, "Endpoint %s · run %s · status %s\n", str(json_object_get(doc, "endpoint"), "url"),
          str(doc, "run_id"), str(doc, "status"));
  if (json_is_string(json_object_get(doc, "error")))
    fprintf(f, "Error: %s\n", str(doc, "error"));
  const json_t *kv = json_object_get(cap, "kv_budget_tokens");
  if (json_is_integer(kv)) {
    fmt_thousands((double)json_integer_value(kv), 0, a, sizeof a);
    fprintf(f, "KV budget %s tokens (%s)", a, str(cap, "source"));
  } else {
    const char *why = tb_json_str(json_object_get(cap, "unknown"), "kv_budget_tokens");
    fprintf(f, "KV budget unknown (%s: every cell run)", why ? why : "no capacity interface");
  }
  fprintf(f,
          " · decode test: fixed duration %.1f s · max output %" PRId64
          " tokens · prefill measured during decode warm-up\n",
          tb_json_num(set, "duration_s"),
          (int64_t)json_integer_value(json_object_get(set, "max_output")));
  if (json_is_string(json_object_get(doc, "launch_command"))) {
    char *red = tb_redact_command(str(doc, "launch_command"));
    fprintf(f, "Launch command: %s\n", red);
    free(red);
  }

  size_t i;
  const json_t *c;
  bool matrix = false;
  json_array_foreach (cells, i, c) {
    if (!tb_ratereport_is_rate(c))
      matrix = true;
  }
  if (!matrix && tb_ratereport_any(doc)) { /* rate cells alone */
    tb_ratereport_print(f, doc);
    tb_costview_print(f, doc);
    return;
  }
  fprintf(f, "\nPrefill\n| Context | Prompt tokens | Prompt tok/s | TTFT |\n"
             "|---|---|---|---|\n");
  json_array_foreach (cells, i, c) {
    if (strcmp(str(c, "phase"), "prefill") != 0)
      continue;
    if (strcmp(str(c, "status"), "valid") != 0) {
      fprintf(f, "| %s | — | %s | — |\n", str(c, "context_label"), status_word(str(c, "status")));
      continue;
    }
    fmt_thousands(tb_json_num(c, "prompt_tokens"), 0, a, sizeof a);
    fmt_k(tb_json_num(c, "prompt_tps"), b, sizeof b);
    char t[32], e[64];
    fmt_thousands(tb_json_num(c, "ttft_ms"), 0, t, sizeof t);
    pm(c, "prompt_tps", "prompt_tps_ci95", -1, e, sizeof e);
    fprintf(f, "| %s | %s | %s%s | %s ms |\n", str(c, "context_label"), a, b, e, t);
  }

  /* decode matrix */
  fprintf(f, "\nSustained decode\ntotal tok/s (± its 95%% interval) · rows are context "
             "length, columns are simultaneous requests\n");
  bool any_cl = decode_matrix(f, cells, set);
  fprintf(f, "%s\n", tb_render_oc_footnote(any_cl));

  fprintf(f, "\nAll measurements\nLatencies are medians. Total tok/s is "
             "output across all simultaneous requests.\n"
             "| Phase | Context | Requests at once | Status | Total tok/s | "
             "Per request tok/s | TTFT | Time between tokens | Average active "
             "requests | Completed requests | Output tokens | Measured for | "
             "Tokens from | Note |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
             "---|---|\n");
  json_array_foreach (cells, i, c) {
    if (!tb_ratereport_is_rate(c)) /* rate cells: below */
      all_row(f, c);
  }
  tb_ratereport_print(f, doc);
  tb_costview_print(f, doc);
}

void
tb_table_cell_line(FILE *f, const json_t *cell)
{
  const char *st = str(cell, "status");
  fprintf(f, "\r\033[K  %-8s %-5s x%-4" PRId64 " %s", str(cell, "phase"),
          str(cell, "context_label"),
          (int64_t)json_integer_value(json_object_get(cell, "concurrency")), status_word(st));
  if (strcmp(st, "valid") == 0 && strcmp(str(cell, "phase"), "decode") == 0) {
    char e[64];
    pm(cell, "total_tps", "total_tps_ci95", 1, e, sizeof e);
    fprintf(f, " %.1f%s tok/s, TTFT %.0f ms", tb_json_num(cell, "total_tps"), e,
            p50(cell, "ttft_ms"));
    tb_costview_cell_line(f, cell);
  } else if (strcmp(st, "valid") == 0 && tb_ratereport_is_rate(cell))
    tb_ratereport_cell_line(f, cell);
  else if (strcmp(st, "valid") == 0)
    fprintf(f, " TTFT %.0f ms", tb_json_num(cell, "ttft_ms"));
  else if (strcmp(st, "error") == 0)
    fprintf(f, ": %s", str(cell, "reason"));
  if (strcmp(st, "valid") == 0)
    tb_srvview_cell_line(f, cell);
  char why[600];
  if (tb_checks_failed_text(cell, why, sizeof why)[0] != '\0')
    fprintf(f, " [checks failed: %s]", why);
  fprintf(f, "\n");
}
