/* Unit tests: tb_webhook (known vectors from GitHub's documentation and the
 * Standard Webhooks reference libraries, replay window, backoff, labels). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "tb_webhook.h"

/* GitHub's "Validating webhook deliveries" example. */
static const char gh_secret[] = "It's a Secret to Everybody";
static const char gh_body[] = "Hello, World!";
static const char gh_sig[] =
  "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

static void
test_github_known_vector(void **state)
{
  (void)state;
  assert_int_equal(
    tb_webhook_verify_github(gh_secret, strlen(gh_secret), gh_sig, gh_body, strlen(gh_body)),
    TB_WEBHOOK_OK);
  /* upper-case hex is the same bytes */
  char upper[sizeof gh_sig];
  memcpy(upper, gh_sig, sizeof gh_sig);
  for (char *p = upper + 7; *p; p++)
    if (*p >= 'a' && *p <= 'f')
      *p = (char)(*p - 'a' + 'A');
  assert_int_equal(
    tb_webhook_verify_github(gh_secret, strlen(gh_secret), upper, gh_body, strlen(gh_body)),
    TB_WEBHOOK_OK);
}

static void
test_github_rejects(void **state)
{
  (void)state;
  size_t kl = strlen(gh_secret), bl = strlen(gh_body);
  assert_int_equal(tb_webhook_verify_github(gh_secret, kl, NULL, gh_body, bl), TB_WEBHOOK_MISSING);
  assert_int_equal(tb_webhook_verify_github(gh_secret, kl, "", gh_body, bl), TB_WEBHOOK_MISSING);
  /* one body byte changed */
  assert_int_equal(tb_webhook_verify_github(gh_secret, kl, gh_sig, "Hello, World?", bl),
                   TB_WEBHOOK_BAD_SIGNATURE);
  /* wrong key */
  assert_int_equal(tb_webhook_verify_github("x", 1, gh_sig, gh_body, bl), TB_WEBHOOK_BAD_SIGNATURE);
  /* last hex digit changed */
  char bad[sizeof gh_sig];
  memcpy(bad, gh_sig, sizeof gh_sig);
  bad[strlen(bad) - 1] = '8';
  assert_int_equal(tb_webhook_verify_github(gh_secret, kl, bad, gh_body, bl),
                   TB_WEBHOOK_BAD_SIGNATURE);
  /* malformed: sha1 prefix, short, long, junk, trailing space */
  static const char *const malformed[] = {
    "sha1=757107ea0eb2509fc211221cce984b8a37570b6d",
    "sha256=757107ea",
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1700",
    "sha256=zz7107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17 ",
    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    "sha256=",
  };
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++)
    assert_int_equal(tb_webhook_verify_github(gh_secret, kl, malformed[i], gh_body, bl),
                     TB_WEBHOOK_MALFORMED);
}

static void
test_generic_sign_verify_window(void **state)
{
  (void)state;
  const char *key = "tbh_secret";
  const char *body = "{\"ref\":\"refs/heads/main\"}";
  char sig[72];
  tb_webhook_sign_generic(key, strlen(key), 1700000000, body, strlen(body), sig);
  /* python3: hmac.new(b"tbh_secret", b"1700000000." + body, sha256) */
  assert_string_equal(sig,
                      "sha256=bfdfac399aab9f73a0494c8f2b6a230d65cb96ae02bf6ebcf2f59ab6329612ae");
  assert_int_equal(
    tb_webhook_verify_generic(key, strlen(key), sig, "1700000000", body, strlen(body), 1700000000),
    TB_WEBHOOK_OK);
}

static void
test_generic_window(void **state)
{
  (void)state;
  const char *key = "tbh_secret";
  const char *body = "{}";
  char sig[72];
  tb_webhook_sign_generic(key, strlen(key), 1700000000, body, 2, sig);
  size_t kl = strlen(key);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "1700000000", body, 2, 1700000000),
                   TB_WEBHOOK_OK);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "1700000000", body, 2, 1700000300),
                   TB_WEBHOOK_OK);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "1700000000", body, 2, 1699999700),
                   TB_WEBHOOK_OK);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "1700000000", body, 2, 1700000301),
                   TB_WEBHOOK_STALE);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "1700000000", body, 2, 1699999699),
                   TB_WEBHOOK_STALE);
  /* the timestamp is signed: moving it forward breaks the signature */
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "1700000290", body, 2, 1700000300),
                   TB_WEBHOOK_BAD_SIGNATURE);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, NULL, body, 2, 1700000000),
                   TB_WEBHOOK_MISSING);
  assert_int_equal(tb_webhook_verify_generic(key, kl, NULL, "1700000000", body, 2, 1700000000),
                   TB_WEBHOOK_MISSING);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "17e8", body, 2, 1700000000),
                   TB_WEBHOOK_MALFORMED);
  assert_int_equal(tb_webhook_verify_generic(key, kl, sig, "-1", body, 2, 1700000000),
                   TB_WEBHOOK_MALFORMED);
  assert_int_equal(
    tb_webhook_verify_generic(key, kl, sig, "99999999999999999999", body, 2, 1700000000),
    TB_WEBHOOK_MALFORMED);
}

/* Issue 13: the delivery id under the signature, and one digest per signed
 * request whatever its unsigned headers or the case of its hex. */
static void
test_generic_delivery_signed(void **state)
{
  (void)state;
  const char *key = "tbh_secret";
  const char *body = "{}";
  size_t kl = strlen(key);
  char sig[72], sig1[72];
  bool signed_id = false;
  tb_webhook_sign_generic_id(key, kl, 1700000000, "pipeline-42", body, 2, sig);
  /* python3: hmac.new(b"tbh_secret", b"1700000000.pipeline-42.{}", sha256) */
  assert_int_equal(tb_webhook_verify_generic_id(key, kl, sig, "1700000000", "pipeline-42", body, 2,
                                                1700000000, &signed_id),
                   TB_WEBHOOK_OK);
  assert_true(signed_id);
  /* another delivery id under the same signature: refused */
  assert_int_equal(tb_webhook_verify_generic_id(key, kl, sig, "1700000000", "pipeline-43", body, 2,
                                                1700000000, &signed_id),
                   TB_WEBHOOK_BAD_SIGNATURE);
  assert_false(signed_id);
  /* stale is stale in this form too */
  assert_int_equal(tb_webhook_verify_generic_id(key, kl, sig, "1700000000", "pipeline-42", body, 2,
                                                1700000301, &signed_id),
                   TB_WEBHOOK_STALE);
  /* the first form still verifies, its delivery id not authenticated */
  tb_webhook_sign_generic(key, kl, 1700000000, body, 2, sig1);
  assert_int_equal(tb_webhook_verify_generic_id(key, kl, sig1, "1700000000", "anything", body, 2,
                                                1700000000, &signed_id),
                   TB_WEBHOOK_OK);
  assert_false(signed_id);
  assert_int_equal(tb_webhook_verify_generic_id(key, kl, sig1, "1700000000", NULL, body, 2,
                                                1700000000, &signed_id),
                   TB_WEBHOOK_OK);
  /* "<ts>.<d>.<b>" of one form is "<ts>.<body>" of the other: one digest */
  char d1[65], d2[65], d3[65];
  assert_true(tb_webhook_signature_digest(sig, d1));
  char upper[72];
  snprintf(upper, sizeof upper, "%s", sig);
  for (char *p = upper + 7; *p; p++)
    if (*p >= 'a' && *p <= 'f')
      *p = (char)(*p - 'a' + 'A');
  assert_true(tb_webhook_signature_digest(upper, d2));
  assert_string_equal(d1, d2);
  assert_true(tb_webhook_signature_digest(sig1, d3));
  assert_string_not_equal(d1, d3);
  assert_false(tb_webhook_signature_digest("sha256=xyz", d3));
  assert_false(tb_webhook_signature_digest(NULL, d3));
}

/* The Standard Webhooks reference libraries' test vector. */
static const char sw_secret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
static const char sw_id[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
static const char sw_body[] = "{\"test\": 2432232314}";
static const char sw_sig[] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

static void
test_standard_known_vector(void **state)
{
  (void)state;
  char sig[TB_WEBHOOK_SIG_MAX];
  assert_true(
    tb_webhook_sign_standard(sw_secret, sw_id, 1614265330, sw_body, strlen(sw_body), sig));
  assert_string_equal(sig, sw_sig);
  size_t bl = strlen(sw_body);
  assert_int_equal(
    tb_webhook_verify_standard(sw_secret, sw_id, "1614265330", sw_sig, sw_body, bl, 1614265330),
    TB_WEBHOOK_OK);
  /* several entries, one good */
  assert_int_equal(
    tb_webhook_verify_standard(sw_secret, sw_id, "1614265330",
                               "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= "
                               "v2,abc v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
                               sw_body, bl, 1614265330),
    TB_WEBHOOK_OK);
  assert_int_equal(tb_webhook_verify_standard(sw_secret, "msg_other", "1614265330", sw_sig, sw_body,
                                              bl, 1614265330),
                   TB_WEBHOOK_BAD_SIGNATURE);
  assert_int_equal(tb_webhook_verify_standard(sw_secret, sw_id, "1614265330", sw_sig, sw_body, bl,
                                              1614265330 + 301),
                   TB_WEBHOOK_STALE);
  assert_int_equal(
    tb_webhook_verify_standard(sw_secret, sw_id, "1614265330", "v1,%%%", sw_body, bl, 1614265330),
    TB_WEBHOOK_MALFORMED);
  assert_int_equal(
    tb_webhook_verify_standard("whsec_!!", sw_id, "1614265330", sw_sig, sw_body, bl, 1614265330),
    TB_WEBHOOK_MALFORMED);
}

static void
test_secrets(void **state)
{
  (void)state;
  char *in = tb_webhook_secret_new_inbound(), *out = tb_webhook_secret_new_outbound();
  assert_non_null(in);
  assert_non_null(out);
  assert_int_equal(strlen(in), 44);
  assert_memory_equal(in, "tbh_", 4);
  assert_memory_equal(out, "whsec_", 6);
  unsigned char key[TB_WEBHOOK_SECRET_MAX];
  size_t kl = 0;
  assert_true(tb_webhook_secret_key(out, key, &kl));
  assert_int_equal(kl, 32);
  assert_true(tb_webhook_secret_key("plain", key, &kl));
  assert_int_equal(kl, 5);
  assert_memory_equal(key, "plain", 5);
  assert_false(tb_webhook_secret_key("", key, &kl));
  assert_false(tb_webhook_secret_key(NULL, key, &kl));
  assert_false(tb_webhook_secret_key("whsec_", key, &kl));
  char big[TB_WEBHOOK_SECRET_MAX + 2];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_false(tb_webhook_secret_key(big, key, &kl));
  /* round trip with a fresh secret */
  char sig[TB_WEBHOOK_SIG_MAX];
  assert_true(tb_webhook_sign_standard(out, "msg_1", 1000, "x", 1, sig));
  assert_int_equal(tb_webhook_verify_standard(out, "msg_1", "1000", sig, "x", 1, 1000),
                   TB_WEBHOOK_OK);
  free(in);
  free(out);
}

static void
test_backoff(void **state)
{
  (void)state;
  assert_int_equal(tb_webhook_backoff_ms(1, 30000), 30000);
  assert_int_equal(tb_webhook_backoff_ms(2, 30000), 60000);
  assert_int_equal(tb_webhook_backoff_ms(3, 30000), 120000);
  assert_int_equal(tb_webhook_backoff_ms(10, 30000), 14400000); /* capped at 4 h */
  assert_int_equal(tb_webhook_backoff_ms(14, 30000), 14400000);
  assert_int_equal(tb_webhook_backoff_ms(TB_WEBHOOK_MAX_ATTEMPTS, 30000), -1);
  assert_int_equal(tb_webhook_backoff_ms(1, 0), -1);
  /* the whole schedule spans about a day */
  int64_t total = 0;
  for (unsigned a = 1; a < TB_WEBHOOK_MAX_ATTEMPTS; a++)
    total += tb_webhook_backoff_ms(a, 30000);
  assert_true(total >= 22 * 3600 * 1000LL && total <= 26 * 3600 * 1000LL);
  /* no overflow with a huge base */
  assert_true(tb_webhook_backoff_ms(14, INT64_MAX / 2) > 0);
}

static void
test_events(void **state)
{
  (void)state;
  json_t *ev = json_pack("[ss]", "push", "workflow_run");
  assert_true(tb_webhook_event_accepted(ev, "push"));
  assert_false(tb_webhook_event_accepted(ev, "issues"));
  assert_false(tb_webhook_event_accepted(NULL, "push"));
  json_decref(ev);
  ev = json_pack("[s]", "*");
  assert_true(tb_webhook_event_accepted(ev, "anything"));
  json_decref(ev);
}

static void
test_github_labels(void **state)
{
  (void)state;
  json_error_t err;
  json_t *push = json_loads("{\"ref\":\"refs/heads/main\",\"after\":\"0123abc\","
                            "\"repository\":{\"full_name\":\"acme/serving\"}}",
                            0, &err);
  json_t *labels = json_object();
  tb_webhook_github_labels(push, "push", "d-1", labels);
  assert_string_equal(json_string_value(json_object_get(labels, "ref")), "refs/heads/main");
  assert_string_equal(json_string_value(json_object_get(labels, "sha")), "0123abc");
  assert_string_equal(json_string_value(json_object_get(labels, "repository")), "acme/serving");
  assert_string_equal(json_string_value(json_object_get(labels, "event")), "push");
  assert_string_equal(json_string_value(json_object_get(labels, "delivery")), "d-1");
  json_decref(labels);
  json_decref(push);

  json_t *wr = json_loads("{\"workflow_run\":{\"head_branch\":\"dev\",\"head_sha\":\"ff\"},"
                          "\"repository\":{\"full_name\":\"a/b\"}}",
                          0, &err);
  labels = json_object();
  tb_webhook_github_labels(wr, "workflow_run", NULL, labels);
  assert_string_equal(json_string_value(json_object_get(labels, "ref")), "refs/heads/dev");
  assert_string_equal(json_string_value(json_object_get(labels, "sha")), "ff");
  json_decref(labels);
  json_decref(wr);

  /* malformed payloads add what they can and never crash */
  json_t *junk = json_loads("{\"ref\":5,\"after\":[1],\"repository\":\"x\"}", 0, &err);
  labels = json_object();
  tb_webhook_github_labels(junk, "push", NULL, labels);
  tb_webhook_github_labels(NULL, "push", NULL, labels);
  tb_webhook_github_labels(junk, NULL, NULL, labels);
  assert_int_equal(json_object_size(labels), 1); /* event only */
  json_decref(labels);
  json_decref(junk);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_github_known_vector),
    cmocka_unit_test(test_github_rejects),
    cmocka_unit_test(test_generic_sign_verify_window),
    cmocka_unit_test(test_generic_window),
    cmocka_unit_test(test_generic_delivery_signed),
    cmocka_unit_test(test_standard_known_vector),
    cmocka_unit_test(test_secrets),
    cmocka_unit_test(test_backoff),
    cmocka_unit_test(test_events),
    cmocka_unit_test(test_github_labels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
