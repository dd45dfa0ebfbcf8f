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
#include "db/tb_regress.h"

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
    case '\n': case '\r': case '\t': tb_render_puts(b, " "); break;
    case '\\': case '`': case '*': case '_': case '[': case ']': case '|':
    case '~': case '@':
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

void
tb_render_csv_pcts(struct tb_render_buf *b, const json_t *cell, const char *k)
{
  static const char *const pct[] = { "p50", "p90", "p99" };
  for (size_t i = 0; i < TB_ARRAY_LEN(pct); i++) {
    tb_render_puts(b, ",");
    tb_render_csv_num(b, tb_json_pct(cell, k, pct[i]));
  }
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
tb_render_fmt_pm(double v, double half, void (*fmt)(double, char *, size_t), char *buf,
                 size_t len)
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
    note_add(buf, len, &o, "output tokens counted from chunks (no usage from the server)",
             NULL);
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
    ".bar{display:inline-block;height:10px;background:#4caf50;border-radius:2px;vertical-align:middle}"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}"
    ".charts figure{margin:0;background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:8px}"
    "figcaption{font-weight:600;margin:0 0 4px 6px}"
    ".scroll{overflow-x:auto}"
    ".up{color:#1b7f2a;font-weight:600}.down{color:#b00020;font-weight:600}"
    "tr.reg td{background:#fde7e9}";

void
tb_render_html_head(struct tb_render_buf *b, const char *title)
{
  tb_render_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
             "<title>");
  tb_render_html(b, title);
  tb_render_puts(b, "</title><style>");
  tb_render_puts(b, html_css);
  tb_render_puts(b, "</style></head>\n<body><main>\n");
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

void
tb_render_md_matrix_head(struct tb_render_buf *b, const struct tb_render_axis *cols)
{
  tb_render_puts(b, "| Context |");
  for (size_t c = 0; c < cols->n; c++)
    tb_render_printf(b, " %" PRId64 " |", cols->v[c]);
  tb_render_puts(b, "\n|---|");
  for (size_t c = 0; c < cols->n; c++)
    tb_render_puts(b, "---:|");
  tb_render_puts(b, "\n");
}

void
tb_render_html_matrix_head(struct tb_render_buf *b, const char *id,
                           const struct tb_render_axis *cols)
{
  tb_render_puts(b, "<table class=\"matrix\" id=\"");
  tb_render_html(b, id);
  tb_render_puts(b, "\"><tr><th class=\"l\">Context</th>");
  for (size_t c = 0; c < cols->n; c++)
    tb_render_printf(b, "<th>%" PRId64 "</th>", cols->v[c]);
  tb_render_puts(b, "</tr>\n");
}

/* ---------------------------------------------------------------- verdict */

/* A number (an element of an array), NAN when not a finite number. */
static double
elem_num(const json_t *v)
{
  double d = json_is_number(v) ? json_number_value(v) : NAN;
  return isfinite(d) ? d : NAN;
}

/* A series' recent values (a JSON array of numbers) as a small line chart,
 * the last (this job's) point in red. */
static void
verdict_chart(struct tb_render_buf *b, const char *title, const json_t *hist)
{
  size_t n = json_array_size(hist);
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    double v = elem_num(json_array_get(hist, i));
    if (isfinite(v)) {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  }
  if (n < 2 || !(hi >= lo))
    return;
  double pad = (hi - lo) * 0.1;
  if (!(pad > 0))
    pad = fabs(hi) * 0.05 + 1e-9;
  lo -= pad;
  hi += pad;
  const double w = 320, h = 90, m = 6;
  tb_render_puts(b, "<figure class=\"history\"><figcaption>");
  tb_render_html(b, title);
  tb_render_printf(b, "</figcaption><svg viewBox=\"0 0 320 90\" width=\"320\" height=\"90\" "
                      "role=\"img\"><polyline fill=\"none\" stroke=\"#1565c0\" "
                      "stroke-width=\"1.5\" points=\"");
  double lx = 0, ly = 0;
  for (size_t i = 0; i < n; i++) {
    double v = elem_num(json_array_get(hist, i));
    if (!isfinite(v))
      continue;
    lx = m + (w - 2 * m) * (double)i / (double)(n - 1);
    ly = m + (h - 2 * m) * (1 - (v - lo) / (hi - lo));
    tb_render_printf(b, "%.1f,%.1f ", lx, ly);
  }
  tb_render_printf(b, "\"/><circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#d32f2f\"/>"
                      "</svg></figure>",
                   lx, ly);
}

/* The charts of a history verdict: the matrix's total tok/s and the first
 * regressions. */
static void
verdict_charts(struct tb_render_buf *b, const json_t *r, const json_t *cells)
{
  const char *method = json_string_value(json_object_get(r, "method"));
  if (method == NULL || strcmp(method, "history") != 0)
    return;
  tb_render_puts(b, "<div class=\"charts\">");
  const json_t *mh = json_object_get(json_object_get(json_object_get(r, "matrix"), "total_tps"),
                                     "history");
  verdict_chart(b, "The matrix: total tok/s, geometric mean over each cell's median, run by run",
                mh);
  for (size_t i = 0, shown = 0; i < json_array_size(cells) && shown < 4; i++) {
    const json_t *g = json_array_get(cells, i);
    const json_t *hist = json_object_get(g, "history");
    if (json_array_size(hist) < 2)
      continue;
    char *why = tb_regress_why(g);
    verdict_chart(b, why, hist);
    free(why);
    shown++;
  }
  tb_render_puts(b, "</div>");
}

/* The markup of a verdict block in one format. */
struct verdict_markup {
  const char *open_reg, *open_ok;   /* up to the headline */
  const char *close_reg, *close_ok; /* after it */
  const char *list_open, *item_open, *item_close, *list_close;
  void (*esc)(struct tb_render_buf *b, const char *s);
  bool charts;
  const char *end;
};

static const struct verdict_markup verdict_md = {
  .open_reg = "### Verdict\n\n> **", .open_ok = "### Verdict\n\n",
  .close_reg = "**\n\n", .close_ok = "\n\n",
  .list_open = "", .item_open = "- ", .item_close = "\n", .list_close = "\n",
  .esc = tb_render_md, .charts = false, .end = "",
};

static const struct verdict_markup verdict_html = {
  .open_reg = "<section class=\"banner\" id=\"verdict\"><h2>Verdict</h2><p><b>",
  .open_ok = "<section id=\"verdict\"><h2>Verdict</h2><p>",
  .close_reg = "</b></p>", .close_ok = "</p>",
  .list_open = "<ul>", .item_open = "<li>", .item_close = "</li>", .list_close = "</ul>",
  .esc = tb_render_html, .charts = true, .end = "</section>\n",
};

static void
verdict_block(struct tb_render_buf *b, const json_t *r, const struct verdict_markup *mk)
{
  char *hl = tb_regress_headline(r);
  if (hl == NULL)
    return;
  const json_t *cells = NULL;
  bool reg = tb_regress_regressed(r, &cells);
  tb_render_puts(b, reg ? mk->open_reg : mk->open_ok);
  mk->esc(b, hl);
  tb_render_puts(b, reg ? mk->close_reg : mk->close_ok);
  size_t n = json_array_size(cells);
  if (n > 0)
    tb_render_puts(b, mk->list_open);
  for (size_t i = 0; i < n && i < TB_RENDER_WHY_MAX; i++) {
    char *why = tb_regress_why(json_array_get(cells, i));
    tb_render_puts(b, mk->item_open);
    mk->esc(b, why);
    tb_render_puts(b, mk->item_close);
    free(why);
  }
  if (n > TB_RENDER_WHY_MAX)
    tb_render_printf(b, "%sand %zu more%s", mk->item_open, n - TB_RENDER_WHY_MAX,
                     mk->item_close);
  if (n > 0)
    tb_render_puts(b, mk->list_close);
  if (mk->charts)
    verdict_charts(b, r, cells);
  tb_render_puts(b, mk->end);
  free(hl);
}

void
tb_render_verdict_md(struct tb_render_buf *b, const json_t *r)
{
  verdict_block(b, r, &verdict_md);
}

void
tb_render_verdict_html(struct tb_render_buf *b, const json_t *r)
{
  verdict_block(b, r, &verdict_html);
}
