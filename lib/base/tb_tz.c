/*
 * tb_tz: TZif files and POSIX TZ rules (see tb_tz.h).
 *
 * The zone is a sorted array of transitions (the instant, the offset after
 * it), the offset before the first (time type 0, RFC 8536 section 3.2),
 * and the footer's rule for what comes after the last.  A rule's
 * transitions are made per year when asked for: those of the years around
 * the instant, sorted, bound the span that holds it.
 */
#include "base/tb_tz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DAY 86400LL
#define HOUR 3600

/* RFC 8536 section 3.2: a type's utoff "SHOULD be in the range -89999 to
 * 93599" (about -25 to +26 hours). */
#define UTOFF_MIN (-89999)
#define UTOFF_MAX 93599
/* Rule times and offsets, RFC 8536 section 3.3.1: hours up to 167. */
#define RULE_HOURS_MAX 167
#define FOOTER_MAX 256
#define TYPES_MAX 256

/* A date of a POSIX TZ rule: Jn (1..365, February 29 never counted), n
 * (0..365, counted) or Mm.w.d (day d, 0 = Sunday, of week w, 5 = the last,
 * of month m), at secs after local midnight. */
struct rdate {
  char kind; /* 'J', 'N' or 'M' */
  int n, m, w, d;
  int32_t secs;
};

struct rule {
  bool present; /* a footer with a rule or a fixed offset */
  bool has_dst; /* two offsets, switched on start and end */
  int32_t std_off, dst_off;
  struct rdate start, end;
};

struct tb_tz {
  size_t n;
  int64_t *at;  /* transitions, ascending */
  int32_t *off; /* the offset from at[i] on */
  int32_t off0; /* before at[0] */
  struct rule rule;
};

/* ------------------------------------------------------------- calendar */

static int64_t
floor_div(int64_t a, int64_t b)
{
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t
tb_tz_days_from_civil(int64_t y, unsigned m, unsigned d)
{
  y -= m <= 2;
  int64_t era = floor_div(y, 400);
  int64_t yoe = y - era * 400;                                   /* [0, 399] */
  int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
  return era * 146097 + doe - 719468;
}

void
tb_tz_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
  z += 719468;
  int64_t era = floor_div(z, 146097);
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
  *m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

unsigned
tb_tz_weekday(int64_t days)
{
  /* 1970-01-01 was a Thursday (4) */
  int64_t w = (days + 4) % 7;
  return (unsigned)(w < 0 ? w + 7 : w);
}

static bool
leap_year(int64_t y)
{
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned
tb_tz_month_days(int64_t y, unsigned m)
{
  static const unsigned len[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
  if (m < 1 || m > 12)
    return 0;
  return len[m - 1] + (m == 2 && leap_year(y));
}

/* ----------------------------------------------------------- POSIX rule */

/* The rule's date r in year y, as local seconds. */
static int64_t
rule_local(const struct rdate *r, int64_t y)
{
  int64_t jan1 = tb_tz_days_from_civil(y, 1, 1), days;
  if (r->kind == 'J') {
    days = jan1 + r->n - 1 + (leap_year(y) && r->n >= 60);
  } else if (r->kind == 'N') {
    days = jan1 + r->n;
  } else {
    int64_t first = tb_tz_days_from_civil(y, (unsigned)r->m, 1);
    int day = (r->d - (int)tb_tz_weekday(first) + 7) % 7 + 7 * (r->w - 1);
    int md = (int)tb_tz_month_days(y, (unsigned)r->m);
    while (day >= md)
      day -= 7;
    days = first + day;
  }
  return days * DAY + r->secs;
}

struct rtrans {
  int64_t at;
  int32_t off;
  int order; /* on a tie the start of DST comes last: DST all year holds */
};

static int
rtrans_cmp(const void *a, const void *b)
{
  const struct rtrans *x = a, *y = b;
  if (x->at != y->at)
    return x->at < y->at ? -1 : 1;
  return x->order - y->order;
}

/* The rule's span of t, its start no earlier than floor. */
static void
rule_span(const struct rule *ru, int64_t t, int64_t floor, struct tb_tz_span *out)
{
  if (!ru->has_dst) {
    *out = (struct tb_tz_span){ floor, INT64_MAX, ru->std_off };
    return;
  }
  int64_t y;
  unsigned m, d;
  tb_tz_civil_from_days(floor_div(t, DAY), &y, &m, &d);
  struct rtrans tr[10];
  size_t n = 0;
  for (int64_t k = y - 2; k <= y + 2; k++) {
    tr[n++] = (struct rtrans){ rule_local(&ru->start, k) - ru->std_off, ru->dst_off, 1 };
    tr[n++] = (struct rtrans){ rule_local(&ru->end, k) - ru->dst_off, ru->std_off, 0 };
  }
  qsort(tr, n, sizeof tr[0], rtrans_cmp);
  out->start = floor;
  out->end = INT64_MAX;
  out->utoff = ru->std_off;
  for (size_t i = 0; i < n; i++) {
    if (tr[i].at <= t) {
      out->utoff = tr[i].off;
      if (tr[i].at > out->start)
        out->start = tr[i].at;
    } else if (out->end == INT64_MAX) {
      out->end = tr[i].at;
    }
  }
}

/* Parsing the footer: a cursor over its text. */
struct cur {
  const char *s;
};

/* A zone abbreviation: <...> or three or more letters. */
static bool
parse_abbr(struct cur *c)
{
  const char *s = c->s;
  size_t n = 0;
  if (*s == '<') {
    s++;
    while (s[n] != '\0' && s[n] != '>') {
      char ch = s[n];
      if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '+' || ch == '-'))
        return false;
      n++;
    }
    if (s[n] != '>' || n < 3)
      return false;
    c->s = s + n + 1;
    return true;
  }
  while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z'))
    n++;
  if (n < 3)
    return false;
  c->s = s + n;
  return true;
}

static bool
parse_uint(struct cur *c, int max_digits, int64_t *v)
{
  int n = 0;
  *v = 0;
  while (*c->s >= '0' && *c->s <= '9' && n < max_digits) {
    *v = *v * 10 + (*c->s - '0');
    c->s++;
    n++;
  }
  return n > 0 && !(*c->s >= '0' && *c->s <= '9');
}

/* [+-]hh[:mm[:ss]], hours at most max_h, into seconds. */
static bool
parse_hms(struct cur *c, int max_h, int32_t *out)
{
  int sign = 1;
  if (*c->s == '+' || *c->s == '-') {
    sign = *c->s == '-' ? -1 : 1;
    c->s++;
  }
  int64_t h, mi = 0, se = 0;
  if (!parse_uint(c, 3, &h) || h > max_h)
    return false;
  if (*c->s == ':') {
    c->s++;
    if (!parse_uint(c, 2, &mi) || mi > 59)
      return false;
    if (*c->s == ':') {
      c->s++;
      if (!parse_uint(c, 2, &se) || se > 59)
        return false;
    }
  }
  *out = (int32_t)(sign * (h * HOUR + mi * 60 + se));
  return true;
}

static bool
parse_rdate(struct cur *c, struct rdate *r)
{
  int64_t a, b, d;
  memset(r, 0, sizeof *r);
  if (*c->s == 'J') {
    c->s++;
    if (!parse_uint(c, 3, &a) || a < 1 || a > 365)
      return false;
    r->kind = 'J';
    r->n = (int)a;
  } else if (*c->s == 'M') {
    c->s++;
    if (!parse_uint(c, 2, &a) || a < 1 || a > 12 || *c->s++ != '.' || !parse_uint(c, 1, &b) ||
        b < 1 || b > 5 || *c->s++ != '.' || !parse_uint(c, 1, &d) || d > 6)
      return false;
    r->kind = 'M';
    r->m = (int)a;
    r->w = (int)b;
    r->d = (int)d;
  } else {
    if (!parse_uint(c, 3, &a) || a > 365)
      return false;
    r->kind = 'N';
    r->n = (int)a;
  }
  r->secs = 2 * HOUR;
  if (*c->s == '/') {
    c->s++;
    return parse_hms(c, RULE_HOURS_MAX, &r->secs);
  }
  return true;
}

/* A POSIX TZ string (RFC 8536 section 3.3): std offset [dst [offset]
 * [,start[/time],end[/time]]].  Offsets are written west-positive. */
static bool
parse_rule(const char *text, struct rule *ru)
{
  struct cur c = { text };
  int32_t off;
  memset(ru, 0, sizeof *ru);
  if (!parse_abbr(&c) || !parse_hms(&c, 24, &off))
    return false;
  ru->present = true;
  ru->std_off = -off;
  if (*c.s == '\0')
    return true;
  if (!parse_abbr(&c))
    return false;
  ru->has_dst = true;
  ru->dst_off = ru->std_off + HOUR;
  if (*c.s != ',' && *c.s != '\0') {
    if (!parse_hms(&c, 24, &off))
      return false;
    ru->dst_off = -off;
  }
  if (*c.s == '\0') { /* no dates: the US rule, as POSIX implementations do */
    ru->start = (struct rdate){ .kind = 'M', .m = 3, .w = 2, .d = 0, .secs = 2 * HOUR };
    ru->end = (struct rdate){ .kind = 'M', .m = 11, .w = 1, .d = 0, .secs = 2 * HOUR };
    return true;
  }
  if (*c.s++ != ',' || !parse_rdate(&c, &ru->start) || *c.s++ != ',' || !parse_rdate(&c, &ru->end))
    return false;
  return *c.s == '\0';
}

/* ---------------------------------------------------------------- TZif */

static uint32_t
be32(const unsigned char *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t
be64(const unsigned char *p)
{
  uint64_t v = (uint64_t)be32(p) << 32 | be32(p + 4);
  return (int64_t)v;
}

/* A header's six counts, in file order. */
struct counts {
  uint32_t isut, isstd, leap, time, type, chars;
};

static bool
read_header(const unsigned char *b, size_t n, size_t at, struct counts *k, char *version,
            const char **why)
{
  if (n < at || n - at < 44 || memcmp(b + at, "TZif", 4) != 0) {
    *why = "not a TZif file";
    return false;
  }
  *version = (char)b[at + 4];
  const unsigned char *p = b + at + 20;
  *k =
    (struct counts){ be32(p), be32(p + 4), be32(p + 8), be32(p + 12), be32(p + 16), be32(p + 20) };
  if (k->type == 0 || k->type > TYPES_MAX || k->chars == 0 || k->time > TB_TZ_TRANS_MAX ||
      k->chars > 65536 || (k->isut != 0 && k->isut != k->type) ||
      (k->isstd != 0 && k->isstd != k->type)) {
    *why = "TZif counts out of range";
    return false;
  }
  if (k->leap != 0) {
    *why = "a zone with leap seconds (right/...) is not POSIX time";
    return false;
  }
  return true;
}

/* The bytes of a data block with times of tsize bytes. */
static size_t
block_size(const struct counts *k, size_t tsize)
{
  return (size_t)k->time * (tsize + 1) + (size_t)k->type * 6 + k->chars +
         (size_t)k->leap * (tsize + 4) + k->isstd + k->isut;
}

/* The data block at b[at..] into tz. */
static bool
read_block(const unsigned char *b, size_t n, size_t at, const struct counts *k, size_t tsize,
           struct tb_tz *tz, const char **why)
{
  if (n < at || n - at < block_size(k, tsize)) {
    *why = "a truncated TZif file";
    return false;
  }
  const unsigned char *times = b + at, *idx = times + (size_t)k->time * tsize;
  const unsigned char *types = idx + k->time;
  int32_t utoff[TYPES_MAX];
  for (uint32_t i = 0; i < k->type; i++) {
    int32_t u = (int32_t)be32(types + 6 * i);
    if (u < UTOFF_MIN || u > UTOFF_MAX || types[6 * i + 4] > 1 || types[6 * i + 5] >= k->chars) {
      *why = "a TZif time type out of range";
      return false;
    }
    utoff[i] = u;
  }
  tz->n = k->time;
  tz->at = tb_xcalloc(k->time + 1, sizeof *tz->at);
  tz->off = tb_xcalloc(k->time + 1, sizeof *tz->off);
  tz->off0 = utoff[0];
  for (uint32_t i = 0; i < k->time; i++) {
    tz->at[i] = tsize == 8 ? be64(times + 8 * i) : (int64_t)(int32_t)be32(times + 4 * i);
    if (idx[i] >= k->type || (i > 0 && tz->at[i] <= tz->at[i - 1])) {
      *why = "TZif transitions out of order";
      return false;
    }
    tz->off[i] = utoff[idx[i]];
  }
  return true;
}

struct tb_tz *
tb_tz_parse(const unsigned char *b, size_t n, const char **why)
{
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  struct counts k;
  char version;
  if (!read_header(b, n, 0, &k, &version, why))
    return NULL;
  struct tb_tz *tz = tb_xcalloc(1, sizeof *tz);
  if (version == '\0') { /* version 1: the 32-bit block is all there is */
    if (!read_block(b, n, 44, &k, 4, tz, why))
      goto bad;
    return tz;
  }
  size_t at2 = 44 + block_size(&k, 4);
  if (!read_header(b, n, at2, &k, &version, why) || !read_block(b, n, at2 + 44, &k, 8, tz, why))
    goto bad;
  /* the footer: "\n" TZ "\n" */
  size_t f = at2 + 44 + block_size(&k, 8);
  if (f >= n || b[f] != '\n') {
    *why = "a TZif file without its footer";
    goto bad;
  }
  const unsigned char *nl = memchr(b + f + 1, '\n', n - f - 1);
  size_t len = nl != NULL ? (size_t)(nl - (b + f + 1)) : 0;
  if (nl == NULL || len > FOOTER_MAX) {
    *why = "a TZif footer too long or unterminated";
    goto bad;
  }
  char text[FOOTER_MAX + 1];
  memcpy(text, b + f + 1, len);
  text[len] = '\0';
  if (len > 0 && !parse_rule(text, &tz->rule)) {
    *why = "a TZif footer that is not a POSIX TZ rule";
    goto bad;
  }
  return tz;
bad:
  tb_tz_free(tz);
  return NULL;
}

struct tb_tz *
tb_tz_fixed(int32_t utoff)
{
  struct tb_tz *tz = tb_xcalloc(1, sizeof *tz);
  tz->off0 = utoff;
  return tz;
}

void
tb_tz_free(struct tb_tz *tz)
{
  if (tz == NULL)
    return;
  free(tz->at);
  free(tz->off);
  free(tz);
}

/* ------------------------------------------------------------- loading */

bool
tb_tz_name_ok(const char *name)
{
  size_t n = name != NULL ? strlen(name) : 0;
  if (n == 0 || n > TB_TZ_NAME_MAX || strcmp(name, "localtime") == 0 ||
      strcmp(name, "posixrules") == 0)
    return false;
  size_t part = 0; /* bytes of the current part */
  for (size_t i = 0; i <= n; i++) {
    char c = name[i];
    if (c == '/' || c == '\0') {
      if (part == 0 || (part == 1 && name[i - 1] == '.') ||
          (part == 2 && name[i - 1] == '.' && name[i - 2] == '.'))
        return false;
      part = 0;
      continue;
    }
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '+' || c == '-' || c == '.'))
      return false;
    if (part == 0 && (c == '.' || c == '-'))
      return false;
    part++;
  }
  return true;
}

enum tb_tz_status
tb_tz_load(const char *dir, const char *name, struct tb_tz **out, const char **why)
{
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  *out = NULL;
  *why = NULL;
  if (!tb_tz_name_ok(name)) {
    *why = "not an IANA zone name";
    return TB_TZ_BAD_NAME;
  }
  char *path = tb_xasprintf("%s/%s", dir != NULL && dir[0] != '\0' ? dir : TB_TZ_DIR_DEFAULT, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  free(path);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0)
      close(fd);
    *why = "no such zone";
    return TB_TZ_UNKNOWN;
  }
  if (st.st_size > TB_TZ_FILE_MAX) {
    close(fd);
    *why = "a zone file larger than any TZif zone";
    return TB_TZ_BAD_FILE;
  }
  size_t cap = (size_t)st.st_size + 1, len = 0;
  unsigned char *buf = tb_xmalloc(cap);
  while (len < cap) {
    ssize_t r = read(fd, buf + len, cap - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    len += (size_t)r;
  }
  close(fd);
  *out = len < cap ? tb_tz_parse(buf, len, why) : NULL;
  if (len >= cap)
    *why = "a zone file that grew while it was read";
  free(buf);
  return *out != NULL ? TB_TZ_OK : TB_TZ_BAD_FILE;
}

/* --------------------------------------------------------------- lookup */

void
tb_tz_span_at(const struct tb_tz *tz, int64_t t, struct tb_tz_span *out)
{
  if (tz->n == 0) {
    if (tz->rule.present)
      rule_span(&tz->rule, t, INT64_MIN, out);
    else
      *out = (struct tb_tz_span){ INT64_MIN, INT64_MAX, tz->off0 };
    return;
  }
  if (t < tz->at[0]) {
    *out = (struct tb_tz_span){ INT64_MIN, tz->at[0], tz->off0 };
    return;
  }
  size_t lo = 0, hi = tz->n; /* the last i with at[i] <= t */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (tz->at[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  if (lo + 1 < tz->n)
    *out = (struct tb_tz_span){ tz->at[lo], tz->at[lo + 1], tz->off[lo] };
  else if (tz->rule.present)
    rule_span(&tz->rule, t, tz->at[lo], out);
  else
    *out = (struct tb_tz_span){ tz->at[lo], INT64_MAX, tz->off[lo] };
}

int32_t
tb_tz_offset(const struct tb_tz *tz, int64_t t)
{
  struct tb_tz_span s;
  tb_tz_span_at(tz, t, &s);
  return s.utoff;
}

/* Instants this far from the year 0 keep every sum below in range. */
#define TIME_BOUND (INT64_C(1) << 60)

int64_t
tb_tz_from_local(const struct tb_tz *tz, int64_t local)
{
  if (local > TIME_BOUND)
    local = TIME_BOUND;
  if (local < -TIME_BOUND)
    local = -TIME_BOUND;
  /* every offset is within 26 hours: before local - 27 h the clock reads
   * less than local, so the first span to reach it starts after that */
  int64_t t = local - 27 * HOUR;
  for (int k = 0; k < 64; k++) {
    struct tb_tz_span s;
    tb_tz_span_at(tz, t, &s);
    int64_t cand = local - s.utoff;
    if (cand < t)
      cand = t;
    if (cand < s.end)
      return cand;
    t = s.end;
  }
  return local - tb_tz_offset(tz, local);
}

/* n digits of s as a number, or -1. */
static int
digits(const char *s, int n)
{
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* The offset of an RFC 3339 date-time's end at p ("Z", "+hh:mm",
 * "-hh:mm") in seconds into *off; false when p holds anything else. */
static bool
rfc3339_offset(const char *p, int64_t *off)
{
  if ((p[0] == 'Z' || p[0] == 'z') && p[1] == '\0') {
    *off = 0;
    return true;
  }
  if ((p[0] != '+' && p[0] != '-') || p[3] != ':' || p[6] != '\0')
    return false;
  int oh = digits(p + 1, 2), om = digits(p + 4, 2);
  if (oh < 0 || oh > 23 || om < 0 || om > 59)
    return false;
  *off = (p[0] == '-' ? -1 : 1) * (int64_t)(oh * HOUR + om * 60);
  return true;
}

bool
tb_tz_parse_rfc3339(const char *s, int64_t *secs)
{
  if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':')
    return false;
  int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
  int h = digits(s + 11, 2), mi = digits(s + 14, 2), se = digits(s + 17, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || (unsigned)d > tb_tz_month_days(y, (unsigned)mo) ||
      h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
    return false;
  const char *p = s + 19;
  if (*p == '.') {
    if (p[1] < '0' || p[1] > '9')
      return false;
    for (p++; *p >= '0' && *p <= '9'; p++)
      ;
  }
  int64_t off;
  if (!rfc3339_offset(p, &off))
    return false;
  *secs = tb_tz_days_from_civil(y, (unsigned)mo, (unsigned)d) * DAY + h * HOUR + mi * 60 + se - off;
  return true;
}
