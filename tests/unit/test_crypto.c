/* Unit tests: tb_crypto (known-answer vectors, sealing, tokens, base64). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/tb_crypto.h"

static void
test_sha256_kat(void **state)
{
  (void)state;
  char hex[65];
  tb_crypto_sha256_hex("abc", 3, hex);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void
test_hmac_kat(void **state)
{
  (void)state;
  /* RFC 4231 test case 2 */
  unsigned char mac[32];
  char hex[65];
  tb_crypto_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
  tb_hex_encode(mac, 32, hex);
  assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void
test_token(void **state)
{
  (void)state;
  char *a = tb_crypto_token("tkb_", 40), *b = tb_crypto_token("tkb_", 40);
  assert_non_null(a);
  assert_int_equal(strlen(a), 44);
  assert_memory_equal(a, "tkb_", 4);
  assert_string_not_equal(a, b);
  for (size_t i = 4; i < 44; i++)
    assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", a[i]));
  free(a);
  free(b);
}

static void
test_base64(void **state)
{
  (void)state;
  char *e = tb_base64_encode("hello", 5);
  assert_string_equal(e, "aGVsbG8=");
  size_t n;
  unsigned char *d = tb_base64_decode(e, &n);
  assert_int_equal(n, 5);
  assert_memory_equal(d, "hello", 5);
  free(d);
  free(e);
  assert_null(tb_base64_decode("a$==", &n));
  assert_null(tb_base64_decode("abc", &n));
  assert_null(tb_base64_decode("", &n));
}

static void
test_seal_open(void **state)
{
  (void)state;
  unsigned char key[32], other[32];
  assert_true(
    tb_crypto_parse_key("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", key));
  memcpy(other, key, 32);
  other[0] ^= 1;
  char *s = tb_crypto_seal(key, "sk-endpoint-secret", "ep-1");
  assert_non_null(s);
  assert_null(strstr(s, "sk-endpoint"));
  char *p = tb_crypto_open(key, s, "ep-1");
  assert_string_equal(p, "sk-endpoint-secret");
  free(p);
  assert_null(tb_crypto_open(key, s, "ep-2"));   /* other row */
  assert_null(tb_crypto_open(other, s, "ep-1")); /* other key */
  s[10] = s[10] == 'A' ? 'B' : 'A';              /* tampered */
  assert_null(tb_crypto_open(key, s, "ep-1"));
  assert_null(tb_crypto_open(key, "not base64!", "ep-1"));
  assert_null(tb_crypto_open(key, "AAAA", "ep-1"));
  free(s);
  char *s2 = tb_crypto_seal(key, "", NULL);
  char *p2 = tb_crypto_open(key, s2, NULL);
  assert_string_equal(p2, "");
  free(p2);
  free(s2);
}

static void
test_parse_key(void **state)
{
  (void)state;
  unsigned char key[32];
  assert_false(tb_crypto_parse_key("abcd", key));
  assert_false(
    tb_crypto_parse_key("zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", key));
  assert_false(
    tb_crypto_parse_key("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f00", key));
}

/* A private key file: read when 0600, refused (naming it) when readable
 * by others, not a regular file, missing, or more than cap bytes. */
static void
test_read_key_file(void **state)
{
  (void)state;
  char dir[] = "/tmp/tb-keyfile-XXXXXX", path[64], buf[17], *err = NULL;
  size_t len = 99;
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/k", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("0123456789abcdef", f); /* 16 bytes: the cap */
  fclose(f);
  assert_int_equal(chmod(path, 0600), 0);
  assert_true(tb_crypto_read_key_file(path, "test key", buf, 16, &len, &err));
  assert_int_equal(len, 16);
  assert_string_equal(buf, "0123456789abcdef");
  assert_false(tb_crypto_read_key_file(path, "test key", buf, 15, &len, &err));
  assert_non_null(strstr(err, "test key file"));
  assert_non_null(strstr(err, "too large"));
  free(err);
  assert_int_equal(chmod(path, 0640), 0);
  assert_false(tb_crypto_read_key_file(path, "test key", buf, 16, &len, &err));
  assert_non_null(strstr(err, "chmod 600"));
  free(err);
  assert_false(tb_crypto_read_key_file(dir, "test key", buf, 16, &len, &err));
  assert_non_null(strstr(err, "not a regular file"));
  free(err);
  assert_int_equal(unlink(path), 0);
  assert_false(tb_crypto_read_key_file(path, "test key", buf, 16, &len, &err));
  assert_non_null(strstr(err, "cannot open test key file"));
  free(err);
  assert_int_equal(rmdir(dir), 0);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sha256_kat),    cmocka_unit_test(test_hmac_kat),
    cmocka_unit_test(test_token),         cmocka_unit_test(test_base64),
    cmocka_unit_test(test_seal_open),     cmocka_unit_test(test_parse_key),
    cmocka_unit_test(test_read_key_file),
  };
  return cmocka_run_group_tests_name("crypto", tests, NULL, NULL);
}
