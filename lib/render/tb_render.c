/*
 * tb_render: buffer, escapers, number formats, axes, header texts and HTML
 * scaffolding shared by the report formats.  See tb_render.h for the
 * contract.
 */
#include "render/tb_render.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"

/* ------------------------------------------------------------------ buffer */

void
tb_render_put(struct tb_render_buf *b, const char *s, size_t n)
{
  if (b->over)
    return;
  if (n > TB_RENDER_MAX - b->len) {
    b->over = true;
    return;
  }
  if (b->len + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + n + 1)
      nc *= 2;
    if (nc > TB_RENDER_MAX + 1)
      nc = TB_RENDER_MAX + 1;
    b->p = tb_xrealloc(b->p, nc);
    b->cap = nc;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void
tb_render_puts(struct tb_render_buf *b, const char *s)
{
  tb_render_put(b, s, strlen(s));
}

void
tb_render_printf(struct tb_render_buf *b, const char *fmt, ...)
{
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n < sizeof small) {
    tb_render_put(b, small, (size_t)n);
    return;
  }
  char *big = tb_xmalloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  tb_render_put(b, big, (size_t)n);
  free(big);
}

char *
tb_render_finish(struct tb_render_buf *b, size_t *len, char **err)
{
  if (b->over) {
    free(b->p);
    *err = tb_xasprintf("report larger than %u bytes", TB_RENDER_MAX);
    return NULL;
  }
  if (b->p == NULL)
    tb_render_put(b, "", 0);
  if (b->p == NULL) { /* tb_render_put of 0 bytes on an empty buffer allocates */
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
void
tb_render_html(struct tb_render_buf *b, const char *s)
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
      tb_render_put(b, run, (size_t)(c - run));
      tb_render_puts(b, rep);
      run = c + 1;
    }
  }
  tb_render_puts(b, run);
}

/* Markdown inline text (a table cell): punctuation that could start markup is
 * backslash-escaped, HTML metacharacters become entities (GitHub renders
 * inline HTML), newlines become spaces (they would end the table row). */
void
tb_render_md(struct tb_render_buf *b, const char *s)
{
  if (s == NULL)
    return;
  for (const char *c = s; *c; c++) {
    switch (*c) {
    case '<': tb_render_puts(b, "&lt;"); break;
    case '>': tb_render_puts(b, "&gt;"); break;
    case '&': tb_render_puts(b, "&amp;"); break;
    case '\n':
    case '\r':
    case '\t': tb_render_puts(b, " "); break;
    case '\\':
    case '`':
    case '*':
    case '_':
    case '[':
    case ']':
    case '|':
    case '~':
    case '@':
      tb_render_put(b, "\\", 1);
      tb_render_put(b, c, 1);
      break;
    default:
      if ((unsigned char)*c >= 0x20)
        tb_render_put(b, c, 1);
    }
  }
}

/* RFC 4180 field.  A text field that a spreadsheet would take for a formula
 * (= + - @ at the start) gets a leading apostrophe (OWASP CSV injection). */
void
tb_render_csv_str(struct tb_render_buf *b, const char *s)
{
  if (s == NULL)
    return;
  bool quote = strpbrk(s, ",\"\r\n") != NULL;
  bool formula = strchr("=+-@\t\r", s[0]) != NULL && s[0] != '\0';
  if (quote || formula)
    tb_render_put(b, "\"", 1);
  if (formula)
    tb_render_put(b, "'", 1);
  for (const char *c = s; *c; c++) {
    if (*c == '"')
      tb_render_put(b, "\"\"", 2);
    else
      tb_render_put(b, c, 1);
  }
  if (quote || formula)
    tb_render_put(b, "\"", 1);
}

/* A number that reads back as the same double (shortest of %.15g, %.17g). */
void
tb_render_csv_num(struct tb_render_buf *b, double v)
{
  if (!isfinite(v))
    return;
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v)
    snprintf(buf, sizeof buf, "%.17g", v);
  tb_render_puts(b, buf);
}

/* ----------------------------------------------------------------- numbers */

/* Inserts thousands separators into the integer part of a formatted number. */
void
tb_render_group(const char *in, char *out, size_t len)
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
tb_render_fmt_int(int64_t v, char *buf, size_t len)
{
  char tmp[32];
  snprintf(tmp, sizeof tmp, "%" PRId64, v);
  tb_render_group(tmp, buf, len);
}

bool
tb_render_ci(const json_t *cell, const char *ci, double *lo, double *hi)
{
  const json_t *a = json_object_get(cell, ci);
  *lo = *hi = NAN;
  if (!json_is_array(a) || json_array_size(a) != 2)
    return false;
  const json_t *x = json_array_get(a, 0), *y = json_array_get(a, 1);
  if (!json_is_number(x) || !json_is_number(y))
    return false;
  double vx = json_number_value(x), vy = json_number_value(y);
  if (!isfinite(vx) || !isfinite(vy) || vx > vy)
    return false;
  *lo = vx;
  *hi = vy;
  return true;
}

double
tb_render_ci_half(const json_t *cell, const char *figure, const char *ci)
{
  double lo, hi, v = tb_json_num(cell, figure);
  if (!tb_render_ci(cell, ci, &lo, &hi) || !isfinite(v) || hi < v)
    return NAN;
  return hi - v;
}

void
tb_render_fmt_pm(double v, double half, void (*fmt)(double, char *, size_t), char *buf, size_t len)
{
  char a[48], h[48];
  fmt(v, a, sizeof a);
  if (!isfinite(v) || !isfinite(half)) {
    snprintf(buf, len, "%s", a);
    return;
  }
  fmt(half, h, sizeof h);
  snprintf(buf, len, "%s \xc2\xb1 %s", a, h);
}

void
tb_render_fmt_range(const json_t *cell, const char *ci, void (*fmt)(double, char *, size_t),
                    const char *unit, char *buf, size_t len)
{
  double lo, hi;
  char a[48], h[48];
  if (!tb_render_ci(cell, ci, &lo, &hi)) {
    snprintf(buf, len, "%s", "");
    return;
  }
  fmt(lo, a, sizeof a);
  fmt(hi, h, sizeof h);
  /* one unit for both ends: "1,020 ms" and "1,080 ms" -> "(1,020–1,080 ms)" */
  const char *ua = strrchr(a, ' '), *uh = strrchr(h, ' ');
  if (ua != NULL && uh != NULL && strcmp(ua, uh) == 0)
    a[ua - a] = '\0';
  snprintf(buf, len, "(%s%s%s%s)", a, TB_RENDER_ENDASH, h, unit);
}

void
tb_render_fmt_tps(double v, char *buf, size_t len)
{
  tb_render_fmt_1(v, buf, len);
}

void
tb_render_fmt_tps_short(double v, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15) {
    snprintf(buf, len, "%s", TB_RENDER_DASH);
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

/* v ms with the given decimals, grouped: "1,047 ms". */
static void
fmt_ms_places(double v, int decimals, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15) {
    snprintf(buf, len, "%s", TB_RENDER_DASH);
    return;
  }
  char tmp[48], g[64];
  snprintf(tmp, sizeof tmp, "%.*f", decimals, v);
  tb_render_group(tmp, g, sizeof g);
  snprintf(buf, len, "%s ms", g);
}

void
tb_render_fmt_ms(double v, char *buf, size_t len)
{
  fmt_ms_places(v, fabs(v) < 9.95 ? 1 : 0, buf, len);
}

void
tb_render_fmt_ms1(double v, char *buf, size_t len)
{
  fmt_ms_places(v, 1, buf, len);
}

/* "%.1f" (average active requests), "30.0 s", "+3.2%" */
void
tb_render_fmt_1(double v, char *buf, size_t len)
{
  if (!isfinite(v) || fabs(v) > 1e15)
    snprintf(buf, len, "%s", TB_RENDER_DASH);
  else {
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.1f", v);
    tb_render_group(tmp, buf, len);
  }
}

void
tb_render_fmt_secs(double v, char *buf, size_t len)
{
  char t[40];
  tb_render_fmt_1(v, t, sizeof t);
  if (isfinite(v) && fabs(v) <= 1e15)
    snprintf(buf, len, "%s s", t);
  else
    snprintf(buf, len, "%s", t);
}

void
tb_render_fmt_num(double v, int places, const char *suffix, char *buf, size_t len)
{
  if (isfinite(v))
    snprintf(buf, len, "%.*f%s", places, v, suffix);
  else
    snprintf(buf, len, "%s", TB_RENDER_DASH);
}

void
tb_render_fmt_pct(double ratio, char *buf, size_t len)
{
  if (!isfinite(ratio) || fabs(ratio) > 1e9) {
    snprintf(buf, len, "%s", TB_RENDER_DASH);
    return;
  }
  double p = (ratio - 1.0) * 100.0;
  if (fabs(p) < 0.05)
    snprintf(buf, len, "0.0%%");
  else
    snprintf(buf, len, "%s%.1f%%", p > 0 ? "+" : TB_RENDER_MINUS, fabs(p));
}
/* -------------------------------------------------------------- axes */

static void
axis_insert(struct tb_render_axis *a, int64_t x)
{
  size_t i = 0;
  while (i < a->n && a->v[i] < x)
    i++;
  if (i < a->n && a->v[i] == x)
    return;
  if (a->n == TB_RENDER_MAX_AXIS) {
    a->truncated = true;
    return;
  }
  memmove(&a->v[i + 1], &a->v[i], (a->n - i) * sizeof a->v[0]);
  a->v[i] = x;
  a->n++;
}

void
tb_render_axis_add(struct tb_render_axis *a, int64_t x)
{
  if (x > 0 && x <= ((int64_t)1 << 40))
    axis_insert(a, x);
}

void
tb_render_axis_add_ctx(struct tb_render_axis *a, int64_t x)
{
  if (x >= 0 && x <= ((int64_t)1 << 40))
    axis_insert(a, x);
}

int
tb_render_axis_find(const struct tb_render_axis *a, int64_t x)
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

/* ------------------------------------------------------ document text */

int
tb_render_cell_phase(const json_t *c)
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

const char *
tb_render_status_text(const char *s)
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

static void
note_add(char *buf, size_t len, size_t *o, const char *a, const char *b)
{
  if (*o >= len)
    return;
  int n = snprintf(buf + *o, len - *o, "%s%s%s", *o > 0 ? "; " : "", a, b ? b : "");
  if (n > 0)
    *o = *o + (size_t)n < len ? *o + (size_t)n : len;
}

const char *
tb_render_cell_note(const json_t *c, char *buf, size_t len)
{
  const char *st = tb_json_str(c, "status");
  if (st == NULL || strcmp(st, "error") == 0 || strcmp(st, "skipped") == 0 ||
      (strcmp(st, "over_capacity") == 0 && json_object_get(c, "scheduler_cap") != NULL)) {
    const char *why = tb_json_str(c, "reason");
    return why ? why : "";
  }
  if (len == 0)
    return "";
  size_t o = 0;
  buf[0] = '\0';
  const char *ts = tb_json_str(c, "token_source");
  if (ts != NULL && strcmp(ts, "chunks") == 0)
    note_add(buf, len, &o, "output tokens counted from chunks (no usage from the server)", NULL);
  const char *rd = tb_json_str(c, "readiness");
  if (rd != NULL && strcmp(rd, "client") == 0)
    note_add(buf, len, &o, "ready by the client alone: ", tb_json_str(c, "readiness_reason"));
  const char *ps = tb_json_str(c, "prompt_tokens_source");
  if (ps != NULL && strcmp(ps, "estimate") == 0)
    note_add(buf, len, &o, "prompt size ", tb_json_str(c, "prompt_tokens_estimate"));
  return buf;
}

bool
tb_render_cell_caplimited(const json_t *c)
{
  const char *st = json_string_value(json_object_get(c, "status"));
  return st != NULL && strcmp(st, "over_capacity") == 0 &&
         json_is_number(json_object_get(c, "total_tps_capacity_limited"));
}

const char *
tb_render_cell_word(const json_t *c)
{
  if (tb_render_cell_caplimited(c))
    return "Over capacity*";
  return tb_render_status_text(json_string_value(json_object_get(c, "status")));
}

const char *
tb_render_oc_footnote(bool any_caplimited)
{
  if (!any_caplimited)
    return "Over capacity: not run because this many requests at this context would "
           "exceed the server's KV cache.";
  return "Over capacity: not run because this many requests at this context would "
         "exceed the server's KV cache. Over capacity*: run, but capacity-limited: "
         "fewer requests ran at once than asked and the rest queued, so its tok/s "
         "(kept as total_tps_capacity_limited in JSON and CSV) is not a figure for "
         "this many requests.";
}

/* "Step-3.7-Flash-FP8 on H200 NVL ×2" */
char *
tb_render_title_line(const json_t *d)
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
    snprintf(cnt, sizeof cnt, " " TB_RENDER_TIMES "%" PRId64, n);
  if (m && g)
    return tb_xasprintf("%s on %s%s", m, g, cnt);
  if (m)
    return tb_xstrdup(m);
  if (g)
    return tb_xasprintf("%s%s", g, cnt);
  return NULL;
}

/* "sglang · 0.0.0.dev1 · FP8" */
char *
tb_render_engine_line(const json_t *d)
{
  const json_t *e = json_object_get(d, "engine");
  const char *parts[3] = { tb_json_str(e, "name"), tb_json_str(e, "version"),
                           tb_json_str(e, "quantization") };
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

/* ------------------------------------------------------------------ HTML */

static const char html_css[] =
  "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;"
  "color:#1b1f24;background:#f6f7f9;margin:0}"
  "main{max-width:1180px;margin:0 auto;padding:24px}"
  "h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}"
  ".sub{color:#555;margin:2px 0}.muted{color:#666;font-size:12px}"
  ".banner{background:#fff4ce;border:1px solid #e0b400;border-radius:6px;"
  "padding:10px 14px;margin:14px 0;font-weight:600}"
  ".cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:12px;margin-"
  "top:16px}"
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
  "tr.flagged td{background:#fff4ce}svg.spark{display:block}"
  "table.matrix td span.flag{color:#8a5a00;font-weight:600}"
  "table.matrix td{min-width:78px;text-align:center}"
  "table.matrix td b{display:block;font-size:15px}"
  "table.matrix td span{display:block;font-size:11px;opacity:.85}"
  "table.matrix td small.ci{display:block;font-size:11px;opacity:.8}"
  "td.oc{background:#eceff1;color:#78848f;font-size:12px}"
  "td.err{background:#fde7e9;color:#b00020;font-weight:600}"
  "td.sk{background:#f5f5f5;color:#999;font-size:12px}"
  "td.na{color:#bbb}"
  ".bar{display:inline-block;height:10px;background:#4caf50;border-radius:2px;vertical-align:"
  "middle}"
  ".charts{display:flex;flex-wrap:wrap;gap:16px}"
  ".charts figure{margin:0;background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:8px}"
  "figcaption{font-weight:600;margin:0 0 4px 6px}"
  ".scroll{overflow-x:auto}"
  ".up{color:#1b7f2a;font-weight:600}.down{color:#b00020;font-weight:600}"
  "tr.reg td{background:#fde7e9}";

void
tb_render_html_head(struct tb_render_buf *b, const char *title)
{
  tb_render_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">" TB_RENDER_HEAD_MARK
                    "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                    "<title>");
  tb_render_html(b, title);
  tb_render_puts(b, "</title><style>");
  tb_render_puts(b, html_css);
  tb_render_puts(b, "</style></head>\n" TB_RENDER_BODY_MARK);
}

/* ------------------------------------------------------------------ JSON */

void
tb_render_json(struct tb_render_buf *b, const json_t *doc)
{
  char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (s == NULL) {
    b->over = true;
    return;
  }
  tb_render_puts(b, s);
  tb_render_puts(b, "\n");
  free(s);
}

/* ---------------------------------------------------------------- matrix */

/* How a format marks up a matrix: its head (a cell per concurrency, then
 * for Markdown the alignment row), and each row (its label, then its
 * cells); each item between its strings. */
struct matrix_markup {
  const char *head_open, *col_pre, *col_post, *head_mid, *align, *head_close;
  const char *row_pre, *row_post, *row_close;
};

static void
matrix(struct tb_render_buf *b, const struct tb_render_matrix *m, const struct matrix_markup *mk)
{
  char lab[32];
  tb_render_puts(b, mk->head_open);
  for (size_t c = 0; c < m->ncols; c++)
    tb_render_printf(b, "%s%" PRId64 "%s", mk->col_pre, m->cols[c], mk->col_post);
  tb_render_puts(b, mk->head_mid);
  for (size_t c = 0; mk->align != NULL && c < m->ncols; c++)
    tb_render_printf(b, "%s|", mk->align);
  tb_render_puts(b, mk->head_close);
  for (size_t r = 0; r < m->nrows; r++) {
    tb_format_tokens(m->rows[r], lab, sizeof lab);
    tb_render_printf(b, "%s%s%s", mk->row_pre, lab, mk->row_post);
    for (size_t c = 0; c < m->ncols; c++)
      m->cell(b, m->ctx, r, c);
    tb_render_puts(b, mk->row_close);
  }
}

void
tb_render_md_matrix(struct tb_render_buf *b, const struct tb_render_matrix *m, const char *align)
{
  const struct matrix_markup mk = { "| Context |", " ",  " |", "\n|---|", align,
                                    "\n",          "| ", " |", "\n" };
  matrix(b, m, &mk);
}

void
tb_render_html_matrix(struct tb_render_buf *b, const char *id, const struct tb_render_matrix *m)
{
  static const struct matrix_markup mk = { "\"><tr><th class=\"l\">Context</th>",
                                           "<th>",
                                           "</th>",
                                           "",
                                           NULL,
                                           "</tr>\n",
                                           "<tr><th class=\"l\">",
                                           "</th>",
                                           "</tr>\n" };
  tb_render_puts(b, "<table class=\"matrix\" id=\"");
  tb_render_html(b, id);
  matrix(b, m, &mk);
  tb_render_puts(b, "</table>");
}

void
tb_render_md_result_cell(struct tb_render_buf *b, const json_t *cell,
                         void (*valid)(struct tb_render_buf *b, const json_t *cell), bool *any_cl)
{
  const char *st = tb_json_str(cell, "status");
  if (st != NULL && strcmp(st, "valid") == 0) {
    valid(b, cell);
  } else if (cell == NULL) {
    tb_render_puts(b, " " TB_RENDER_DASH " |");
  } else {
    *any_cl = *any_cl || tb_render_cell_caplimited(cell);
    tb_render_printf(b, " %s |", tb_render_cell_word(cell));
  }
}
