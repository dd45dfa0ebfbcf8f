/* Unit tests: tb_masterkey (hex, file, permissions, creation). */
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

#include "net/tb_masterkey.h"

#define HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static void
test_hex_and_none(void **state)
{
  (void)state;
  unsigned char k[TB_CRYPTO_KEY_LEN];
  char *err = NULL;
  assert_int_equal(tb_masterkey_load(HEX, NULL, k, &err), TB_MASTERKEY_OK);
  assert_int_equal(k[31], 0x1f);
  assert_int_equal(tb_masterkey_load(NULL, "", k, &err), TB_MASTERKEY_NONE);
  assert_int_equal(tb_masterkey_load("abcd", NULL, k, &err), TB_MASTERKEY_ERROR);
  assert_null(strstr(err, "abcd")); /* never echo key material */
  free(err);
}

static void
test_file(void **state)
{
  (void)state;
  char dir[] = "/tmp/tb-mk-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[64];
  snprintf(path, sizeof path, "%s/key", dir);
  unsigned char k[TB_CRYPTO_KEY_LEN], k2[TB_CRYPTO_KEY_LEN];
  char *err = NULL;
  assert_int_equal(tb_masterkey_load(NULL, path, k, &err), TB_MASTERKEY_ERROR); /* missing */
  free(err);
  assert_true(tb_masterkey_create_file(path, &err));
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(tb_masterkey_load(NULL, path, k, &err), TB_MASTERKEY_OK);
  assert_true(tb_masterkey_create_file(path, &err)); /* exists: left alone */
  assert_int_equal(tb_masterkey_load(NULL, path, k2, &err), TB_MASTERKEY_OK);
  assert_memory_equal(k, k2, sizeof k);
  /* the hex wins over the file */
  assert_int_equal(tb_masterkey_load(HEX, path, k2, &err), TB_MASTERKEY_OK);
  assert_int_equal(k2[1], 0x01);
  /* group-readable is refused */
  assert_int_equal(chmod(path, 0644), 0);
  assert_int_equal(tb_masterkey_load(NULL, path, k, &err), TB_MASTERKEY_ERROR);
  assert_non_null(strstr(err, "chmod"));
  free(err);
  /* junk is refused */
  FILE *f = fopen(path, "w");
  fputs("not a key\n", f);
  fclose(f);
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(tb_masterkey_load(NULL, path, k, &err), TB_MASTERKEY_ERROR);
  free(err);
  unlink(path);
  rmdir(dir);
}

/* Endpoint keys bound to the endpoint and the origin of its base_url. */
static void
test_endpoint_key_origin(void **state)
{
  (void)state;
  unsigned char k[TB_CRYPTO_KEY_LEN];
  char *err = NULL;
  assert_int_equal(tb_masterkey_load(HEX, NULL, k, &err), TB_MASTERKEY_OK);
  char *origin = NULL;
  const char *why = NULL;
  char *sealed =
    tb_masterkey_seal_endpoint_key(k, "sk-1", "ep-1", "http://GPU.example:8000/v1", &origin);
  assert_non_null(sealed);
  assert_string_equal(origin, "http://gpu.example:8000");
  /* same origin, another path: opens */
  char *p =
    tb_masterkey_open_endpoint_key(k, sealed, "ep-1", origin, "http://gpu.example:8000/", &why);
  assert_string_equal(p, "sk-1");
  free(p);
  /* another host, port or scheme: refused before any crypto */
  const char *moved[] = { "http://evil.example:8000", "http://gpu.example:8001",
                          "https://gpu.example:8000" };
  for (size_t i = 0; i < TB_ARRAY_LEN(moved); i++) {
    assert_null(tb_masterkey_open_endpoint_key(k, sealed, "ep-1", origin, moved[i], &why));
    assert_non_null(strstr(why, "another origin"));
  }
  /* the stored origin rewritten to follow base_url: the seal still refuses */
  assert_null(tb_masterkey_open_endpoint_key(k, sealed, "ep-1", "http://evil.example:8000",
                                             "http://evil.example:8000", &why));
  /* another row */
  assert_null(
    tb_masterkey_open_endpoint_key(k, sealed, "ep-2", origin, "http://gpu.example:8000", &why));
  /* a legacy seal (the id alone) opens while its origin is NULL */
  char *legacy = tb_crypto_seal(k, "sk-old", "ep-1");
  p = tb_masterkey_open_endpoint_key(k, legacy, "ep-1", NULL, "http://any.example", &why);
  assert_string_equal(p, "sk-old");
  free(p);
  assert_null(tb_masterkey_open_endpoint_key(k, legacy, "ep-1", "http://any.example:80",
                                             "http://any.example", &why));
  free(legacy);
  free(sealed);
  free(origin);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_hex_and_none),
    cmocka_unit_test(test_file),
    cmocka_unit_test(test_endpoint_key_origin),
  };
  return cmocka_run_group_tests_name("masterkey", tests, NULL, NULL);
}
