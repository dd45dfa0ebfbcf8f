/*
 * tb_cron: the parser and the walk over fires (see tb_cron.h).
 *
 * A field is a bit set.  The walk runs over local minutes in order,
 * skipping months, days and hours that cannot match, and turns each
 * matching minute into an instant with tb_tz_from_local; since that map
 * only ever goes forward (tb_tz.h), the first minute whose instant is
 * after the last fire is the next fire, and two minutes that land on one
 * instant (the minutes of a gap) fire once.  The walk starts at the local
 * reading of the instant given: every earlier minute maps to an instant no
 * later than it.
 */
#include "base/tb_cron.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define DAY 86400LL

/* ----------------------------------------------------------------- parse */

static const char *const month_names[] = { "jan", "feb", "mar", "apr", "may", "jun",
                                           "jul", "aug", "sep", "oct", "nov", "dec" };
static const char *const day_names[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat" };

struct field_def {
  const char *name;
  int min, max;
  const char *const *names; /* the names of min, min + 1, ...; NULL: none */
  size_t nnames;
};

static const struct field_def fields[5] = {
  { "minute", 0, 59, NULL, 0 },          { "hour", 0, 23, NULL, 0 },
  { "day-of-month", 1, 31, NULL, 0 },    { "month", 1, 12, month_names, 12 },
  { "day-of-week", 0, 7, day_names, 7 },
};

static const struct {
  const char *name, *fields;
} macros[] = {
  { "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" }, { "@monthly", "0 0 1 * *" },
  { "@weekly", "0 0 * * 0" }, { "@daily", "0 0 * * *" },    { "@midnight", "0 0 * * *" },
  { "@hourly", "0 * * * *" },
};

/* A number or (for months and days) a name at *p, moved past it. */
static bool
parse_value(const char **p, const char *end, const struct field_def *f, int *out,
            char why[TB_CRON_WHY_MAX])
{
  const char *s = *p;
  if (s < end && *s >= '0' && *s <= '9') {
    long v = 0;
    int digits = 0;
    while (s < end && *s >= '0' && *s <= '9') {
      if (++digits > 3) {
        snprintf(why, TB_CRON_WHY_MAX, "%s: a number too long", f->name);
        return false;
      }
      v = v * 10 + (*s++ - '0');
    }
    if (v < f->min || v > f->max) {
      snprintf(why, TB_CRON_WHY_MAX, "%s: %ld is outside %d-%d", f->name, v, f->min, f->max);
      return false;
    }
    *out = (int)v;
    *p = s;
    return true;
  }
  size_t n = 0;
  while (s + n < end && ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z')))
    n++;
  for (size_t i = 0; n == 3 && i < f->nnames; i++) {
    if (strncasecmp(s, f->names[i], 3) == 0) {
      *out = f->min + (int)i;
      *p = s + 3;
      return true;
    }
  }
  if (n == 0)
    snprintf(why, TB_CRON_WHY_MAX, "%s: expected a number%s", f->name,
             f->names != NULL ? " or a name" : "");
  else
    snprintf(why, TB_CRON_WHY_MAX, "%s: unknown name \"%.*s\"", f->name, (int)(n > 16 ? 16 : n), s);
  return false;
}

/* One item of a field, [p, end) (no comma inside), into *bits. */
static bool
parse_item(const char *p, const char *end, const struct field_def *f, uint64_t *bits,
           char why[TB_CRON_WHY_MAX])
{
  int lo, hi, step = 1;
  bool single = false;
  if (p < end && *p == '*') {
    lo = f->min;
    hi = f->max;
    p++;
  } else {
    if (!parse_value(&p, end, f, &lo, why))
      return false;
    hi = lo;
    single = true;
    if (p < end && *p == '-') {
      p++;
      if (!parse_value(&p, end, f, &hi, why))
        return false;
      single = false;
      if (hi < lo) {
        snprintf(why, TB_CRON_WHY_MAX, "%s: the range %d-%d runs backwards", f->name, lo, hi);
        return false;
      }
    }
  }
  if (p < end && *p == '/') {
    p++;
    long s = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 4) {
      s = s * 10 + (*p++ - '0');
      digits++;
    }
    if (digits == 0 || s < 1 || s > f->max - f->min + 1) {
      snprintf(why, TB_CRON_WHY_MAX, "%s: a step must be 1 to %d", f->name, f->max - f->min + 1);
      return false;
    }
    step = (int)s;
    if (single) /* N/S: from N to the end of the field */
      hi = f->max;
  }
  if (p != end) {
    snprintf(why, TB_CRON_WHY_MAX, "%s: unexpected \"%c\"", f->name, *p);
    return false;
  }
  for (int v = lo; v <= hi; v += step)
    *bits |= UINT64_C(1) << v;
  return true;
}

/* A whole field [p, end) into *bits. */
static bool
parse_field(const char *p, const char *end, const struct field_def *f, uint64_t *bits,
            char why[TB_CRON_WHY_MAX])
{
  *bits = 0;
  while (p <= end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *stop = comma != NULL ? comma : end;
    if (stop == p) {
      snprintf(why, TB_CRON_WHY_MAX, "%s: an empty item", f->name);
      return false;
    }
    if (!parse_item(p, stop, f, bits, why))
      return false;
    p = stop + 1;
    if (comma == NULL)
      break;
  }
  return true;
}

bool
tb_cron_parse(const char *text, struct tb_cron *out, char why[TB_CRON_WHY_MAX])
{
  memset(out, 0, sizeof *out);
  why[0] = '\0';
  size_t len = text != NULL ? strlen(text) : 0;
  if (len == 0 || len > TB_CRON_TEXT_MAX) {
    snprintf(why, TB_CRON_WHY_MAX, "a cron expression of 1 to %d characters", TB_CRON_TEXT_MAX);
    return false;
  }
  const char *s = text;
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s == '@') {
    size_t n = strcspn(s, " \t");
    const char *rest = s + n + strspn(s + n, " \t");
    for (size_t i = 0; i < TB_ARRAY_LEN(macros); i++)
      if (*rest == '\0' && strlen(macros[i].name) == n && strncasecmp(s, macros[i].name, n) == 0)
        return tb_cron_parse(macros[i].fields, out, why);
    snprintf(why, TB_CRON_WHY_MAX,
             "unknown macro: @yearly, @annually, @monthly, @weekly, @daily, @midnight or "
             "@hourly");
    return false;
  }
  uint64_t bits[5];
  int k = 0;
  while (*s != '\0') {
    const char *e = s;
    while (*e != '\0' && *e != ' ' && *e != '\t') {
      if ((unsigned char)*e < 0x20 || (unsigned char)*e >= 0x7f) {
        snprintf(why, TB_CRON_WHY_MAX, "a character that is not printable ASCII");
        return false;
      }
      e++;
    }
    if (k == 5) {
      k++;
      break;
    }
    if (!parse_field(s, e, &fields[k], &bits[k], why))
      return false;
    if (k == 2)
      out->days_star = *s == '*';
    if (k == 4)
      out->weekdays_star = *s == '*';
    k++;
    s = e;
    while (*s == ' ' || *s == '\t')
      s++;
  }
  if (k != 5) {
    snprintf(why, TB_CRON_WHY_MAX,
             "five fields are needed (minute hour day-of-month month day-of-week), not %s%d",
             k > 5 ? "more than " : "", k > 5 ? 5 : k);
    return false;
  }
  out->minutes = bits[0];
  out->hours = (uint32_t)bits[1];
  out->days = (uint32_t)bits[2];
  out->months = (uint16_t)bits[3];
  out->weekdays = (uint8_t)((bits[4] | bits[4] >> 7) & 0x7f); /* 7 is Sunday too */
  return true;
}

/* ------------------------------------------------------------------ walk */

bool
tb_cron_day_matches(const struct tb_cron *c, int64_t y, unsigned m, unsigned d)
{
  bool dom = (c->days >> d) & 1u;
  bool dow = (c->weekdays >> tb_tz_weekday(tb_tz_days_from_civil(y, m, d))) & 1u;
  if (c->days_star || c->weekdays_star)
    return dom && dow;
  return dom || dow;
}

/* The first bit of mask at or above i (< width), or -1. */
static int
first_bit(uint64_t mask, int i, int width)
{
  if (i >= width)
    return -1;
  uint64_t m = mask & (~UINT64_C(0) << i);
  return m != 0 ? __builtin_ctzll(m) : -1;
}

/* The first matching local minute at or after from and before end. */
static bool
next_local(const struct tb_cron *c, int64_t from, int64_t end, int64_t *out)
{
  int64_t day = from >= 0 ? from / DAY : -((-from + DAY - 1) / DAY);
  int64_t sod = from - day * DAY;
  int h = (int)(sod / 3600), mi = (int)((sod % 3600 + 59) / 60);
  int64_t y;
  unsigned m, d;
  tb_tz_civil_from_days(day, &y, &m, &d);
  while (day * DAY < end) {
    if (((c->months >> m) & 1u) == 0) { /* to the first of the next month */
      day += tb_tz_month_days(y, m) - d + 1;
      d = 1;
      if (++m > 12) {
        m = 1;
        y++;
      }
      h = mi = 0;
      continue;
    }
    if (tb_cron_day_matches(c, y, m, d)) {
      int h0 = h;
      for (h = first_bit(c->hours, h, 24); h >= 0; h = first_bit(c->hours, h + 1, 24)) {
        int at = first_bit(c->minutes, h == h0 ? mi : 0, 60);
        if (at >= 0) {
          *out = day * DAY + h * 3600 + at * 60;
          return *out < end;
        }
      }
    }
    day++;
    h = mi = 0;
    if (++d > tb_tz_month_days(y, m)) {
      d = 1;
      if (++m > 12) {
        m = 1;
        y++;
      }
    }
  }
  return false;
}

/* The instant of local minute local, through the span cache: far enough
 * inside the last fire's span (3 days from its start: more than any two
 * offsets differ), the local time's instant is local - offset. */
static int64_t
to_instant(struct tb_cron_iter *it, int64_t local)
{
  const struct tb_tz_span *s = &it->span;
  int64_t t = local - s->utoff;
  if (t < s->end && (s->start == INT64_MIN || (t >= s->start && t - s->start >= 3 * DAY)))
    return t;
  t = tb_tz_from_local(it->tz, local);
  tb_tz_span_at(it->tz, t, &it->span);
  return t;
}

/* Instants kept this far inside int64 (a few hundred billion years). */
#define INSTANT_BOUND (INT64_C(1) << 58)

void
tb_cron_iter_init(struct tb_cron_iter *it, const struct tb_cron *c, const struct tb_tz *tz,
                  int64_t after)
{
  if (after > INSTANT_BOUND)
    after = INSTANT_BOUND;
  if (after < -INSTANT_BOUND)
    after = -INSTANT_BOUND;
  it->c = c;
  it->tz = tz;
  it->last = after;
  tb_tz_span_at(tz, after, &it->span);
  int64_t local = after + it->span.utoff;
  /* the minute of that reading (floor) */
  it->local = local >= 0 ? local / 60 * 60 : -((-local + 59) / 60) * 60;
  it->end_local = it->local + TB_CRON_HORIZON_DAYS * DAY;
}

int64_t
tb_cron_iter_next(struct tb_cron_iter *it)
{
  int64_t local;
  while (next_local(it->c, it->local, it->end_local, &local)) {
    it->local = local + 60;
    int64_t t = to_instant(it, local);
    if (t > it->last) {
      it->last = t;
      return t;
    }
  }
  it->local = it->end_local;
  return TB_CRON_NEVER;
}

int64_t
tb_cron_next(const struct tb_cron *c, const struct tb_tz *tz, int64_t after)
{
  struct tb_cron_iter it;
  tb_cron_iter_init(&it, c, tz, after);
  return tb_cron_iter_next(&it);
}

int64_t
tb_cron_min_gap(const struct tb_cron *c, const struct tb_tz *tz, int64_t from, int64_t horizon_s,
                int64_t stop_below)
{
  struct tb_cron_iter it;
  tb_cron_iter_init(&it, c, tz, from);
  int64_t prev = tb_cron_iter_next(&it), best = INT64_MAX;
  if (prev == TB_CRON_NEVER)
    return best;
  if (horizon_s > INSTANT_BOUND)
    horizon_s = INSTANT_BOUND;
  int64_t end = it.last + horizon_s; /* from the first fire; both bounded: no overflow */
  for (;;) {
    int64_t t = tb_cron_iter_next(&it);
    if (t == TB_CRON_NEVER || t > end)
      break;
    if (t - prev < best)
      best = t - prev;
    if (best < stop_below)
      break;
    prev = t;
  }
  return best;
}
