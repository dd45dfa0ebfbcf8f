/*
 * Unit tests for tb_sharedoc: what a share link's copy of a document keeps
 * and loses.  A stored result (tests/fixtures/result_vllm.json) with the
 * endpoint's URL, key and a private label's value planted in its own
 * strings comes out with none of them, anywhere, and with its figures
 * untouched; the member rules (endpoint url, ids, other jobs, private
 * label keys, the signature moved aside); short hidden strings only as
 * whole strings; URLs hidden with their origin and host; deep documents
 * emptied past the cap, never a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "result/tb_sharedoc.h"

#define FIXTURE "tests/fixtures/result_vllm.json"
#define URL "http://10.0.0.7:8000"
#define KEY "sk-live-0123456789"
#define PRIV "blue-team-only"
#define OTHER_JOB "4c1d8a4e-0000-4000-8000-000000000001"
#define THIS_JOB "9e0f6b2a-0000-4000-8000-000000000002"

static char *
dump(const json_t *d)
{
  return json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
}

static void
hide_all(struct tb_sharedoc_hide *h, const json_t *labels)
{
  memset(h, 0, sizeof *h);
  tb_sharedoc_hide_url(h, URL "/");
  tb_sharedoc_hide_str(h, KEY);
  tb_sharedoc_keep_job(h, THIS_JOB);
  json_t *keys = json_pack("[s]", "team");
  tb_sharedoc_hide_labels(h, keys, labels);
  json_decref(keys);
}

static void
test_planted_strings_leave_no_trace(void **state)
{
  (void)state;
  json_t *d = fixture_json(FIXTURE), *orig = fixture_json(FIXTURE);
  json_t *labels = json_pack("{s:s, s:s}", "team", PRIV, "gpu", "h200");
  json_object_set_new(d, "error",
                      json_string("POST " URL "/v1/completions with " KEY " for " PRIV));
  json_object_set_new(d, "job_id", json_string(THIS_JOB));
  json_object_set_new(d, "labels", json_deep_copy(labels));
  json_object_set_new(json_object_get(d, "model"), "revision", json_string(PRIV));
  json_object_set_new(json_object_get(d, "endpoint"), "telemetry_url",
                      json_string("http://10.0.0.7:9400/metrics"));
  json_object_set_new(json_object_get(d, "endpoint"), "api_key", json_string(KEY));
  json_object_set_new(d, "project_id", json_string("p-1"));
  json_object_set_new(d, "regressions",
                      json_pack("{s:s, s:b, s:[{s:s}]}", "base_job_id", OTHER_JOB, "regressed", 0,
                                "cells", "job_id", OTHER_JOB));
  json_object_set_new(d, "project_frontier", json_pack("[{s:s}]", "job_id", OTHER_JOB));
  json_t *note = json_array_get(json_object_get(d, "cells"), 3);
  json_object_set_new(note, "note", json_string("slow on 10.0.0.7:8000 today"));
  struct tb_sharedoc_hide h;
  hide_all(&h, labels);
  tb_sharedoc_strip(d, &h);
  char *s = dump(d);
  const char *gone[] = { URL, "10.0.0.7", KEY, PRIV, OTHER_JOB, "p-1", "telemetry_url", "\"url\"" };
  for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
    if (strstr(s, gone[i]) != NULL)
      fail_msg("%s is still in the shared copy", gone[i]);
  /* what is left is what the document shares */
  assert_string_equal(json_string_value(json_object_get(d, "job_id")), THIS_JOB);
  assert_string_equal(json_string_value(json_object_get(json_object_get(d, "endpoint"), "name")),
                      "vllm-demo");
  assert_null(json_object_get(json_object_get(d, "labels"), "team"));
  assert_string_equal(json_string_value(json_object_get(json_object_get(d, "labels"), "gpu")),
                      "h200");
  assert_string_equal(json_string_value(json_object_get(d, "error")),
                      "POST <redacted>/v1/completions with <redacted> for <redacted>");
  assert_string_equal(
    json_string_value(json_object_get(json_object_get(d, "regressions"), "base_job_id")),
    "not shared");
  assert_null(json_object_get(d, "project_frontier"));
  assert_null(json_object_get(d, "project_id"));
  assert_true(json_is_true(json_object_get(json_object_get(d, "shared"), "read_only")));
  /* every figure is as it was */
  const json_t *cells = json_object_get(d, "cells"), *was = json_object_get(orig, "cells");
  assert_int_equal(json_array_size(cells), json_array_size(was));
  for (size_t i = 0; i < json_array_size(was); i++)
    if (i != 3 && !json_equal(json_array_get(cells, i), json_array_get(was, i)))
      fail_msg("cell %zu changed", i);
  assert_string_equal(json_string_value(json_object_get(json_array_get(cells, 3), "note")),
                      "slow on <redacted> today");
  assert_true(json_equal(json_object_get(d, "settings"), json_object_get(orig, "settings")));
  assert_true(json_equal(json_object_get(d, "capacity"), json_object_get(orig, "capacity")));
  free(s);
  tb_sharedoc_hide_clear(&h);
  json_decref(labels);
  json_decref(orig);
  json_decref(d);
}

static void
test_signature_moved_aside(void **state)
{
  (void)state;
  json_t *d =
    json_pack("{s:s, s:{s:s, s:s, s:s, s:s}}", "schema", "tokbench.result/v1", "signature", "alg",
              "Ed25519", "kid", "k1", "signed_at", "2026-05-01T00:00:00Z", "value", "AAAA");
  const char *kid = NULL, *at = NULL;
  assert_true(tb_sharedoc_signature(d, &kid, &at));
  assert_string_equal(kid, "k1");
  struct tb_sharedoc_hide h = { 0 };
  tb_sharedoc_strip(d, &h);
  assert_null(json_object_get(d, "signature"));
  const json_t *sh = json_object_get(d, "shared");
  assert_string_equal(
    json_string_value(json_object_get(json_object_get(sh, "original_signature"), "value")), "AAAA");
  kid = at = NULL;
  assert_true(tb_sharedoc_signature(d, &kid, &at));
  assert_string_equal(kid, "k1");
  assert_string_equal(at, "2026-05-01T00:00:00Z");
  /* no block, or one without kid and value: not signed */
  json_t *u = json_pack("{s:{s:s}}", "signature", "alg", "Ed25519");
  assert_false(tb_sharedoc_signature(u, &kid, &at));
  tb_sharedoc_strip(u, &h);
  assert_false(tb_sharedoc_signature(u, &kid, &at));
  assert_null(json_object_get(u, "signature"));
  json_decref(u);
  json_decref(d);
}

static void
test_short_strings_only_whole(void **state)
{
  (void)state;
  struct tb_sharedoc_hide h = { 0 };
  tb_sharedoc_hide_str(&h, "ab"); /* a private label of two letters */
  tb_sharedoc_hide_str(&h, "");   /* ignored */
  tb_sharedoc_hide_str(&h, NULL);
  char *a = tb_sharedoc_scrub(&h, "abc lab");
  assert_string_equal(a, "abc lab");
  char *b = tb_sharedoc_scrub(&h, "ab");
  assert_string_equal(b, TB_SHAREDOC_REDACTED);
  tb_sharedoc_hide_str(&h, "secret");
  char *c = tb_sharedoc_scrub(&h, "secretsecret and secret");
  assert_string_equal(c, "<redacted><redacted> and <redacted>");
  free(a);
  free(b);
  free(c);
  tb_sharedoc_hide_clear(&h);
}

static void
test_url_parts(void **state)
{
  (void)state;
  struct tb_sharedoc_hide h = { 0 };
  tb_sharedoc_hide_url(&h, "https://user:pw@[fd00::7]:8443/v1/");
  char *s =
    tb_sharedoc_scrub(&h, "to [fd00::7]:8443 at fd00::7 via https://user:pw@[fd00::7]:8443/v1");
  assert_string_equal(s, "to <redacted> at <redacted> via <redacted>");
  free(s);
  tb_sharedoc_hide_clear(&h);
  tb_sharedoc_hide_url(&h, "http://gpu-7.internal:8000");
  s = tb_sharedoc_scrub(&h, "gpu-7.internal refused");
  assert_string_equal(s, "<redacted> refused");
  free(s);
  tb_sharedoc_hide_clear(&h);
}

static void
test_job_ids_and_keys(void **state)
{
  (void)state;
  json_t *d =
    json_pack("{s:{s:s, s:{s:s}}, s:{s:s}, s:[{s:s, s:f}]}", "base", "job_id", THIS_JOB, "endpoint",
              "url", URL, "head", "job_id", OTHER_JOB, "points", "job_id", OTHER_JOB, "value", 1.5);
  json_object_set_new(d, "endpoint_id", json_string("e-1"));
  json_object_set_new(d, PRIV, json_string("a member named after a hidden string"));
  struct tb_sharedoc_hide h = { 0 };
  tb_sharedoc_keep_job(&h, THIS_JOB);
  tb_sharedoc_hide_str(&h, PRIV);
  tb_sharedoc_strip(d, &h);
  assert_string_equal(json_string_value(json_object_get(json_object_get(d, "base"), "job_id")),
                      THIS_JOB);
  assert_null(json_object_get(json_object_get(json_object_get(d, "base"), "endpoint"), "url"));
  assert_null(json_object_get(json_object_get(d, "head"), "job_id"));
  const json_t *p = json_array_get(json_object_get(d, "points"), 0);
  assert_null(json_object_get(p, "job_id"));
  assert_true(json_real_value(json_object_get(p, "value")) == 1.5);
  assert_null(json_object_get(d, "endpoint_id"));
  assert_null(json_object_get(d, PRIV));
  tb_sharedoc_hide_clear(&h);
  json_decref(d);
}

static void
test_deep_and_odd_documents(void **state)
{
  (void)state;
  struct tb_sharedoc_hide h = { 0 };
  tb_sharedoc_hide_str(&h, KEY);
  /* nested far past the cap: emptied there, no crash */
  json_t *root = json_object(), *cur = root;
  for (int i = 0; i < 3 * TB_SHAREDOC_DEPTH_MAX; i++) {
    json_t *next = i % 2 ? json_object() : json_array();
    if (json_is_object(cur))
      json_object_set_new(cur, "x", next);
    else
      json_array_append_new(cur, next);
    cur = next;
  }
  if (json_is_object(cur))
    json_object_set_new(cur, "leak", json_string(KEY));
  else
    json_array_append_new(cur, json_string(KEY));
  tb_sharedoc_strip(root, &h);
  char *s = dump(root);
  assert_null(strstr(s, KEY));
  free(s);
  json_decref(root);
  /* not an object: scrubbed, no "shared" */
  json_t *str = json_string("key " KEY);
  tb_sharedoc_strip(str, &h);
  assert_string_equal(json_string_value(str), "key <redacted>");
  json_decref(str);
  tb_sharedoc_strip(NULL, &h);
  const char *kid = NULL, *at = NULL;
  assert_false(tb_sharedoc_signature(NULL, &kid, &at));
  tb_sharedoc_hide_clear(&h);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_planted_strings_leave_no_trace),
    cmocka_unit_test(test_signature_moved_aside),
    cmocka_unit_test(test_short_strings_only_whole),
    cmocka_unit_test(test_url_parts),
    cmocka_unit_test(test_job_ids_and_keys),
    cmocka_unit_test(test_deep_and_odd_documents),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
