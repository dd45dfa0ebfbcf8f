/*
 * tb_report: renderers from a result document to HTML, Markdown, CSV and
 * JSON.  See tb_report.h for the contract.
 *
 * Shape of the code: the capped buffer, escapers, number formats and page
 * scaffolding come from tb_render (shared with tb_cmpreport and tb_table).
 * Here: a "view" of a result document (the sorted axes of
 * the matrix and a grid of borrowed cell pointers, built once with every
 * member type-checked), then one function per format.  Nothing read from a
 * document is trusted: strings are escaped where they are written, numbers
 * are checked finite, arrays and axes are capped.
 */
#include "render/tb_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "render/tb_cellview.h"
#include "base/tb_json.h"
#include "render/tb_ratereport.h"
#include "base/tb_redact.h"
#include "render/tb_render.h"
#include "result/tb_checks.h"

/* ------------------------------------------------------------ JSON access */

/* ------------------------------------------------------------------- view */

static void
axis_from(struct tb_render_axis *a, const json_t *arr,
          void (*add)(struct tb_render_axis *, int64_t))
{
  size_t i;
  const json_t *v;
  if (!json_is_array(arr))
    return;
  json_array_foreach(arr, i, v) {
    if (i >= 4 * TB_RENDER_MAX_AXIS)
      break;
    if (json_is_integer(v))
      add(a, json_integer_value(v));
  }
}

struct view {
  const json_t *doc;
  const char *status;
  struct tb_render_axis pctx, dctx, conc;
  const json_t *pcell[TB_RENDER_MAX_AXIS];
  const json_t **grid; /* dctx.n x conc.n, row-major */
  size_t ncells;       /* cells considered */
  size_t ndropped;     /* cells not shown (malformed, over caps) */
  size_t nvalid, nerror, nover, nskipped;
  double max_tps, max_prompt_tps;
};

static const char *
cell_status(const json_t *c)
{
  const char *s = tb_json_str(c, "status");
  return s ? s : "";
}

static bool
st_is(const json_t *c, const char *s)
{
  return c != NULL && strcmp(cell_status(c), s) == 0;
}

static void
view_build(struct view *v, const json_t *doc)
{
  memset(v, 0, sizeof *v);
  v->doc = doc;
  v->status = tb_json_str(doc, "status");
  /* The API's document of an unfinished job carries its state ("running",
   * "queued") beside a status of "partial": it is a run still going. */
  const char *state = tb_json_str(doc, "state");
  if (state != NULL && (strcmp(state, "running") == 0 || strcmp(state, "queued") == 0))
    v->status = "running";
  const json_t *st = json_object_get(doc, "settings");
  axis_from(&v->dctx, json_object_get(st, "contexts"), tb_render_axis_add_ctx);
  axis_from(&v->conc, json_object_get(st, "concurrency"), tb_render_axis_add);
  axis_from(&v->pctx, json_object_get(st, "prefill_contexts"), tb_render_axis_add);
  const json_t *cells = json_object_get(doc, "cells");
  size_t n = json_is_array(cells) ? json_array_size(cells) : 0;
  if (n > TB_REPORT_MAX_CELLS) {
    v->ndropped += n - TB_REPORT_MAX_CELLS;
    n = TB_REPORT_MAX_CELLS;
  }
  v->ncells = n;
  for (size_t i = 0; i < n; i++) {
    const json_t *c = json_array_get(cells, i);
    int64_t ctx, conc = 1;
    int ph = tb_render_cell_phase(c);
    if (ph < 0 || !tb_json_int(c, "context", &ctx))
      continue;
    if (ph == 0)
      tb_render_axis_add(&v->pctx, ctx);
    else if (tb_json_int(c, "concurrency", &conc)) {
      tb_render_axis_add_ctx(&v->dctx, ctx);
      tb_render_axis_add(&v->conc, conc);
    }
  }
  v->grid = tb_xcalloc(v->dctx.n * v->conc.n + 1, sizeof *v->grid);
  for (size_t i = 0; i < n; i++) {
    const json_t *c = json_array_get(cells, i);
    if (tb_ratereport_is_rate(c))
      continue; /* tb_ratereport's */
    int64_t ctx, conc = 1;
    int ph = tb_render_cell_phase(c);
    int a = -1, b = 0;
    if (ph >= 0 && tb_json_int(c, "context", &ctx)) {
      if (ph == 0)
        a = tb_render_axis_find(&v->pctx, ctx);
      else if (tb_json_int(c, "concurrency", &conc)) {
        a = tb_render_axis_find(&v->dctx, ctx);
        b = tb_render_axis_find(&v->conc, conc);
      }
    }
    const json_t **slot = NULL;
    if (a >= 0 && b >= 0)
      slot = ph == 0 ? &v->pcell[a] : &v->grid[(size_t)a * v->conc.n + (size_t)b];
    if (slot == NULL || *slot != NULL) {
      v->ndropped++;
      continue;
    }
    *slot = c;
    if (st_is(c, "valid"))
      v->nvalid++;
    else if (st_is(c, "error"))
      v->nerror++;
    else if (st_is(c, "over_capacity"))
      v->nover++;
    else
      v->nskipped++;
    double t = tb_json_num(c, ph == 0 ? "prompt_tps" : "total_tps");
    if (st_is(c, "valid") && isfinite(t) && t > 0) {
      if (ph == 0 && t > v->max_prompt_tps)
        v->max_prompt_tps = t;
      if (ph == 1 && t > v->max_tps)
        v->max_tps = t;
    }
  }
}

static void
view_free(struct view *v)
{
  free(v->grid);
  v->grid = NULL;
}

static const json_t *
grid_at(const struct view *v, size_t r, size_t c)
{
  return v->grid[r * v->conc.n + c];
}

static const char *
status_word(const json_t *c)
{
  return tb_render_status_text(cell_status(c));
}

/* Figures of a cell as the "All measurements" table shows them. */
struct figs {
  char total[96], per[48], ttft[112], tbt[112], active[48], completed[48],
      out[48], measured[48];
};

/* " ± <half>" of a cell's total tok/s, "" without an interval. */
static void
pm_text(const json_t *cell, char *buf, size_t len)
{
  char h[48];
  double half = tb_render_ci_half(cell, "total_tps", "total_tps_ci95");
  buf[0] = '\0';
  if (!isfinite(half))
    return;
  tb_render_fmt_tps(half, h, sizeof h);
  snprintf(buf, len, " \xc2\xb1 %s", h);
}

/* "<median> (<lo>–<hi>)" of a latency with its interval (ci), ms. */
static void
latency_fig(const json_t *c, const char *k, const char *ci,
            void (*fmt)(double, char *, size_t), char *buf, size_t len)
{
  char m[48], r[64];
  fmt(tb_json_pct(c, k, "p50"), m, sizeof m);
  tb_render_fmt_range(c, ci, fmt, "", r, sizeof r);
  snprintf(buf, len, "%s%s%s", m, r[0] ? " " : "", r);
}

static void
cell_figs(const json_t *c, int phase, struct figs *f)
{
  int64_t iv;
  bool valid = st_is(c, "valid");
  snprintf(f->total, sizeof f->total, TB_RENDER_DASH);
  snprintf(f->per, sizeof f->per, TB_RENDER_DASH);
  snprintf(f->ttft, sizeof f->ttft, TB_RENDER_DASH);
  snprintf(f->tbt, sizeof f->tbt, TB_RENDER_DASH);
  snprintf(f->active, sizeof f->active, TB_RENDER_DASH);
  snprintf(f->completed, sizeof f->completed, TB_RENDER_DASH);
  snprintf(f->out, sizeof f->out, TB_RENDER_DASH);
  snprintf(f->measured, sizeof f->measured, TB_RENDER_DASH);
  if (!valid)
    return;
  if (phase == 0) {
    tb_render_fmt_pm(tb_json_num(c, "prompt_tps"),
                     tb_render_ci_half(c, "prompt_tps", "prompt_tps_ci95"),
                     tb_render_fmt_tps_short, f->total, sizeof f->total);
    tb_render_fmt_ms(tb_json_pct(c, "ttft_ms", "p50"), f->ttft, sizeof f->ttft);
    if (tb_json_int(c, "completed", &iv))
      tb_render_fmt_int(iv, f->completed, sizeof f->completed);
    else
      snprintf(f->completed, sizeof f->completed, "1");
    return;
  }
  tb_render_fmt_pm(tb_json_num(c, "total_tps"), tb_render_ci_half(c, "total_tps", "total_tps_ci95"),
                   tb_render_fmt_tps, f->total, sizeof f->total);
  tb_render_fmt_tps(tb_json_num(c, "per_request_tps"), f->per, sizeof f->per);
  latency_fig(c, "ttft_ms", "ttft_p50_ci95", tb_render_fmt_ms, f->ttft, sizeof f->ttft);
  latency_fig(c, "tbt_ms", "tbt_p50_ci95", tb_render_fmt_ms1, f->tbt, sizeof f->tbt);
  tb_render_fmt_1(tb_json_num(c, "avg_active"), f->active, sizeof f->active);
  if (tb_json_int(c, "completed", &iv))
    tb_render_fmt_int(iv, f->completed, sizeof f->completed);
  if (tb_json_int(c, "output_tokens", &iv))
    tb_render_fmt_int(iv, f->out, sizeof f->out);
  tb_render_fmt_secs(tb_json_num(c, "measured_s"), f->measured, sizeof f->measured);
}

/* The note shown beside a cell (tb_render_cell_note; a static buffer: the
 * renderers use one note at a time). */
static const char *
cell_note(const json_t *c)
{
  static _Thread_local char buf[TB_RENDER_NOTE_MAX];
  return tb_render_cell_note(c, buf, sizeof buf);
}

/* The note with a flagged cell's failed self-checks (tb_cellview). */
#define NOTE_MAX 800

static const char *
cell_note_full(const json_t *c, char *buf, size_t len)
{
  return tb_cellview_note(c, cell_note(c), buf, len);
}

/* True when the cell's self-checks failed; why: their reasons. */
static bool
cell_flagged(const json_t *c, char *why, size_t len)
{
  return tb_checks_failed_text(c, why, len)[0] != '\0';
}

/* True when some decode cell has a server view or checks to show. */
static bool
any_cellview(const struct view *v)
{
  for (size_t i = 0; i < v->dctx.n * v->conc.n; i++)
    if (v->grid[i] != NULL && tb_cellview_has(v->grid[i]))
      return true;
  return false;
}

/* ------------------------------------------------------- header contents */

struct field {
  const char *key, *label;
};

static const struct field hw_fields[] = {
  { "type", "Type" },         { "gpu", "GPU" },       { "gpu_count", "GPU count" },
  { "count", "GPU count" },
  { "vram_gb", "VRAM" },      { "cpu", "CPU" },       { "os", "OS" },
  { "driver", "Driver" },     { "interconnect", "Interconnect" },
};
static const struct field eng_fields[] = {
  { "name", "Engine" },           { "version", "Version" },
  { "quantization", "Quantization" }, { "backend", "Backend" },
  { "repository", "Repository" }, { "build", "Build" },
  { "commit", "Commit" },
};

#define HEADER_EXTRA_MAX 32u

/* A scalar member as text (static buffer in the caller); NULL otherwise. */
static const char *
scalar_text(const json_t *v, char *buf, size_t len)
{
  if (json_is_string(v))
    return json_string_value(v);
  if (json_is_integer(v)) {
    tb_render_fmt_int(json_integer_value(v), buf, len);
    return buf;
  }
  if (json_is_real(v) && isfinite(json_real_value(v))) {
    snprintf(buf, len, "%g", json_real_value(v));
    return buf;
  }
  if (json_is_boolean(v))
    return json_is_true(v) ? "yes" : "no";
  return NULL;
}

/* One (label, value) line of a header section; emit() writes it in the
 * format at hand. */
typedef void (*emit_fn)(struct tb_render_buf *b, const char *label, const char *value);

static void
vram_text(const json_t *hw, char *buf, size_t len)
{
  double g = tb_json_num(hw, "vram_gb");
  int64_t n = 0;
  buf[0] = '\0';
  if (!isfinite(g) || g <= 0 || g > 1e9)
    return;
  if ((tb_json_int(hw, "gpu_count", &n) || tb_json_int(hw, "count", &n)) && n > 1 && n < 100000)
    snprintf(buf, len, "%g GB (%" PRId64 " " TB_RENDER_TIMES " %g GB)", g * (double)n, n, g);
  else
    snprintf(buf, len, "%g GB", g);
}

static void
section_fields(struct tb_render_buf *b, const json_t *obj, const struct field *f, size_t nf,
               emit_fn emit)
{
  char buf[96];
  if (!json_is_object(obj))
    return;
  for (size_t i = 0; i < nf; i++) {
    const json_t *v = json_object_get(obj, f[i].key);
    if (strcmp(f[i].key, "vram_gb") == 0) {
      vram_text(obj, buf, sizeof buf);
      if (buf[0])
        emit(b, f[i].label, buf);
      continue;
    }
    const char *t = scalar_text(v, buf, sizeof buf);
    if (t != NULL && *t)
      emit(b, f[i].label, t);
  }
  /* Members we have no label for, as they are (keys escaped like values). */
  const char *k;
  const json_t *v;
  size_t extra = 0;
  json_object_foreach((json_t *)obj, k, v) {
    bool known = false;
    for (size_t i = 0; i < nf && !known; i++)
      known = strcmp(k, f[i].key) == 0;
    if (known)
      continue;
    const char *t = scalar_text(v, buf, sizeof buf);
    if (t == NULL || !*t)
      continue;
    if (++extra > HEADER_EXTRA_MAX)
      break;
    emit(b, k, t);
  }
}

static const char *
decode_test_text(const char *s)
{
  if (s == NULL)
    return NULL;
  if (strcmp(s, "fixed_duration") == 0)
    return "Fixed duration";
  if (strcmp(s, "request_count") == 0)
    return "Request count";
  return s;
}

static const char *
prefill_mode_text(const char *s)
{
  if (s == NULL)
    return NULL;
  if (strcmp(s, "decode_warmup") == 0 || strcmp(s, "integrated_decode_scout") == 0)
    return "Measured during decode warm-up";
  if (strcmp(s, "standalone_cold") == 0)
    return "Standalone cold requests";
  if (strcmp(s, "skipped") == 0 || strcmp(s, "none") == 0)
    return "Not measured";
  return s;
}

static void
section_run(struct tb_render_buf *b, const struct view *v, emit_fn emit)
{
  const json_t *d = v->doc;
  const json_t *model = json_object_get(d, "model");
  const json_t *st = json_object_get(d, "settings");
  const json_t *cap = json_object_get(d, "capacity");
  const json_t *ep = json_object_get(d, "endpoint");
  const json_t *imp = json_object_get(d, "imported_from");
  char buf[160], n1[48];
  int64_t iv;
  const char *s;
  if ((s = tb_json_str(model, "served")) != NULL)
    emit(b, "Served model", s);
  if ((s = tb_json_str(model, "name")) != NULL)
    emit(b, "Model", s);
  if ((s = tb_json_str(model, "revision")) != NULL)
    emit(b, "Revision", s);
  if (tb_json_int(model, "max_model_len", &iv)) {
    tb_render_fmt_int(iv, n1, sizeof n1);
    snprintf(buf, sizeof buf, "%s tokens", n1);
    emit(b, "Max model length", buf);
  }
  if (json_is_object(imp) && (s = tb_json_str(imp, "tool")) != NULL) {
    const char *ver = tb_json_str(imp, "version");
    char *t = tb_xasprintf("%s%s%s (imported)", s, ver ? " v" : "", ver ? ver : "");
    emit(b, "Benchmark tool", t);
    free(t);
  } else if ((s = tb_json_str(d, "tokbench_version")) != NULL) {
    char *t = tb_xasprintf("tokbench v%s", s);
    emit(b, "Benchmark tool", t);
    free(t);
  }
  if ((s = decode_test_text(tb_json_str(st, "decode_test"))) != NULL)
    emit(b, "Decode test", s);
  if ((s = prefill_mode_text(tb_json_str(st, "prefill_mode"))) != NULL)
    emit(b, "Prefill mode", s);
  double dur = tb_json_num(st, "duration_s");
  if (isfinite(dur)) {
    snprintf(buf, sizeof buf, "%g s", dur);
    emit(b, "Time per measurement", buf);
  }
  if (tb_json_int(st, "max_output", &iv)) {
    tb_render_fmt_int(iv, n1, sizeof n1);
    snprintf(buf, sizeof buf, "%s tokens", n1);
    emit(b, "Max output", buf);
  }
  if (tb_json_int(cap, "kv_budget_tokens", &iv)) {
    tb_render_fmt_int(iv, n1, sizeof n1);
    const char *src = tb_json_str(cap, "source");
    if (src != NULL && strcmp(src, "metrics") == 0)
      src = "from /metrics";
    else if (src != NULL && strcmp(src, "server_info") == 0)
      src = "from the server's info";
    else if (src != NULL && strcmp(src, "override") == 0)
      src = "set by the job";
    char *t = tb_xasprintf("%s tokens%s%s%s", n1, src ? " (" : "", src ? src : "",
                           src ? ")" : "");
    emit(b, "KV cache budget", t);
    free(t);
  } else if (json_is_object(cap)) {
    /* why, as discovery recorded it (capacity.unknown), when it did */
    const char *why = tb_json_str(json_object_get(cap, "unknown"), "kv_budget_tokens");
    char *t = tb_xasprintf("unknown (%s)", why ? why : "no capacity information from the server");
    emit(b, "KV cache budget", t);
    free(t);
  }
  if (tb_json_int(cap, "max_running_requests", &iv)) {
    tb_render_fmt_int(iv, n1, sizeof n1);
    const char *src = tb_json_str(cap, "max_running_source");
    char *t = tb_xasprintf("%s%s%s%s", n1, src ? " (" : "", src ? src : "", src ? ")" : "");
    emit(b, "Max running requests", t);
    free(t);
  }
  if ((s = tb_json_str(ep, "name")) != NULL)
    emit(b, "Endpoint", s);
  if ((s = tb_json_str(ep, "url")) != NULL)
    emit(b, "URL", s);
  if ((s = tb_json_str(d, "run_id")) != NULL)
    emit(b, "Run", s);
  if ((s = tb_json_str(d, "started_at")) != NULL)
    emit(b, "Started", s);
  if ((s = tb_json_str(d, "finished_at")) != NULL)
    emit(b, "Finished", s);
  if (v->status != NULL)
    emit(b, "Status", v->status);
}

/* "6 contexts (8K–251K) × 8 concurrency levels (1–128) · prefill at 8K, 16K" */
static char *
matrix_line(const struct view *v)
{
  char a[32], z[32], ca[32], cz[32];
  char *out = tb_xstrdup("");
  if (v->dctx.n > 0 && v->conc.n > 0) {
    tb_format_tokens(v->dctx.v[0], a, sizeof a);
    tb_format_tokens(v->dctx.v[v->dctx.n - 1], z, sizeof z);
    snprintf(ca, sizeof ca, "%" PRId64, v->conc.v[0]);
    snprintf(cz, sizeof cz, "%" PRId64, v->conc.v[v->conc.n - 1]);
    free(out);
    out = tb_xasprintf("%zu context%s (%s%s%s) " TB_RENDER_TIMES " %zu concurrency level%s (%s%s%s)",
                       v->dctx.n, v->dctx.n == 1 ? "" : "s", a,
                       v->dctx.n > 1 ? TB_RENDER_ENDASH : "", v->dctx.n > 1 ? z : "",
                       v->conc.n, v->conc.n == 1 ? "" : "s", ca,
                       v->conc.n > 1 ? TB_RENDER_ENDASH : "", v->conc.n > 1 ? cz : "");
  }
  if (v->pctx.n > 0) {
    char *t = tb_xasprintf("%s%sprefill at ", out, *out ? " \xc2\xb7 " : "");
    free(out);
    out = t;
    for (size_t i = 0; i < v->pctx.n; i++) {
      tb_format_tokens(v->pctx.v[i], a, sizeof a);
      t = tb_xasprintf("%s%s%s", out, i ? ", " : "", a);
      free(out);
      out = t;
    }
  }
  return out;
}

/* The partial banner's text, or NULL for a complete result. */
static char *
banner_text(const struct view *v)
{
  const char *s = v->status;
  const char *err = tb_json_str(v->doc, "error");
  size_t done = v->nvalid + v->nerror + v->nover + v->nskipped;
  int64_t total = 0;
  const json_t *prog = json_object_get(v->doc, "progress");
  if (!tb_json_int(prog, "cells_total", &total))
    total = 0;
  if (s != NULL && strcmp(s, "complete") == 0)
    return NULL;
  if (s != NULL && (strcmp(s, "running") == 0 || strcmp(s, "queued") == 0)) {
    if (total > 0)
      return tb_xasprintf("Partial result: the run is still going; %zu of %" PRId64
                          " cells done so far.", done, total);
    return tb_xasprintf("Partial result: the run is still going; %zu cells done so far.",
                        done);
  }
  if (s != NULL && strcmp(s, "partial") == 0)
    return tb_xasprintf("Partial result: %zu cell%s could not be measured (Error).",
                        v->nerror, v->nerror == 1 ? "" : "s");
  if (s != NULL && strcmp(s, "failed") == 0)
    return tb_xasprintf("Partial result: the run failed%s%s. The cells measured before "
                        "the failure are shown.", err ? ": " : "", err ? err : "");
  if (s != NULL && strcmp(s, "cancelled") == 0)
    return tb_xasprintf("Partial result: the run was cancelled. The cells measured "
                        "before are shown.");
  return tb_xasprintf("Partial result: status %s.", s ? s : "unknown");
}

static void
emit_html(struct tb_render_buf *b, const char *label, const char *value)
{
  tb_render_puts(b, "<dt>");
  tb_render_html(b, label);
  tb_render_puts(b, "</dt><dd>");
  tb_render_html(b, value);
  tb_render_puts(b, "</dd>");
}

static void
html_card(struct tb_render_buf *b, const char *title, const json_t *obj,
          const struct field *f, size_t nf)
{
  tb_render_puts(b, "<div class=\"card\"><h3>");
  tb_render_html(b, title);
  tb_render_puts(b, "</h3><dl>");
  if (json_is_object(obj) && json_object_size(obj) > 0)
    section_fields(b, obj, f, nf, emit_html);
  else
    emit_html(b, "Not recorded", TB_RENDER_DASH);
  tb_render_puts(b, "</dl></div>\n");
}

/* Heat map colour for t in [0, 1]: light to deep green. */
static void
heat(double t, char *style, size_t len)
{
  if (!isfinite(t) || t < 0)
    t = 0;
  if (t > 1)
    t = 1;
  static const int lo[3] = { 0xf1, 0xf8, 0xe9 }, hi[3] = { 0x1b, 0x5e, 0x20 };
  int c[3];
  for (int i = 0; i < 3; i++)
    c[i] = (int)lround(lo[i] + (hi[i] - lo[i]) * t);
  snprintf(style, len, "background:rgb(%d,%d,%d);color:%s", c[0], c[1], c[2],
           t > 0.55 ? "#fff" : "#1b1f24");
}

/* --- SVG charts */

#define CHART_W 560
#define CHART_H 300
#define CHART_ML 62
#define CHART_MR 110
#define CHART_MT 14
#define CHART_MB 40
#define CHART_MAX_SERIES 16u

struct series {
  char name[32];
  double x[TB_RENDER_MAX_AXIS], y[TB_RENDER_MAX_AXIS];
  double lo[TB_RENDER_MAX_AXIS], hi[TB_RENDER_MAX_AXIS]; /* 95% interval; NAN: none */
  size_t n;
};

/* Appends a point with the interval cell[ci] (an error bar) to se. */
static void
series_add(struct series *se, double x, double y, const json_t *cell, const char *ci)
{
  double lo, hi;
  if (!tb_render_ci(cell, ci, &lo, &hi) || lo < 0)
    lo = hi = NAN;
  se->x[se->n] = x;
  se->y[se->n] = y;
  se->lo[se->n] = lo;
  se->hi[se->n] = hi;
  se->n++;
}

static const char *const palette[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                       "#9467bd", "#8c564b", "#e377c2", "#17becf" };

static double
nice_ceil(double v)
{
  if (!(v > 0))
    return 1;
  double e = pow(10, floor(log10(v)));
  double m = v / e;
  double n = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
  return n * e;
}

/* xs: the x axis (tick positions, log2 scale); xtok: label ticks as token
 * counts (8K) rather than integers. */
static void
svg_chart(struct tb_render_buf *b, const char *caption, const char *xlabel, const char *ylabel,
          const struct tb_render_axis *xs, bool xtok, const struct series *s, size_t ns)
{
  if (xs->n == 0 || ns == 0)
    return;
  double ymax = 0;
  for (size_t i = 0; i < ns; i++)
    for (size_t j = 0; j < s[i].n; j++)
      for (int k = 0; k < 2; k++) {
        double y = k ? s[i].hi[j] : s[i].y[j]; /* error bars fit too */
        if (isfinite(y) && y > ymax)
          ymax = y;
      }
  if (ymax <= 0)
    return;
  ymax = nice_ceil(ymax * 1.05);
  double x0 = log2((double)xs->v[0]), x1 = log2((double)xs->v[xs->n - 1]);
  double pw = CHART_W - CHART_ML - CHART_MR, ph = CHART_H - CHART_MT - CHART_MB;
#define PX(x) (CHART_ML + (x1 > x0 ? (log2(x) - x0) / (x1 - x0) : 0.5) * pw)
#define PY(y) (CHART_MT + ph - (y) / ymax * ph)
  tb_render_puts(b, "<figure><figcaption>");
  tb_render_html(b, caption);
  tb_render_printf(b, "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
                   CHART_W, CHART_H, CHART_W, CHART_H);
  tb_render_html(b, caption);
  tb_render_puts(b, "\" font-family=\"system-ui,sans-serif\" font-size=\"11\">");
  char lab[48];
  for (int i = 0; i <= 4; i++) {
    double y = ymax * i / 4;
    tb_render_fmt_tps_short(y, lab, sizeof lab);
    tb_render_printf(b, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e6ea\"/>"
                 "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%s</text>",
                     CHART_ML, CHART_ML + pw, PY(y), PY(y), CHART_ML - 6, PY(y) + 4, lab);
  }
  double last_px = -1e9;
  for (size_t i = 0; i < xs->n; i++) {
    double tick = PX((double)xs->v[i]);
    if (tick - last_px < 30) /* labels would overlap: keep the first */
      continue;
    last_px = tick;
    if (xtok)
      tb_format_tokens(xs->v[i], lab, sizeof lab);
    else
      snprintf(lab, sizeof lab, "%" PRId64, xs->v[i]);
    double px = PX((double)xs->v[i]);
    tb_render_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.1f\" stroke=\"#f0f2f4\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%s</text>",
                     px, px, CHART_MT, CHART_MT + ph, px, CHART_MT + ph + 15, lab);
  }
  tb_render_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#333\">",
                   CHART_ML + pw / 2, CHART_H - 6);
  tb_render_html(b, xlabel);
  tb_render_printf(b, "</text><text transform=\"translate(14,%.1f) rotate(-90)\" "
               "text-anchor=\"middle\" fill=\"#333\">",
                   CHART_MT + ph / 2);
  tb_render_html(b, ylabel);
  tb_render_puts(b, "</text>");
  tb_render_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"#c9ced4\"/>",
                   CHART_ML, CHART_MT, pw, ph);
  for (size_t i = 0; i < ns; i++) {
    const char *col = palette[i % TB_ARRAY_LEN(palette)];
    tb_render_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    for (size_t j = 0; j < s[i].n; j++)
      tb_render_printf(b, "%s%.1f,%.1f", j ? " " : "", PX(s[i].x[j]), PY(s[i].y[j]));
    tb_render_puts(b, "\"/>");
    for (size_t j = 0; j < s[i].n; j++) {
      double px = PX(s[i].x[j]);
      bool bar = isfinite(s[i].lo[j]) && isfinite(s[i].hi[j]);
      if (bar) /* the 95% interval as an error bar with caps */
        tb_render_printf(b, "<path class=\"errbar\" d=\"M%.1f,%.1fV%.1fM%.1f,%.1fH%.1fM%.1f,%.1fH%.1f\" "
                         "stroke=\"%s\" stroke-width=\"1.2\" fill=\"none\"/>",
                         px, PY(s[i].lo[j]), PY(s[i].hi[j]), px - 4, PY(s[i].lo[j]), px + 4,
                         px - 4, PY(s[i].hi[j]), px + 4, col);
      char pm[128] = "";
      if (bar) {
        char l[48], h[48];
        tb_render_fmt_tps(s[i].lo[j], l, sizeof l);
        tb_render_fmt_tps(s[i].hi[j], h, sizeof h);
        snprintf(pm, sizeof pm, " (95%%: %s%s%s)", l, TB_RENDER_ENDASH, h);
      }
      tb_render_fmt_tps(s[i].y[j], lab, sizeof lab);
      tb_render_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>",
                       px, PY(s[i].y[j]), col);
      tb_render_html(b, s[i].name);
      tb_render_printf(b, ": %s tok/s%s</title></circle>", lab, pm);
    }
    if (ns > 1) {
      double ly = CHART_MT + 8 + 16.0 * (double)i;
      tb_render_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">",
                       CHART_ML + pw + 10, CHART_ML + pw + 28, ly, ly, col,
                       CHART_ML + pw + 32, ly + 4);
      tb_render_html(b, s[i].name);
      tb_render_puts(b, "</text>");
    }
  }
#undef PX
#undef PY
  tb_render_puts(b, "</svg></figure>\n");
}

static void
html_charts(struct tb_render_buf *b, const struct view *v)
{
  struct series *s = tb_xcalloc(CHART_MAX_SERIES, sizeof *s);
  struct tb_render_axis px = { 0 };
  s[0].n = 0;
  snprintf(s[0].name, sizeof s[0].name, "prefill");
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    double y = tb_json_num(c, "prompt_tps");
    if (st_is(c, "valid") && isfinite(y) && y >= 0) {
      series_add(&s[0], (double)v->pctx.v[i], y, c, "prompt_tps_ci95");
      tb_render_axis_add(&px, v->pctx.v[i]);
    }
  }
  bool any = s[0].n > 0 || v->max_tps > 0;
  if (any)
    tb_render_puts(b, "<h2>Charts</h2><div class=\"charts\">\n");
  if (s[0].n > 0)
    svg_chart(b, "Prefill: prompt tok/s by context length", "context (tokens)",
              "prompt tok/s", &px, true, s, 1);
  size_t ns = 0;
  struct tb_render_axis cx = { 0 };
  for (size_t r = 0; r < v->dctx.n && ns < CHART_MAX_SERIES; r++) {
    struct series *se = &s[ns];
    se->n = 0;
    tb_format_tokens(v->dctx.v[r], se->name, sizeof se->name);
    for (size_t c = 0; c < v->conc.n; c++) {
      const json_t *cell = grid_at(v, r, c);
      double y = tb_json_num(cell, "total_tps");
      if (st_is(cell, "valid") && isfinite(y) && y >= 0) {
        series_add(se, (double)v->conc.v[c], y, cell, "total_tps_ci95");
        tb_render_axis_add(&cx, v->conc.v[c]);
      }
    }
    if (se->n > 0)
      ns++;
  }
  if (ns > 0)
    svg_chart(b, "Sustained decode: total tok/s by simultaneous requests, per context",
              "simultaneous requests", "total tok/s", &cx, false, s, ns);
  if (any)
    tb_render_puts(b, "</div>\n");
  free(s);
}

static void
html_matrix(struct tb_render_buf *b, const struct view *v)
{
  bool running = v->status && strcmp(v->status, "running") == 0;
  tb_render_puts(b, "<h2>Sustained decode</h2><p class=\"muted\">total tok/s (\xc2\xb1 its 95% "
             "interval) \xc2\xb7 rows are context length, columns are simultaneous requests</p>"
             "<div class=\"scroll\">");
  tb_render_html_matrix_head(b, "decode-matrix", &v->conc);
  char lab[32], t[48], ms[48], style[96];
  bool any_cl = false;
  for (size_t r = 0; r < v->dctx.n; r++) {
    tb_format_tokens(v->dctx.v[r], lab, sizeof lab);
    tb_render_printf(b, "<tr><th class=\"l\">%s</th>", lab);
    for (size_t c = 0; c < v->conc.n; c++) {
      const json_t *cell = grid_at(v, r, c);
      tb_render_printf(b, "<td data-context=\"%" PRId64 "\" data-concurrency=\"%" PRId64 "\"",
                       v->dctx.v[r], v->conc.v[c]);
      if (cell == NULL) {
        tb_render_printf(b, " class=\"na\">%s</td>", running ? "pending" : TB_RENDER_DASH);
        continue;
      }
      if (st_is(cell, "valid")) {
        double tps = tb_json_num(cell, "total_tps");
        heat(v->max_tps > 0 ? tps / v->max_tps : 0, style, sizeof style);
        tb_render_fmt_tps(tps, t, sizeof t);
        tb_render_fmt_ms(tb_json_pct(cell, "ttft_ms", "p50"), ms, sizeof ms);
        char pm[64];
        pm_text(cell, pm, sizeof pm);
        tb_render_printf(b, " class=\"v\" style=\"%s\"><b>%s</b>%s%s%s<span>%s TTFT</span>",
                         style, t, pm[0] ? "<small class=\"ci\">" : "", pm,
                         pm[0] ? "</small>" : "", ms);
        char why[NOTE_MAX];
        if (cell_flagged(cell, why, sizeof why)) {
          tb_render_puts(b, "<span class=\"flag\" title=\"");
          tb_render_html(b, why);
          tb_render_puts(b, "\">\xe2\x9a\xa0 checks failed</span>");
        }
        tb_render_puts(b, "</td>");
      } else if (tb_render_cell_caplimited(cell)) {
        any_cl = true;
        tb_render_puts(b, " class=\"oc\" title=\"");
        tb_render_html(b, tb_json_str(cell, "reason"));
        tb_render_puts(b, "\">Over capacity*</td>");
      } else if (st_is(cell, "over_capacity")) {
        tb_render_puts(b, " class=\"oc\">Over capacity</td>");
      } else {
        bool err = st_is(cell, "error");
        tb_render_printf(b, " class=\"%s\" title=\"", err ? "err" : "sk");
        tb_render_html(b, tb_json_str(cell, "reason"));
        tb_render_printf(b, "\">%s</td>", err ? "Error" : "Skipped");
      }
    }
    tb_render_puts(b, "</tr>\n");
  }
  tb_render_puts(b, "</table></div>\n<p class=\"muted\">");
  tb_render_html(b, tb_render_oc_footnote(any_cl));
  tb_render_puts(b, "<br>TTFT is measured after the benchmark warms the server's prompt cache, "
             "so it mostly excludes prefill.</p>\n");
}

static void
html_prefill(struct tb_render_buf *b, const struct view *v)
{
  tb_render_puts(b, "<h2>Prefill</h2><p class=\"muted\">prompt tok/s by context length "
             "(one cold request per context: prompt tokens / TTFT)</p>"
             "<table id=\"prefill\"><tr><th class=\"l\">Context</th><th>Prompt tokens</th>"
             "<th>Prompt tok/s</th><th>TTFT</th><th class=\"l\"></th></tr>\n");
  char lab[32], n1[48], t[96], ms[48];
  int64_t pt;
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    tb_format_tokens(v->pctx.v[i], lab, sizeof lab);
    tb_render_printf(b, "<tr data-context=\"%" PRId64 "\"><th class=\"l\">%s context</th>",
                     v->pctx.v[i], lab);
    if (!st_is(c, "valid")) {
      tb_render_printf(b, "<td>%s</td><td colspan=\"3\" class=\"l\">", TB_RENDER_DASH);
      tb_render_html(b, c ? status_word(c) : "pending");
      if (c && tb_json_str(c, "reason")) {
        tb_render_puts(b, ": ");
        tb_render_html(b, tb_json_str(c, "reason"));
      }
      tb_render_puts(b, "</td></tr>\n");
      continue;
    }
    if (tb_json_int(c, "prompt_tokens", &pt))
      tb_render_fmt_int(pt, n1, sizeof n1);
    else
      snprintf(n1, sizeof n1, TB_RENDER_DASH);
    double tps = tb_json_num(c, "prompt_tps");
    tb_render_fmt_pm(tps, tb_render_ci_half(c, "prompt_tps", "prompt_tps_ci95"),
                     tb_render_fmt_tps_short, t, sizeof t);
    tb_render_fmt_ms(tb_json_pct(c, "ttft_ms", "p50"), ms, sizeof ms);
    double w = v->max_prompt_tps > 0 && isfinite(tps) ? 160.0 * tps / v->max_prompt_tps : 0;
    tb_render_printf(b, "<td>%s</td><td><b>%s</b></td><td>%s TTFT</td>"
                 "<td class=\"l\"><span class=\"bar\" style=\"width:%.0fpx\"></span></td></tr>\n",
                     n1, t, ms, w);
  }
  tb_render_puts(b, "</table>\n");
}

/* One row of the "All measurements" table, in a format. */
typedef void (*all_row_fn)(struct tb_render_buf *b, const char *phase, const char *lab,
                           int64_t conc, const json_t *c, const struct figs *f,
                           const char *note);

/* The rows of the "All measurements" table: prefill, then decode by
 * context and concurrency; cells not measured yet are left out. */
static void
all_rows(struct tb_render_buf *b, const struct view *v, all_row_fn row)
{
  char lab[32], note[NOTE_MAX];
  struct figs f;
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    if (c == NULL)
      continue;
    tb_format_tokens(v->pctx.v[i], lab, sizeof lab);
    cell_figs(c, 0, &f);
    row(b, "Prefill", lab, 1, c, &f, cell_note_full(c, note, sizeof note));
  }
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++) {
      const json_t *c = grid_at(v, r, k);
      if (c == NULL)
        continue;
      tb_format_tokens(v->dctx.v[r], lab, sizeof lab);
      cell_figs(c, 1, &f);
      row(b, "Sustained decode", lab, v->conc.v[k], c, &f, cell_note_full(c, note, sizeof note));
    }
}

/* The decode cells with a server view or checks, through row. */
static void
cellview_rows(struct tb_render_buf *b, const struct view *v,
              void (*row)(struct tb_render_buf *, const char *, int64_t, const json_t *))
{
  char lab[32];
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++) {
      const json_t *c = grid_at(v, r, k);
      if (c == NULL || !tb_cellview_has(c))
        continue;
      tb_format_tokens(v->dctx.v[r], lab, sizeof lab);
      row(b, lab, v->conc.v[k], c);
    }
}

static void
html_all_row(struct tb_render_buf *b, const char *phase, const char *lab, int64_t conc,
             const json_t *c, const struct figs *f, const char *note)
{
  tb_render_printf(b, "<tr><td class=\"l\">%s</td><td>%s</td><td>%" PRId64
                      "</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                      "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l\">",
                   phase, lab, conc, status_word(c), f->total, f->per, f->ttft, f->tbt,
                   f->active, f->completed, f->out, f->measured);
  tb_render_html(b, note);
  tb_render_puts(b, "</td></tr>\n");
}

static void
md_all_row(struct tb_render_buf *b, const char *phase, const char *lab, int64_t conc,
           const json_t *c, const struct figs *f, const char *note)
{
  tb_render_printf(b, "| %s | %s | %" PRId64 " | %s | %s | %s | %s | %s | %s | %s | %s | %s | ",
                   phase, lab, conc, status_word(c), f->total, f->per, f->ttft, f->tbt,
                   f->active, f->completed, f->out, f->measured);
  tb_render_md(b, note);
  tb_render_puts(b, " |\n");
}

static void
html_all(struct tb_render_buf *b, const struct view *v)
{
  tb_render_puts(b, "<h2>All measurements</h2><p class=\"muted\">Latencies are medians. Total "
             "tok/s is output across all simultaneous requests.</p><div class=\"scroll\">"
             "<table id=\"all\"><tr><th class=\"l\">Phase</th><th>Context</th>"
             "<th>Requests at once</th><th class=\"l\">Status</th><th>Total tok/s</th>"
             "<th>Per request tok/s</th><th>TTFT</th><th>Time between tokens</th>"
             "<th>Average active requests</th><th>Completed requests</th>"
             "<th>Output tokens</th><th>Measured for</th><th class=\"l\">Note</th></tr>\n");
  all_rows(b, v, html_all_row);
  tb_render_puts(b, "</table></div>\n");
  if (!any_cellview(v))
    return;
  tb_cellview_html_head(b);
  cellview_rows(b, v, tb_cellview_html_cell);
  tb_cellview_html_end(b);
}

/* How a format marks up the top of a report: the page's opening (HTML:
 * its head, from the title), then the title, the engine and matrix line,
 * the partial banner and the verdict, each between its strings. */
struct heading_markup {
  void (*open)(struct tb_render_buf *b, const char *title); /* may be NULL */
  void (*esc)(struct tb_render_buf *b, const char *s);
  const char *title_pre, *title_post, *sub_post, *ban_pre, *ban_post;
  void (*verdict)(struct tb_render_buf *b, const json_t *regressions);
};

static const struct heading_markup heading_html = {
  tb_render_html_head, tb_render_html,
  "<h1>Speed test matrix</h1>\n<p class=\"sub\"><b>", "</b></p><p class=\"sub\">", "</p>\n",
  "<div class=\"banner\" id=\"partial\">", "</div>\n", tb_render_verdict_html,
};

static const struct heading_markup heading_md = {
  NULL, tb_render_md, "## Speed test matrix\n\n**", "**  \n", "\n\n", "> **Warning:** ", "\n\n",
  tb_render_verdict_md,
};

/* The top of a report: title, "<engine> · <matrix>", the partial banner
 * (when not complete) and the verdict, in markup m. */
static void
heading(struct tb_render_buf *b, const struct view *v, const struct heading_markup *m)
{
  char *title = tb_render_title_line(v->doc);
  char *eng = tb_render_engine_line(v->doc);
  char *mx = matrix_line(v);
  char *ban = banner_text(v);
  if (m->open != NULL)
    m->open(b, title ? title : "Speed test matrix");
  tb_render_puts(b, m->title_pre);
  m->esc(b, title ? title : "Unnamed run");
  tb_render_puts(b, m->title_post);
  m->esc(b, eng);
  if (*eng && *mx)
    tb_render_puts(b, " \xc2\xb7 ");
  m->esc(b, mx);
  tb_render_puts(b, m->sub_post);
  if (ban) {
    tb_render_puts(b, m->ban_pre);
    m->esc(b, ban);
    tb_render_puts(b, m->ban_post);
  }
  m->verdict(b, json_object_get(v->doc, "regressions"));
  free(title);
  free(eng);
  free(mx);
  free(ban);
}

static void
render_html(struct tb_render_buf *b, const struct view *v)
{
  const json_t *d = v->doc;
  heading(b, v, &heading_html);
  tb_render_puts(b, "<div class=\"cards\">");
  html_card(b, "Hardware", json_object_get(d, "hardware"), hw_fields,
            TB_ARRAY_LEN(hw_fields));
  html_card(b, "Engine", json_object_get(d, "engine"), eng_fields,
            TB_ARRAY_LEN(eng_fields));
  tb_render_puts(b, "<div class=\"card\"><h3>Run</h3><dl>");
  section_run(b, v, emit_html);
  tb_render_puts(b, "</dl></div></div>\n<h2>Launch command</h2><pre id=\"launch\">");
  const char *lc = tb_json_str(d, "launch_command");
  tb_render_html(b, lc ? lc : "(not recorded)");
  tb_render_puts(b, "</pre>\n");
  if (v->pctx.n > 0)
    html_prefill(b, v);
  if (v->dctx.n > 0 && v->conc.n > 0)
    html_matrix(b, v);
  html_charts(b, v);
  html_all(b, v);
  tb_ratereport_html(b, d);
  if (v->ndropped > 0)
    tb_render_printf(b, "<p class=\"muted\">%zu malformed or duplicate cells were left out.</p>\n",
                     v->ndropped);
  tb_render_puts(b, "<p class=\"muted\">K = 1,024 tokens for contexts; tok/s figures use K = "
             "1,000. Generated by tokbench.</p>\n</main></body></html>\n");
}

/* -------------------------------------------------------------- Markdown */

static void
emit_md(struct tb_render_buf *b, const char *label, const char *value)
{
  tb_render_puts(b, "| ");
  tb_render_md(b, label);
  tb_render_puts(b, " | ");
  tb_render_md(b, value);
  tb_render_puts(b, " |\n");
}

/* A fenced code block whose fence is longer than any backtick run inside,
 * so no content can close it (CommonMark 4.5). */
static void
md_code(struct tb_render_buf *b, const char *s)
{
  size_t run = 0, best = 0;
  for (const char *c = s; *c; c++) {
    run = *c == '`' ? run + 1 : 0;
    if (run > best)
      best = run;
  }
  size_t n = best < 3 ? 3 : best + 1;
  if (n > 64)
    n = 64;
  for (size_t i = 0; i < n; i++)
    tb_render_put(b, "`", 1);
  tb_render_puts(b, "sh\n");
  for (const char *c = s; *c; c++)
    if ((unsigned char)*c >= 0x20 || *c == '\n' || *c == '\t')
      tb_render_put(b, c, 1);
  tb_render_puts(b, "\n");
  for (size_t i = 0; i < n; i++)
    tb_render_put(b, "`", 1);
  tb_render_puts(b, "\n");
}

static void
render_md(struct tb_render_buf *b, const struct view *v)
{
  const json_t *d = v->doc;
  heading(b, v, &heading_md);
  tb_render_puts(b, "| | |\n|---|---|\n| **Hardware** | |\n");
  section_fields(b, json_object_get(d, "hardware"), hw_fields, TB_ARRAY_LEN(hw_fields),
                 emit_md);
  tb_render_puts(b, "| **Engine** | |\n");
  section_fields(b, json_object_get(d, "engine"), eng_fields, TB_ARRAY_LEN(eng_fields),
                 emit_md);
  tb_render_puts(b, "| **Run** | |\n");
  section_run(b, v, emit_md);
  const char *lc = tb_json_str(d, "launch_command");
  if (lc) {
    tb_render_puts(b, "\n<details><summary>Launch command</summary>\n\n");
    md_code(b, lc);
    tb_render_puts(b, "\n</details>\n");
  }
  char lab[32], n1[48], t[96], ms[48];
  int64_t pt;
  if (v->pctx.n > 0) {
    tb_render_puts(b, "\n### Prefill\n\n| Context | Prompt tokens | Prompt tok/s | TTFT |\n"
               "|---|---:|---:|---:|\n");
    for (size_t i = 0; i < v->pctx.n; i++) {
      const json_t *c = v->pcell[i];
      tb_format_tokens(v->pctx.v[i], lab, sizeof lab);
      if (!st_is(c, "valid")) {
        tb_render_printf(b, "| %s | %s | %s | %s |\n", lab, TB_RENDER_DASH, c ? status_word(c) : "pending",
                         TB_RENDER_DASH);
        continue;
      }
      if (tb_json_int(c, "prompt_tokens", &pt))
        tb_render_fmt_int(pt, n1, sizeof n1);
      else
        snprintf(n1, sizeof n1, TB_RENDER_DASH);
      tb_render_fmt_pm(tb_json_num(c, "prompt_tps"),
                       tb_render_ci_half(c, "prompt_tps", "prompt_tps_ci95"),
                       tb_render_fmt_tps_short, t, sizeof t);
      tb_render_fmt_ms(tb_json_pct(c, "ttft_ms", "p50"), ms, sizeof ms);
      tb_render_printf(b, "| %s | %s | %s | %s |\n", lab, n1, t, ms);
    }
  }
  if (v->dctx.n > 0 && v->conc.n > 0) {
    tb_render_puts(b, "\n### Sustained decode\n\ntotal tok/s (\xc2\xb1 its 95% interval) "
               "\xc2\xb7 median TTFT; rows are context length, columns are simultaneous "
               "requests\n\n");
    tb_render_md_matrix_head(b, &v->conc);
    bool any_cl = false;
    for (size_t r = 0; r < v->dctx.n; r++) {
      tb_format_tokens(v->dctx.v[r], lab, sizeof lab);
      tb_render_printf(b, "| %s |", lab);
      for (size_t c = 0; c < v->conc.n; c++) {
        const json_t *cell = grid_at(v, r, c);
        if (st_is(cell, "valid")) {
          tb_render_fmt_tps(tb_json_num(cell, "total_tps"), t, sizeof t);
          tb_render_fmt_ms(tb_json_pct(cell, "ttft_ms", "p50"), ms, sizeof ms);
          char pm[64];
          pm_text(cell, pm, sizeof pm);
          char why[NOTE_MAX];
          tb_render_printf(b, " **%s**%s<br>%s TTFT%s |", t, pm, ms,
                           cell_flagged(cell, why, sizeof why) ? "<br>\xe2\x9a\xa0 checks failed" : "");
        } else if (cell == NULL) {
          tb_render_puts(b, " " TB_RENDER_DASH " |");
        } else {
          any_cl = any_cl || tb_render_cell_caplimited(cell);
          tb_render_printf(b, " %s |", tb_render_cell_word(cell));
        }
      }
      tb_render_puts(b, "\n");
    }
    tb_render_printf(b, "\n%s\n", tb_render_oc_footnote(any_cl));
  }
  tb_render_puts(b, "\n<details><summary>All measurements</summary>\n\n"
             "| Phase | Context | Requests at once | Status | Total tok/s | Per request "
             "tok/s | TTFT | Time between tokens | Average active requests | Completed "
             "requests | Output tokens | Measured for | Note |\n"
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  all_rows(b, v, md_all_row);
  tb_render_puts(b, "\n</details>\n");
  if (any_cellview(v)) {
    tb_cellview_md_head(b);
    cellview_rows(b, v, tb_cellview_md_row);
  }
  tb_ratereport_md(b, d);
}

/* ------------------------------------------------------------------- CSV */

static const char csv_header[] =
    "phase,context,context_label,concurrency,status,reason,prompt_tokens,prompt_tps,"
    "total_tps,per_request_tps,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,tbt_p50_ms,"
    "tbt_p90_ms,tbt_p99_ms,avg_active,avg_active_source,completed,output_tokens,"
    "measured_s,token_source,total_tps_se,total_tps_ci95_lo,total_tps_ci95_hi,"
    "ttft_p50_ci95_lo_ms,ttft_p50_ci95_hi_ms,tbt_p50_ci95_lo_ms,tbt_p50_ci95_hi_ms,"
    "prompt_tps_ci95_lo,prompt_tps_ci95_hi,repeats,total_tps_capacity_limited,readiness,"
    "readiness_reason,prompt_tokens_source,scheduler_cap";

static void
csv_int(struct tb_render_buf *b, const json_t *c, const char *k)
{
  int64_t v;
  if (tb_json_int(c, k, &v))
    tb_render_printf(b, "%" PRId64, v);
}

static void
csv_row(struct tb_render_buf *b, const json_t *c, int phase, int64_t ctx, int64_t conc)
{
  char lab[32];
  tb_format_tokens(ctx, lab, sizeof lab);
  const char *st = tb_json_str(c, "status");
  tb_render_printf(b, "%s,%" PRId64 ",%s,%" PRId64 ",",
                   phase == 2 ? "rate" : phase ? "decode" : "prefill", ctx, lab, conc);
  tb_render_csv_str(b, st ? st : "");
  tb_render_puts(b, ",");
  tb_render_csv_str(b, tb_json_str(c, "reason"));
  tb_render_puts(b, ",");
  csv_int(b, c, "prompt_tokens");
  tb_render_puts(b, ",");
  tb_render_csv_num(b, tb_json_num(c, "prompt_tps"));
  tb_render_puts(b, ",");
  tb_render_csv_num(b, tb_json_num(c, "total_tps"));
  tb_render_puts(b, ",");
  tb_render_csv_num(b, tb_json_num(c, "per_request_tps"));
  tb_render_csv_pcts(b, c, "ttft_ms");
  tb_render_csv_pcts(b, c, "tbt_ms");
  tb_render_puts(b, ",");
  tb_render_csv_num(b, tb_json_num(c, "avg_active"));
  tb_render_puts(b, ",");
  tb_render_csv_str(b, tb_json_str(c, "avg_active_source"));
  tb_render_puts(b, ",");
  csv_int(b, c, "completed");
  tb_render_puts(b, ",");
  csv_int(b, c, "output_tokens");
  tb_render_puts(b, ",");
  tb_render_csv_num(b, tb_json_num(c, "measured_s"));
  tb_render_puts(b, ",");
  tb_render_csv_str(b, tb_json_str(c, "token_source"));
  tb_render_puts(b, ",");
  tb_render_csv_num(b, tb_json_num(c, "total_tps_se"));
  static const char *const cis[] = { "total_tps_ci95", "ttft_p50_ci95", "tbt_p50_ci95",
                                     "prompt_tps_ci95" };
  for (size_t i = 0; i < TB_ARRAY_LEN(cis); i++) {
    double lo, hi;
    (void)tb_render_ci(c, cis[i], &lo, &hi); /* NAN: an empty field */
    tb_render_puts(b, ",");
    tb_render_csv_num(b, lo);
    tb_render_puts(b, ",");
    tb_render_csv_num(b, hi);
  }
  tb_render_puts(b, ",");
  csv_int(b, c, "repeats");
  tb_render_puts(b, ",");
  tb_render_csv_num(b, tb_json_num(c, "total_tps_capacity_limited"));
  static const char *const flags[] = { "readiness", "readiness_reason", "prompt_tokens_source" };
  for (size_t i = 0; i < TB_ARRAY_LEN(flags); i++) {
    tb_render_puts(b, ",");
    tb_render_csv_str(b, tb_json_str(c, flags[i]));
  }
  tb_render_puts(b, ",");
  csv_int(b, c, "scheduler_cap");
  tb_cellview_csv_cols(b, c);
  tb_ratereport_csv_tail(b, c);
  tb_render_puts(b, "\r\n");
}

static void
render_csv(struct tb_render_buf *b, const struct view *v)
{
  tb_render_puts(b, csv_header);
  tb_render_puts(b, tb_cellview_csv_head);
  tb_render_puts(b, TB_RATEREPORT_CSV_COLUMNS "\r\n");
  for (size_t i = 0; i < v->pctx.n; i++)
    if (v->pcell[i])
      csv_row(b, v->pcell[i], 0, v->pctx.v[i], 1);
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++)
      if (grid_at(v, r, k))
        csv_row(b, grid_at(v, r, k), 1, v->dctx.v[r], v->conc.v[k]);
  const json_t *cells = json_object_get(v->doc, "cells");
  for (size_t i = 0; i < v->ncells; i++) {
    const json_t *c = json_array_get(cells, i);
    int64_t ctx, conc;
    if (tb_ratereport_is_rate(c) && tb_json_int(c, "context", &ctx) &&
        tb_json_int(c, "concurrency", &conc))
      csv_row(b, c, 2, ctx, conc); /* a rate cell: its number as concurrency */
  }
}

/* ------------------------------------------------------------ formats */

static const struct {
  const char *name, *alias, *mime;
  enum tb_report_format f;
} formats[] = {
  { "html", "text/html", "text/html; charset=utf-8", TB_REPORT_HTML },
  { "md", "markdown", "text/markdown; charset=utf-8", TB_REPORT_MD },
  { "csv", "text/csv", "text/csv; charset=utf-8", TB_REPORT_CSV },
  { "json", "application/json", "application/json", TB_REPORT_JSON },
};

bool
tb_report_format_parse(const char *s, enum tb_report_format *out)
{
  if (s == NULL)
    return false;
  for (size_t i = 0; i < TB_ARRAY_LEN(formats); i++)
    if (strcasecmp(s, formats[i].name) == 0 || strcasecmp(s, formats[i].alias) == 0) {
      *out = formats[i].f;
      return true;
    }
  if (strcasecmp(s, "text/markdown") == 0) {
    *out = TB_REPORT_MD;
    return true;
  }
  return false;
}

const char *
tb_report_format_name(enum tb_report_format f)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(formats); i++)
    if (formats[i].f == f)
      return formats[i].name;
  return "json";
}

const char *
tb_report_content_type(enum tb_report_format f)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(formats); i++)
    if (formats[i].f == f)
      return formats[i].mime;
  return "application/json";
}

char *
tb_report_render(const json_t *doc, enum tb_report_format f, size_t *len, char **err)
{
  *err = NULL;
  if (!json_is_object(doc)) {
    *err = tb_xstrdup("not a result document (not a JSON object)");
    return NULL;
  }
  struct tb_render_buf b = { 0 };
  /* any document, however old or wherever it came from, is shown redacted */
  json_t *safe = tb_redact_document(doc);
  if (f == TB_REPORT_JSON) {
    tb_render_json(&b, safe);
    json_decref(safe);
    return tb_render_finish(&b, len, err);
  }
  struct view v;
  view_build(&v, safe);
  switch (f) {
  case TB_REPORT_HTML: render_html(&b, &v); break;
  case TB_REPORT_MD: render_md(&b, &v); break;
  case TB_REPORT_CSV: render_csv(&b, &v); break;
  default: tb_render_json(&b, safe); break;
  }
  view_free(&v);
  json_decref(safe);
  return tb_render_finish(&b, len, err);
}
