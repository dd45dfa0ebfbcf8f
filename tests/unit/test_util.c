/* Unit tests: tb_util (parsing and formatting of token counts, numbers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/tb_util.h"

static void
test_parse_tokens(void **state)
{
  (void)state;
  int64_t v;
  assert_true(tb_parse_tokens("8192", &v));
  assert_int_equal(v, 8192);
  assert_true(tb_parse_tokens("8k", &v));
  assert_int_equal(v, 8192);
  assert_true(tb_parse_tokens("251K", &v));
  assert_int_equal(v, 257024);
  assert_true(tb_parse_tokens("1M", &v));
  assert_int_equal(v, 1048576);
  assert_false(tb_parse_tokens("", &v));
  assert_false(tb_parse_tokens("k", &v));
  assert_false(tb_parse_tokens("8kk", &v));
  assert_false(tb_parse_tokens("-8k", &v));
  assert_true(tb_parse_tokens("0", &v)); /* context 0: decode with no prompt context */
  assert_int_equal(v, 0);
  assert_true(tb_parse_tokens("0k", &v));
  assert_int_equal(v, 0);
  assert_false(tb_parse_tokens("99999999999999999999k", &v));
  assert_false(tb_parse_tokens(" 8k", &v));
}

static void
test_format_tokens(void **state)
{
  (void)state;
  char buf[32];
  tb_format_tokens(8192, buf, sizeof buf);
  assert_string_equal(buf, "8K");
  tb_format_tokens(257024, buf, sizeof buf);
  assert_string_equal(buf, "251K");
  tb_format_tokens(262144, buf, sizeof buf);
  assert_string_equal(buf, "256K");
  tb_format_tokens(1000, buf, sizeof buf);
  assert_string_equal(buf, "1000");
}

static void
test_hex_digit(void **state)
{
  (void)state;
  assert_int_equal(tb_hex_digit('0'), 0);
  assert_int_equal(tb_hex_digit('9'), 9);
  assert_int_equal(tb_hex_digit('a'), 10);
  assert_int_equal(tb_hex_digit('F'), 15);
  assert_int_equal(tb_hex_digit('g'), -1);
  assert_int_equal(tb_hex_digit(' '), -1);
  assert_int_equal(tb_hex_digit(0xff), -1);
  assert_int_equal(tb_hex_digit(-1), -1);
}

static void
test_parse_i64(void **state)
{
  (void)state;
  int64_t v;
  assert_true(tb_parse_i64("42", 0, 100, &v));
  assert_int_equal(v, 42);
  assert_false(tb_parse_i64("101", 0, 100, &v));
  assert_false(tb_parse_i64("4x", 0, 100, &v));
  assert_false(tb_parse_i64("", 0, 100, &v));
  assert_false(tb_parse_i64(NULL, 0, 100, &v));
}

static void
test_ct_equal(void **state)
{
  (void)state;
  assert_true(tb_ct_equal("abcd", "abcd", 4));
  assert_false(tb_ct_equal("abcd", "abce", 4));
  assert_true(tb_ct_equal("", "", 0));
}

static void
test_asprintf_and_clock(void **state)
{
  (void)state;
  char *s = tb_xasprintf("%s-%d", "x", 7);
  assert_string_equal(s, "x-7");
  free(s);
  int64_t a = tb_time_mono_ns(), b = tb_time_mono_ns();
  assert_true(b >= a);
  char ts[40];
  tb_time_rfc3339(0, ts, sizeof ts);
  assert_string_equal(ts, "1970-01-01T00:00:00.000Z");
}

/* tb_list_next: items trimmed, empty ones given, a trailing comma ends. */
static void
test_lists(void **state)
{
  (void)state;
  const char *want[] = { "a", "b c", "", "d", "" };
  const char *p = " a ,\tb c ,,d,", *s;
  size_t n, k = 0;
  while (tb_list_next(&p, &s, &n)) {
    assert_true(k < TB_ARRAY_LEN(want));
    assert_int_equal(n, strlen(want[k]));
    assert_memory_equal(s, want[k], n);
    k++;
  }
  assert_int_equal(k, 4); /* a trailing comma ends the list */
  p = NULL;
  assert_false(tb_list_next(&p, &s, &n));
  p = "";
  assert_false(tb_list_next(&p, &s, &n));
}

/* tb_xgrow: doubles from the first size, keeps the bytes, never shrinks. */
static void
test_xgrow(void **state)
{
  (void)state;
  char *b = NULL;
  size_t cap = 0;
  tb_xgrow(&b, &cap, 10, 16);
  assert_int_equal(cap, 16);
  memcpy(b, "0123456789", 10);
  tb_xgrow(&b, &cap, 16, 16); /* fits: unchanged */
  assert_int_equal(cap, 16);
  tb_xgrow(&b, &cap, 100, 16);
  assert_int_equal(cap, 128);
  assert_memory_equal(b, "0123456789", 10);
  tb_xgrow(&b, &cap, 5, 16);
  assert_int_equal(cap, 128);
  free(b);
  b = NULL;
  cap = 0;
  tb_xgrow(&b, &cap, 3, 0); /* no first size: from 1 */
  assert_int_equal(cap, 4);
  free(b);
}

/* The soft limit raised to what is asked, at most to the hard limit, and
 * never lowered; the limits are put back after. */
static void
test_raise_nofile(void **state)
{
  (void)state;
  struct rlimit old, rl;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  if (old.rlim_max < 64)
    skip();
  rl = old;
  rl.rlim_cur = 32;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
  tb_raise_nofile(48);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  assert_int_equal(rl.rlim_cur, 48);
  tb_raise_nofile(40); /* never lowered */
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  assert_int_equal(rl.rlim_cur, 48);
  if (old.rlim_max != RLIM_INFINITY) {
    tb_raise_nofile((uint64_t)old.rlim_max + 1000); /* at most the hard limit */
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_int_equal(rl.rlim_cur, old.rlim_max);
  }
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse_tokens), cmocka_unit_test(test_format_tokens),
    cmocka_unit_test(test_hex_digit),    cmocka_unit_test(test_parse_i64),
    cmocka_unit_test(test_ct_equal),     cmocka_unit_test(test_asprintf_and_clock),
    cmocka_unit_test(test_xgrow),        cmocka_unit_test(test_lists),
    cmocka_unit_test(test_raise_nofile),
  };
  return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
