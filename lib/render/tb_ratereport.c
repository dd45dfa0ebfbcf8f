/*
 * tb_ratereport: see tb_ratereport.h.
 *
 * One table model for Markdown, HTML and the terminal: each row is a rate
 * cell, each column one figure (rows[] below), so the formats cannot drift
 * apart.  The sweep's curve plots its probes in the order of their rate:
 * goodput (requests/s) and attainment (% of requests meeting every SLO,
 * on its own 0-100 scale), with the target attainment as a dashed line and
 * the rate found marked.
 */
#include "render/tb_ratereport.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_cellview.h"
#include "render/tb_steadyview.h"
#include "render/tb_traceview.h"
#include "render/tb_svg.h"
#include "base/tb_json.h"

#define PROBES_MAX 64 /* a sweep's probes drawn, at most (tb_spec's max_probes) */

bool
tb_ratereport_is_rate(const json_t *c)
{
  const char *p = tb_json_str(c, "phase");
  return p != NULL && strcmp(p, "rate") == 0;
}

bool
tb_ratereport_any(const json_t *doc)
{
  if (json_is_object(json_object_get(doc, "sweep")))
    return true;
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (tb_ratereport_is_rate(c))
      return true;
  }
  return false;
}

/* ------------------------------------------------------------- the table */

enum fmt {
  F_RPS,
  F_PCT,
  F_MS,
  F_LAG,
  F_INT,
  F_STR,
  F_LOAD
};

static const struct col {
  const char *head, *key, *sub;
  enum fmt fmt;
} cols[] = {
  { "Cell", "concurrency", NULL, F_INT },
  { "Role", "role", NULL, F_STR },
  { "Load (req/s or users)", "rate_rps", NULL, F_LOAD },
  { "Arrival", "arrival", NULL, F_STR },
  { "Status", "status", NULL, F_STR },
  { "Achieved (req/s)", "achieved_rps", NULL, F_RPS },
  { "Goodput (req/s)", "goodput_rps", NULL, F_RPS },
  { "Meeting SLOs", "attainment", NULL, F_PCT },
  { "Requests", "requests", NULL, F_INT },
  { "Errors", "error_share", NULL, F_PCT },
  { "TTFT p50", "ttft_ms", "p50", F_MS },
  { "TTFT p99", "ttft_ms", "p99", F_MS },
  { "TPOT p50", "tpot_ms", "p50", F_MS },
  { "TPOT p99", "tpot_ms", "p99", F_MS },
  { "TBT p50", "tbt_ms", "p50", F_MS },
  { "E2E p50", "e2e_ms", "p50", F_MS },
  { "E2E p99", "e2e_ms", "p99", F_MS },
  { "Start lag p50", "schedule_lag_ms", "p50", F_LAG },
  { "Start lag p99", "schedule_lag_ms", "p99", F_LAG },
  { "Output tok/s", "total_tps", NULL, F_RPS },
};

/* A cell's value of column k as text (static buffer of the caller). */
static const char *
col_text(const json_t *c, const struct col *k, char *buf, size_t len)
{
  double v = k->sub ? tb_json_pct(c, k->key, k->sub) : tb_json_num(c, k->key);
  int64_t i;
  switch (k->fmt) {
  case F_STR: {
    const char *s = tb_json_str(c, k->key);
    if (s != NULL && strcmp(k->key, "status") == 0)
      return tb_render_status_text(s);
    return s ? s : "—";
  }
  case F_INT:
    if (!tb_json_int(c, k->key, &i))
      return "—";
    tb_render_fmt_int(i, buf, len);
    return buf;
  case F_PCT:
    if (!isfinite(v))
      return "—";
    snprintf(buf, len, "%.1f%%", v * 100);
    return buf;
  case F_LAG:
    if (!isfinite(v))
      return "—";
    snprintf(buf, len, "%.3f ms", v);
    return buf;
  case F_MS: tb_render_fmt_ms1(v, buf, len); return buf;
  case F_LOAD: /* open loop: the rate; closed loop: its users */
    if (tb_json_int(c, "users", &i)) {
      snprintf(buf, len, "%" PRId64 " users", i);
      return buf;
    }
    if (!isfinite(v))
      return "—";
    snprintf(buf, len, "%.2f", v);
    return buf;
  case F_RPS:
  default:
    if (!isfinite(v))
      return "—";
    snprintf(buf, len, "%.2f", v);
    return buf;
  }
}

static void
slo_text(const json_t *slo, char *buf, size_t len)
{
  size_t o = 0;
  buf[0] = '\0';
  const char *k;
  const json_t *v;
  json_object_foreach ((json_t *)slo, k, v) {
    if (!json_is_number(v) || o >= len)
      continue;
    o += (size_t)snprintf(buf + o, len - o, "%s%.40s ≤ %g", o ? ", " : "", k, json_number_value(v));
  }
  if (buf[0] == '\0')
    snprintf(buf, len, "none (every finished request counts)");
}

/* Whether the sweep varies the concurrency (closed-loop users) rather
 * than the rate, and its keys then: "<what>_concurrency", else
 * "<what>_rps". */
static bool
sweep_closed(const json_t *sw)
{
  const char *over = tb_json_str(sw, "over");
  return over != NULL && strcmp(over, "concurrency") == 0;
}

static double
sweep_num(const json_t *sw, const char *what)
{
  char k[48];
  snprintf(k, sizeof k, "%s_%s", what, sweep_closed(sw) ? "concurrency" : "rps");
  return tb_json_num(sw, k);
}

/* A probe's value: its rate, or its users. */
static double
probe_x(const json_t *sw, const json_t *pr)
{
  return tb_json_num(pr, sweep_closed(sw) ? "users" : "rate_rps");
}

/* The sweep's summary sentence. */
static void
sweep_text(const json_t *sw, char *buf, size_t len)
{
  char slo[256];
  slo_text(json_object_get(sw, "slo"), slo, sizeof slo);
  bool closed = sweep_closed(sw);
  const char *unit = closed ? "users" : "req/s";
  double found = sweep_num(sw, "found"), fails = sweep_num(sw, "fails_at");
  const char *outcome = tb_json_str(sw, "outcome");
  char f[64], g[64];
  if (isfinite(found))
    snprintf(f, sizeof f, "%.3g %s", found, unit);
  else
    snprintf(f, sizeof f, "none (even %.3g %s misses)", sweep_num(sw, "min"), unit);
  if (isfinite(fails))
    snprintf(g, sizeof g, "; %.3g %s misses", fails, unit);
  else
    g[0] = '\0';
  snprintf(buf, len,
           "Highest %s with at least %.3g%% of requests meeting %s: %s%s "
           "(step %.3g %s, %s).",
           closed ? "concurrency" : "rate", tb_json_num(sw, "attainment_pct"), slo, f, g,
           sweep_num(sw, "step"), unit, outcome ? outcome : "—");
}

/* The turns of a conversation cell: per turn, its requests, TTFT and the
 * share of its prompt the server's cache held (md or html rows). */
static void
turns_table(struct tb_render_buf *b, const json_t *c, bool html)
{
  static const char *const heads[] = { "Turn",
                                       "Requests",
                                       "Completed",
                                       "TTFT p50",
                                       "TTFT p99",
                                       "Prompt tokens (mean)",
                                       "Cached by the server" };
  tb_render_puts(b, html ? "<table class=\"all\"><tr>" : "\n|");
  for (size_t k = 0; k < TB_ARRAY_LEN(heads); k++)
    tb_render_printf(b, html ? "<th>%s</th>" : " %s |", heads[k]);
  tb_render_puts(b, html ? "</tr>\n" : "\n|");
  if (!html) {
    for (size_t k = 0; k < TB_ARRAY_LEN(heads); k++)
      tb_render_puts(b, "---|");
    tb_render_puts(b, "\n");
  }
  size_t i;
  const json_t *t;
  json_array_foreach (json_object_get(c, "turns"), i, t) {
    char v[7][32];
    int64_t n;
    snprintf(v[0], sizeof v[0], "%zu", i + 1);
    for (int k = 1; k <= 2; k++) {
      if (tb_json_int(t, k == 1 ? "requests" : "completed", &n))
        tb_render_fmt_int(n, v[k], sizeof v[k]);
      else
        snprintf(v[k], sizeof v[k], "—");
    }
    tb_render_fmt_ms1(tb_json_pct(t, "ttft_ms", "p50"), v[3], sizeof v[3]);
    tb_render_fmt_ms1(tb_json_pct(t, "ttft_ms", "p99"), v[4], sizeof v[4]);
    double pm = tb_json_num(t, "prompt_tokens_mean"), cp = tb_json_num(t, "cached_pct");
    snprintf(v[5], sizeof v[5], isfinite(pm) ? "%.0f" : "—", pm);
    snprintf(v[6], sizeof v[6], isfinite(cp) ? "%.1f%%" : "—", cp);
    tb_render_puts(b, html ? "<tr>" : "|");
    for (size_t k = 0; k < 7; k++)
      tb_render_printf(b, html ? "<td>%s</td>" : " %s |", v[k]);
    tb_render_puts(b, html ? "</tr>\n" : "\n");
  }
  tb_render_puts(b, html ? "</table>\n" : "\n");
}

/* The conversation cells' sections: each cell's conversations and turns. */
static void
conversations(struct tb_render_buf *b, const json_t *doc, bool html)
{
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    const json_t *cv = json_object_get(c, "conversations");
    if (!tb_ratereport_is_rate(c) || !json_is_object(cv))
      continue;
    int64_t cell = 0, st = 0, done = 0, ab = 0, dr = 0;
    (void)tb_json_int(c, "concurrency", &cell);
    (void)tb_json_int(cv, "started", &st);
    (void)tb_json_int(cv, "completed", &done);
    (void)tb_json_int(cv, "abandoned", &ab);
    (void)tb_json_int(cv, "dropped", &dr);
    tb_render_printf(b,
                     html ? "<h3>Cell %" PRId64 ": conversations</h3>\n<p>"
                          : "\n### Cell %" PRId64 ": conversations\n\n",
                     cell);
    tb_render_printf(b,
                     "%" PRId64 " started, %" PRId64 " completed every turn, %" PRId64
                     " abandoned after a failed turn, %" PRId64 " dropped.",
                     st, done, ab, dr);
    tb_render_puts(b, html ? "</p>\n" : "\n");
    turns_table(b, c, html);
  }
}

/* A cell's note: its reason or first error, and its failed self-checks
 * (tb_cellview); NULL when none. */
static const char *
cell_note(const json_t *c, char *buf, size_t len)
{
  const char *why = tb_json_str(c, "reason");
  if (why == NULL)
    why = tb_json_str(c, "first_error");
  return tb_cellview_note(c, why, buf, len);
}

/* The rate cells' server view and checks (tb_cellview): the load (rate or
 * users) as the row's label, the cell's number beside it. */
static void
cellview_rows(struct tb_render_buf *b, const json_t *doc,
              void (*row)(struct tb_render_buf *, const char *, int64_t, const json_t *))
{
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    int64_t n = 0;
    if (!tb_ratereport_is_rate(c) || !tb_cellview_has(c))
      continue;
    (void)tb_json_int(c, "concurrency", &n);
    char lab[32];
    row(b, col_text(c, &cols[2], lab, sizeof lab), n, c); /* the Load column */
  }
}

static bool
any_cellview(const json_t *doc)
{
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (tb_ratereport_is_rate(c) && tb_cellview_has(c))
      return true;
  }
  return false;
}

/* ------------------------------------------------------------- markdown */

void
tb_ratereport_md(struct tb_render_buf *b, const json_t *doc)
{
  if (!tb_ratereport_any(doc))
    return;
  char buf[64];
  const json_t *cells = json_object_get(doc, "cells");
  tb_render_puts(b, "\n## Rate cells\n\nRequests arrive at the rate on a seeded schedule; "
                    "goodput counts those meeting every SLO; start lag is actual minus "
                    "scheduled start.\n\n|");
  for (size_t k = 0; k < TB_ARRAY_LEN(cols); k++)
    tb_render_printf(b, " %s |", cols[k].head);
  tb_render_puts(b, "\n|");
  for (size_t k = 0; k < TB_ARRAY_LEN(cols); k++)
    tb_render_puts(b, "---|");
  tb_render_puts(b, "\n");
  size_t i;
  const json_t *c;
  json_array_foreach (cells, i, c) {
    if (!tb_ratereport_is_rate(c))
      continue;
    tb_render_puts(b, "|");
    for (size_t k = 0; k < TB_ARRAY_LEN(cols); k++) {
      tb_render_puts(b, " ");
      tb_render_md(b, col_text(c, &cols[k], buf, sizeof buf));
      tb_render_puts(b, " |");
    }
    tb_render_puts(b, "\n");
    char note[800];
    const char *why = cell_note(c, note, sizeof note);
    if (why != NULL) {
      tb_render_printf(b, "\nCell %s: ", col_text(c, &cols[0], buf, sizeof buf));
      tb_render_md(b, why);
      tb_render_puts(b, "\n\n");
    }
  }
  conversations(b, doc, false);
  tb_traceview_md(b, doc);
  tb_steadyview_md(b, doc);
  if (any_cellview(doc)) {
    tb_cellview_rate_md_head(b);
    cellview_rows(b, doc, tb_cellview_md_row);
  }
  const json_t *sw = json_object_get(doc, "sweep");
  if (!json_is_object(sw))
    return;
  char line[512];
  sweep_text(sw, line, sizeof line);
  tb_render_puts(b, "\n## Sweep\n\n");
  tb_render_md(b, line);
  tb_render_printf(b,
                   "\n\n| Probe | %s | Meeting SLOs | Goodput (req/s) | Passes |\n"
                   "|---|---|---|---|---|\n",
                   sweep_closed(sw) ? "Users" : "Rate (req/s)");
  json_array_foreach (json_object_get(sw, "probes"), i, c) {
    int64_t cell = 0;
    (void)tb_json_int(c, "cell", &cell);
    const json_t *rc = NULL, *x;
    size_t j;
    json_array_foreach (cells, j, x) {
      int64_t n;
      if (tb_ratereport_is_rate(x) && tb_json_int(x, "concurrency", &n) && n == cell)
        rc = x;
    }
    double att = tb_json_num(c, "attainment");
    tb_render_printf(b, "| %zu | %.3g | ", i + 1, probe_x(sw, c));
    if (isfinite(att))
      tb_render_printf(b, "%.1f%%", att * 100);
    else
      tb_render_puts(b, "—");
    tb_render_printf(b, " | %s | %s |\n", col_text(rc, &cols[6], buf, sizeof buf),
                     json_is_true(json_object_get(c, "pass")) ? "yes" : "no");
  }
}

void
tb_ratereport_print(FILE *f, const json_t *doc)
{
  struct tb_render_buf b = { 0 };
  tb_ratereport_md(&b, doc);
  if (b.p != NULL)
    fputs(b.p, f);
  free(b.p);
}

void
tb_ratereport_cell_line(FILE *f, const json_t *c)
{
  int64_t users;
  char rate[32], ach[32], good[32], att[32], ttft[32], lag[32];
  const json_t *trace = json_object_get(c, "trace");
  if (tb_json_int(c, "users", &users))
    fprintf(f, " %" PRId64 " users", users);
  else if (json_is_object(trace))
    fprintf(f, " trace %s", tb_json_str(trace, "format") ? tb_json_str(trace, "format") : "");
  else {
    tb_render_fmt_num(tb_json_num(c, "rate_rps"), 2, " req/s", rate, sizeof rate);
    fprintf(f, " %s", rate);
  }
  /* a figure the cell lacks (an error cell's) reads as a dash, never "nan" */
  tb_render_fmt_num(tb_json_num(c, "achieved_rps"), 2, "", ach, sizeof ach);
  tb_render_fmt_num(tb_json_num(c, "goodput_rps"), 2, "", good, sizeof good);
  tb_render_fmt_num(tb_json_num(c, "attainment") * 100, 1, "%", att, sizeof att);
  tb_render_fmt_num(tb_json_pct(c, "ttft_ms", "p50"), 1, " ms", ttft, sizeof ttft);
  tb_render_fmt_num(tb_json_pct(c, "schedule_lag_ms", "p99"), 3, " ms", lag, sizeof lag);
  fprintf(f, ": achieved %s, goodput %s (%s meet SLOs), TTFT p50 %s, start lag p99 %s", ach, good,
          att, ttft, lag);
  tb_steadyview_cell_line(f, c);
}

/* ------------------------------------------------------------------ html */

struct pt {
  double rate, goodput, att;
  bool pass;
};

static int
cmp_pt(const void *a, const void *b)
{
  double x = ((const struct pt *)a)->rate, y = ((const struct pt *)b)->rate;
  return (x > y) - (x < y);
}

/* The sweep's probes that have a rate (or users), into p (PROBES_MAX),
 * in the order of their rate; how many. */
static size_t
sweep_points(const json_t *doc, const json_t *sw, struct pt *p)
{
  size_t n = 0;
  size_t i;
  const json_t *pr;
  json_array_foreach (json_object_get(sw, "probes"), i, pr) {
    if (n >= PROBES_MAX)
      break;
    int64_t cell = 0;
    (void)tb_json_int(pr, "cell", &cell);
    double g = NAN;
    size_t j;
    const json_t *x;
    json_array_foreach (json_object_get(doc, "cells"), j, x) {
      int64_t k;
      if (tb_ratereport_is_rate(x) && tb_json_int(x, "concurrency", &k) && k == cell)
        g = tb_json_num(x, "goodput_rps");
    }
    double r = probe_x(sw, pr), a = tb_json_num(pr, "attainment");
    if (!isfinite(r))
      continue;
    p[n++] = (struct pt){ r, isfinite(g) ? g : 0, isfinite(a) ? a : 0,
                          json_is_true(json_object_get(pr, "pass")) };
  }
  qsort(p, n, sizeof p[0], cmp_pt);
  return n;
}

/* The sweep's curve: rate on x; goodput (left axis) and attainment
 * (0-100%, right axis) as two polylines. */
static void
sweep_svg(struct tb_render_buf *b, const json_t *doc, const json_t *sw)
{
  struct pt p[PROBES_MAX];
  size_t n = sweep_points(doc, sw, p);
  if (n == 0)
    return;
  bool closed = sweep_closed(sw);
  double xmax = p[n - 1].rate, ymax = 0;
  for (size_t k = 0; k < n; k++)
    ymax = fmax(ymax, closed ? p[k].goodput : fmax(p[k].goodput, p[k].rate));
  if (!(xmax > 0))
    xmax = 1;
  if (!(ymax > 0))
    ymax = 1;
  const double W = 560, H = 260, L = 56, R = 56, T = 16, B = 40;
  double pw = W - L - R, ph = H - T - B;
  const struct tb_svg_scale xs = { 0, xmax, L, L + pw, false };
  const struct tb_svg_scale gs = { 0, ymax, T + ph, T, false }; /* goodput */
  const struct tb_svg_scale as = { 0, 1, T + ph, T, false };    /* attainment */
  const char *unit = closed ? "users" : "req/s";
  tb_render_printf(b,
                   "<figure class=\"chart\"><svg viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
                   "height=\"%.0f\" role=\"img\" aria-label=\"sweep: rate against goodput "
                   "and attainment\">\n",
                   W, H, W, H);
  tb_render_printf(b,
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
                   L, T + ph, L + pw, T + ph, L, T, L, T + ph);
  double target = tb_json_num(sw, "attainment_pct") / 100;
  if (isfinite(target))
    tb_render_printf(b,
                     "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c33\" "
                     "stroke-dasharray=\"4 3\"/>\n",
                     L, tb_svg_at(&as, target), L + pw, tb_svg_at(&as, target));
  struct tb_svg_poly gl, al;
  tb_svg_poly_begin(&gl, b, "#1f6feb", 2, true);
  for (size_t k = 0; k < n; k++)
    tb_svg_poly_pt(&gl, tb_svg_at(&xs, p[k].rate), tb_svg_at(&gs, p[k].goodput));
  tb_svg_poly_end(&gl);
  tb_render_puts(b, "\n");
  tb_svg_poly_begin(&al, b, "#2da44e", 2, true);
  for (size_t k = 0; k < n; k++)
    tb_svg_poly_pt(&al, tb_svg_at(&xs, p[k].rate), tb_svg_at(&as, p[k].att));
  tb_svg_poly_end(&al);
  tb_render_puts(b, "\n");
  for (size_t k = 0; k < n; k++) {
    char title[160];
    snprintf(title, sizeof title, "%.3g %s: goodput %.3g, %.1f%% meet SLOs", p[k].rate, unit,
             p[k].goodput, p[k].att * 100);
    tb_svg_dot(b, tb_svg_at(&xs, p[k].rate), tb_svg_at(&as, p[k].att),
               p[k].pass ? "#2da44e" : "#c33", title);
    tb_render_puts(b, "\n");
  }
  double found = sweep_num(sw, "found");
  if (isfinite(found) && found <= xmax)
    tb_render_printf(b,
                     "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" "
                     "stroke-dasharray=\"2 2\"/>\n",
                     tb_svg_at(&xs, found), T, tb_svg_at(&xs, found), T + ph);
  tb_render_printf(b,
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">0</text>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.3g "
                   "%s</text>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.3g</text>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">100%%</text>\n",
                   L - 4, T + ph + 14, L + pw, T + ph + 14, xmax, unit, L - 4, T + 10, ymax,
                   L + pw + 4, T + 10);
  const char *axis = closed ? "concurrency (users)" : "arrival rate (req/s)";
  tb_render_printf(b,
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">"
                   "%s · blue: goodput (req/s) · green: share meeting "
                   "SLOs · red dashes: target</text>\n",
                   L + pw / 2, H - 8, axis);
  tb_render_printf(b,
                   "</svg><figcaption>Sweep: goodput and SLO attainment by %s"
                   "</figcaption></figure>\n",
                   axis);
}

void
tb_ratereport_html(struct tb_render_buf *b, const json_t *doc)
{
  if (!tb_ratereport_any(doc))
    return;
  char buf[64];
  tb_render_puts(b, "<section id=\"rate\"><h2>Rate cells</h2>\n<p>Requests arrive at the rate "
                    "on a seeded schedule; goodput counts those meeting every SLO; start lag "
                    "is actual minus scheduled start.</p>\n<table class=\"all\"><tr>");
  for (size_t k = 0; k < TB_ARRAY_LEN(cols); k++) {
    tb_render_puts(b, "<th>");
    tb_render_html(b, cols[k].head);
    tb_render_puts(b, "</th>");
  }
  tb_render_puts(b, "<th>Note</th></tr>\n");
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (!tb_ratereport_is_rate(c))
      continue;
    bool flagged = json_is_false(json_object_get(json_object_get(c, "checks"), "ok"));
    tb_render_puts(b, flagged ? "<tr class=\"flagged\">" : "<tr>");
    for (size_t k = 0; k < TB_ARRAY_LEN(cols); k++) {
      tb_render_puts(b, "<td>");
      tb_render_html(b, col_text(c, &cols[k], buf, sizeof buf));
      tb_render_puts(b, "</td>");
    }
    char note[800];
    const char *why = cell_note(c, note, sizeof note);
    tb_render_puts(b, "<td>");
    tb_render_html(b, why);
    tb_render_puts(b, "</td></tr>\n");
  }
  tb_render_puts(b, "</table>\n");
  conversations(b, doc, true);
  tb_traceview_html(b, doc);
  tb_steadyview_html(b, doc);
  if (any_cellview(doc)) {
    tb_cellview_rate_html_head(b);
    cellview_rows(b, doc, tb_cellview_html_cell);
    tb_cellview_html_end(b);
  }
  const json_t *sw = json_object_get(doc, "sweep");
  if (json_is_object(sw)) {
    char line[512];
    sweep_text(sw, line, sizeof line);
    tb_render_puts(b, "<h2 id=\"sweep\">Sweep</h2>\n<p>");
    tb_render_html(b, line);
    tb_render_puts(b, "</p>\n");
    sweep_svg(b, doc, sw);
  }
  tb_render_puts(b, "</section>\n");
}
