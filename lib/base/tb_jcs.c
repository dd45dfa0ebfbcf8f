/*
 * tb_jcs: see tb_jcs.h.
 *
 * Numbers.  ECMAScript wants the shortest digit string s (k digits) whose
 * value s x 10^(n-k) reads back as the double, the nearest of such when
 * there are two.  glibc's printf rounds correctly, so "%.{p-1}e" gives the
 * nearest p-digit decimal; the smallest p at which that reads back (strtod,
 * correctly rounded too) is found from 15, 16 and 17 digits (shortest():
 * a normal double's form has at most 15 digits exactly when its nearest
 * 15-digit decimal reads back), and 16 digits are tried once more with the
 * last digit one up and one down: at a power of two the interval of values
 * that read back is narrower below than above, so the nearest decimal can
 * miss it while its neighbour is inside.  Then ES 2019 7.1.12.1's layout:
 * fixed when -6 < n <= 21, exponential otherwise.
 *
 * Objects.  The members' names are sorted once per object (an array of
 * pointers, qsort by UTF-16 code units); a document's depth is jansson's
 * own parser cap (JSON_PARSER_MAX_DEPTH), so the recursion is bounded.
 */
#include "base/tb_jcs.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- the buffer */

struct out {
  char *b;
  size_t len, cap;
};

static void
put(struct out *o, const char *s, size_t n)
{
  tb_xgrow(&o->b, &o->cap, o->len + n + 1, 256);
  memcpy(o->b + o->len, s, n);
  o->len += n;
  o->b[o->len] = '\0';
}

static void
putc1(struct out *o, char c)
{
  put(o, &c, 1);
}

/* ------------------------------------------------------------- numbers */

/* The nearest decimal of p significant digits to a > 0: its digits (no
 * trailing zeros) into dig (>= 18 bytes) and the exponent e of
 * d.ddd x 10^e. */
static void
nearest(double a, int p, char *dig, int *e)
{
  char buf[40];
  snprintf(buf, sizeof buf, "%.*e", p - 1, a);
  size_t k = 0;
  const char *c = buf;
  for (; *c != '\0' && *c != 'e'; c++)
    if (*c >= '0' && *c <= '9')
      dig[k++] = *c;
  while (k > 1 && dig[k - 1] == '0')
    k--;
  dig[k] = '\0';
  *e = (int)strtol(*c == 'e' ? c + 1 : "0", NULL, 10);
}

/* Whether digits dig x 10^(e - k + 1) reads back as a. */
static bool
reads_back(double a, const char *dig, int e)
{
  char buf[48];
  snprintf(buf, sizeof buf, "%c.%se%d", dig[0], dig[1] != '\0' ? dig + 1 : "0", e);
  return strtod(buf, NULL) == a;
}

/* dig (p digits, e) moved one unit in its last place (+1 or -1), into out
 * with its exponent; false when that leaves p digits' range (a carry out
 * of 9...9, or a borrow below 1). */
static bool
step_last(const char *dig, int e, int p, int dir, char *out, int *oe)
{
  char d[20];
  size_t k = strlen(dig);
  if (k > (size_t)p || p > 17)
    return false;
  memcpy(d, dig, k);
  while (k < (size_t)p) /* back to p digits */
    d[k++] = '0';
  d[k] = '\0';
  size_t i = k;
  while (i > 0) {
    i--;
    if (dir > 0 && d[i] == '9') {
      d[i] = '0';
      continue;
    }
    if (dir < 0 && d[i] == '0') {
      d[i] = '9';
      continue;
    }
    d[i] = (char)(d[i] + dir);
    break;
  }
  if (d[0] == '0') /* a carry out of 9...9, or 1 less one */
    return false;
  while (k > 1 && d[k - 1] == '0')
    k--;
  d[k] = '\0';
  memcpy(out, d, k + 1);
  *oe = e;
  return true;
}

/* The digits of p - 1 significant digits next to the nearest one (one
 * unit up or down in the last place) that read back as a, if one does:
 * the narrow side of a power of two (see the file comment). */
static bool
neighbour(double a, int p, char *dig, int *e)
{
  char near[20], alt[20];
  int ne, ae;
  nearest(a, p, near, &ne);
  for (int dir = -1; dir <= 1; dir += 2)
    if (step_last(near, ne, p, dir, alt, &ae) && reads_back(a, alt, ae)) {
      memcpy(dig, alt, strlen(alt) + 1);
      *e = ae;
      return true;
    }
  return false;
}

/* The shortest digits that read back as a > 0 (ES's s and n - 1).
 *
 * A normal double: every decimal of at most 15 significant digits reads
 * back as the double nearest to it (DBL_DIG), and two of them lie further
 * apart than half the double's spacing; so when the nearest 15-digit
 * decimal reads back, its digits less their trailing zeros are the one
 * shortest form.  Else the form has 16 digits (the nearest, or on the
 * narrow side of a power of two its neighbour) or 17 (the nearest always
 * reads back).  A subnormal has fewer digits of precision: bisection over
 * 1..17, then the neighbour of one digit less. */
static void
shortest(double a, char *dig, int *e)
{
  if (a >= DBL_MIN) {
    nearest(a, 15, dig, e);
    if (reads_back(a, dig, *e))
      return;
    nearest(a, 16, dig, e);
    if (reads_back(a, dig, *e) || neighbour(a, 16, dig, e))
      return;
    nearest(a, 17, dig, e);
    return;
  }
  int lo = 1, hi = 17;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    nearest(a, mid, dig, e);
    if (reads_back(a, dig, *e))
      hi = mid;
    else
      lo = mid + 1;
  }
  if (lo > 1 && neighbour(a, lo - 1, dig, e))
    return;
  nearest(a, lo, dig, e);
}

bool
tb_jcs_number(double d, char out[TB_JCS_NUMBER_MAX])
{
  if (!isfinite(d))
    return false;
  if (d == 0) { /* and -0 */
    memcpy(out, "0", 2);
    return true;
  }
  char dig[20];
  int e;
  shortest(fabs(d), dig, &e);
  int k = (int)strlen(dig), n = e + 1;
  size_t o = 0;
  if (d < 0)
    out[o++] = '-';
  if (k <= n && n <= 21) { /* digits, then n - k zeros */
    memcpy(out + o, dig, (size_t)k);
    o += (size_t)k;
    for (int i = k; i < n; i++)
      out[o++] = '0';
  } else if (0 < n && n <= 21) { /* a point inside the digits */
    memcpy(out + o, dig, (size_t)n);
    o += (size_t)n;
    out[o++] = '.';
    memcpy(out + o, dig + n, (size_t)(k - n));
    o += (size_t)(k - n);
  } else if (-6 < n && n <= 0) { /* 0.000ddd */
    out[o++] = '0';
    out[o++] = '.';
    for (int i = 0; i < -n; i++)
      out[o++] = '0';
    memcpy(out + o, dig, (size_t)k);
    o += (size_t)k;
  } else { /* d[.ddd]e+x */
    out[o++] = dig[0];
    if (k > 1) {
      out[o++] = '.';
      memcpy(out + o, dig + 1, (size_t)(k - 1));
      o += (size_t)(k - 1);
    }
    o +=
      (size_t)snprintf(out + o, TB_JCS_NUMBER_MAX - o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
    return true;
  }
  out[o] = '\0';
  return true;
}

/* ------------------------------------------------------------- strings */

static void
put_string(struct out *o, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  putc1(o, '"');
  size_t run = 0; /* bytes copied as they are, pending */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char u[7];
    switch (c) {
    case '"': esc = "\\\""; break;
    case '\\': esc = "\\\\"; break;
    case '\b': esc = "\\b"; break;
    case '\f': esc = "\\f"; break;
    case '\n': esc = "\\n"; break;
    case '\r': esc = "\\r"; break;
    case '\t': esc = "\\t"; break;
    default:
      if (c < 0x20) {
        memcpy(u, "\\u00", 4);
        u[4] = hex[c >> 4];
        u[5] = hex[c & 15];
        u[6] = '\0';
        esc = u;
      }
    }
    if (esc == NULL) {
      run++;
      continue;
    }
    put(o, s + i - run, run);
    run = 0;
    put(o, esc, strlen(esc));
  }
  put(o, s + n - run, run);
  putc1(o, '"');
}

/* The next UTF-16 code unit of a UTF-8 string at *i (n bytes); *low holds
 * the low surrogate still owed by a code point above U+FFFF.  -1 at the
 * end.  A byte that does not begin a valid sequence counts as itself
 * (jansson's strings are valid UTF-8: this is only a guard). */
static int
next_unit(const unsigned char *s, size_t n, size_t *i, int *low)
{
  if (*low >= 0) {
    int u = *low;
    *low = -1;
    return u;
  }
  if (*i >= n)
    return -1;
  unsigned c = s[*i];
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + len > n) {
    (*i)++;
    return (int)c;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
  for (size_t k = 1; k < len; k++)
    cp = cp << 6 | (s[*i + k] & 0x3f);
  *i += len;
  if (cp < 0x10000)
    return (int)cp;
  cp -= 0x10000;
  *low = (int)(0xdc00 | (cp & 0x3ff));
  return (int)(0xd800 | (cp >> 10));
}

int
tb_jcs_key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
  size_t i = 0, j = 0;
  int la = -1, lb = -1;
  for (;;) {
    int ua = next_unit((const unsigned char *)a, alen, &i, &la);
    int ub = next_unit((const unsigned char *)b, blen, &j, &lb);
    if (ua != ub)
      return ua < ub ? -1 : 1; /* the end (-1) sorts first: a prefix is smaller */
    if (ua < 0)
      return 0;
  }
}

/* ------------------------------------------------------------- values */

struct member {
  const char *key;
  size_t len;
  json_t *value;
};

static int
member_cmp(const void *x, const void *y)
{
  const struct member *a = x, *b = y;
  return tb_jcs_key_cmp(a->key, a->len, b->key, b->len);
}

static bool put_value(struct out *o, const json_t *v);

static bool
put_object(struct out *o, const json_t *v)
{
  size_t n = json_object_size(v), i = 0;
  struct member *m = tb_xcalloc(n > 0 ? n : 1, sizeof *m);
  const char *key;
  size_t klen;
  json_t *val;
  json_object_keylen_foreach((json_t *)v, key, klen, val)
  {
    if (i < n)
      m[i++] = (struct member){ key, klen, val };
  }
  qsort(m, i, sizeof *m, member_cmp);
  bool ok = true;
  putc1(o, '{');
  for (size_t k = 0; k < i && ok; k++) {
    if (k > 0)
      putc1(o, ',');
    put_string(o, m[k].key, m[k].len);
    putc1(o, ':');
    ok = put_value(o, m[k].value);
  }
  putc1(o, '}');
  free(m);
  return ok;
}

/* 2^53: integers up to it in magnitude are exact doubles, written as such. */
#define EXACT_INT ((json_int_t)1 << 53)

static bool
put_value(struct out *o, const json_t *v)
{
  char num[TB_JCS_NUMBER_MAX];
  switch (json_typeof(v)) {
  case JSON_OBJECT: return put_object(o, v);
  case JSON_ARRAY: {
    putc1(o, '[');
    size_t i;
    const json_t *e;
    bool ok = true;
    json_array_foreach (v, i, e) {
      if (i > 0)
        putc1(o, ',');
      if (ok)
        ok = put_value(o, e);
    }
    putc1(o, ']');
    return ok;
  }
  case JSON_STRING: put_string(o, json_string_value(v), json_string_length(v)); return true;
  case JSON_INTEGER: {
    json_int_t x = json_integer_value(v);
    if (x >= -EXACT_INT && x <= EXACT_INT) {
      int n = snprintf(num, sizeof num, "%lld", (long long)x);
      put(o, num, (size_t)n);
      return true;
    }
    if (!tb_jcs_number((double)x, num))
      return false;
    put(o, num, strlen(num));
    return true;
  }
  case JSON_REAL:
    if (!tb_jcs_number(json_real_value(v), num))
      return false;
    put(o, num, strlen(num));
    return true;
  case JSON_TRUE: put(o, "true", 4); return true;
  case JSON_FALSE: put(o, "false", 5); return true;
  case JSON_NULL: put(o, "null", 4); return true;
  }
  return false;
}

char *
tb_jcs_dumps(const json_t *v, size_t *len)
{
  if (v == NULL)
    return NULL;
  struct out o = { 0 };
  tb_xgrow(&o.b, &o.cap, 1, 256);
  o.b[0] = '\0';
  if (!put_value(&o, v)) {
    free(o.b);
    return NULL;
  }
  if (len != NULL)
    *len = o.len;
  return o.b;
}
