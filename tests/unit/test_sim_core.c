/* Unit tests for tokbench-sim's modules: tokenizer, HTTP request parser,
 * fault specs, profile interpolation and ground truth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_fault.h"
#include "sim_http.h"
#include "sim_profile.h"
#include "sim_server.h"
#include "sim_tok.h"

static void
test_tok_count(void **state)
{
  (void)state;
  assert_int_equal(sim_tok_count("", 0), 0);
  assert_int_equal(sim_tok_count("a", 1), 1);
  assert_int_equal(sim_tok_count("abcd", 4), 1);
  assert_int_equal(sim_tok_count("abcde", 5), 2);
  assert_int_equal(sim_tok_count("hello world", 11), 4);
  assert_int_equal(sim_tok_count(" \t\n\r\v\f", 6), 0);
  assert_int_equal(sim_tok_count("a b  c\n", 7), 3);
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  sim_tok_ids("hello world", 11, &ids, &len, &cap);
  assert_int_equal(len, 4);
  for (size_t i = 0; i < len; i++)
    assert_true(ids[i] >= 1000 && ids[i] < 101000);
  int32_t first = ids[0];
  len = 0;
  sim_tok_ids("hell", 4, &ids, &len, &cap);
  assert_int_equal(ids[0], first); /* deterministic */
  free(ids);
  for (int i = 0; i < 100; i++) {
    const char *w = sim_tok_output_word(i);
    assert_true(w[0] == ' ' && strlen(w) >= 2 && strlen(w) <= 5);
    assert_int_equal(sim_tok_count(w, strlen(w)), 1);
  }
}

static void
test_tok_chat(void **state)
{
  (void)state;
  json_t *m = json_loads("[{\"role\":\"system\",\"content\":\"be brief\"},"
                         "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hello\"},"
                         "{\"type\":\"image_url\"},{\"type\":\"text\",\"text\":\"world\"}]}]",
                         0, NULL);
  const char *err = NULL;
  uint64_t h1 = 0, h2 = 0;
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  int64_t n = sim_tok_chat(m, true, &h1, &ids, &len, &cap, &err);
  assert_int_equal(n, 1 + (4 + 3) + (4 + 4) + 3);
  assert_int_equal((int64_t)len, n);
  assert_int_equal(sim_tok_chat(m, false, &h2, NULL, NULL, NULL, &err), n - 3);
  assert_true(h1 == h2); /* the hash covers the messages */
  free(ids);
  json_decref(m);
  m = json_loads("[{\"content\":\"x\"}]", 0, NULL);
  assert_int_equal(sim_tok_chat(m, true, NULL, NULL, NULL, NULL, &err), -1);
  assert_non_null(err);
  json_decref(m);
  m = json_loads("[]", 0, NULL);
  assert_int_equal(sim_tok_chat(m, true, NULL, NULL, NULL, NULL, &err), -1);
  json_decref(m);
  uint64_t a, b;
  assert_int_equal(sim_tok_prompt("one two", 7, &a, NULL, NULL, NULL), 3);
  sim_tok_prompt("one tw0", 7, &b, NULL, NULL, NULL);
  assert_true(a != b);
}

/* llama.cpp's /apply-template and /tokenize: the BOS and the template's
 * text, its markers parsed, give the chat prompt's very ids. */
static void
test_tok_template(void **state)
{
  (void)state;
  json_t *m = json_loads("[{\"role\":\"system\",\"content\":\"be brief\"},"
                         "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hello\"},"
                         "{\"type\":\"text\",\"text\":\"world\"}]},"
                         "{\"role\":\"tool\",\"content\":\"x y\"}]",
                         0, NULL);
  for (int agp = 0; agp <= 1; agp++) {
    const char *err = NULL;
    int32_t *a = NULL, *b = NULL;
    size_t al = 0, ac = 0, bl = 0, bc = 0;
    int64_t n = sim_tok_chat(m, agp, NULL, &a, &al, &ac, &err);
    char *text = sim_tok_render_chat(m, agp);
    assert_int_equal(strncmp(text, "<|im_start|>system\nbe brief<|im_end|>\n", 38), 0);
    sim_tok_special_ids(SIM_TOK_BOS_TEXT, 3, &b, &bl, &bc); /* /tokenize's add_special */
    sim_tok_special_ids(text, strlen(text), &b, &bl, &bc);
    assert_int_equal((int64_t)bl, n);
    assert_memory_equal(a, b, al * sizeof(*a));
    free(text);
    free(a);
    free(b);
  }
  json_decref(m);
  /* outside the markers: the plain tokenizer; an unterminated header */
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  sim_tok_special_ids("hello <|im_end|>\nworld<|im_start|>user", 38, &ids, &len, &cap);
  assert_int_equal(len, 2 + 1 + 2 + 2);
  assert_int_equal(ids[2], 6);
  assert_int_equal(ids[5], 3);
  assert_int_equal(ids[6], 9);
  free(ids);
}

static enum sim_http_result
parse(const char *s, struct sim_http_req *r, int *status)
{
  return sim_http_parse(s, strlen(s), r, status);
}

static void
test_http_parse(void **state)
{
  (void)state;
  struct sim_http_req r;
  int st;
  const char *ok = "POST /v1/completions?x=1&y=22 HTTP/1.1\r\nHost: a\r\n"
                   "Content-Length: 5\r\nauthorization:  Bearer k \r\nX-Sim-Fault: cut=3\r\n"
                   "\r\nhelloGET";
  assert_int_equal(parse(ok, &r, &st), SIM_HTTP_DONE);
  assert_int_equal(r.method, SIM_HTTP_POST);
  assert_string_equal(r.path, "/v1/completions");
  assert_string_equal(r.query, "x=1&y=22");
  assert_true(r.keep_alive && r.has_auth);
  assert_string_equal(r.auth, "Bearer k");
  assert_string_equal(r.fault, "cut=3");
  assert_false(r.stamps); /* stamps only when asked */
  assert_int_equal(r.body_len, 5);
  assert_memory_equal(r.body, "hello", 5);
  assert_int_equal(r.total_len, strlen(ok) - 3);
  char v[16];
  assert_true(sim_http_query(r.query, "y", v, sizeof(v)));
  assert_string_equal(v, "22");
  assert_false(sim_http_query(r.query, "z", v, sizeof(v)));
  /* incomplete head and body */
  assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n", &r, &st), SIM_HTTP_NEED_MORE);
  assert_int_equal(
    parse("POST / HTTP/1.1\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\nabc", &r, &st),
    SIM_HTTP_NEED_MORE);
  assert_true(r.head_len > 0 && r.expect_continue);
  /* HTTP/1.0 and Connection */
  assert_int_equal(parse("GET /h HTTP/1.0\n\n", &r, &st), SIM_HTTP_DONE);
  assert_false(r.keep_alive);
  assert_int_equal(parse("GET /h HTTP/1.1\r\nConnection: x, close\r\n\r\n", &r, &st),
                   SIM_HTTP_DONE);
  assert_false(r.keep_alive);
  /* errors */
  assert_int_equal(parse("GET / HTTP/2.0\r\n\r\n", &r, &st), SIM_HTTP_ERROR);
  assert_int_equal(st, 505);
  assert_int_equal(parse("GET /\r\n\r\n", &r, &st), SIM_HTTP_ERROR);
  assert_int_equal(st, 400);
  assert_int_equal(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r, &st),
                   SIM_HTTP_ERROR);
  assert_int_equal(st, 411);
  assert_int_equal(
    parse("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", &r, &st),
    SIM_HTTP_ERROR);
  assert_int_equal(st, 413);
  assert_int_equal(
    parse("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &r, &st),
    SIM_HTTP_ERROR);
  assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &r, &st), SIM_HTTP_ERROR);
  assert_int_equal(parse("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", &r, &st), SIM_HTTP_ERROR);
  assert_int_equal(parse("GET nopath HTTP/1.1\r\n\r\n", &r, &st), SIM_HTTP_ERROR);
  /* head cap */
  size_t big = SIM_HTTP_HEAD_CAP + 10;
  char *b = malloc(big + 1);
  memset(b, 'a', big);
  b[big] = '\0';
  memcpy(b, "GET / HTTP/1.1\r\nX: ", 19);
  assert_int_equal(sim_http_parse(b, big, &r, &st), SIM_HTTP_ERROR);
  assert_int_equal(st, 431);
  free(b);
  assert_int_equal(parse("GET /x HTTP/1.1\r\nX-Tokbench-Stamps: 1\r\n\r\n", &r, &st),
                   SIM_HTTP_DONE);
  assert_true(r.stamps);
  assert_int_equal(parse("GET /x HTTP/1.1\r\nX-Tokbench-Stamps: 0\r\n\r\n", &r, &st),
                   SIM_HTTP_DONE);
  assert_false(r.stamps);
}

static void
test_fault(void **state)
{
  (void)state;
  struct sim_fault f;
  char err[128];
  sim_fault_init(&f);
  assert_true(sim_fault_parse(&f,
                              "status=503, cut=4;stall=2:150.5 malformed=1,first_byte=20,"
                              "no_usage,refuse=300",
                              err, sizeof(err)));
  assert_int_equal(f.status, 503);
  assert_int_equal(f.cut_after, 4);
  assert_int_equal(f.stall_after, 2);
  assert_true(fabs(f.stall_ms - 150.5) < 1e-9);
  assert_int_equal(f.malformed_after, 1);
  assert_true(f.first_byte_ms == 20 && f.no_usage && f.refuse_ms == 300);
  assert_int_equal(f.error_after, -1);
  assert_true(sim_fault_parse(&f, "error=7", err, sizeof(err)));
  assert_int_equal(f.error_after, 7);
  assert_true(sim_fault_parse(&f, "none,cut=1", err, sizeof(err)));
  assert_int_equal(f.status, 0);
  assert_int_equal(f.cut_after, 1);
  const char *bad[] = { "status=200", "status=abc", "cut",        "stall=3",     "stall=a:1",
                        "x=1",        "refuse=0",   "no_usage=2", "status=500.5" };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    sim_fault_init(&f);
    assert_false(sim_fault_parse(&f, bad[i], err, sizeof(err)));
  }
}

static const char *profile_text =
  "{\"name\":\"t\",\"model\":\"m\",\"max_model_len\":8192,\"kv_budget_tokens\":20000,"
  "\"max_running_requests\":4,\"engine\":{\"version\":\"1\"},"
  "\"prefill\":{\"contexts\":[1000,3000],\"tokens_per_s\":[10000,20000]},"
  "\"decode\":{\"contexts\":[1000,3000],\"batches\":[1,3],\"step_ms\":[[10,20],[30,40]]},"
  "\"cached_ttft\":{\"contexts\":[1000],\"batches\":[1],\"ms\":[[7]]}}";

static void
test_profile(void **state)
{
  (void)state;
  struct sim_profile p;
  char err[256];
  assert_true(sim_profile_parse(&p, profile_text, err, sizeof(err)));
  assert_true(fabs(sim_profile_step_ms(&p, 1, 1000) - 10) < 1e-9);
  assert_true(fabs(sim_profile_step_ms(&p, 2, 1000) - 15) < 1e-9);
  assert_true(fabs(sim_profile_step_ms(&p, 2, 2000) - 25) < 1e-9);
  assert_true(fabs(sim_profile_step_ms(&p, 9, 9000) - 40) < 1e-9); /* clamped */
  assert_true(fabs(sim_profile_step_ms(&p, 0, 10) - 10) < 1e-9);
  assert_true(fabs(sim_profile_prefill_ms(&p, 1000) - 100) < 1e-9);
  assert_true(fabs(sim_profile_prefill_ms(&p, 2000) - 2000.0 * 1000 / 15000) < 1e-9);
  assert_true(fabs(sim_profile_cached_ms(&p, 5, 50000) - 7) < 1e-9);
  json_t *e = sim_profile_expected(&p, 1000, 2, 4096, 2.0);
  assert_true(fabs(json_real_value(json_object_get(e, "tbt_ms")) - 7.5) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(e, "total_tok_s")) - 2000.0 / 7.5) < 1e-9);
  assert_true(json_is_true(json_object_get(e, "fits")));
  json_decref(e);
  e = sim_profile_expected(&p, 1000, 5, 4096, 1.0); /* 5 x 5096 > 20000 and 5 > 4 */
  assert_true(json_is_false(json_object_get(e, "fits")));
  assert_true(json_is_false(json_object_get(e, "fits_kv")));
  assert_true(json_is_false(json_object_get(e, "fits_running")));
  json_decref(e);
  sim_profile_free(&p);
  assert_false(sim_profile_parse(&p, "{}", err, sizeof(err)));
  assert_false(sim_profile_parse(&p, "not json", err, sizeof(err)));
  char *broken = strdup(profile_text);
  char *at = strstr(broken, "[1,3]");
  at[1] = '9'; /* batches [9,3]: not increasing */
  assert_false(sim_profile_parse(&p, broken, err, sizeof(err)));
  free(broken);
}

static void
test_shipped_profiles(void **state)
{
  (void)state;
  const char *names[] = { "sim/profiles/tiny.json", "sim/profiles/bench.json",
                          "sim/profiles/vllm-h200x2-step3p7.json",
                          "sim/profiles/sglang-rtxpro6000x4-step3p7.json",
                          "sim/profiles/firehose.json" };
  char err[256];
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    struct sim_profile p;
    if (!sim_profile_load(&p, names[i], err, sizeof(err)))
      fail_msg("%s", err);
    sim_profile_free(&p);
  }
  struct sim_profile v;
  assert_true(sim_profile_load(&v, names[2], err, sizeof(err)));
  assert_true(v.kv_budget >= 786432 && v.kv_budget < 1044480);
  /* vLLM report: 8K x 1 = 112.0 tok/s, 128K x 4 = 297.5 tok/s, prefill 8K = 332 ms */
  assert_true(fabs(1000.0 / sim_profile_step_ms(&v, 1, 8192) - 112.0) < 0.05);
  assert_true(fabs(4000.0 / sim_profile_step_ms(&v, 4, 131072) - 297.5) < 0.05);
  assert_true(fabs(sim_profile_prefill_ms(&v, 8192) - 332) < 0.01);
  sim_profile_free(&v);
  struct sim_profile s;
  assert_true(sim_profile_load(&s, names[3], err, sizeof(err)));
  assert_true(s.kv_budget >= 589824 && s.kv_budget < 655360);
  assert_true(fabs(32000.0 / sim_profile_step_ms(&s, 32, 8192) - 1310.0) < 0.05);
  assert_true(fabs(sim_profile_prefill_ms(&s, 262144) - 25453) < 0.1);
  sim_profile_free(&s);
  /* firehose (bench_firehose.sh): no compute behind the stream, a step of
   * 1 us at any batch */
  struct sim_profile h;
  assert_true(sim_profile_load(&h, names[4], err, sizeof(err)));
  assert_true(sim_profile_step_ms(&h, 1, 1024) <= 0.001 &&
              sim_profile_step_ms(&h, 4096, 1024) <= 0.001);
  sim_profile_free(&h);
}

/* Every flavour the help lists resolves; the aliases name the right ones. */
static void
test_flavours(void **state)
{
  (void)state;
  bool pv;
  const struct sim_dialect *d = sim_flavour_find("vllm", &pv);
  assert_non_null(d);
  assert_string_equal(d->name, "vllm-2026");
  assert_true(pv);
  d = sim_flavour_find("sglang", &pv);
  assert_string_equal(d->name, "sglang-0.4");
  assert_true(pv && d->family == SIM_FLAVOUR_SGLANG && d->rev == 4);
  d = sim_flavour_find("tgi", &pv);
  assert_string_equal(d->name, "tgi-3.3");
  assert_false(pv);
  d = sim_flavour_find("vllm-0.8", &pv);
  assert_true(d->family == SIM_FLAVOUR_VLLM && d->rev == 8 && !pv);
  assert_string_equal(d->version, "0.8.5.post1");
  assert_null(sim_flavour_find("vllm-0.9", &pv));
  assert_null(sim_flavour_find("", &pv));
  char names[1024];
  snprintf(names, sizeof(names), "%s", sim_flavour_names());
  char *semi = strchr(names, ';');
  assert_non_null(semi);
  *semi = '\0';
  int n = 0;
  for (char *save = NULL, *t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
    d = sim_flavour_find(t, &pv);
    assert_non_null(d);
    assert_string_equal(d->name, t);
    n++;
  }
  assert_int_equal(n, 14);
  /* llamacpp is the newest llama.cpp; b6915 keeps its name */
  assert_string_equal(sim_flavour_find("llamacpp", &pv)->name, "llamacpp-b11669");
  assert_string_equal(sim_flavour_find("llama-server", &pv)->name, "llamacpp-b11669");
  assert_int_equal(sim_flavour_find("llamacpp-b6915", &pv)->rev, 6915);
  /* the framing flags of the two odd streams */
  assert_true(sim_flavour_find("gateway", &pv)->crlf);
  assert_true(sim_flavour_find("tgi-2.2", &pv)->data_nospace);
  assert_false(sim_flavour_find("tgi-2.2", &pv)->role_chunk);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_tok_count),
    cmocka_unit_test(test_tok_chat),
    cmocka_unit_test(test_tok_template),
    cmocka_unit_test(test_http_parse),
    cmocka_unit_test(test_fault),
    cmocka_unit_test(test_profile),
    cmocka_unit_test(test_shipped_profiles),
    cmocka_unit_test(test_flavours),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
