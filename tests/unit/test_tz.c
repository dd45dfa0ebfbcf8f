/* Unit tests: tb_tz, IANA zones from their TZif files (RFC 8536) and the
 * POSIX TZ rule of their footer, the calendar arithmetic, and local time to
 * UTC with the schedules' DST rule (a skipped time maps to the end of the
 * gap, a repeated one to its first occurrence).
 *
 * The zones are the system's (tzdata, /usr/share/zoneinfo).  By hand, the
 * rules in force since 2007 (US) and 1996 (EU):
 *   America/New_York: EST -5 h, EDT -4 h; DST from the second Sunday of March
 *   at 02:00 local (07:00 UTC) to the first Sunday of November at 02:00 EDT
 *   (06:00 UTC).  2026: March 8 and November 1; 2040: March 11 (the 1st is a
 *   Thursday) and November 4.
 *   Europe/Berlin: CET +1 h, CEST +2 h; the last Sunday of March and of
 *   October at 01:00 UTC.  2026: March 29 and October 25.
 * The files are "fat" (transitions written out to 2037): 2040 and 2045 are
 * read from the footer's rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_tz.h"

#define ZDIR TB_TZ_DIR_DEFAULT
#define H 3600

/* Seconds since the epoch of a UTC civil time. */
static int64_t
utc(int64_t y, unsigned m, unsigned d, int h, int mi)
{
  return tb_tz_days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60;
}

static struct tb_tz *
zone(const char *name)
{
  struct tb_tz *tz = NULL;
  const char *why = NULL;
  enum tb_tz_status st = tb_tz_load(ZDIR, name, &tz, &why);
  if (st != TB_TZ_OK)
    fail_msg("%s: %d %s", name, (int)st, why ? why : "");
  return tz;
}

static void
test_calendar(void **state)
{
  (void)state;
  assert_int_equal(tb_tz_days_from_civil(1970, 1, 1), 0);
  assert_int_equal(tb_tz_days_from_civil(1969, 12, 31), -1);
  assert_int_equal(tb_tz_days_from_civil(2000, 3, 1), 11017);
  /* date -u -d 2026-03-08T07:00:00Z +%s */
  assert_int_equal(utc(2026, 3, 8, 7, 0), 1772953200);
  assert_int_equal(tb_tz_weekday(0), 4);                                   /* Thursday */
  assert_int_equal(tb_tz_weekday(tb_tz_days_from_civil(2026, 3, 8)), 0);   /* Sunday */
  assert_int_equal(tb_tz_weekday(tb_tz_days_from_civil(2026, 1, 2)), 5);   /* Friday */
  assert_int_equal(tb_tz_weekday(tb_tz_days_from_civil(1969, 12, 28)), 0); /* before 1970 */
  assert_int_equal(tb_tz_month_days(2028, 2), 29);
  assert_int_equal(tb_tz_month_days(2100, 2), 28);
  assert_int_equal(tb_tz_month_days(2000, 2), 29);
  assert_int_equal(tb_tz_month_days(2026, 4), 30);
  /* both ways over 1900..2500, day by day */
  int64_t y0, y;
  unsigned m, d;
  tb_tz_civil_from_days(tb_tz_days_from_civil(1900, 1, 1), &y0, &m, &d);
  assert_int_equal(y0, 1900);
  for (int64_t z = tb_tz_days_from_civil(1900, 1, 1); z < tb_tz_days_from_civil(2500, 1, 1); z++) {
    tb_tz_civil_from_days(z, &y, &m, &d);
    if (tb_tz_days_from_civil(y, m, d) != z || d < 1 || d > tb_tz_month_days(y, m))
      fail_msg("day %lld", (long long)z);
  }
}

static void
test_names(void **state)
{
  (void)state;
  const char *good[] = { "UTC",
                         "America/New_York",
                         "Etc/GMT+5",
                         "America/Port-au-Prince",
                         "America/Argentina/Buenos_Aires",
                         "GMT-0",
                         "Europe/Berlin" };
  const char *bad[] = { "",
                        "/etc/passwd",
                        "../etc/passwd",
                        "America/../../etc/passwd",
                        "America//New_York",
                        "America/",
                        ".hidden",
                        "a b",
                        "localtime",
                        "posixrules",
                        "-x",
                        "Europe/Berlin\n",
                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    assert_true(tb_tz_name_ok(good[i]));
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (tb_tz_name_ok(bad[i]))
      fail_msg("accepted \"%s\"", bad[i]);
  struct tb_tz *tz = NULL;
  const char *why;
  assert_int_equal(tb_tz_load(ZDIR, "../../etc/passwd", &tz, &why), TB_TZ_BAD_NAME);
  assert_int_equal(tb_tz_load(ZDIR, "Mars/Olympus_Mons", &tz, &why), TB_TZ_UNKNOWN);
  assert_int_equal(tb_tz_load(ZDIR, "America", &tz, &why), TB_TZ_UNKNOWN); /* a directory */
  assert_int_equal(tb_tz_load(ZDIR, "zone.tab", &tz, &why), TB_TZ_BAD_FILE);
  assert_string_equal(why, "not a TZif file");
  FILE *f = fopen(ZDIR "/right/UTC", "rb");
  if (f != NULL) { /* tzdata's leap-second zones */
    fclose(f);
    assert_int_equal(tb_tz_load(ZDIR, "right/UTC", &tz, &why), TB_TZ_BAD_FILE);
  }
  assert_null(tz);
}

static void
test_new_york(void **state)
{
  (void)state;
  struct tb_tz *ny = zone("America/New_York");
  assert_int_equal(tb_tz_offset(ny, utc(2026, 1, 15, 12, 0)), -5 * H);
  assert_int_equal(tb_tz_offset(ny, utc(2026, 7, 1, 12, 0)), -4 * H);
  /* the transitions of 2026, to the second */
  assert_int_equal(tb_tz_offset(ny, utc(2026, 3, 8, 7, 0) - 1), -5 * H);
  assert_int_equal(tb_tz_offset(ny, utc(2026, 3, 8, 7, 0)), -4 * H);
  assert_int_equal(tb_tz_offset(ny, utc(2026, 11, 1, 6, 0) - 1), -4 * H);
  assert_int_equal(tb_tz_offset(ny, utc(2026, 11, 1, 6, 0)), -5 * H);
  struct tb_tz_span s;
  tb_tz_span_at(ny, utc(2026, 6, 1, 0, 0), &s);
  assert_int_equal(s.start, utc(2026, 3, 8, 7, 0));
  assert_int_equal(s.end, utc(2026, 11, 1, 6, 0));
  assert_int_equal(s.utoff, -4 * H);
  /* 2040 is past the file's transitions: the footer EST5EDT,M3.2.0,M11.1.0 */
  assert_int_equal(tb_tz_offset(ny, utc(2040, 3, 11, 7, 0) - 1), -5 * H);
  assert_int_equal(tb_tz_offset(ny, utc(2040, 3, 11, 7, 0)), -4 * H);
  assert_int_equal(tb_tz_offset(ny, utc(2040, 11, 4, 6, 0) - 1), -4 * H);
  assert_int_equal(tb_tz_offset(ny, utc(2040, 11, 4, 6, 0)), -5 * H);
  tb_tz_span_at(ny, utc(2040, 6, 1, 0, 0), &s);
  assert_int_equal(s.start, utc(2040, 3, 11, 7, 0));
  assert_int_equal(s.end, utc(2040, 11, 4, 6, 0));
  /* local to UTC: ordinary times */
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 1, 15, 9, 0)), utc(2026, 1, 15, 14, 0));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 7, 1, 9, 0)), utc(2026, 7, 1, 13, 0));
  /* spring forward: 02:00..02:59 do not exist; they map to 03:00 EDT */
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 3, 8, 1, 59)), utc(2026, 3, 8, 6, 59));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 3, 8, 2, 0)), utc(2026, 3, 8, 7, 0));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 3, 8, 2, 30)), utc(2026, 3, 8, 7, 0));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 3, 8, 3, 0)), utc(2026, 3, 8, 7, 0));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 3, 8, 3, 1)), utc(2026, 3, 8, 7, 1));
  /* fall back: 01:00..01:59 twice; the first (EDT) is taken */
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 11, 1, 0, 59)), utc(2026, 11, 1, 4, 59));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 11, 1, 1, 30)), utc(2026, 11, 1, 5, 30));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 11, 1, 1, 59)), utc(2026, 11, 1, 5, 59));
  assert_int_equal(tb_tz_from_local(ny, utc(2026, 11, 1, 2, 0)), utc(2026, 11, 1, 7, 0));
  /* the same in 2040, from the footer */
  assert_int_equal(tb_tz_from_local(ny, utc(2040, 3, 11, 2, 30)), utc(2040, 3, 11, 7, 0));
  assert_int_equal(tb_tz_from_local(ny, utc(2040, 11, 4, 1, 30)), utc(2040, 11, 4, 5, 30));
  tb_tz_free(ny);
}

static void
test_berlin_and_south(void **state)
{
  (void)state;
  struct tb_tz *be = zone("Europe/Berlin");
  assert_int_equal(tb_tz_offset(be, utc(2026, 1, 1, 0, 0)), 1 * H);
  assert_int_equal(tb_tz_offset(be, utc(2026, 3, 29, 1, 0) - 1), 1 * H);
  assert_int_equal(tb_tz_offset(be, utc(2026, 3, 29, 1, 0)), 2 * H);
  assert_int_equal(tb_tz_offset(be, utc(2026, 10, 25, 1, 0) - 1), 2 * H);
  assert_int_equal(tb_tz_offset(be, utc(2026, 10, 25, 1, 0)), 1 * H);
  /* 02:30 on March 29 does not exist: 03:00 CEST = 01:00 UTC */
  assert_int_equal(tb_tz_from_local(be, utc(2026, 3, 29, 2, 30)), utc(2026, 3, 29, 1, 0));
  /* 02:30 on October 25 comes twice: the first is CEST, 00:30 UTC */
  assert_int_equal(tb_tz_from_local(be, utc(2026, 10, 25, 2, 30)), utc(2026, 10, 25, 0, 30));
  assert_int_equal(tb_tz_from_local(be, utc(2026, 10, 25, 3, 0)), utc(2026, 10, 25, 2, 0));
  /* 2045 from the footer CET-1CEST,M3.5.0,M10.5.0/3: March 26 and October 29 */
  assert_int_equal(tb_tz_offset(be, utc(2045, 3, 26, 1, 0) - 1), 1 * H);
  assert_int_equal(tb_tz_offset(be, utc(2045, 3, 26, 1, 0)), 2 * H);
  assert_int_equal(tb_tz_offset(be, utc(2045, 10, 29, 1, 0)), 1 * H);
  tb_tz_free(be);
  /* the southern hemisphere: DST over the new year (AEST-10AEDT,M10.1.0,M4.1.0/3) */
  struct tb_tz *syd = zone("Australia/Sydney");
  assert_int_equal(tb_tz_offset(syd, utc(2045, 1, 15, 0, 0)), 11 * H);
  assert_int_equal(tb_tz_offset(syd, utc(2045, 7, 15, 0, 0)), 10 * H);
  tb_tz_free(syd);
  struct tb_tz *u = zone("UTC");
  assert_int_equal(tb_tz_offset(u, utc(2026, 6, 1, 0, 0)), 0);
  assert_int_equal(tb_tz_from_local(u, 12345), 12345);
  tb_tz_free(u);
  struct tb_tz *fx = tb_tz_fixed(5 * H + 1800); /* Asia/Kolkata's offset */
  assert_int_equal(tb_tz_from_local(fx, utc(2026, 1, 1, 5, 30)), utc(2026, 1, 1, 0, 0));
  tb_tz_free(fx);
}

/* Bytes of a real zone file. */
static unsigned char *
slurp(const char *path, size_t *n)
{
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char *b = malloc(1 << 16);
  *n = fread(b, 1, 1 << 16, f);
  fclose(f);
  return b;
}

/* Every prefix of a real file, and every byte of it changed, parses or is
 * refused: never a crash, never a read past the bytes (ASan). */
static void
test_damaged_files(void **state)
{
  (void)state;
  size_t n;
  unsigned char *b = slurp(ZDIR "/America/New_York", &n);
  const char *why;
  struct tb_tz *tz = tb_tz_parse(b, n, &why);
  assert_non_null(tz);
  tb_tz_free(tz);
  for (size_t len = 0; len < n; len++) {
    unsigned char *copy = malloc(len + 1); /* exactly len bytes for ASan */
    memcpy(copy, b, len);
    tz = tb_tz_parse(copy, len, &why);
    if (tz != NULL)
      fail_msg("a prefix of %zu bytes parsed", len);
    tb_tz_free(tz);
    free(copy);
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char *copy = malloc(n);
    memcpy(copy, b, n);
    copy[i] ^= 0xa5;
    tz = tb_tz_parse(copy, n, &why);
    if (tz != NULL) { /* still a zone: its lookups hold */
      int64_t t = tb_tz_from_local(tz, utc(2026, 3, 8, 2, 30));
      (void)tb_tz_offset(tz, t);
    }
    tb_tz_free(tz);
    free(copy);
  }
  free(b);
}

/* Footers written by hand: a rule of each date form, and bad ones. */
static struct tb_tz *
with_footer(const char *footer)
{
  /* a version 2 file with no transitions and one type, then the footer */
  unsigned char b[256];
  size_t n = 0;
  for (int v = 0; v < 2; v++) {
    memset(b + n, 0, 44);
    memcpy(b + n, "TZif2", 5);
    b[n + 39] = 1; /* typecnt */
    b[n + 43] = 4; /* charcnt */
    n += 44;
    memset(b + n, 0, 10); /* type 0: utoff 0, isdst 0, idx 0; "UTC\0" */
    memcpy(b + n + 6, "UTC", 4);
    n += 10;
  }
  size_t fl = strlen(footer);
  b[n++] = '\n';
  memcpy(b + n, footer, fl);
  n += fl;
  b[n++] = '\n';
  const char *why;
  return tb_tz_parse(b, n, &why);
}

static void
test_footers(void **state)
{
  (void)state;
  /* Jn: day n of 365, never counting February 29: J60 is March 1 */
  struct tb_tz *tz = with_footer("XST3XDT,J60/0,J300");
  assert_non_null(tz);
  assert_int_equal(tb_tz_offset(tz, utc(2028, 3, 1, 3, 0) - 1), -3 * H);
  assert_int_equal(tb_tz_offset(tz, utc(2028, 3, 1, 3, 0)), -2 * H);
  tb_tz_free(tz);
  /* n: day n counting from 0 and February 29: 59 is March 1 in 2027, Feb 29 in 2028 */
  tz = with_footer("<-03>3<-02>,59/0,300");
  assert_non_null(tz);
  assert_int_equal(tb_tz_offset(tz, utc(2028, 2, 29, 3, 0)), -2 * H);
  assert_int_equal(tb_tz_offset(tz, utc(2027, 3, 1, 3, 0) - 1), -3 * H);
  assert_int_equal(tb_tz_offset(tz, utc(2027, 3, 1, 3, 0)), -2 * H);
  tb_tz_free(tz);
  /* RFC 8536's extended times: -1 hour, 25 hours */
  tz = with_footer("EST5EDT,M3.2.0/-1,M11.1.0/25");
  assert_non_null(tz);
  /* 2026-03-07 23:00 EST = 03-08 04:00 UTC */
  assert_int_equal(tb_tz_offset(tz, utc(2026, 3, 8, 4, 0)), -4 * H);
  assert_int_equal(tb_tz_offset(tz, utc(2026, 3, 8, 4, 0) - 1), -5 * H);
  tb_tz_free(tz);
  /* DST all year (RFC 8536 section 3.3.1's example) */
  tz = with_footer("EST5EDT,0/0,J365/25");
  assert_non_null(tz);
  assert_int_equal(tb_tz_offset(tz, utc(2026, 1, 1, 12, 0)), -4 * H);
  assert_int_equal(tb_tz_offset(tz, utc(2026, 12, 31, 23, 0)), -4 * H);
  tb_tz_free(tz);
  tz = with_footer("<+0545>-5:45");
  assert_non_null(tz);
  assert_int_equal(tb_tz_offset(tz, 0), 5 * H + 45 * 60);
  tb_tz_free(tz);
  const char *bad[] = { "E5",
                        "EST",
                        "EST5EDT,M13.1.0,M11.1.0",
                        "EST5EDT,M3.6.0,M11.1.0",
                        "EST5EDT,J0,J300",
                        "EST5EDT,M3.2.0",
                        "EST5EDT,M3.2.0/168,M11.1.0",
                        "<A>5",
                        "EST25",
                        "EST5EDT,M3.2.0,M11.1.0x" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tz = with_footer(bad[i]);
    if (tz != NULL)
      fail_msg("accepted the footer \"%s\"", bad[i]);
  }
}

/* RFC 3339 date-times: offsets, fractions, and each malformed shape. */
static void
test_rfc3339(void **state)
{
  (void)state;
  int64_t t = -1;
  assert_true(tb_tz_parse_rfc3339("1970-01-01T00:00:00Z", &t));
  assert_int_equal(t, 0);
  assert_true(tb_tz_parse_rfc3339("2026-07-01T12:00:00Z", &t));
  assert_int_equal(t, utc(2026, 7, 1, 12, 0));
  assert_true(tb_tz_parse_rfc3339("2026-07-01t12:00:00.123456z", &t));
  assert_int_equal(t, utc(2026, 7, 1, 12, 0));
  assert_true(tb_tz_parse_rfc3339("2026-07-01T14:30:00+02:30", &t));
  assert_int_equal(t, utc(2026, 7, 1, 12, 0));
  assert_true(tb_tz_parse_rfc3339("2026-07-01T07:00:00-05:00", &t));
  assert_int_equal(t, utc(2026, 7, 1, 12, 0));
  assert_true(tb_tz_parse_rfc3339("2024-02-29T00:00:00Z", &t));
  assert_int_equal(t, utc(2024, 2, 29, 0, 0));
  const char *bad[] = { "",
                        "2026-07-01",
                        "2026-07-01T12:00:00",
                        "2026-07-01 12:00:00Z",
                        "2026-13-01T12:00:00Z",
                        "2026-02-29T12:00:00Z",
                        "2026-04-31T12:00:00Z",
                        "2026-07-01T24:00:00Z",
                        "2026-07-01T12:60:00Z",
                        "2026-07-01T12:00:00.Z",
                        "2026-07-01T12:00:00+0200",
                        "2026-07-01T12:00:00+24:00",
                        "2026-07-01T12:00:00Zjunk",
                        "2026-07-01T12:00:00+02:00x",
                        "20x6-07-01T12:00:00Z" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (tb_tz_parse_rfc3339(bad[i], &t))
      fail_msg("accepted \"%s\"", bad[i]);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_calendar),      cmocka_unit_test(test_names),
    cmocka_unit_test(test_new_york),      cmocka_unit_test(test_berlin_and_south),
    cmocka_unit_test(test_damaged_files), cmocka_unit_test(test_footers),
    cmocka_unit_test(test_rfc3339),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
