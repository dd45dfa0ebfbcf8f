/* Unit tests: tb_cron, five-field cron expressions (Vixie cron's syntax and
 * day rule) and their fires in a time zone.
 *
 * By hand (the calendar): 2026-01-02 is a Friday, 2026-02-01 a Sunday,
 * 2026-03-01 and 03-08 Sundays; 2100 is not a leap year, so after 2096 the
 * next 29 February is in 2104.  New York switches on 2026-03-08 at 07:00 UTC
 * (02:00 EST becomes 03:00 EDT) and back on 2026-11-01 at 06:00 UTC (02:00
 * EDT becomes 01:00 EST); Berlin on 2026-03-29 and 2026-10-25 at 01:00 UTC
 * (test_tz.c checks those instants).  The rule of the schedules: a skipped
 * local time fires once at the end of the gap, a repeated one once at its
 * first occurrence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_cron.h"

#define MIN 60
#define H 3600

static int64_t
utc(int64_t y, unsigned m, unsigned d, int h, int mi)
{
  return tb_tz_days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60;
}

static struct tb_cron
cron(const char *text)
{
  struct tb_cron c;
  char why[TB_CRON_WHY_MAX];
  if (!tb_cron_parse(text, &c, why))
    fail_msg("\"%s\": %s", text, why);
  return c;
}

static struct tb_tz *
zone(const char *name)
{
  struct tb_tz *tz = NULL;
  const char *why;
  if (tb_tz_load(TB_TZ_DIR_DEFAULT, name, &tz, &why) != TB_TZ_OK)
    fail_msg("%s", name);
  return tz;
}

/* Asserts the fires of text in tz after after: n instants, in order. */
static void
fires(const char *text, const struct tb_tz *tz, int64_t after, const int64_t *want, size_t n)
{
  struct tb_cron c = cron(text);
  struct tb_cron_iter it;
  tb_cron_iter_init(&it, &c, tz, after);
  for (size_t i = 0; i < n; i++) {
    int64_t got = tb_cron_iter_next(&it);
    if (got != want[i])
      fail_msg("\"%s\" fire %zu: %lld, want %lld (%+lld s)", text, i, (long long)got,
               (long long)want[i], (long long)(got - want[i]));
  }
  assert_int_equal(tb_cron_next(&c, tz, after), want[0]);
}

#define FIRES(text, tz, after, ...)                       \
  do {                                                    \
    const int64_t w_[] = { __VA_ARGS__ };                 \
    fires(text, tz, after, w_, sizeof w_ / sizeof w_[0]); \
  } while (0)

static void
test_parse(void **state)
{
  (void)state;
  struct tb_cron c = cron("*/7 * * * *");
  uint64_t want = 0;
  for (int m = 0; m < 60; m += 7)
    want |= UINT64_C(1) << m;
  assert_true(c.minutes == want); /* 0, 7, ..., 56: nine minutes */
  assert_int_equal(__builtin_popcountll(c.minutes), 9);
  assert_int_equal(c.hours, 0xffffff);
  assert_true(c.days_star && c.weekdays_star);
  c = cron("0 9 * JAN-mar mon-fri");
  assert_int_equal(c.months, 0xe);
  assert_int_equal(c.weekdays, 0x3e);
  assert_true(c.days_star);
  assert_false(c.weekdays_star);
  /* Sunday is 0 and 7 */
  assert_int_equal(cron("0 0 * * 0").weekdays, 0x01);
  assert_int_equal(cron("0 0 * * 7").weekdays, 0x01);
  assert_int_equal(cron("0 0 * * sun").weekdays, 0x01);
  assert_int_equal(cron("0 0 * * 5-7").weekdays, 0x61);
  assert_int_equal(cron("0 0 * * 0-7").weekdays, 0x7f);
  assert_int_equal(cron("0 0 * * */2").weekdays, 0x55); /* 0, 2, 4, 6 */
  /* lists, ranges with steps, N/S from N to the end */
  assert_true(
    cron("1,2,10-20/5,58 * * * *").minutes ==
    ((1ull << 1) | (1ull << 2) | (1ull << 10) | (1ull << 15) | (1ull << 20) | (1ull << 58)));
  assert_true(cron("50/5 * * * *").minutes == ((1ull << 50) | (1ull << 55)));
  assert_int_equal(cron("0 0 1,15 * *").days, (1u << 1) | (1u << 15));
  /* blanks around and between fields, tabs */
  assert_int_equal(cron("  0\t12  *  * *  ").hours, 1u << 12);
  /* macros */
  struct tb_cron d = cron("@daily"), e = cron("0 0 * * *");
  assert_memory_equal(&d, &e, sizeof d);
  d = cron("@HOURLY");
  assert_true(d.minutes == 1 && d.hours == 0xffffff);
  assert_int_equal(cron("@weekly").weekdays, 1);
}

static void
test_parse_errors(void **state)
{
  (void)state;
  static const struct {
    const char *text, *why;
  } bad[] = {
    { "", "characters" },
    { "* * * *", "five fields are needed (minute hour day-of-month month day-of-week), not 4" },
    { "* * * * * *", "not more than 5" },
    { "61 * * * *", "minute: 61 is outside 0-59" },
    { "* 24 * * *", "hour: 24 is outside 0-23" },
    { "* * 0 * *", "day-of-month: 0 is outside 1-31" },
    { "* * 32 * *", "day-of-month: 32 is outside 1-31" },
    { "* * * 13 *", "month: 13 is outside 1-12" },
    { "* * * * 8", "day-of-week: 8 is outside 0-7" },
    { "5-3 * * * *", "minute: the range 5-3 runs backwards" },
    { "*/0 * * * *", "minute: a step must be 1 to 60" },
    { "*/61 * * * *", "minute: a step must be 1 to 60" },
    { "* * * foo *", "month: unknown name \"foo\"" },
    { "* * * * monday", "day-of-week: unknown name \"monday\"" },
    { "* * mon * *", "day-of-month: unknown name" },
    { "1,,2 * * * *", "minute: an empty item" },
    { "1, * * * *", "minute: an empty item" },
    { "1-2-3 * * * *", "minute: unexpected \"-\"" },
    { "** * * * *", "minute: unexpected \"*\"" },
    { "1234 * * * *", "minute: a number too long" },
    { "@reboot", "unknown macro" },
    { "@daily 5", "unknown macro" },
    { "0 0 * * fri-mon", "day-of-week: the range 5-1 runs backwards" },
    { "0\n0 * * *", "printable" },
    { "-1 * * * *", "minute: expected a number" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct tb_cron c;
    char why[TB_CRON_WHY_MAX];
    if (tb_cron_parse(bad[i].text, &c, why))
      fail_msg("accepted \"%s\"", bad[i].text);
    if (strstr(why, bad[i].why) == NULL)
      fail_msg("\"%s\": \"%s\", want \"%s\"", bad[i].text, why, bad[i].why);
  }
  char longer[TB_CRON_TEXT_MAX + 2];
  memset(longer, ' ', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  struct tb_cron c;
  char why[TB_CRON_WHY_MAX];
  assert_false(tb_cron_parse(longer, &c, why));
  assert_false(tb_cron_parse(NULL, &c, why));
}

static void
test_next_utc(void **state)
{
  (void)state;
  struct tb_tz *u = tb_tz_fixed(0);
  /* every seventh minute: 10:56, then 11:00 (four minutes at the wrap) */
  FIRES("*/7 * * * *", u, utc(2026, 5, 4, 10, 55) + 30, utc(2026, 5, 4, 10, 56),
        utc(2026, 5, 4, 11, 0), utc(2026, 5, 4, 11, 7));
  /* strictly after: a fire at the instant given is not the next */
  FIRES("*/7 * * * *", u, utc(2026, 5, 4, 10, 56), utc(2026, 5, 4, 11, 0));
  /* the 31st: months without one are skipped */
  FIRES("0 12 31 * *", u, utc(2026, 1, 31, 13, 0), utc(2026, 3, 31, 12, 0), utc(2026, 5, 31, 12, 0),
        utc(2026, 7, 31, 12, 0), utc(2026, 8, 31, 12, 0), utc(2026, 10, 31, 12, 0),
        utc(2026, 12, 31, 12, 0));
  /* 29 February: leap years only, and 2100 is not one */
  FIRES("0 0 29 2 *", u, utc(2026, 1, 1, 0, 0), utc(2028, 2, 29, 0, 0), utc(2032, 2, 29, 0, 0));
  FIRES("0 0 29 2 *", u, utc(2096, 3, 1, 0, 0), utc(2104, 2, 29, 0, 0));
  /* never */
  struct tb_cron c = cron("0 0 30 2 *");
  assert_true(tb_cron_next(&c, u, utc(2026, 1, 1, 0, 0)) == TB_CRON_NEVER);
  c = cron("0 0 31 4,6,9,11 *");
  assert_true(tb_cron_next(&c, u, utc(2026, 1, 1, 0, 0)) == TB_CRON_NEVER);
  /* both day fields restricted: either matches (the 13th, or a Friday) */
  FIRES("0 0 13 * 5", u, utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0), utc(2026, 1, 9, 0, 0),
        utc(2026, 1, 13, 0, 0), utc(2026, 1, 16, 0, 0));
  /* so 30 February or a Monday fires on February's Mondays */
  FIRES("0 0 30 2 1", u, utc(2026, 1, 1, 0, 0), utc(2026, 2, 2, 0, 0), utc(2026, 2, 9, 0, 0));
  /* a starred field (steps too) makes it AND: odd days that are Fridays */
  FIRES("0 0 */2 * 5", u, utc(2026, 1, 1, 0, 0), utc(2026, 1, 9, 0, 0), utc(2026, 1, 23, 0, 0));
  FIRES("0 0 * * 5", u, utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0), utc(2026, 1, 9, 0, 0));
  /* Sunday as 0 and as 7, from a Sunday midnight */
  FIRES("0 0 * * 0", u, utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
  FIRES("0 0 * * 7", u, utc(2026, 3, 1, 0, 0), utc(2026, 3, 8, 0, 0));
  /* hours and minutes lists, across a month and a year */
  FIRES("15,45 9-10 * * *", u, utc(2026, 12, 31, 10, 50), utc(2027, 1, 1, 9, 15),
        utc(2027, 1, 1, 9, 45), utc(2027, 1, 1, 10, 15));
  /* an instant between minutes */
  FIRES("* * * * *", u, utc(2026, 1, 1, 0, 0) + 1, utc(2026, 1, 1, 0, 1));
  FIRES("* * * * *", u, utc(1969, 12, 31, 23, 58) + 59, utc(1969, 12, 31, 23, 59));
  tb_tz_free(u);
}

static void
test_dst_new_york(void **state)
{
  (void)state;
  struct tb_tz *ny = zone("America/New_York");
  /* 02:30 does not exist on March 8: it fires at 03:00 EDT, once */
  FIRES("30 2 * * *", ny, utc(2026, 3, 7, 12, 0), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30));
  /* 01:30 is shown twice on November 1: it fires at the first (EDT), once */
  FIRES("30 1 * * *", ny, utc(2026, 10, 31, 12, 0), utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 2, 6, 30));
  /* every 15 minutes over the gap: 02:00 to 02:45 and 03:00 are one instant */
  FIRES("*/15 * * * *", ny, utc(2026, 3, 8, 6, 40), utc(2026, 3, 8, 6, 45), utc(2026, 3, 8, 7, 0),
        utc(2026, 3, 8, 7, 15));
  /* every 30 minutes over the repeat: 01:00 and 01:30 EST do not fire again */
  FIRES("0,30 * * * *", ny, utc(2026, 11, 1, 4, 50), utc(2026, 11, 1, 5, 0),
        utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 7, 0), utc(2026, 11, 1, 7, 30));
  /* from inside the second 01:00 hour: its 01:45 EST is not a new fire */
  FIRES("45 1 * * *", ny, utc(2026, 11, 1, 6, 10), utc(2026, 11, 2, 6, 45));
  /* 2040, past the file's transitions (the footer's rule) */
  FIRES("30 2 * * *", ny, utc(2040, 3, 10, 12, 0), utc(2040, 3, 11, 7, 0), utc(2040, 3, 12, 6, 30));
  /* 09:00 local all year: 14:00 UTC in winter, 13:00 in summer */
  FIRES("0 9 * * 1-5", ny, utc(2026, 3, 6, 15, 0), utc(2026, 3, 9, 13, 0));
  tb_tz_free(ny);
}

static void
test_dst_berlin(void **state)
{
  (void)state;
  struct tb_tz *be = zone("Europe/Berlin");
  FIRES("30 2 * * *", be, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30));
  FIRES("30 2 * * *", be, utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 26, 1, 30));
  /* the last Sunday's 02:00-02:59 twice: every 20 minutes fires 02:00, 02:20,
   * 02:40 once (CEST), then 03:00 CET */
  FIRES("*/20 2-3 * * *", be, utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 0, 0),
        utc(2026, 10, 25, 0, 20), utc(2026, 10, 25, 0, 40), utc(2026, 10, 25, 2, 0));
  tb_tz_free(be);
}

static void
test_min_gap(void **state)
{
  (void)state;
  struct tb_tz *u = tb_tz_fixed(0), *ny = zone("America/New_York");
  int64_t from = utc(2026, 1, 1, 0, 0), year = 366 * 86400LL;
  struct tb_cron c = cron("*/7 * * * *");
  assert_int_equal(tb_cron_min_gap(&c, u, from, year, 0), 4 * MIN);
  c = cron("0 * * * *");
  assert_int_equal(tb_cron_min_gap(&c, ny, from, year, 0), H);
  /* 01:00 and 03:00: two hours apart, but one on the spring-forward day */
  c = cron("0 1,3 * * *");
  assert_int_equal(tb_cron_min_gap(&c, u, from, year, 0), 2 * H);
  assert_int_equal(tb_cron_min_gap(&c, ny, from, year, 0), H);
  /* over January only, no DST: two hours in New York too */
  assert_int_equal(tb_cron_min_gap(&c, ny, from, 31 * 86400LL, 0), 2 * H);
  /* every minute over a whole year, and the early stop */
  c = cron("* * * * *");
  assert_int_equal(tb_cron_min_gap(&c, ny, from, year, 0), MIN);
  assert_int_equal(tb_cron_min_gap(&c, ny, from, year, 3600), MIN);
  /* one fire a year, or none: no gap */
  c = cron("0 0 1 1 *");
  assert_true(tb_cron_min_gap(&c, u, from, year / 2, 0) == INT64_MAX);
  c = cron("0 0 30 2 *");
  assert_true(tb_cron_min_gap(&c, u, from, year, 0) == INT64_MAX);
  tb_tz_free(u);
  tb_tz_free(ny);
}

/* A small seeded generator for the property tests (xorshift64). */
static uint64_t
next_u64(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* The fires of random crons against the definition, minute by minute:
 * the first local minute after the instant that matches, taken to UTC by
 * tb_tz_from_local, strictly after the instant given. */
static void
test_against_brute_force(void **state)
{
  (void)state;
  static const char *const alpha[] = { "*", "*/2", "*/3", "1-5", "0,30", "7", "10-20/5", "3" };
  struct tb_tz *zones[2] = { tb_tz_fixed(0), zone("America/New_York") };
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  for (int k = 0; k < 300; k++) {
    char text[96];
    const char *f[5];
    for (int i = 0; i < 5; i++)
      f[i] = alpha[next_u64(&seed) % 8];
    snprintf(text, sizeof text, "%s %s %s %s %s", f[0], f[1], f[2], f[3], f[4]);
    struct tb_cron c;
    char why[TB_CRON_WHY_MAX];
    if (!tb_cron_parse(text, &c, why))
      continue;
    const struct tb_tz *tz = zones[k % 2];
    /* around the New York transitions of 2026, and elsewhere */
    static const int64_t starts[] = { 1772928000, 1793491200, 1780000000 };
    int64_t after = starts[k % 3] + (int64_t)(next_u64(&seed) % 86400);
    int64_t got = tb_cron_next(&c, tz, after);
    /* brute force over 40 days of local minutes */
    int64_t best = INT64_MAX;
    int64_t l0 = (after + tb_tz_offset(tz, after)) / 60 * 60 - 3 * H;
    for (int64_t l = l0; l < l0 + 40 * 86400LL; l += 60) {
      int64_t day = l / 86400, sod = l % 86400, y;
      unsigned mo, d;
      tb_tz_civil_from_days(day, &y, &mo, &d);
      int h = (int)(sod / 3600), mi = (int)(sod % 3600 / 60);
      if (!((c.minutes >> mi) & 1) || !((c.hours >> h) & 1) || !((c.months >> mo) & 1) ||
          !tb_cron_day_matches(&c, y, mo, d))
        continue;
      int64_t t = tb_tz_from_local(tz, l);
      if (t > after && t < best)
        best = t;
      if (best != INT64_MAX && l > best + 30 * H)
        break;
    }
    if (best == INT64_MAX)
      assert_true(got == TB_CRON_NEVER || got > after + 39 * 86400LL);
    else if (got != best)
      fail_msg("\"%s\" after %lld: %lld, want %lld", text, (long long)after, (long long)got,
               (long long)best);
  }
  tb_tz_free(zones[0]);
  tb_tz_free(zones[1]);
}

/* Whatever the text, parsing never crashes, and a cron parsed fires after
 * the instant given or never. */
static void
test_random_text(void **state)
{
  (void)state;
  static const char alphabet[] = "0123456789*/-,  \tjanmonfriSUN@dailyx";
  uint64_t seed = 42;
  struct tb_tz *ny = zone("America/New_York");
  for (int k = 0; k < 20000; k++) {
    char text[40];
    size_t n = next_u64(&seed) % (sizeof text - 1);
    for (size_t i = 0; i < n; i++)
      text[i] = alphabet[next_u64(&seed) % (sizeof alphabet - 1)];
    text[n] = '\0';
    struct tb_cron c;
    char why[TB_CRON_WHY_MAX];
    if (tb_cron_parse(text, &c, why)) {
      int64_t t = tb_cron_next(&c, ny, 1772928000);
      assert_true(t == TB_CRON_NEVER || t > 1772928000);
    } else {
      assert_true(why[0] != '\0');
    }
  }
  tb_tz_free(ny);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse),
    cmocka_unit_test(test_parse_errors),
    cmocka_unit_test(test_next_utc),
    cmocka_unit_test(test_dst_new_york),
    cmocka_unit_test(test_dst_berlin),
    cmocka_unit_test(test_min_gap),
    cmocka_unit_test(test_against_brute_force),
    cmocka_unit_test(test_random_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
