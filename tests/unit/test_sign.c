/* Unit tests: tb_sign (key files and their mode, RFC 8032's test key,
 * the signer round trip, every kind of change refused, base64url, JWK). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/tb_crypto.h"
#include "base/tb_sign.h"

/* RFC 8032 section 7.1, TEST 1: its secret key as PKCS#8 PEM, and the
 * public key the RFC gives for it. */
static const char rfc8032_pem[] =
  "-----BEGIN PRIVATE KEY-----\n"
  "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
  "-----END PRIVATE KEY-----\n";
static const char rfc8032_pub[] =
  "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

static char dir[64];

static int
setup(void **state)
{
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/tb_sign_XXXXXX");
  return mkdtemp(dir) != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static char *
path_of(const char *name)
{
  return tb_xasprintf("%s/%s", dir, name);
}

static void
write_file(const char *path, const char *text, mode_t mode)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  assert_int_equal(chmod(path, mode), 0);
}

static void
test_rfc8032_key(void **state)
{
  (void)state;
  char *p = path_of("rfc.pem"), *err = NULL;
  write_file(p, rfc8032_pem, 0600);
  struct tb_sign_key *k = tb_sign_key_load(p, &err);
  assert_non_null(k);
  char hex[65], kid[TB_SIGN_KID_LEN + 1], want[65];
  tb_hex_encode(tb_sign_key_pub(k), TB_SIGN_PUB_LEN, hex);
  assert_string_equal(hex, rfc8032_pub);
  /* kid: the first 16 hex digits of SHA-256 of the raw public key */
  unsigned char raw[32];
  assert_true(tb_hex_decode(rfc8032_pub, raw, sizeof raw));
  tb_crypto_sha256_hex(raw, sizeof raw, want);
  want[16] = '\0';
  tb_sign_kid(raw, kid);
  assert_string_equal(kid, want);
  assert_string_equal(tb_sign_key_id(k), want);
  tb_sign_key_free(k);
  free(p);
}

static void
test_key_file_refusals(void **state)
{
  (void)state;
  char *err = NULL, *p = path_of("loose.pem");
  write_file(p, rfc8032_pem, 0644);
  assert_null(tb_sign_key_load(p, &err));
  assert_non_null(strstr(err, "chmod 600"));
  assert_null(strstr(err, "PRIVATE")); /* never the key's text */
  free(err);
  free(p);
  p = path_of("junk.pem");
  write_file(p, "not a key\n", 0600);
  assert_null(tb_sign_key_load(p, &err));
  assert_non_null(strstr(err, "Ed25519"));
  free(err);
  free(p);
  p = path_of("missing.pem");
  assert_null(tb_sign_key_load(p, &err));
  free(err);
  free(p);
  /* an RSA or EC key is not ours either */
  p = path_of("ec.pem");
  write_file(p,
             "-----BEGIN PRIVATE KEY-----\n"
             "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYHSIjXNF4ROXy8Rd\n"
             "r2Qv018jSrm270p7cdsj77JF5xKhRANCAASQYJTHzn8VkHzPdMljz6H0J2xLqgUe\n"
             "PZV0MmIjprHuG4PZpNIItZFLAzS8wpxy3uKJCPOpYheOPVOqMvJQ7JwK\n"
             "-----END PRIVATE KEY-----\n",
             0600);
  assert_null(tb_sign_key_load(p, &err));
  assert_non_null(strstr(err, "Ed25519"));
  free(err);
  free(p);
}

static void
test_create_file(void **state)
{
  (void)state;
  char *p = path_of("new.pem"), *err = NULL;
  assert_true(tb_sign_create_file(p, &err));
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  struct tb_sign_key *a = tb_sign_key_load(p, &err);
  assert_non_null(a);
  /* a second create leaves the file (and its key) alone */
  assert_true(tb_sign_create_file(p, &err));
  struct tb_sign_key *b = tb_sign_key_load(p, &err);
  assert_string_equal(tb_sign_key_id(a), tb_sign_key_id(b));
  /* another file: another key, another kid (rotation) */
  char *q = path_of("other.pem");
  assert_true(tb_sign_create_file(q, &err));
  struct tb_sign_key *c = tb_sign_key_load(q, &err);
  assert_string_not_equal(tb_sign_key_id(a), tb_sign_key_id(c));
  tb_sign_key_free(a);
  tb_sign_key_free(b);
  tb_sign_key_free(c);
  free(p);
  free(q);
}

static struct tb_sign_key *
rfc_key(void)
{
  char *p = path_of("rfc2.pem"), *err = NULL;
  write_file(p, rfc8032_pem, 0600);
  struct tb_sign_key *k = tb_sign_key_load(p, &err);
  assert_non_null(k);
  free(p);
  return k;
}

static const char sample[] =
  "{\"schema\": \"tokbench.result/v1\", \"status\": \"complete\", \"run_id\": \"r1\","
  " \"cells\": [{\"phase\": \"decode\", \"context\": 1024, \"concurrency\": 2,"
  "  \"total_tps\": 123.456, \"valid\": true, \"reason\": null}],"
  " \"provenance\": {\"tokbench\": {\"version\": \"0.1.0\"}, \"gpu\": {\"count\": 8}}}";

static void
test_round_trip(void **state)
{
  (void)state;
  struct tb_sign_key *k = rfc_key();
  json_t *doc = json_loads(sample, 0, NULL);
  char *err = NULL;
  /* 2024-05-01T12:00:00.250Z */
  assert_true(tb_sign_doc(k, doc, 1714564800250000LL, &err));
  const json_t *sb = json_object_get(doc, "signature");
  assert_string_equal(json_string_value(json_object_get(sb, "alg")), "Ed25519");
  assert_string_equal(json_string_value(json_object_get(sb, "kid")), tb_sign_key_id(k));
  assert_string_equal(json_string_value(json_object_get(sb, "signed_at")),
                      "2024-05-01T12:00:00.250Z");
  const char *value = json_string_value(json_object_get(sb, "value"));
  assert_int_equal(strlen(value), 86); /* 64 bytes, base64url, no padding */
  assert_null(strchr(value, '='));
  assert_int_equal(tb_sign_verify(doc, tb_sign_key_pub(k), NULL), TB_SIGN_GOOD);

  /* the text a reader gets (any member order, any spacing) still verifies */
  char *text = json_dumps(doc, JSON_INDENT(3));
  json_t *again = json_loads(text, 0, NULL);
  assert_int_equal(tb_sign_verify(again, tb_sign_key_pub(k), NULL), TB_SIGN_GOOD);
  json_decref(again);
  free(text);

  /* Ed25519 is deterministic: signing again gives the same value */
  json_t *copy = json_deep_copy(doc);
  assert_true(tb_sign_doc(k, copy, 1714564800250000LL, &err));
  assert_string_equal(
    json_string_value(json_object_get(json_object_get(copy, "signature"), "value")), value);
  json_decref(copy);
  tb_sign_key_free(k);
  json_decref(doc);
}

/* Each single change (a number, a string, a bool, a null, a member added
 * or removed) fails; a wrong key fails; no block is "absent". */
static void
test_changes_fail(void **state)
{
  (void)state;
  struct tb_sign_key *k = rfc_key();
  json_t *doc = json_loads(sample, 0, NULL);
  char *err = NULL;
  assert_true(tb_sign_doc(k, doc, 0, &err));
  const unsigned char *pub = tb_sign_key_pub(k);
  json_t *cell = json_array_get(json_object_get(doc, "cells"), 0);
  struct {
    const char *key;
    json_t *value;
  } ch[] = {
    { "total_tps", json_real(123.457) }, { "context", json_integer(1025) },
    { "phase", json_string("prefill") }, { "valid", json_false() },
    { "reason", json_string("") },       { "extra", json_null() },
  };
  for (size_t i = 0; i < sizeof ch / sizeof ch[0]; i++) {
    json_t *old = json_object_get(cell, ch[i].key);
    json_t *keep = old != NULL ? json_incref(old) : NULL;
    json_object_set_new(cell, ch[i].key, ch[i].value);
    const char *why = NULL;
    assert_int_equal(tb_sign_verify(doc, pub, &why), TB_SIGN_BAD);
    assert_non_null(why);
    if (keep != NULL)
      json_object_set_new(cell, ch[i].key, keep);
    else
      json_object_del(cell, ch[i].key);
    assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_GOOD);
  }
  /* a member of the document removed */
  json_t *prov = json_incref(json_object_get(doc, "provenance"));
  json_object_del(doc, "provenance");
  assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_BAD);
  json_object_set_new(doc, "provenance", prov);
  assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_GOOD);

  /* another key */
  char *p = path_of("x.pem");
  assert_true(tb_sign_create_file(p, &err));
  struct tb_sign_key *other = tb_sign_key_load(p, &err);
  assert_int_equal(tb_sign_verify(doc, tb_sign_key_pub(other), NULL), TB_SIGN_BAD);
  tb_sign_key_free(other);
  free(p);

  /* a value altered, or not base64url of 64 bytes */
  json_t *sb = json_object_get(doc, "signature");
  char *v = tb_xstrdup(json_string_value(json_object_get(sb, "value")));
  char *bad = tb_xstrdup(v);
  bad[10] = bad[10] == 'A' ? 'B' : 'A';
  json_object_set_new(sb, "value", json_string(bad));
  assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_BAD);
  json_object_set_new(sb, "value", json_string("short"));
  assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_BAD);
  json_object_set_new(sb, "value", json_string(v));
  assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_GOOD);
  free(bad);
  free(v);

  /* no block, or another algorithm: absent */
  json_object_set_new(sb, "alg", json_string("RS256"));
  assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_ABSENT);
  json_object_del(doc, "signature");
  assert_int_equal(tb_sign_verify(doc, pub, NULL), TB_SIGN_ABSENT);
  json_decref(doc);
  tb_sign_key_free(k);
}

static void
test_b64url(void **state)
{
  (void)state;
  /* RFC 4648 section 10, without padding */
  static const char *const in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
  static const char *const out[] = { "", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy" };
  for (size_t i = 0; i < 7; i++) {
    char *e = tb_b64url_encode(in[i], strlen(in[i]));
    assert_string_equal(e, out[i]);
    char back[8] = { 0 };
    assert_true(tb_b64url_decode(e, back, strlen(in[i])));
    assert_memory_equal(back, in[i], strlen(in[i]));
    free(e);
  }
  unsigned char b[3] = { 0xfb, 0xff, 0xfe };
  char *e = tb_b64url_encode(b, 3);
  assert_string_equal(e, "-__-"); /* the url alphabet */
  free(e);
  unsigned char o[2];
  assert_false(tb_b64url_decode("Zm9=", o, 2)); /* padding */
  assert_false(tb_b64url_decode("Zm+v", o, 2)); /* the standard alphabet */
  assert_false(tb_b64url_decode("Zm9", o, 1));  /* the wrong length */
  assert_true(tb_b64url_decode("Zm8", o, 2));
  assert_memory_equal(o, "fo", 2);
  assert_false(tb_b64url_decode("Zm9", o, 2)); /* "fo" with a spare bit set */
  assert_false(tb_b64url_decode("Zh", o, 1));  /* spare bits set: not canonical */
}

static void
test_jwk(void **state)
{
  (void)state;
  unsigned char raw[32], back[32];
  assert_true(tb_hex_decode(rfc8032_pub, raw, sizeof raw));
  json_t *j = tb_sign_jwk(raw);
  assert_string_equal(json_string_value(json_object_get(j, "kty")), "OKP");
  assert_string_equal(json_string_value(json_object_get(j, "crv")), "Ed25519");
  /* RFC 8037 Appendix A.2's x for this very key */
  assert_string_equal(json_string_value(json_object_get(j, "x")),
                      "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
  assert_true(tb_sign_jwk_pub(j, back));
  assert_memory_equal(raw, back, 32);
  json_object_set_new(j, "crv", json_string("X25519"));
  assert_false(tb_sign_jwk_pub(j, back));
  json_decref(j);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_rfc8032_key),  cmocka_unit_test(test_key_file_refusals),
    cmocka_unit_test(test_create_file),  cmocka_unit_test(test_round_trip),
    cmocka_unit_test(test_changes_fail), cmocka_unit_test(test_b64url),
    cmocka_unit_test(test_jwk),
  };
  return cmocka_run_group_tests_name("sign", tests, setup, teardown);
}
