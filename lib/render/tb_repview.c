/*
 * tb_repview: the view of a result document the report formats are written
 * from.  See tb_repview.h.
 *
 * The view is built once (tb_repview_build): the axes from the settings and
 * the cells, then each cell into its slot; a cell that does not fit (no
 * phase or context, a duplicate, past the axis caps) is counted as left
 * out.  The header's texts are read here and written by the format's emit
 * function; the formats never read the document's header themselves.
 */
#include "render/tb_repview.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "render/tb_cellview.h"
#include "render/tb_ratereport.h"
#include "result/tb_checks.h"

static void
axis_from(struct tb_render_axis *a, const json_t *arr,
          void (*add)(struct tb_render_axis *, int64_t))
{
  size_t i;
  const json_t *v;
  if (!json_is_array(arr))
    return;
  json_array_foreach (arr, i, v) {
    if (i >= 4 * TB_RENDER_MAX_AXIS)
      break;
    if (json_is_integer(v))
      add(a, json_integer_value(v));
  }
}

static const char *
cell_status(const json_t *c)
{
  const char *s = tb_json_str(c, "status");
  return s ? s : "";
}

bool
tb_repview_is(const json_t *c, const char *s)
{
  return c != NULL && strcmp(cell_status(c), s) == 0;
}

void
tb_repview_build(struct tb_repview *v, const json_t *doc)
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
  if (n > TB_RENDER_MAX_CELLS) {
    v->ndropped += n - TB_RENDER_MAX_CELLS;
    n = TB_RENDER_MAX_CELLS;
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
    if (tb_repview_is(c, "valid"))
      v->nvalid++;
    else if (tb_repview_is(c, "error"))
      v->nerror++;
    else if (tb_repview_is(c, "over_capacity"))
      v->nover++;
    else
      v->nskipped++;
    double t = tb_json_num(c, ph == 0 ? "prompt_tps" : "total_tps");
    if (tb_repview_is(c, "valid") && isfinite(t) && t > 0) {
      if (ph == 0 && t > v->max_prompt_tps)
        v->max_prompt_tps = t;
      if (ph == 1 && t > v->max_tps)
        v->max_tps = t;
    }
  }
}

void
tb_repview_free(struct tb_repview *v)
{
  free(v->grid);
  v->grid = NULL;
}

const json_t *
tb_repview_at(const struct tb_repview *v, size_t r, size_t c)
{
  return v->grid[r * v->conc.n + c];
}

const char *
tb_repview_status_word(const json_t *c)
{
  return tb_render_status_text(cell_status(c));
}

/* " ± <half>" of a cell's total tok/s, "" without an interval. */
void
tb_repview_pm(const json_t *cell, char *buf, size_t len)
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
latency_fig(const json_t *c, const char *k, const char *ci, void (*fmt)(double, char *, size_t),
            char *buf, size_t len)
{
  char m[48], r[64];
  fmt(tb_json_pct(c, k, "p50"), m, sizeof m);
  tb_render_fmt_range(c, ci, fmt, "", r, sizeof r);
  snprintf(buf, len, "%s%s%s", m, r[0] ? " " : "", r);
}

void
tb_repview_cell_figs(const json_t *c, int phase, struct tb_repview_figs *f)
{
  int64_t iv;
  bool valid = tb_repview_is(c, "valid");
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
                     tb_render_ci_half(c, "prompt_tps", "prompt_tps_ci95"), tb_render_fmt_tps_short,
                     f->total, sizeof f->total);
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
static const char *
cell_note_full(const json_t *c, char *buf, size_t len)
{
  return tb_cellview_note(c, cell_note(c), buf, len);
}

/* True when the cell's self-checks failed; why: their reasons. */
bool
tb_repview_flagged(const json_t *c, char *why, size_t len)
{
  return tb_checks_failed_text(c, why, len)[0] != '\0';
}

/* True when some decode cell has a server view or checks to show. */
bool
tb_repview_any_cellview(const struct tb_repview *v)
{
  for (size_t i = 0; i < v->dctx.n * v->conc.n; i++)
    if (v->grid[i] != NULL && tb_cellview_has(v->grid[i]))
      return true;
  return false;
}

/* ------------------------------------------------------- header contents */

static const struct tb_repview_field hw_fields[] = {
  { "type", "Type" },       { "gpu", "GPU" },       { "gpu_count", "GPU count" },
  { "count", "GPU count" }, { "vram_gb", "VRAM" },  { "cpu", "CPU" },
  { "os", "OS" },           { "driver", "Driver" }, { "interconnect", "Interconnect" },
};
static const struct tb_repview_field eng_fields[] = {
  { "name", "Engine" },     { "version", "Version" },       { "quantization", "Quantization" },
  { "backend", "Backend" }, { "repository", "Repository" }, { "build", "Build" },
  { "commit", "Commit" },
};

const struct tb_repview_section tb_repview_hardware = { "hardware", "Hardware", hw_fields,
                                                        TB_ARRAY_LEN(hw_fields) };
const struct tb_repview_section tb_repview_engine = { "engine", "Engine", eng_fields,
                                                      TB_ARRAY_LEN(eng_fields) };

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

void
tb_repview_section(struct tb_render_buf *b, const struct tb_repview_section *s, const json_t *doc,
                   tb_repview_emit_fn emit)
{
  const json_t *obj = json_object_get(doc, s->member);
  const struct tb_repview_field *f = s->fields;
  size_t nf = s->nfields;
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
  json_object_foreach ((json_t *)obj, k, v) {
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

void
tb_repview_run(struct tb_render_buf *b, const struct tb_repview *v, tb_repview_emit_fn emit)
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
    char *t = tb_xasprintf("%s tokens%s%s%s", n1, src ? " (" : "", src ? src : "", src ? ")" : "");
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
matrix_line(const struct tb_repview *v)
{
  char a[32], z[32], ca[32], cz[32];
  char *out = tb_xstrdup("");
  if (v->dctx.n > 0 && v->conc.n > 0) {
    tb_format_tokens(v->dctx.v[0], a, sizeof a);
    tb_format_tokens(v->dctx.v[v->dctx.n - 1], z, sizeof z);
    snprintf(ca, sizeof ca, "%" PRId64, v->conc.v[0]);
    snprintf(cz, sizeof cz, "%" PRId64, v->conc.v[v->conc.n - 1]);
    free(out);
    out =
      tb_xasprintf("%zu context%s (%s%s%s) " TB_RENDER_TIMES " %zu concurrency level%s (%s%s%s)",
                   v->dctx.n, v->dctx.n == 1 ? "" : "s", a, v->dctx.n > 1 ? TB_RENDER_ENDASH : "",
                   v->dctx.n > 1 ? z : "", v->conc.n, v->conc.n == 1 ? "" : "s", ca,
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
banner_text(const struct tb_repview *v)
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
                          " cells done so far.",
                          done, total);
    return tb_xasprintf("Partial result: the run is still going; %zu cells done so far.", done);
  }
  if (s != NULL && strcmp(s, "partial") == 0)
    return tb_xasprintf("Partial result: %zu cell%s could not be measured (Error).", v->nerror,
                        v->nerror == 1 ? "" : "s");
  if (s != NULL && strcmp(s, "failed") == 0)
    return tb_xasprintf("Partial result: the run failed%s%s. The cells measured before "
                        "the failure are shown.",
                        err ? ": " : "", err ? err : "");
  if (s != NULL && strcmp(s, "cancelled") == 0)
    return tb_xasprintf("Partial result: the run was cancelled. The cells measured "
                        "before are shown.");
  return tb_xasprintf("Partial result: status %s.", s ? s : "unknown");
}

/* The rows of the "All measurements" table: prefill, then decode by
 * context and concurrency; cells not measured yet are left out. */
void
tb_repview_all_rows(struct tb_render_buf *b, const struct tb_repview *v, tb_repview_row_fn row)
{
  char lab[32], note[TB_REPVIEW_NOTE_MAX];
  struct tb_repview_figs f;
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    if (c == NULL)
      continue;
    tb_format_tokens(v->pctx.v[i], lab, sizeof lab);
    tb_repview_cell_figs(c, 0, &f);
    row(b, "Prefill", lab, 1, c, &f, cell_note_full(c, note, sizeof note));
  }
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++) {
      const json_t *c = tb_repview_at(v, r, k);
      if (c == NULL)
        continue;
      tb_format_tokens(v->dctx.v[r], lab, sizeof lab);
      tb_repview_cell_figs(c, 1, &f);
      row(b, "Sustained decode", lab, v->conc.v[k], c, &f, cell_note_full(c, note, sizeof note));
    }
}

/* The decode cells with a server view or checks, through row. */
void
tb_repview_cellview_rows(struct tb_render_buf *b, const struct tb_repview *v,
                         void (*row)(struct tb_render_buf *, const char *, int64_t, const json_t *))
{
  char lab[32];
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++) {
      const json_t *c = tb_repview_at(v, r, k);
      if (c == NULL || !tb_cellview_has(c))
        continue;
      tb_format_tokens(v->dctx.v[r], lab, sizeof lab);
      row(b, lab, v->conc.v[k], c);
    }
}

/* The top of a report: title, "<engine> · <matrix>", the partial banner
 * (when not complete) and the verdict, in markup m. */
void
tb_repview_heading(struct tb_render_buf *b, const struct tb_repview *v,
                   const struct tb_repview_heading *m)
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
