/* Unit tests: tb_jcs against RFC 8785's own examples (section 3.2.2's
 * document, section 3.2.3's sorting, Appendix B's numbers) and the
 * numbers issue 35 names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_jcs.h"

static void
expect_canon(const char *in, const char *want)
{
  json_error_t e;
  json_t *v = json_loads(in, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
  assert_non_null(v);
  size_t len = 0;
  char *got = tb_jcs_dumps(v, &len);
  assert_non_null(got);
  assert_string_equal(got, want);
  assert_int_equal(len, strlen(want));
  free(got);
  json_decref(v);
}

static double
from_bits(uint64_t bits)
{
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static void
expect_number(double d, const char *want)
{
  char out[TB_JCS_NUMBER_MAX];
  assert_true(tb_jcs_number(d, out));
  assert_string_equal(out, want);
}

/* RFC 8785 section 3.2.2: the sample document and its canonical form. */
static void
test_rfc_sample(void **state)
{
  (void)state;
  expect_canon("{\n  \"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, "
               "0.000000000000000000000000001],\n"
               "  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n"
               "  \"literals\": [null, true, false]\n}",
               "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,"
               "1e-27],\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
}

/* RFC 8785 section 3.2.3: names sorted by UTF-16 code units, so the emoji
 * (D83D DE00) comes before U+FB33, unlike their UTF-8 bytes. */
static void
test_rfc_sorting(void **state)
{
  (void)state;
  expect_canon(
    "{\"\\u20ac\": \"Euro Sign\", \"\\r\": \"Carriage Return\", "
    "\"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\", \"1\": \"One\", "
    "\"\\ud83d\\ude00\": \"Emoji: Grinning Face\", \"\\u0080\": \"Control\", "
    "\"\\u00f6\": \"Latin Small Letter O With Diaeresis\"}",
    "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
    "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\",\"\xe2\x82\xac\":\"Euro Sign\","
    "\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
    "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}");
  /* a prefix sorts first; nested objects are sorted too; arrays keep order */
  expect_canon("{\"ab\": 1, \"a\": {\"z\": [3, 1, 2], \"b\": null}, \"\": true}",
               "{\"\":true,\"a\":{\"b\":null,\"z\":[3,1,2]},\"ab\":1}");
  assert_true(tb_jcs_key_cmp("\xf0\x9f\x98\x80", 4, "\xef\xac\xb3", 3) < 0);
  assert_true(tb_jcs_key_cmp("a", 1, "ab", 2) < 0);
  assert_int_equal(tb_jcs_key_cmp("ab", 2, "ab", 2), 0);
}

/* RFC 8785 Appendix B: IEEE-754 bit patterns and their text. */
static void
test_rfc_numbers(void **state)
{
  (void)state;
  static const struct {
    uint64_t bits;
    const char *text;
  } b[] = {
    { 0x0000000000000000ull, "0" },
    { 0x8000000000000000ull, "0" },
    { 0x0000000000000001ull, "5e-324" },
    { 0x8000000000000001ull, "-5e-324" },
    { 0x7fefffffffffffffull, "1.7976931348623157e+308" },
    { 0xffefffffffffffffull, "-1.7976931348623157e+308" },
    { 0x4340000000000000ull, "9007199254740992" },
    { 0xc340000000000000ull, "-9007199254740992" },
    { 0x4430000000000000ull, "295147905179352830000" },
    { 0x44b52d02c7e14af5ull, "9.999999999999997e+22" },
    { 0x44b52d02c7e14af6ull, "1e+23" },
    { 0x44b52d02c7e14af7ull, "1.0000000000000001e+23" },
    { 0x444b1ae4d6e2ef4eull, "999999999999999700000" },
    { 0x444b1ae4d6e2ef4full, "999999999999999900000" },
    { 0x444b1ae4d6e2ef50ull, "1e+21" },
    { 0x3eb0c6f7a0b5ed8cull, "9.999999999999997e-7" },
    { 0x3eb0c6f7a0b5ed8dull, "0.000001" },
    { 0x41b3de4355555553ull, "333333333.3333332" },
    { 0x41b3de4355555554ull, "333333333.33333325" },
    { 0x41b3de4355555555ull, "333333333.3333333" },
    { 0x41b3de4355555556ull, "333333333.3333334" },
    { 0x41b3de4355555557ull, "333333333.33333343" },
    { 0xbecbf647612f3696ull, "-0.0000033333333333333333" },
    { 0x43143ff3c1cb0959ull, "1424953923781206.2" },
  };
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
    expect_number(from_bits(b[i].bits), b[i].text);
  char out[TB_JCS_NUMBER_MAX];
  assert_false(tb_jcs_number(from_bits(0x7fffffffffffffffull), out)); /* NaN */
  assert_false(tb_jcs_number(from_bits(0x7ff0000000000000ull), out)); /* Infinity */
}

/* The numbers issue 35 names, through whole documents: 1e21 and 1e-7 turn
 * exponential, -0 is 0, integers stay integers, a real that is integral
 * loses its ".0". */
static void
test_issue_numbers(void **state)
{
  (void)state;
  expect_canon("[1e21, 1e20, 1e-7, 1e-6, -0.0, -0, 333333333.33333329, 12, -3, 2.0, 0.1, 1.5e300]",
               "[1e+21,100000000000000000000,1e-7,0.000001,0,0,333333333.3333333,12,-3,2,0.1,"
               "1.5e+300]");
  /* integers within 2^53 are written as such; beyond, as ES's double */
  expect_canon("[9007199254740992, -9007199254740992, 4611686018427387904]",
               "[9007199254740992,-9007199254740992,4611686018427388000]");
}

/* Strings: the escapes JSON.stringify writes, nothing else escaped. */
static void
test_strings(void **state)
{
  (void)state;
  expect_canon("\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f \\u007f\\u2028/\\\\\\\"\"",
               "\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f \x7f\xe2\x80\xa8/\\\\\\\"\"");
  json_t *nul = json_stringn("a\0b", 3);
  char *t = tb_jcs_dumps(nul, NULL);
  assert_string_equal(t, "\"a\\u0000b\"");
  free(t);
  json_decref(nul);
  assert_null(tb_jcs_dumps(NULL, NULL));
}

/* The significant digits of an ES number text (no sign, point, exponent,
 * leading or trailing zeros). */
static size_t
significant(const char *t)
{
  char d[40];
  size_t k = 0;
  for (const char *c = t; *c != '\0' && *c != 'e'; c++)
    if (*c >= '0' && *c <= '9' && (k > 0 || *c != '0'))
      d[k++] = *c;
  while (k > 1 && d[k - 1] == '0')
    k--;
  return k;
}

/* Every double reads back as itself, and its nearest decimal of one digit
 * less does not (a seeded xorshift sweep of bit patterns). */
static void
test_round_trip(void **state)
{
  (void)state;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double d = from_bits(x);
    char out[TB_JCS_NUMBER_MAX], shorter[40];
    if (!isfinite(d)) {
      assert_false(tb_jcs_number(d, out));
      continue;
    }
    assert_true(tb_jcs_number(d, out));
    assert_true(strtod(out, NULL) == d);
    size_t k = significant(out);
    assert_in_range(k, 1, 17);
    if (k > 1) {
      snprintf(shorter, sizeof shorter, "%.*e", (int)k - 2, d);
      assert_false(strtod(shorter, NULL) == d);
    }
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_rfc_sample),  cmocka_unit_test(test_rfc_sorting),
    cmocka_unit_test(test_rfc_numbers), cmocka_unit_test(test_issue_numbers),
    cmocka_unit_test(test_strings),     cmocka_unit_test(test_round_trip),
  };
  return cmocka_run_group_tests_name("jcs", tests, NULL, NULL);
}
