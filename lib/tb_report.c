/*
 * tb_report: renderers from result and comparison documents to HTML,
 * Markdown, CSV and JSON.  See tb_report.h for the contract.
 *
 * Shape of the code: a capped growable buffer (struct rb: once past the cap
 * it stops growing and the render fails), escapers per format, the seed
 * reports' number formats, a "view" of a result document (the sorted axes of
 * the matrix and a grid of borrowed cell pointers, built once with every
 * member type-checked), then one function per format.  Nothing read from a
 * document is trusted: strings are escaped where they are written, numbers
 * are checked finite, arrays and axes are capped.
 */
#include "tb_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tb_compare.h"
#include "tb_json.h"
#include "tb_redact.h"

#define DASH "\xe2\x80\x94" /* — */
#define TIMES "\xc3\x97"    /* × */
#define ENDASH "\xe2\x80\x93"
#define ARROW "\xe2\x86\x92"
#define MINUS "\xe2\x88\x92"

/* ------------------------------------------------------------------ buffer */

struct rb {
  char *p;
  size_t len, cap;
  bool over;
};

static void
rb_put(struct rb *b, const char *s, size_t n)
{
  if (b->over)
    return;
  if (n > TB_REPORT_MAX - b->len) {
    b->over = true;
    return;
  }
  if (b->len + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + n + 1)
      nc *= 2;
    if (nc > TB_REPORT_MAX + 1)
      nc = TB_REPORT_MAX + 1;
    b->p = tb_xrealloc(b->p, nc);
    b->cap = nc;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void
rb_puts(struct rb *b, const char *s)
{
  rb_put(b, s, strlen(s));
}

static void TB_PRINTF(2, 3)
rb_printf(struct rb *b, const char *fmt, ...)
{
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n < sizeof small) {
    rb_put(b, small, (size_t)n);
    return;
  }
  char *big = tb_xmalloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  rb_put(b, big, (size_t)n);
  free(big);
}

static char *
rb_finish(struct rb *b, size_t *len, char **err)
{
  if (b->over) {
    free(b->p);
    *err = tb_xasprintf("report larger than %u bytes", TB_REPORT_MAX);
    return NULL;
  }
  if (b->p == NULL)
    rb_put(b, "", 0);
  if (b->p == NULL) { /* rb_put of 0 bytes on an empty buffer allocates */
    *err = tb_xstrdup("empty report");
    return NULL;
  }
  if (len)
    *len = b->len;
  return b->p;
}

/* ---------------------------------------------------------------- escaping */

/* HTML text and attribute values.  Control characters other than tab and
 * newline are dropped; invalid UTF-8 cannot occur (jansson validates). */
static void
rb_html(struct rb *b, const char *s)
{
  if (s == NULL)
    return;
  const char *run = s;
  for (const char *c = s; *c; c++) {
    const char *rep = NULL;
    switch (*c) {
    case '&': rep = "&amp;"; break;
    case '<': rep = "&lt;"; break;
    case '>': rep = "&gt;"; break;
    case '"': rep = "&quot;"; break;
    case '\'': rep = "&#39;"; break;
    default:
      if ((unsigned char)*c < 0x20 && *c != '\n' && *c != '\t')
        rep = "";
    }
    if (rep) {
      rb_put(b, run, (size_t)(c - run));
      rb_puts(b, rep);
      run = c + 1;
    }
  }
  rb_puts(b, run);
}

/* Markdown inline text (a table cell): punctuation that could start markup is
 * backslash-escaped, HTML metacharacters become entities (GitHub renders
 * inline HTML), newlines become spaces (they would end the table row). */
static void
rb_md(struct rb *b, const char *s)
{
  if (s == NULL)
    return;
  for (const char *c = s; *c; c++) {
    switch (*c) {
    case '<': rb_puts(b, "&lt;"); break;
    case '>': rb_puts(b, "&gt;"); break;
    case '&': rb_puts(b, "&amp;"); break;
    case '\n': case '\r': case '\t': rb_puts(b, " "); break;
    case '\\': case '`': case '*': case '_': case '[': case ']': case '|':
    case '~': case '@':
      rb_put(b, "\\", 1);
      rb_put(b, c, 1);
      break;
    default:
      if ((unsigned char)*c >= 0x20)
        rb_put(b, c, 1);
    }
  }
}

/* RFC 4180 field.  A text field that a spreadsheet would take for a formula
 * (= + - @ at the start) gets a leading apostrophe (OWASP CSV injection). */
static void
rb_csv_str(struct rb *b, const char *s)
{
  if (s == NULL)
    return;
  bool quote = strpbrk(s, ",\"\r\n") != NULL;
  bool formula = strchr("=+-@\t\r", s[0]) != NULL && s[0] != '\0';
  if (quote || formula)
    rb_put(b, "\"", 1);
  if (formula)
    rb_put(b, "'", 1);
  for (const char *c = s; *c; c++) {
    if (*c == '"')
      rb_put(b, "\"\"", 2);
    else
      rb_put(b, c, 1);
  }
  if (quote || formula)
    rb_put(b, "\"", 1);
}

/* A number that reads back as the same double (shortest of %.15g, %.17g). */
static void
rb_csv_num(struct rb *b, double v)
{
  if (!isfinite(v))
    return;
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v)
    snprintf(buf, sizeof buf, "%.17g", v);
  rb_puts(b, buf);
}

/* ----------------------------------------------------------------- numbers */

/* Inserts thousands separators into the integer part of a formatted number. */
static void
group(const char *in, char *out, size_t len)
{
  size_t o = 0;
  const char *p = in;
  if (*p == '-') {
    if (o + 1 < len)
      out[o++] = *p;
    p++;
  }
  size_t digits = strspn(p, "0123456789");
  for (size_t i = 0; i < digits; i++) {
    if (i > 0 && (digits - i) % 3 == 0 && o + 1 < len)
      out[o++] = ',';
    if (o + 1 < len)
      out[o++] = p[i];
  }
  for (p += digits; *p && o + 1 < len; p++)
    out[o++] = *p;
  out[o < len ? o : len - 1] = '\0';
}

void
tb_report_fmt_int(int64_t v, char *buf, size_t len)
{
  char tmp[32];
  snprintf(tmp, sizeof tmp, "%" PRId64, v);
  group(tmp, buf, len);
}

void
tb_report_fmt_tps(double v, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15) {
    snprintf(buf, len, "%s", DASH);
    return;
  }
  char tmp[48];
  snprintf(tmp, sizeof tmp, "%.1f", v);
  group(tmp, buf, len);
}

void
tb_report_fmt_tps_short(double v, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15) {
    snprintf(buf, len, "%s", DASH);
    return;
  }
  const char *unit = "";
  double x = v;
  if (fabs(v) >= 999.95e3) {
    x = v / 1e6;
    unit = "M";
  } else if (fabs(v) >= 999.95) {
    x = v / 1e3;
    unit = "K";
  }
  char tmp[48];
  if (*unit) {
    snprintf(tmp, sizeof tmp, "%.1f", x);
    size_t n = strlen(tmp);
    if (n > 2 && strcmp(tmp + n - 2, ".0") == 0)
      tmp[n - 2] = '\0';
    snprintf(buf, len, "%s%s", tmp, unit);
  } else {
    snprintf(tmp, sizeof tmp, "%.0f", x);
    snprintf(buf, len, "%s", tmp);
  }
}

void
tb_report_fmt_ms(double v, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15) {
    snprintf(buf, len, "%s", DASH);
    return;
  }
  char tmp[48], g[64];
  if (fabs(v) < 9.95)
    snprintf(tmp, sizeof tmp, "%.1f", v);
  else
    snprintf(tmp, sizeof tmp, "%.0f", v);
  group(tmp, g, sizeof g);
  snprintf(buf, len, "%s ms", g);
}

void
tb_report_fmt_ms1(double v, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15) {
    snprintf(buf, len, "%s", DASH);
    return;
  }
  char tmp[48], g[64];
  snprintf(tmp, sizeof tmp, "%.1f", v);
  group(tmp, g, sizeof g);
  snprintf(buf, len, "%s ms", g);
}

/* "%.1f" (average active requests), "30.0 s", "+3.2%" */
static void
fmt_1(double v, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15)
    snprintf(buf, len, "%s", DASH);
  else {
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.1f", v);
    group(tmp, buf, len);
  }
}

static void
fmt_secs(double v, char *buf, size_t len)
{
  char t[40];
  fmt_1(v, t, sizeof t);
  if (isfinite(v) && fabs(v) <= 1e15)
    snprintf(buf, len, "%s s", t);
  else
    snprintf(buf, len, "%s", t);
}

static void
fmt_pct(double ratio, char *buf, size_t len)
{
  if (!isfinite(ratio) || fabs(ratio) > 1e9) {
    snprintf(buf, len, "%s", DASH);
    return;
  }
  double p = (ratio - 1.0) * 100.0;
  if (fabs(p) < 0.05)
    snprintf(buf, len, "0.0%%");
  else
    snprintf(buf, len, "%s%.1f%%", p > 0 ? "+" : MINUS, fabs(p));
}

/* ------------------------------------------------------------ JSON access */




static double
jpct(const json_t *o, const char *k, const char *p)
{
  const json_t *v = json_object_get(o, k);
  if (json_is_object(v))
    return tb_json_num(v, p);
  if (strcmp(p, "p50") == 0 && json_is_number(v))
    return tb_json_num(o, k);
  return NAN;
}

/* ------------------------------------------------------------------- view */

struct axis {
  int64_t v[TB_REPORT_MAX_AXIS];
  size_t n;
  bool truncated;
};

static void
axis_add(struct axis *a, int64_t x)
{
  if (x <= 0 || x > ((int64_t)1 << 40))
    return;
  size_t i = 0;
  while (i < a->n && a->v[i] < x)
    i++;
  if (i < a->n && a->v[i] == x)
    return;
  if (a->n == TB_REPORT_MAX_AXIS) {
    a->truncated = true;
    return;
  }
  memmove(&a->v[i + 1], &a->v[i], (a->n - i) * sizeof a->v[0]);
  a->v[i] = x;
  a->n++;
}

static int
axis_find(const struct axis *a, int64_t x)
{
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a->v[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < a->n && a->v[lo] == x ? (int)lo : -1;
}

static void
axis_from(struct axis *a, const json_t *arr)
{
  size_t i;
  const json_t *v;
  if (!json_is_array(arr))
    return;
  json_array_foreach(arr, i, v) {
    if (i >= 4 * TB_REPORT_MAX_AXIS)
      break;
    if (json_is_integer(v))
      axis_add(a, json_integer_value(v));
  }
}

struct view {
  const json_t *doc;
  const char *status;
  struct axis pctx, dctx, conc;
  const json_t *pcell[TB_REPORT_MAX_AXIS];
  const json_t **grid; /* dctx.n x conc.n, row-major */
  size_t ncells;       /* cells considered */
  size_t ndropped;     /* cells not shown (malformed, over caps) */
  size_t nvalid, nerror, nover, nskipped;
  double max_tps, max_prompt_tps;
};

static int
cell_phase(const json_t *c)
{
  const char *p = tb_json_str(c, "phase");
  if (p == NULL)
    return -1;
  if (strcmp(p, "prefill") == 0)
    return 0;
  if (strcmp(p, "decode") == 0)
    return 1;
  return -1;
}

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
  axis_from(&v->dctx, json_object_get(st, "contexts"));
  axis_from(&v->conc, json_object_get(st, "concurrency"));
  axis_from(&v->pctx, json_object_get(st, "prefill_contexts"));
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
    int ph = cell_phase(c);
    if (ph < 0 || !tb_json_int(c, "context", &ctx))
      continue;
    if (ph == 0)
      axis_add(&v->pctx, ctx);
    else if (tb_json_int(c, "concurrency", &conc)) {
      axis_add(&v->dctx, ctx);
      axis_add(&v->conc, conc);
    }
  }
  v->grid = tb_xcalloc(v->dctx.n * v->conc.n + 1, sizeof *v->grid);
  for (size_t i = 0; i < n; i++) {
    const json_t *c = json_array_get(cells, i);
    int64_t ctx, conc = 1;
    int ph = cell_phase(c);
    int a = -1, b = 0;
    if (ph >= 0 && tb_json_int(c, "context", &ctx)) {
      if (ph == 0)
        a = axis_find(&v->pctx, ctx);
      else if (tb_json_int(c, "concurrency", &conc)) {
        a = axis_find(&v->dctx, ctx);
        b = axis_find(&v->conc, conc);
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

static void
ctx_label(int64_t ctx, char *buf, size_t len)
{
  tb_format_tokens(ctx, buf, len);
}

static const char *
status_word(const json_t *c)
{
  const char *s = cell_status(c);
  if (strcmp(s, "valid") == 0)
    return "Valid";
  if (strcmp(s, "over_capacity") == 0)
    return "Over capacity";
  if (strcmp(s, "error") == 0)
    return "Error";
  if (strcmp(s, "skipped") == 0)
    return "Skipped";
  return "Unknown";
}

/* Figures of a cell as the "All measurements" table shows them. */
struct figs {
  char total[48], per[48], ttft[48], tbt[48], active[48], completed[48],
      out[48], measured[48];
};

static void
cell_figs(const json_t *c, int phase, struct figs *f)
{
  int64_t iv;
  bool valid = st_is(c, "valid");
  snprintf(f->total, sizeof f->total, DASH);
  snprintf(f->per, sizeof f->per, DASH);
  snprintf(f->ttft, sizeof f->ttft, DASH);
  snprintf(f->tbt, sizeof f->tbt, DASH);
  snprintf(f->active, sizeof f->active, DASH);
  snprintf(f->completed, sizeof f->completed, DASH);
  snprintf(f->out, sizeof f->out, DASH);
  snprintf(f->measured, sizeof f->measured, DASH);
  if (!valid)
    return;
  if (phase == 0) {
    tb_report_fmt_tps_short(tb_json_num(c, "prompt_tps"), f->total, sizeof f->total);
    tb_report_fmt_ms(jpct(c, "ttft_ms", "p50"), f->ttft, sizeof f->ttft);
    if (tb_json_int(c, "completed", &iv))
      tb_report_fmt_int(iv, f->completed, sizeof f->completed);
    else
      snprintf(f->completed, sizeof f->completed, "1");
    return;
  }
  tb_report_fmt_tps(tb_json_num(c, "total_tps"), f->total, sizeof f->total);
  tb_report_fmt_tps(tb_json_num(c, "per_request_tps"), f->per, sizeof f->per);
  tb_report_fmt_ms(jpct(c, "ttft_ms", "p50"), f->ttft, sizeof f->ttft);
  tb_report_fmt_ms1(jpct(c, "tbt_ms", "p50"), f->tbt, sizeof f->tbt);
  fmt_1(tb_json_num(c, "avg_active"), f->active, sizeof f->active);
  if (tb_json_int(c, "completed", &iv))
    tb_report_fmt_int(iv, f->completed, sizeof f->completed);
  if (tb_json_int(c, "output_tokens", &iv))
    tb_report_fmt_int(iv, f->out, sizeof f->out);
  fmt_secs(tb_json_num(c, "measured_s"), f->measured, sizeof f->measured);
}

/* The note shown beside a cell: the reason of an error or skip, and the
 * flagged chunk-count fallback. */
static const char *
cell_note(const json_t *c)
{
  if (st_is(c, "error") || st_is(c, "skipped"))
    return tb_json_str(c, "reason");
  const char *ts = tb_json_str(c, "token_source");
  if (ts != NULL && strcmp(ts, "chunks") == 0)
    return "output tokens counted from chunks (no usage from the server)";
  return NULL;
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
    tb_report_fmt_int(json_integer_value(v), buf, len);
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
typedef void (*emit_fn)(struct rb *b, const char *label, const char *value);

static void
vram_text(const json_t *hw, char *buf, size_t len)
{
  double g = tb_json_num(hw, "vram_gb");
  int64_t n = 0;
  buf[0] = '\0';
  if (!isfinite(g) || g <= 0 || g > 1e9)
    return;
  if ((tb_json_int(hw, "gpu_count", &n) || tb_json_int(hw, "count", &n)) && n > 1 && n < 100000)
    snprintf(buf, len, "%g GB (%" PRId64 " " TIMES " %g GB)", g * (double)n, n, g);
  else
    snprintf(buf, len, "%g GB", g);
}

static void
section_fields(struct rb *b, const json_t *obj, const struct field *f, size_t nf,
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
section_run(struct rb *b, const struct view *v, emit_fn emit)
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
    tb_report_fmt_int(iv, n1, sizeof n1);
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
    tb_report_fmt_int(iv, n1, sizeof n1);
    snprintf(buf, sizeof buf, "%s tokens", n1);
    emit(b, "Max output", buf);
  }
  if (tb_json_int(cap, "kv_budget_tokens", &iv)) {
    tb_report_fmt_int(iv, n1, sizeof n1);
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
    emit(b, "KV cache budget", "unknown (no capacity information from the server)");
  }
  if (tb_json_int(cap, "max_running_requests", &iv)) {
    tb_report_fmt_int(iv, n1, sizeof n1);
    emit(b, "Max running requests", n1);
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

/* "Step-3.7-Flash-FP8 on H200 NVL ×2" */
static char *
title_line(const json_t *d)
{
  const json_t *model = json_object_get(d, "model");
  const json_t *hw = json_object_get(d, "hardware");
  const char *m = tb_json_str(model, "name");
  if (m == NULL)
    m = tb_json_str(model, "served");
  const char *g = tb_json_str(hw, "gpu");
  int64_t n = 0;
  char cnt[40] = "";
  if ((tb_json_int(hw, "gpu_count", &n) || tb_json_int(hw, "count", &n)) && n > 0 && n < 100000)
    snprintf(cnt, sizeof cnt, " " TIMES "%" PRId64, n);
  if (m && g)
    return tb_xasprintf("%s on %s%s", m, g, cnt);
  if (m)
    return tb_xstrdup(m);
  if (g)
    return tb_xasprintf("%s%s", g, cnt);
  return NULL;
}

/* "sglang · 0.0.0.dev1 · FP8" */
static char *
engine_line(const json_t *d)
{
  const json_t *e = json_object_get(d, "engine");
  const char *parts[3] = { tb_json_str(e, "name"), tb_json_str(e, "version"), tb_json_str(e, "quantization") };
  char *out = tb_xstrdup("");
  for (size_t i = 0; i < 3; i++) {
    if (parts[i] == NULL || !*parts[i])
      continue;
    char *t = tb_xasprintf("%s%s%s", out, *out ? " \xc2\xb7 " : "", parts[i]);
    free(out);
    out = t;
  }
  return out;
}

/* "6 contexts (8K–251K) × 8 concurrency levels (1–128) · prefill at 8K, 16K" */
static char *
matrix_line(const struct view *v)
{
  char a[32], z[32], ca[32], cz[32];
  char *out = tb_xstrdup("");
  if (v->dctx.n > 0 && v->conc.n > 0) {
    ctx_label(v->dctx.v[0], a, sizeof a);
    ctx_label(v->dctx.v[v->dctx.n - 1], z, sizeof z);
    snprintf(ca, sizeof ca, "%" PRId64, v->conc.v[0]);
    snprintf(cz, sizeof cz, "%" PRId64, v->conc.v[v->conc.n - 1]);
    free(out);
    out = tb_xasprintf("%zu context%s (%s%s%s) " TIMES " %zu concurrency level%s (%s%s%s)",
                       v->dctx.n, v->dctx.n == 1 ? "" : "s", a,
                       v->dctx.n > 1 ? ENDASH : "", v->dctx.n > 1 ? z : "",
                       v->conc.n, v->conc.n == 1 ? "" : "s", ca,
                       v->conc.n > 1 ? ENDASH : "", v->conc.n > 1 ? cz : "");
  }
  if (v->pctx.n > 0) {
    char *t = tb_xasprintf("%s%sprefill at ", out, *out ? " \xc2\xb7 " : "");
    free(out);
    out = t;
    for (size_t i = 0; i < v->pctx.n; i++) {
      ctx_label(v->pctx.v[i], a, sizeof a);
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

/* ------------------------------------------------------------------ HTML */

static const char html_css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;"
    "color:#1b1f24;background:#f6f7f9;margin:0}"
    "main{max-width:1180px;margin:0 auto;padding:24px}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}"
    ".sub{color:#555;margin:2px 0}.muted{color:#666;font-size:12px}"
    ".banner{background:#fff4ce;border:1px solid #e0b400;border-radius:6px;"
    "padding:10px 14px;margin:14px 0;font-weight:600}"
    ".cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:12px;margin-top:16px}"
    ".card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:12px 14px}"
    ".card h3{margin:0 0 6px;font-size:15px}"
    "dl{display:grid;grid-template-columns:auto 1fr;gap:2px 12px;margin:0}"
    "dt{color:#666}dd{margin:0;word-break:break-word}"
    "pre{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:10px;"
    "white-space:pre-wrap;word-break:break-all;font-size:12px}"
    "table{border-collapse:collapse;background:#fff;font-variant-numeric:tabular-nums}"
    "th,td{border:1px solid #dde1e6;padding:4px 8px;text-align:right;vertical-align:middle}"
    "td{white-space:nowrap}td.l:last-child{white-space:normal}"
    "th{background:#eef1f4}td.l,th.l{text-align:left}"
    "table.matrix td{min-width:78px;text-align:center}"
    "table.matrix td b{display:block;font-size:15px}"
    "table.matrix td span{display:block;font-size:11px;opacity:.85}"
    "td.oc{background:#eceff1;color:#78848f;font-size:12px}"
    "td.err{background:#fde7e9;color:#b00020;font-weight:600}"
    "td.sk{background:#f5f5f5;color:#999;font-size:12px}"
    "td.na{color:#bbb}"
    ".bar{display:inline-block;height:10px;background:#4caf50;border-radius:2px;vertical-align:middle}"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}"
    ".charts figure{margin:0;background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:8px}"
    "figcaption{font-weight:600;margin:0 0 4px 6px}"
    ".scroll{overflow-x:auto}"
    ".up{color:#1b7f2a;font-weight:600}.down{color:#b00020;font-weight:600}"
    "tr.reg td{background:#fde7e9}";

static void
html_head(struct rb *b, const char *title)
{
  rb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
             "<title>");
  rb_html(b, title);
  rb_puts(b, "</title><style>");
  rb_puts(b, html_css);
  rb_puts(b, "</style></head>\n<body><main>\n");
}

static void
emit_html(struct rb *b, const char *label, const char *value)
{
  rb_puts(b, "<dt>");
  rb_html(b, label);
  rb_puts(b, "</dt><dd>");
  rb_html(b, value);
  rb_puts(b, "</dd>");
}

static void
html_card(struct rb *b, const char *title, const json_t *obj,
          const struct field *f, size_t nf)
{
  rb_puts(b, "<div class=\"card\"><h3>");
  rb_html(b, title);
  rb_puts(b, "</h3><dl>");
  if (json_is_object(obj) && json_object_size(obj) > 0)
    section_fields(b, obj, f, nf, emit_html);
  else
    emit_html(b, "Not recorded", DASH);
  rb_puts(b, "</dl></div>\n");
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
  double x[TB_REPORT_MAX_AXIS], y[TB_REPORT_MAX_AXIS];
  size_t n;
};

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
svg_chart(struct rb *b, const char *caption, const char *xlabel, const char *ylabel,
          const struct axis *xs, bool xtok, const struct series *s, size_t ns)
{
  if (xs->n == 0 || ns == 0)
    return;
  double ymax = 0;
  for (size_t i = 0; i < ns; i++)
    for (size_t j = 0; j < s[i].n; j++)
      if (isfinite(s[i].y[j]) && s[i].y[j] > ymax)
        ymax = s[i].y[j];
  if (ymax <= 0)
    return;
  ymax = nice_ceil(ymax * 1.05);
  double x0 = log2((double)xs->v[0]), x1 = log2((double)xs->v[xs->n - 1]);
  double pw = CHART_W - CHART_ML - CHART_MR, ph = CHART_H - CHART_MT - CHART_MB;
#define PX(x) (CHART_ML + (x1 > x0 ? (log2(x) - x0) / (x1 - x0) : 0.5) * pw)
#define PY(y) (CHART_MT + ph - (y) / ymax * ph)
  rb_puts(b, "<figure><figcaption>");
  rb_html(b, caption);
  rb_printf(b, "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
            CHART_W, CHART_H, CHART_W, CHART_H);
  rb_html(b, caption);
  rb_puts(b, "\" font-family=\"system-ui,sans-serif\" font-size=\"11\">");
  char lab[48];
  for (int i = 0; i <= 4; i++) {
    double y = ymax * i / 4;
    tb_report_fmt_tps_short(y, lab, sizeof lab);
    rb_printf(b, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e6ea\"/>"
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
      ctx_label(xs->v[i], lab, sizeof lab);
    else
      snprintf(lab, sizeof lab, "%" PRId64, xs->v[i]);
    double px = PX((double)xs->v[i]);
    rb_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.1f\" stroke=\"#f0f2f4\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%s</text>",
              px, px, CHART_MT, CHART_MT + ph, px, CHART_MT + ph + 15, lab);
  }
  rb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#333\">",
            CHART_ML + pw / 2, CHART_H - 6);
  rb_html(b, xlabel);
  rb_printf(b, "</text><text transform=\"translate(14,%.1f) rotate(-90)\" "
               "text-anchor=\"middle\" fill=\"#333\">",
            CHART_MT + ph / 2);
  rb_html(b, ylabel);
  rb_puts(b, "</text>");
  rb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"#c9ced4\"/>",
            CHART_ML, CHART_MT, pw, ph);
  for (size_t i = 0; i < ns; i++) {
    const char *col = palette[i % TB_ARRAY_LEN(palette)];
    rb_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    for (size_t j = 0; j < s[i].n; j++)
      rb_printf(b, "%s%.1f,%.1f", j ? " " : "", PX(s[i].x[j]), PY(s[i].y[j]));
    rb_puts(b, "\"/>");
    for (size_t j = 0; j < s[i].n; j++) {
      tb_report_fmt_tps(s[i].y[j], lab, sizeof lab);
      rb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>",
                PX(s[i].x[j]), PY(s[i].y[j]), col);
      rb_html(b, s[i].name);
      rb_printf(b, ": %s tok/s</title></circle>", lab);
    }
    if (ns > 1) {
      double ly = CHART_MT + 8 + 16.0 * (double)i;
      rb_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">",
                CHART_ML + pw + 10, CHART_ML + pw + 28, ly, ly, col,
                CHART_ML + pw + 32, ly + 4);
      rb_html(b, s[i].name);
      rb_puts(b, "</text>");
    }
  }
#undef PX
#undef PY
  rb_puts(b, "</svg></figure>\n");
}

static void
html_charts(struct rb *b, const struct view *v)
{
  struct series *s = tb_xcalloc(CHART_MAX_SERIES, sizeof *s);
  struct axis px = { 0 };
  s[0].n = 0;
  snprintf(s[0].name, sizeof s[0].name, "prefill");
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    double y = tb_json_num(c, "prompt_tps");
    if (st_is(c, "valid") && isfinite(y) && y >= 0) {
      s[0].x[s[0].n] = (double)v->pctx.v[i];
      s[0].y[s[0].n++] = y;
      axis_add(&px, v->pctx.v[i]);
    }
  }
  bool any = s[0].n > 0 || v->max_tps > 0;
  if (any)
    rb_puts(b, "<h2>Charts</h2><div class=\"charts\">\n");
  if (s[0].n > 0)
    svg_chart(b, "Prefill: prompt tok/s by context length", "context (tokens)",
              "prompt tok/s", &px, true, s, 1);
  size_t ns = 0;
  struct axis cx = { 0 };
  for (size_t r = 0; r < v->dctx.n && ns < CHART_MAX_SERIES; r++) {
    struct series *se = &s[ns];
    se->n = 0;
    ctx_label(v->dctx.v[r], se->name, sizeof se->name);
    for (size_t c = 0; c < v->conc.n; c++) {
      const json_t *cell = grid_at(v, r, c);
      double y = tb_json_num(cell, "total_tps");
      if (st_is(cell, "valid") && isfinite(y) && y >= 0) {
        se->x[se->n] = (double)v->conc.v[c];
        se->y[se->n++] = y;
        axis_add(&cx, v->conc.v[c]);
      }
    }
    if (se->n > 0)
      ns++;
  }
  if (ns > 0)
    svg_chart(b, "Sustained decode: total tok/s by simultaneous requests, per context",
              "simultaneous requests", "total tok/s", &cx, false, s, ns);
  if (any)
    rb_puts(b, "</div>\n");
  free(s);
}

static void
html_matrix(struct rb *b, const struct view *v)
{
  bool running = v->status && strcmp(v->status, "running") == 0;
  rb_puts(b, "<h2>Sustained decode</h2><p class=\"muted\">total tok/s " "\xc2\xb7"
             " rows are context length, columns are simultaneous requests</p>"
             "<div class=\"scroll\"><table class=\"matrix\" id=\"decode-matrix\">"
             "<tr><th class=\"l\">Context</th>");
  for (size_t c = 0; c < v->conc.n; c++)
    rb_printf(b, "<th>%" PRId64 "</th>", v->conc.v[c]);
  rb_puts(b, "</tr>\n");
  char lab[32], t[48], ms[48], style[96];
  for (size_t r = 0; r < v->dctx.n; r++) {
    ctx_label(v->dctx.v[r], lab, sizeof lab);
    rb_printf(b, "<tr><th class=\"l\">%s</th>", lab);
    for (size_t c = 0; c < v->conc.n; c++) {
      const json_t *cell = grid_at(v, r, c);
      rb_printf(b, "<td data-context=\"%" PRId64 "\" data-concurrency=\"%" PRId64 "\"",
                v->dctx.v[r], v->conc.v[c]);
      if (cell == NULL) {
        rb_printf(b, " class=\"na\">%s</td>", running ? "pending" : DASH);
        continue;
      }
      if (st_is(cell, "valid")) {
        double tps = tb_json_num(cell, "total_tps");
        heat(v->max_tps > 0 ? tps / v->max_tps : 0, style, sizeof style);
        tb_report_fmt_tps(tps, t, sizeof t);
        tb_report_fmt_ms(jpct(cell, "ttft_ms", "p50"), ms, sizeof ms);
        rb_printf(b, " class=\"v\" style=\"%s\"><b>%s</b><span>%s TTFT</span></td>",
                  style, t, ms);
      } else if (st_is(cell, "over_capacity")) {
        rb_puts(b, " class=\"oc\">Over capacity</td>");
      } else {
        bool err = st_is(cell, "error");
        rb_printf(b, " class=\"%s\" title=\"", err ? "err" : "sk");
        rb_html(b, tb_json_str(cell, "reason"));
        rb_printf(b, "\">%s</td>", err ? "Error" : "Skipped");
      }
    }
    rb_puts(b, "</tr>\n");
  }
  rb_puts(b, "</table></div>\n<p class=\"muted\">Over capacity: not run because this "
             "many requests at this context would exceed the server's KV cache.<br>"
             "TTFT is measured after the benchmark warms the server's prompt cache, "
             "so it mostly excludes prefill.</p>\n");
}

static void
html_prefill(struct rb *b, const struct view *v)
{
  rb_puts(b, "<h2>Prefill</h2><p class=\"muted\">prompt tok/s by context length "
             "(one cold request per context: prompt tokens / TTFT)</p>"
             "<table id=\"prefill\"><tr><th class=\"l\">Context</th><th>Prompt tokens</th>"
             "<th>Prompt tok/s</th><th>TTFT</th><th class=\"l\"></th></tr>\n");
  char lab[32], n1[48], t[48], ms[48];
  int64_t pt;
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    ctx_label(v->pctx.v[i], lab, sizeof lab);
    rb_printf(b, "<tr data-context=\"%" PRId64 "\"><th class=\"l\">%s context</th>",
              v->pctx.v[i], lab);
    if (!st_is(c, "valid")) {
      rb_printf(b, "<td>%s</td><td colspan=\"3\" class=\"l\">", DASH);
      rb_html(b, c ? status_word(c) : "pending");
      if (c && tb_json_str(c, "reason")) {
        rb_puts(b, ": ");
        rb_html(b, tb_json_str(c, "reason"));
      }
      rb_puts(b, "</td></tr>\n");
      continue;
    }
    if (tb_json_int(c, "prompt_tokens", &pt))
      tb_report_fmt_int(pt, n1, sizeof n1);
    else
      snprintf(n1, sizeof n1, DASH);
    double tps = tb_json_num(c, "prompt_tps");
    tb_report_fmt_tps_short(tps, t, sizeof t);
    tb_report_fmt_ms(jpct(c, "ttft_ms", "p50"), ms, sizeof ms);
    double w = v->max_prompt_tps > 0 && isfinite(tps) ? 160.0 * tps / v->max_prompt_tps : 0;
    rb_printf(b, "<td>%s</td><td><b>%s</b></td><td>%s TTFT</td>"
                 "<td class=\"l\"><span class=\"bar\" style=\"width:%.0fpx\"></span></td></tr>\n",
              n1, t, ms, w);
  }
  rb_puts(b, "</table>\n");
}

static void
html_all(struct rb *b, const struct view *v)
{
  rb_puts(b, "<h2>All measurements</h2><p class=\"muted\">Latencies are medians. Total "
             "tok/s is output across all simultaneous requests.</p><div class=\"scroll\">"
             "<table id=\"all\"><tr><th class=\"l\">Phase</th><th>Context</th>"
             "<th>Requests at once</th><th class=\"l\">Status</th><th>Total tok/s</th>"
             "<th>Per request tok/s</th><th>TTFT</th><th>Time between tokens</th>"
             "<th>Average active requests</th><th>Completed requests</th>"
             "<th>Output tokens</th><th>Measured for</th><th class=\"l\">Note</th></tr>\n");
  char lab[32];
  struct figs f;
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    if (c == NULL)
      continue;
    ctx_label(v->pctx.v[i], lab, sizeof lab);
    cell_figs(c, 0, &f);
    rb_printf(b, "<tr><td class=\"l\">Prefill</td><td>%s</td><td>1</td><td class=\"l\">%s</td>"
                 "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                 "<td>%s</td><td>%s</td><td class=\"l\">",
              lab, status_word(c), f.total, f.per, f.ttft, f.tbt, f.active, f.completed,
              f.out, f.measured);
    rb_html(b, cell_note(c));
    rb_puts(b, "</td></tr>\n");
  }
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++) {
      const json_t *c = grid_at(v, r, k);
      if (c == NULL)
        continue;
      ctx_label(v->dctx.v[r], lab, sizeof lab);
      cell_figs(c, 1, &f);
      rb_printf(b, "<tr><td class=\"l\">Sustained decode</td><td>%s</td><td>%" PRId64
                   "</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                   "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l\">",
                lab, v->conc.v[k], status_word(c), f.total, f.per, f.ttft, f.tbt,
                f.active, f.completed, f.out, f.measured);
      rb_html(b, cell_note(c));
      rb_puts(b, "</td></tr>\n");
    }
  rb_puts(b, "</table></div>\n");
}

static void
render_html(struct rb *b, const struct view *v)
{
  const json_t *d = v->doc;
  char *title = title_line(d);
  char *eng = engine_line(d);
  char *mx = matrix_line(v);
  char *ban = banner_text(v);
  html_head(b, title ? title : "Speed test matrix");
  rb_puts(b, "<h1>Speed test matrix</h1>\n<p class=\"sub\"><b>");
  rb_html(b, title ? title : "Unnamed run");
  rb_puts(b, "</b></p><p class=\"sub\">");
  rb_html(b, eng);
  if (*eng && *mx)
    rb_puts(b, " \xc2\xb7 ");
  rb_html(b, mx);
  rb_puts(b, "</p>\n");
  if (ban) {
    rb_puts(b, "<div class=\"banner\" id=\"partial\">");
    rb_html(b, ban);
    rb_puts(b, "</div>\n");
  }
  rb_puts(b, "<div class=\"cards\">");
  html_card(b, "Hardware", json_object_get(d, "hardware"), hw_fields,
            TB_ARRAY_LEN(hw_fields));
  html_card(b, "Engine", json_object_get(d, "engine"), eng_fields,
            TB_ARRAY_LEN(eng_fields));
  rb_puts(b, "<div class=\"card\"><h3>Run</h3><dl>");
  section_run(b, v, emit_html);
  rb_puts(b, "</dl></div></div>\n<h2>Launch command</h2><pre id=\"launch\">");
  const char *lc = tb_json_str(d, "launch_command");
  rb_html(b, lc ? lc : "(not recorded)");
  rb_puts(b, "</pre>\n");
  if (v->pctx.n > 0)
    html_prefill(b, v);
  if (v->dctx.n > 0 && v->conc.n > 0)
    html_matrix(b, v);
  html_charts(b, v);
  html_all(b, v);
  if (v->ndropped > 0)
    rb_printf(b, "<p class=\"muted\">%zu malformed or duplicate cells were left out.</p>\n",
              v->ndropped);
  rb_puts(b, "<p class=\"muted\">K = 1,024 tokens for contexts; tok/s figures use K = "
             "1,000. Generated by tokbench.</p>\n</main></body></html>\n");
  free(title);
  free(eng);
  free(mx);
  free(ban);
}

/* -------------------------------------------------------------- Markdown */

static void
emit_md(struct rb *b, const char *label, const char *value)
{
  rb_puts(b, "| ");
  rb_md(b, label);
  rb_puts(b, " | ");
  rb_md(b, value);
  rb_puts(b, " |\n");
}

/* A fenced code block whose fence is longer than any backtick run inside,
 * so no content can close it (CommonMark 4.5). */
static void
md_code(struct rb *b, const char *s)
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
    rb_put(b, "`", 1);
  rb_puts(b, "sh\n");
  for (const char *c = s; *c; c++)
    if ((unsigned char)*c >= 0x20 || *c == '\n' || *c == '\t')
      rb_put(b, c, 1);
  rb_puts(b, "\n");
  for (size_t i = 0; i < n; i++)
    rb_put(b, "`", 1);
  rb_puts(b, "\n");
}

static void
render_md(struct rb *b, const struct view *v)
{
  const json_t *d = v->doc;
  char *title = title_line(d);
  char *eng = engine_line(d);
  char *mx = matrix_line(v);
  char *ban = banner_text(v);
  rb_puts(b, "## Speed test matrix\n\n**");
  rb_md(b, title ? title : "Unnamed run");
  rb_puts(b, "**  \n");
  rb_md(b, eng);
  if (*eng && *mx)
    rb_puts(b, " \xc2\xb7 ");
  rb_md(b, mx);
  rb_puts(b, "\n\n");
  if (ban) {
    rb_puts(b, "> **Warning:** ");
    rb_md(b, ban);
    rb_puts(b, "\n\n");
  }
  rb_puts(b, "| | |\n|---|---|\n| **Hardware** | |\n");
  section_fields(b, json_object_get(d, "hardware"), hw_fields, TB_ARRAY_LEN(hw_fields),
                 emit_md);
  rb_puts(b, "| **Engine** | |\n");
  section_fields(b, json_object_get(d, "engine"), eng_fields, TB_ARRAY_LEN(eng_fields),
                 emit_md);
  rb_puts(b, "| **Run** | |\n");
  section_run(b, v, emit_md);
  const char *lc = tb_json_str(d, "launch_command");
  if (lc) {
    rb_puts(b, "\n<details><summary>Launch command</summary>\n\n");
    md_code(b, lc);
    rb_puts(b, "\n</details>\n");
  }
  char lab[32], n1[48], t[48], ms[48];
  int64_t pt;
  if (v->pctx.n > 0) {
    rb_puts(b, "\n### Prefill\n\n| Context | Prompt tokens | Prompt tok/s | TTFT |\n"
               "|---|---:|---:|---:|\n");
    for (size_t i = 0; i < v->pctx.n; i++) {
      const json_t *c = v->pcell[i];
      ctx_label(v->pctx.v[i], lab, sizeof lab);
      if (!st_is(c, "valid")) {
        rb_printf(b, "| %s | %s | %s | %s |\n", lab, DASH, c ? status_word(c) : "pending",
                  DASH);
        continue;
      }
      if (tb_json_int(c, "prompt_tokens", &pt))
        tb_report_fmt_int(pt, n1, sizeof n1);
      else
        snprintf(n1, sizeof n1, DASH);
      tb_report_fmt_tps_short(tb_json_num(c, "prompt_tps"), t, sizeof t);
      tb_report_fmt_ms(jpct(c, "ttft_ms", "p50"), ms, sizeof ms);
      rb_printf(b, "| %s | %s | %s | %s |\n", lab, n1, t, ms);
    }
  }
  if (v->dctx.n > 0 && v->conc.n > 0) {
    rb_puts(b, "\n### Sustained decode\n\ntotal tok/s \xc2\xb7 median TTFT; rows are "
               "context length, columns are simultaneous requests\n\n| Context |");
    for (size_t c = 0; c < v->conc.n; c++)
      rb_printf(b, " %" PRId64 " |", v->conc.v[c]);
    rb_puts(b, "\n|---|");
    for (size_t c = 0; c < v->conc.n; c++)
      rb_puts(b, "---:|");
    rb_puts(b, "\n");
    for (size_t r = 0; r < v->dctx.n; r++) {
      ctx_label(v->dctx.v[r], lab, sizeof lab);
      rb_printf(b, "| %s |", lab);
      for (size_t c = 0; c < v->conc.n; c++) {
        const json_t *cell = grid_at(v, r, c);
        if (st_is(cell, "valid")) {
          tb_report_fmt_tps(tb_json_num(cell, "total_tps"), t, sizeof t);
          tb_report_fmt_ms(jpct(cell, "ttft_ms", "p50"), ms, sizeof ms);
          rb_printf(b, " **%s**<br>%s TTFT |", t, ms);
        } else if (cell == NULL) {
          rb_puts(b, " " DASH " |");
        } else {
          rb_printf(b, " %s |", status_word(cell));
        }
      }
      rb_puts(b, "\n");
    }
    rb_puts(b, "\nOver capacity: not run because this many requests at this context "
               "would exceed the server's KV cache.\n");
  }
  rb_puts(b, "\n<details><summary>All measurements</summary>\n\n"
             "| Phase | Context | Requests at once | Status | Total tok/s | Per request "
             "tok/s | TTFT | Time between tokens | Average active requests | Completed "
             "requests | Output tokens | Measured for | Note |\n"
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  struct figs f;
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    if (c == NULL)
      continue;
    ctx_label(v->pctx.v[i], lab, sizeof lab);
    cell_figs(c, 0, &f);
    rb_printf(b, "| Prefill | %s | 1 | %s | %s | %s | %s | %s | %s | %s | %s | %s | ", lab,
              status_word(c), f.total, f.per, f.ttft, f.tbt, f.active, f.completed, f.out,
              f.measured);
    rb_md(b, cell_note(c));
    rb_puts(b, " |\n");
  }
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++) {
      const json_t *c = grid_at(v, r, k);
      if (c == NULL)
        continue;
      ctx_label(v->dctx.v[r], lab, sizeof lab);
      cell_figs(c, 1, &f);
      rb_printf(b, "| Sustained decode | %s | %" PRId64 " | %s | %s | %s | %s | %s | %s | "
                   "%s | %s | %s | ",
                lab, v->conc.v[k], status_word(c), f.total, f.per, f.ttft, f.tbt, f.active,
                f.completed, f.out, f.measured);
      rb_md(b, cell_note(c));
      rb_puts(b, " |\n");
    }
  rb_puts(b, "\n</details>\n");
  free(title);
  free(eng);
  free(mx);
  free(ban);
}

/* ------------------------------------------------------------------- CSV */

static const char csv_header[] =
    "phase,context,context_label,concurrency,status,reason,prompt_tokens,prompt_tps,"
    "total_tps,per_request_tps,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,tbt_p50_ms,"
    "tbt_p90_ms,tbt_p99_ms,avg_active,avg_active_source,completed,output_tokens,"
    "measured_s,token_source\r\n";

static void
csv_int(struct rb *b, const json_t *c, const char *k)
{
  int64_t v;
  if (tb_json_int(c, k, &v))
    rb_printf(b, "%" PRId64, v);
}

static void
csv_row(struct rb *b, const json_t *c, int phase, int64_t ctx, int64_t conc)
{
  char lab[32];
  ctx_label(ctx, lab, sizeof lab);
  const char *st = tb_json_str(c, "status");
  rb_printf(b, "%s,%" PRId64 ",%s,%" PRId64 ",", phase ? "decode" : "prefill", ctx, lab,
            conc);
  rb_csv_str(b, st ? st : "");
  rb_puts(b, ",");
  rb_csv_str(b, tb_json_str(c, "reason"));
  rb_puts(b, ",");
  csv_int(b, c, "prompt_tokens");
  rb_puts(b, ",");
  rb_csv_num(b, tb_json_num(c, "prompt_tps"));
  rb_puts(b, ",");
  rb_csv_num(b, tb_json_num(c, "total_tps"));
  rb_puts(b, ",");
  rb_csv_num(b, tb_json_num(c, "per_request_tps"));
  static const char *const pct[] = { "p50", "p90", "p99" };
  for (size_t i = 0; i < 3; i++) {
    rb_puts(b, ",");
    rb_csv_num(b, jpct(c, "ttft_ms", pct[i]));
  }
  for (size_t i = 0; i < 3; i++) {
    rb_puts(b, ",");
    rb_csv_num(b, jpct(c, "tbt_ms", pct[i]));
  }
  rb_puts(b, ",");
  rb_csv_num(b, tb_json_num(c, "avg_active"));
  rb_puts(b, ",");
  rb_csv_str(b, tb_json_str(c, "avg_active_source"));
  rb_puts(b, ",");
  csv_int(b, c, "completed");
  rb_puts(b, ",");
  csv_int(b, c, "output_tokens");
  rb_puts(b, ",");
  rb_csv_num(b, tb_json_num(c, "measured_s"));
  rb_puts(b, ",");
  rb_csv_str(b, tb_json_str(c, "token_source"));
  rb_puts(b, "\r\n");
}

static void
render_csv(struct rb *b, const struct view *v)
{
  rb_puts(b, csv_header);
  for (size_t i = 0; i < v->pctx.n; i++)
    if (v->pcell[i])
      csv_row(b, v->pcell[i], 0, v->pctx.v[i], 1);
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++)
      if (grid_at(v, r, k))
        csv_row(b, grid_at(v, r, k), 1, v->dctx.v[r], v->conc.v[k]);
}

/* ------------------------------------------------------------------ JSON */

static void
render_json(struct rb *b, const json_t *doc)
{
  char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (s == NULL) {
    b->over = true;
    return;
  }
  rb_puts(b, s);
  rb_puts(b, "\n");
  free(s);
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
  struct rb b = { 0 };
  /* any document, however old or wherever it came from, is shown redacted */
  json_t *safe = tb_redact_document(doc);
  if (f == TB_REPORT_JSON) {
    render_json(&b, safe);
    json_decref(safe);
    return rb_finish(&b, len, err);
  }
  struct view v;
  view_build(&v, safe);
  switch (f) {
  case TB_REPORT_HTML: render_html(&b, &v); break;
  case TB_REPORT_MD: render_md(&b, &v); break;
  case TB_REPORT_CSV: render_csv(&b, &v); break;
  default: render_json(&b, safe); break;
  }
  view_free(&v);
  json_decref(safe);
  return rb_finish(&b, len, err);
}

/* ============================================================ compare */

/* A comparison document's cell, type-checked. */
struct ccell {
  const json_t *c;
  int phase;
  int64_t ctx, conc;
};

static bool
ccell_get(const json_t *c, struct ccell *o)
{
  o->c = c;
  o->phase = cell_phase(c);
  o->conc = 1;
  if (o->phase < 0 || !tb_json_int(c, "context", &o->ctx))
    return false;
  if (!tb_json_int(c, "concurrency", &o->conc))
    o->conc = 1;
  return true;
}

static const json_t *
cmetric(const json_t *c, const char *m)
{
  return json_object_get(json_object_get(c, "metrics"), m);
}

/* Direction-aware class for a ratio: "up" = better, "down" = worse. */
static const char *
ratio_class(double r, bool higher_better, double tol)
{
  if (!isfinite(r))
    return "";
  if (higher_better ? r < 1 - tol : r > 1 + tol)
    return "down";
  if (higher_better ? r > 1 + tol : r < 1 - tol)
    return "up";
  return "";
}

static void
fmt_metric(const char *metric, double v, char *buf, size_t len)
{
  if (strcmp(metric, "prompt_tps") == 0)
    tb_report_fmt_tps_short(v, buf, len);
  else if (strcmp(metric, "total_tps") == 0)
    tb_report_fmt_tps(v, buf, len);
  else if (strcmp(metric, "tbt_p50_ms") == 0)
    tb_report_fmt_ms1(v, buf, len);
  else
    tb_report_fmt_ms(v, buf, len);
}

static char *
side_title(const json_t *side)
{
  char *t = title_line(side);
  char *e = engine_line(side);
  const char *rid = tb_json_str(side, "run_id");
  char *s = tb_xasprintf("%s%s%s%s%s", t ? t : "", t && *e ? " \xc2\xb7 " : "", e,
                         rid ? " \xc2\xb7 run " : "", rid ? rid : "");
  free(t);
  free(e);
  return s;
}

struct cview {
  const json_t *doc;
  double tol;
  struct axis dctx, conc;
  const json_t **grid;
  const json_t *regs;
  size_t ncells;
};

static void
cview_build(struct cview *v, const json_t *cmp)
{
  memset(v, 0, sizeof *v);
  v->doc = cmp;
  v->tol = tb_json_num(cmp, "tolerance");
  if (!isfinite(v->tol))
    v->tol = TB_COMPARE_DEFAULT_TOLERANCE;
  v->regs = json_object_get(cmp, "regressions");
  const json_t *cells = json_object_get(cmp, "cells");
  size_t n = json_is_array(cells) ? json_array_size(cells) : 0;
  if (n > 2 * TB_REPORT_MAX_CELLS)
    n = 2 * TB_REPORT_MAX_CELLS;
  v->ncells = n;
  struct ccell cc;
  for (size_t i = 0; i < n; i++)
    if (ccell_get(json_array_get(cells, i), &cc) && cc.phase == 1) {
      axis_add(&v->dctx, cc.ctx);
      axis_add(&v->conc, cc.conc);
    }
  v->grid = tb_xcalloc(v->dctx.n * v->conc.n + 1, sizeof *v->grid);
  for (size_t i = 0; i < n; i++)
    if (ccell_get(json_array_get(cells, i), &cc) && cc.phase == 1) {
      int a = axis_find(&v->dctx, cc.ctx), k = axis_find(&v->conc, cc.conc);
      if (a >= 0 && k >= 0 && v->grid[(size_t)a * v->conc.n + (size_t)k] == NULL)
        v->grid[(size_t)a * v->conc.n + (size_t)k] = cc.c;
    }
}

static const char *
status_text(const char *s)
{
  if (s == NULL)
    return "not measured";
  if (strcmp(s, "valid") == 0)
    return "Valid";
  if (strcmp(s, "over_capacity") == 0)
    return "Over capacity";
  if (strcmp(s, "error") == 0)
    return "Error";
  if (strcmp(s, "skipped") == 0)
    return "Skipped";
  return "Unknown";
}

static const char *
metric_label(const char *m)
{
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  for (size_t i = 0; m != NULL && i < nm; i++)
    if (strcmp(ms[i].name, m) == 0)
      return ms[i].label;
  return m;
}

static void
render_compare_html(struct rb *b, const struct cview *v)
{
  const json_t *d = v->doc;
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  char *bt = side_title(json_object_get(d, "base"));
  char *ht = side_title(json_object_get(d, "head"));
  char t1[48], t2[48], t3[48], lab[32];
  html_head(b, "tokbench comparison");
  rb_puts(b, "<h1>Comparison</h1><div class=\"cards\"><div class=\"card\"><h3>Base</h3><p>");
  rb_html(b, bt);
  rb_puts(b, "</p></div><div class=\"card\"><h3>Head</h3><p>");
  rb_html(b, ht);
  rb_puts(b, "</p></div></div>\n");
  size_t nreg = json_is_array(v->regs) ? json_array_size(v->regs) : 0;
  if (nreg > 0)
    rb_printf(b, "<div class=\"banner\" id=\"regressed\">%zu regression%s beyond the "
                 "tolerated %.1f%%.</div>\n",
              nreg, nreg == 1 ? "" : "s", v->tol * 100);
  else
    rb_printf(b, "<p id=\"regressed\">No regression beyond the tolerated %.1f%%.</p>\n",
              v->tol * 100);
  rb_puts(b, "<h2>Summary</h2><p class=\"muted\">Geometric mean of head / base over the "
             "cells valid in both.</p><table id=\"summary\"><tr><th class=\"l\">Metric</th>"
             "<th>Ratio</th><th>Change</th><th>Cells</th><th class=\"l\">Better</th></tr>\n");
  const json_t *sum = json_object_get(d, "summary");
  for (size_t i = 0; i < nm; i++) {
    const json_t *s = json_object_get(sum, ms[i].name);
    double g = tb_json_num(s, "geomean");
    int64_t n = 0;
    if (!tb_json_int(s, "cells", &n))
      n = 0;
    fmt_pct(g, t1, sizeof t1);
    rb_printf(b, "<tr><td class=\"l\">%s %s</td>", ms[i].phase, ms[i].label);
    if (isfinite(g))
      rb_printf(b, "<td>%.3f" TIMES "</td>", g);
    else
      rb_puts(b, "<td>" DASH "</td>");
    rb_printf(b, "<td class=\"%s\">%s</td><td>%" PRId64 "</td><td class=\"l\">%s</td></tr>\n",
              ratio_class(g, ms[i].higher_better, 0), t1, n,
              ms[i].higher_better ? "higher" : "lower");
  }
  rb_puts(b, "</table>\n");
  if (nreg > 0) {
    rb_puts(b, "<h2>Regressions</h2><table id=\"regressions\"><tr><th class=\"l\">Phase</th>"
               "<th>Context</th><th>Requests at once</th><th class=\"l\">Metric</th>"
               "<th>Base</th><th>Head</th><th>Change</th></tr>\n");
    for (size_t i = 0; i < nreg && i < TB_REPORT_MAX_CELLS; i++) {
      const json_t *g = json_array_get(v->regs, i);
      int64_t ctx = 0, conc = 0;
      if (!tb_json_int(g, "context", &ctx) || !tb_json_int(g, "concurrency", &conc))
        continue;
      const char *m = tb_json_str(g, "metric");
      ctx_label(ctx, lab, sizeof lab);
      rb_printf(b, "<tr class=\"reg\"><td class=\"l\">%s</td><td>%s</td><td>%" PRId64
                   "</td><td class=\"l\">",
                cell_phase(g) == 0 ? "Prefill" : "Sustained decode", lab, conc);
      rb_html(b, m && strcmp(m, "status") == 0 ? "Status" : metric_label(m));
      rb_puts(b, "</td>");
      if (m && strcmp(m, "status") == 0) {
        rb_puts(b, "<td>valid</td><td>");
        rb_html(b, tb_json_str(g, "head"));
        rb_puts(b, "</td><td class=\"down\">lost</td></tr>\n");
        continue;
      }
      fmt_metric(m ? m : "", tb_json_num(g, "base"), t1, sizeof t1);
      fmt_metric(m ? m : "", tb_json_num(g, "head"), t2, sizeof t2);
      fmt_pct(tb_json_num(g, "ratio"), t3, sizeof t3);
      rb_printf(b, "<td>%s</td><td>%s</td><td class=\"down\">%s</td></tr>\n", t1, t2, t3);
    }
    rb_puts(b, "</table>\n");
  }
  if (v->dctx.n > 0 && v->conc.n > 0) {
    rb_puts(b, "<h2>Sustained decode: total tok/s, head vs base</h2><div class=\"scroll\">"
               "<table class=\"matrix\" id=\"compare-matrix\"><tr><th class=\"l\">Context</th>");
    for (size_t c = 0; c < v->conc.n; c++)
      rb_printf(b, "<th>%" PRId64 "</th>", v->conc.v[c]);
    rb_puts(b, "</tr>\n");
    for (size_t r = 0; r < v->dctx.n; r++) {
      ctx_label(v->dctx.v[r], lab, sizeof lab);
      rb_printf(b, "<tr><th class=\"l\">%s</th>", lab);
      for (size_t c = 0; c < v->conc.n; c++) {
        const json_t *cell = v->grid[r * v->conc.n + c];
        const json_t *m = cmetric(cell, "total_tps");
        double ratio = tb_json_num(m, "ratio");
        if (cell == NULL) {
          rb_puts(b, "<td class=\"na\">" DASH "</td>");
        } else if (isfinite(ratio)) {
          tb_report_fmt_tps(tb_json_num(m, "head"), t1, sizeof t1);
          tb_report_fmt_tps(tb_json_num(m, "base"), t2, sizeof t2);
          fmt_pct(ratio, t3, sizeof t3);
          rb_printf(b, "<td><b>%s</b><span>was %s</span><span class=\"%s\">%s</span></td>",
                    t1, t2, ratio_class(ratio, true, v->tol), t3);
        } else {
          /* Valid on one side only, or on neither: say what each side was. */
          const char *bs = tb_json_str(cell, "base_status"), *hs = tb_json_str(cell, "head_status");
          double hv = tb_json_num(m, "head"), bv = tb_json_num(m, "base");
          if (isfinite(hv)) {
            tb_report_fmt_tps(hv, t1, sizeof t1);
            rb_printf(b, "<td><b>%s</b><span>base: %s</span></td>", t1, status_text(bs));
          } else if (isfinite(bv)) {
            tb_report_fmt_tps(bv, t2, sizeof t2);
            rb_printf(b, "<td class=\"err\"><span>was %s</span><span>head: %s</span></td>", t2,
                      status_text(hs));
          } else if (bs != NULL && hs != NULL && strcmp(bs, hs) == 0) {
            rb_printf(b, "<td class=\"%s\">%s</td>", strcmp(hs, "over_capacity") == 0 ? "oc" : "sk",
                      status_text(hs));
          } else {
            rb_printf(b, "<td class=\"sk\">%s / %s</td>", status_text(bs), status_text(hs));
          }
        }
      }
      rb_puts(b, "</tr>\n");
    }
    rb_puts(b, "</table></div>\n");
  }
  rb_puts(b, "<h2>All cells</h2><div class=\"scroll\"><table id=\"cells\"><tr>"
             "<th class=\"l\">Phase</th><th>Context</th><th>Requests at once</th>"
             "<th class=\"l\">Base</th><th class=\"l\">Head</th><th class=\"l\">Metric</th>"
             "<th>Base</th><th>Head</th><th>Change</th></tr>\n");
  const json_t *cells = json_object_get(d, "cells");
  for (size_t i = 0; i < v->ncells; i++) {
    struct ccell cc;
    if (!ccell_get(json_array_get(cells, i), &cc))
      continue;
    ctx_label(cc.ctx, lab, sizeof lab);
    for (size_t k = 0; k < nm; k++) {
      if (strcmp(ms[k].phase, cc.phase ? "decode" : "prefill") != 0)
        continue;
      const json_t *m = cmetric(cc.c, ms[k].name);
      fmt_metric(ms[k].name, tb_json_num(m, "base"), t1, sizeof t1);
      fmt_metric(ms[k].name, tb_json_num(m, "head"), t2, sizeof t2);
      fmt_pct(tb_json_num(m, "ratio"), t3, sizeof t3);
      rb_printf(b, "<tr><td class=\"l\">%s</td><td>%s</td><td>%" PRId64 "</td><td class=\"l\">",
                cc.phase ? "Sustained decode" : "Prefill", lab, cc.conc);
      rb_html(b, tb_json_str(cc.c, "base_status") ? tb_json_str(cc.c, "base_status") : "absent");
      rb_puts(b, "</td><td class=\"l\">");
      rb_html(b, tb_json_str(cc.c, "head_status") ? tb_json_str(cc.c, "head_status") : "absent");
      rb_printf(b, "</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td></tr>\n",
                ms[k].label, t1, t2,
                ratio_class(tb_json_num(m, "ratio"), ms[k].higher_better, v->tol), t3);
    }
  }
  rb_puts(b, "</table></div>\n<p class=\"muted\">Generated by tokbench.</p></main></body></html>\n");
  free(bt);
  free(ht);
}

static void
render_compare_md(struct rb *b, const struct cview *v)
{
  const json_t *d = v->doc;
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  char *bt = side_title(json_object_get(d, "base"));
  char *ht = side_title(json_object_get(d, "head"));
  char t1[48], t2[48], t3[48], lab[32];
  rb_puts(b, "## tokbench comparison\n\n- **Base:** ");
  rb_md(b, bt);
  rb_puts(b, "\n- **Head:** ");
  rb_md(b, ht);
  rb_puts(b, "\n\n");
  size_t nreg = json_is_array(v->regs) ? json_array_size(v->regs) : 0;
  if (nreg > 0)
    rb_printf(b, "> **%zu regression%s** beyond the tolerated %.1f%%.\n\n", nreg,
              nreg == 1 ? "" : "s", v->tol * 100);
  else
    rb_printf(b, "No regression beyond the tolerated %.1f%%.\n\n", v->tol * 100);
  rb_puts(b, "| Metric | Ratio (geomean) | Change | Cells |\n|---|---:|---:|---:|\n");
  const json_t *sum = json_object_get(d, "summary");
  for (size_t i = 0; i < nm; i++) {
    const json_t *s = json_object_get(sum, ms[i].name);
    double g = tb_json_num(s, "geomean");
    int64_t n = 0;
    if (!tb_json_int(s, "cells", &n))
      n = 0;
    fmt_pct(g, t1, sizeof t1);
    if (isfinite(g))
      snprintf(t2, sizeof t2, "%.3f" TIMES, g);
    else
      snprintf(t2, sizeof t2, DASH);
    rb_printf(b, "| %s %s (%s is better) | %s | %s | %" PRId64 " |\n", ms[i].phase,
              ms[i].label, ms[i].higher_better ? "higher" : "lower", t2, t1, n);
  }
  if (nreg > 0) {
    rb_puts(b, "\n### Regressions\n\n| Phase | Context | Requests at once | Metric | Base | "
               "Head | Change |\n|---|---|---:|---|---:|---:|---:|\n");
    for (size_t i = 0; i < nreg && i < TB_REPORT_MAX_CELLS; i++) {
      const json_t *g = json_array_get(v->regs, i);
      int64_t ctx = 0, conc = 0;
      if (!tb_json_int(g, "context", &ctx) || !tb_json_int(g, "concurrency", &conc))
        continue;
      const char *m = tb_json_str(g, "metric");
      ctx_label(ctx, lab, sizeof lab);
      rb_printf(b, "| %s | %s | %" PRId64 " | ", cell_phase(g) == 0 ? "Prefill" : "Sustained decode",
                lab, conc);
      rb_md(b, m && strcmp(m, "status") == 0 ? "Status" : metric_label(m));
      if (m && strcmp(m, "status") == 0) {
        rb_puts(b, " | valid | ");
        rb_md(b, tb_json_str(g, "head"));
        rb_puts(b, " | lost |\n");
        continue;
      }
      fmt_metric(m ? m : "", tb_json_num(g, "base"), t1, sizeof t1);
      fmt_metric(m ? m : "", tb_json_num(g, "head"), t2, sizeof t2);
      fmt_pct(tb_json_num(g, "ratio"), t3, sizeof t3);
      rb_printf(b, " | %s | %s | %s |\n", t1, t2, t3);
    }
  }
  if (v->dctx.n > 0 && v->conc.n > 0) {
    rb_puts(b, "\n### Sustained decode: total tok/s, head (change vs base)\n\n| Context |");
    for (size_t c = 0; c < v->conc.n; c++)
      rb_printf(b, " %" PRId64 " |", v->conc.v[c]);
    rb_puts(b, "\n|---|");
    for (size_t c = 0; c < v->conc.n; c++)
      rb_puts(b, "---:|");
    rb_puts(b, "\n");
    for (size_t r = 0; r < v->dctx.n; r++) {
      ctx_label(v->dctx.v[r], lab, sizeof lab);
      rb_printf(b, "| %s |", lab);
      for (size_t c = 0; c < v->conc.n; c++) {
        const json_t *cell = v->grid[r * v->conc.n + c];
        const json_t *m = cmetric(cell, "total_tps");
        double ratio = tb_json_num(m, "ratio");
        if (cell == NULL) {
          rb_puts(b, " " DASH " |");
        } else if (isfinite(ratio)) {
          tb_report_fmt_tps(tb_json_num(m, "head"), t1, sizeof t1);
          fmt_pct(ratio, t3, sizeof t3);
          rb_printf(b, " %s (%s) |", t1, t3);
        } else {
          const char *bs = tb_json_str(cell, "base_status"), *hs = tb_json_str(cell, "head_status");
          double hv = tb_json_num(m, "head"), bv = tb_json_num(m, "base");
          if (isfinite(hv)) {
            tb_report_fmt_tps(hv, t1, sizeof t1);
            rb_printf(b, " %s (base: %s) |", t1, status_text(bs));
          } else if (isfinite(bv)) {
            tb_report_fmt_tps(bv, t1, sizeof t1);
            rb_printf(b, " head: %s (was %s) |", status_text(hs), t1);
          } else if (bs != NULL && hs != NULL && strcmp(bs, hs) == 0) {
            rb_printf(b, " %s |", status_text(hs));
          } else {
            rb_printf(b, " %s / %s |", status_text(bs), status_text(hs));
          }
        }
      }
      rb_puts(b, "\n");
    }
  }
  free(bt);
  free(ht);
}

static void
render_compare_csv(struct rb *b, const struct cview *v)
{
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  rb_puts(b, "phase,context,context_label,concurrency,base_status,head_status,mark");
  for (size_t i = 0; i < nm; i++)
    rb_printf(b, ",%s_%s_base,%s_%s_head,%s_%s_ratio", ms[i].phase, ms[i].name, ms[i].phase,
              ms[i].name, ms[i].phase, ms[i].name);
  rb_puts(b, ",regressions\r\n");
  const json_t *cells = json_object_get(v->doc, "cells");
  char lab[32];
  for (size_t i = 0; i < v->ncells; i++) {
    struct ccell cc;
    if (!ccell_get(json_array_get(cells, i), &cc))
      continue;
    ctx_label(cc.ctx, lab, sizeof lab);
    rb_printf(b, "%s,%" PRId64 ",%s,%" PRId64 ",", cc.phase ? "decode" : "prefill", cc.ctx,
              lab, cc.conc);
    rb_csv_str(b, tb_json_str(cc.c, "base_status"));
    rb_puts(b, ",");
    rb_csv_str(b, tb_json_str(cc.c, "head_status"));
    rb_puts(b, ",");
    rb_csv_str(b, tb_json_str(cc.c, "mark"));
    for (size_t k = 0; k < nm; k++) {
      const json_t *m = cmetric(cc.c, ms[k].name);
      rb_puts(b, ",");
      rb_csv_num(b, tb_json_num(m, "base"));
      rb_puts(b, ",");
      rb_csv_num(b, tb_json_num(m, "head"));
      rb_puts(b, ",");
      rb_csv_num(b, tb_json_num(m, "ratio"));
    }
    /* The regressions of this cell, as "metric:change%" joined by ';'. */
    rb_puts(b, ",");
    struct rb regs = { 0 };
    size_t nreg = json_is_array(v->regs) ? json_array_size(v->regs) : 0;
    for (size_t g = 0; g < nreg && g < TB_REPORT_MAX_CELLS; g++) {
      const json_t *r = json_array_get(v->regs, g);
      int64_t ctx, conc;
      if (cell_phase(r) != cc.phase || !tb_json_int(r, "context", &ctx) || ctx != cc.ctx ||
          !tb_json_int(r, "concurrency", &conc) || conc != cc.conc)
        continue;
      const char *m = tb_json_str(r, "metric");
      double pct = tb_json_num(r, "change_pct");
      if (regs.len)
        rb_puts(&regs, ";");
      rb_puts(&regs, m ? m : "?");
      if (isfinite(pct))
        rb_printf(&regs, ":%+.1f%%", pct);
      else
        rb_puts(&regs, ":lost");
    }
    if (regs.p) {
      rb_csv_str(b, regs.p);
      free(regs.p);
    }
    rb_puts(b, "\r\n");
  }
}

char *
tb_report_render_compare(const json_t *cmp, enum tb_report_format f, size_t *len,
                         char **err)
{
  *err = NULL;
  if (!json_is_object(cmp)) {
    *err = tb_xstrdup("not a comparison document (not a JSON object)");
    return NULL;
  }
  struct rb b = { 0 };
  if (f == TB_REPORT_JSON) {
    render_json(&b, cmp);
    return rb_finish(&b, len, err);
  }
  struct cview v;
  cview_build(&v, cmp);
  switch (f) {
  case TB_REPORT_HTML: render_compare_html(&b, &v); break;
  case TB_REPORT_MD: render_compare_md(&b, &v); break;
  case TB_REPORT_CSV: render_compare_csv(&b, &v); break;
  default: render_json(&b, cmp); break;
  }
  free(v.grid);
  return rb_finish(&b, len, err);
}
