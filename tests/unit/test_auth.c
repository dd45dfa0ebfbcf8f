/* Unit tests: tb_auth's pure parts (scope lists and their implications,
 * expiry durations and their bounds, the key's shape, its hash).  The SQL
 * half (projects, create, list, revoke) runs against PostgreSQL in the
 * integration tests (test_api.py, test_api_cli.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "db/tb_auth.h"
#include "base/tb_crypto.h"

static void
test_parse_scopes(void **state)
{
  (void)state;
  unsigned m = 99;
  assert_true(tb_scope_parse("read", &m));
  assert_int_equal(m, TB_SCOPE_READ);
  assert_true(tb_scope_parse("read,write", &m));
  assert_int_equal(m, TB_SCOPE_READ | TB_SCOPE_WRITE);
  assert_true(tb_scope_parse("admin,read", &m));
  assert_int_equal(m, TB_SCOPE_ADMIN | TB_SCOPE_READ);
  assert_true(tb_scope_parse("write,write", &m));
  assert_int_equal(m, TB_SCOPE_WRITE);
  const char *bad[] = { "",    "read,",      ",read",       "read,,write", "READ",     "readx",
                        "rea", "read write", "read,admin,", "all",         "read,\xff" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_false(tb_scope_parse(bad[i], &m));
  assert_false(tb_scope_parse(NULL, &m));
  assert_int_equal(m, 0);
}

static void
test_effective_and_csv(void **state)
{
  (void)state;
  assert_int_equal(tb_scope_effective(TB_SCOPE_ADMIN),
                   TB_SCOPE_ADMIN | TB_SCOPE_WRITE | TB_SCOPE_READ);
  assert_int_equal(tb_scope_effective(TB_SCOPE_WRITE), TB_SCOPE_WRITE | TB_SCOPE_READ);
  assert_int_equal(tb_scope_effective(TB_SCOPE_READ), TB_SCOPE_READ);
  assert_int_equal(tb_scope_effective(TB_SCOPE_NONE), TB_SCOPE_NONE);
  char buf[32];
  tb_scope_csv(TB_SCOPE_READ | TB_SCOPE_WRITE | TB_SCOPE_ADMIN, buf, sizeof buf);
  assert_string_equal(buf, "read,write,admin");
  tb_scope_csv(TB_SCOPE_ADMIN | TB_SCOPE_READ, buf, sizeof buf);
  assert_string_equal(buf, "read,admin");
  tb_scope_csv(0, buf, sizeof buf);
  assert_string_equal(buf, "");
  tb_scope_csv(0xf0, buf, sizeof buf); /* unknown bits: nothing */
  assert_string_equal(buf, "");
  /* round trip of every mask */
  for (unsigned mask = 1; mask < 8; mask++) {
    unsigned back;
    tb_scope_csv(mask, buf, sizeof buf);
    assert_true(tb_scope_parse(buf, &back));
    assert_int_equal(back, mask);
  }
  /* a short buffer is never overrun (ASan watches) and stays terminated */
  char *small = malloc(7);
  tb_scope_csv(7, small, 7);
  assert_true(strlen(small) < 7);
  free(small);
}

static void
test_parse_duration(void **state)
{
  (void)state;
  struct {
    const char *s;
    int64_t want;
  } ok[] = {
    { "3600", 3600 },
    { "45s", 45 },
    { "15m", 900 },
    { "12h", 43200 },
    { "30d", 2592000 },
    { "2w", 1209600 },
    { "1", 1 },
    { "316224000", TB_SCOPE_MAX_EXPIRY_S },
    { "3660d", TB_SCOPE_MAX_EXPIRY_S },
    { "522w", 522LL * 7 * 86400 },
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int64_t v = -1;
    assert_true(tb_scope_parse_duration(ok[i].s, &v));
    assert_int_equal(v, ok[i].want);
  }
  const char *bad[] = { "",
                        "0",
                        "0s",
                        "-5",
                        "-5m",
                        "m",
                        "10y",
                        "1.5h",
                        " 5m",
                        "5 m",
                        "316224001",
                        "3661d",
                        "523w",
                        "87841h",
                        "99999999999999999999",
                        "999999999999999999999w",
                        "12345678901234567890123",
                        "5mm",
                        "0x10" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 77;
    assert_false(tb_scope_parse_duration(bad[i], &v));
    assert_int_equal(v, 77); /* untouched */
  }
  int64_t v;
  assert_false(tb_scope_parse_duration(NULL, &v));
}

static void
test_key_shape_and_hash(void **state)
{
  (void)state;
  char *k = tb_crypto_token(TB_AUTH_KEY_PREFIX, TB_AUTH_KEY_CHARS);
  assert_non_null(k);
  assert_int_equal(strlen(k), TB_AUTH_KEY_LEN);
  assert_true(tb_auth_key_wellformed(k, strlen(k)));
  assert_false(tb_auth_key_wellformed(k, strlen(k) - 1));
  assert_false(tb_auth_key_wellformed(NULL, TB_AUTH_KEY_LEN));
  char mod[64];
  memcpy(mod, k, TB_AUTH_KEY_LEN + 1);
  mod[10] = '-';
  assert_false(tb_auth_key_wellformed(mod, TB_AUTH_KEY_LEN));
  memcpy(mod, k, TB_AUTH_KEY_LEN + 1);
  mod[TB_AUTH_KEY_LEN - 1] = '\0'; /* an embedded NUL */
  assert_false(tb_auth_key_wellformed(mod, TB_AUTH_KEY_LEN));
  memcpy(mod, k, TB_AUTH_KEY_LEN + 1);
  mod[0] = 'T';
  assert_false(tb_auth_key_wellformed(mod, TB_AUTH_KEY_LEN));
  assert_false(tb_auth_key_wellformed("tkb_", 4));

  /* SHA-256 of "abc", FIPS 180-2 appendix B.1 */
  char hex[65];
  tb_auth_key_hash("abc", 3, hex);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  char h2[65];
  tb_auth_key_hash(k, strlen(k), hex);
  tb_auth_key_hash(k, strlen(k), h2);
  assert_string_equal(hex, h2);
  assert_int_equal(strlen(hex), 64);
  char *k2 = tb_crypto_token(TB_AUTH_KEY_PREFIX, TB_AUTH_KEY_CHARS);
  assert_string_not_equal(k, k2); /* ~238 bits each */
  tb_auth_key_hash(k2, strlen(k2), h2);
  assert_string_not_equal(hex, h2);
  free(k);
  free(k2);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse_scopes),
    cmocka_unit_test(test_effective_and_csv),
    cmocka_unit_test(test_parse_duration),
    cmocka_unit_test(test_key_shape_and_hash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
