/* Unit tests: tb_prompt's exact-size prompts against a loopback server
 * (loopback.h) whose tokenizer is known: a word of four letters counts two
 * tokens, any other word one, the tag one, and the chat template
 * TEMPLATE tokens.  So the word count is monotonic but not linear in tokens,
 * and every size is reachable (" a" padding is one token).  The three modes
 * (vLLM chat /tokenize, SGLang text /tokenize plus the template's overhead,
 * generic calibration) and hostile or broken answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "loopback.h"
#include "engine/tb_discover.h"
#include "engine/tb_prompt.h"

#define TEMPLATE 7

enum answer {
  GOOD = 0,
  HTTP500,
  NOT_JSON,
  NO_COUNT,
  NEGATIVE,
  FLAT,
  HUGE,
  SPARSE
};

struct fake {
  enum answer answer;
  bool no_template; /* /apply-template answers 404 (an older llama.cpp) */
};

static int64_t
tokens_of(const char *text)
{
  int64_t n = 0;
  const char *p = text;
  while (*p != '\0') {
    while (*p == ' ')
      p++;
    if (*p == '\0')
      break;
    const char *w = p;
    while (*p != '\0' && *p != ' ')
      p++;
    n += p - w == 4 ? 2 : 1;
  }
  return n;
}

static bool
handler(void *cls, int fd, const struct lb_req *req)
{
  struct fake *f = cls;
  json_t *body = json_loads(req->body, 0, NULL);
  const char *content = json_string_value(
    json_object_get(json_array_get(json_object_get(body, "messages"), 0), "content"));
  const char *prompt = json_string_value(json_object_get(body, "prompt"));
  int64_t n = content ? tokens_of(content) + TEMPLATE : prompt ? tokens_of(prompt) : 0;
  char out[256];
  if (f->answer == HTTP500) {
    lb_respond(fd, 500, "text/plain", "boom", false);
    json_decref(body);
    return true;
  }
  if (f->answer == NOT_JSON)
    snprintf(out, sizeof out, "[1,2,3]");
  else if (f->answer == NO_COUNT)
    snprintf(out, sizeof out, "{\"tokens\":\"many\",\"usage\":{}}");
  else if (f->answer == NEGATIVE)
    snprintf(out, sizeof out, "{\"count\":-5,\"usage\":{\"prompt_tokens\":-5}}");
  else if (f->answer == FLAT)
    snprintf(out, sizeof out, "{\"count\":100,\"usage\":{\"prompt_tokens\":100}}");
  else if (f->answer == HUGE)
    snprintf(out, sizeof out, "{\"count\":%lld,\"usage\":{\"prompt_tokens\":%lld}}",
             (long long)(INT64_MAX - 10 + (n % 5)), (long long)(INT64_MAX - 10 + (n % 5)));
  else if (f->answer == SPARSE) /* one token per 100 words */
    snprintf(out, sizeof out, "{\"count\":%lld,\"usage\":{\"prompt_tokens\":%lld}}",
             (long long)(100 + n / 100), (long long)(100 + n / 100));
  else if (strstr(req->head, "POST /apply-template ") == req->head) {
    /* llama.cpp: the template's prompt (TEMPLATE one-token words, then the
     * message); its /tokenize of {content} answers the tokens themselves */
    if (f->no_template) {
      lb_respond(fd, 404, "application/json", "{\"error\":\"not found\"}", false);
      json_decref(body);
      return true;
    }
    json_t *a = json_pack("{s:s+}", "prompt", "T T T T T T T ", content ? content : "");
    char *txt = json_dumps(a, JSON_COMPACT);
    lb_respond(fd, 200, "application/json", txt, false);
    free(txt);
    json_decref(a);
    json_decref(body);
    return true;
  } else if (strstr(req->head, "POST /tokenize ") == req->head &&
             json_string_value(json_object_get(body, "content")) != NULL) {
    int64_t k = tokens_of(json_string_value(json_object_get(body, "content")));
    json_t *a = json_pack("{s:[]}", "tokens");
    for (int64_t i = 0; i < k; i++)
      json_array_append_new(json_object_get(a, "tokens"), json_integer(i % 4000));
    char *txt = json_dumps(a, JSON_COMPACT);
    lb_respond(fd, 200, "application/json", txt, false);
    free(txt);
    json_decref(a);
    json_decref(body);
    return true;
  } else if (strstr(req->head, "POST /tokenize ") == req->head)
    snprintf(out, sizeof out, "{\"count\":%lld,\"max_model_len\":262144}", (long long)n);
  else
    snprintf(out, sizeof out, "{\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":1}}",
             (long long)n);
  lb_respond(fd, 200, "application/json", out, false);
  json_decref(body);
  return true;
}

struct fixture {
  struct lb_server s;
  struct fake f;
  struct tb_discover d;
};

static int
setup(void **state)
{
  struct fixture *x = calloc(1, sizeof *x);
  if (!lb_start(&x->s, handler, &x->f))
    return -1;
  tb_discover_init(&x->d, x->s.url);
  x->d.model = strdup("m");
  *state = x;
  return 0;
}

static int
teardown(void **state)
{
  struct fixture *x = *state;
  lb_stop(&x->s);
  tb_discover_free(&x->d);
  free(x);
  return 0;
}

static void
test_text(void **state)
{
  (void)state;
  char *t = tb_prompt_text("[BENCH_r_CTX_8192]", 3);
  assert_true(strncmp(t, "[BENCH_r_CTX_8192] ", 19) == 0);
  int spaces = 0;
  for (char *p = t; *p; p++)
    spaces += *p == ' ';
  assert_int_equal(spaces, 3);
  free(t);
  /* deterministic: the same words every time */
  char *a = tb_prompt_text("[T]", 500), *b = tb_prompt_text("[T]", 500);
  assert_string_equal(a, b);
  free(a);
  free(b);
  t = tb_prompt_text("[T]", 0);
  assert_string_equal(t, "[T]");
  free(t);
  t = tb_prompt_text("", -4);
  assert_string_equal(t, "");
  free(t);
}

/* Builds and checks a prompt of target tokens for ctx in the current mode. */
static void
build_exact(struct fixture *x, int64_t ctx, int64_t target)
{
  struct tb_prompt_ctx *c = tb_prompt_ctx_new(&x->d, "key", "run1");
  struct tb_prompt p;
  char *err = NULL;
  assert_int_equal(tb_prompt_build(c, ctx, target, &p, &err), 0);
  assert_null(err);
  assert_true(p.exact);
  assert_int_equal(p.tokens, target);
  assert_int_equal(tokens_of(p.text) + TEMPLATE, target); /* as the server counts it */
  char tag[64];
  snprintf(tag, sizeof tag, "[BENCH_run1_CTX_%lld] ", (long long)ctx);
  assert_true(strncmp(p.text, tag, strlen(tag)) == 0);
  tb_prompt_free(&p);
  assert_null(p.text);
  tb_prompt_ctx_free(c);
}

static void
test_chat_tokenize(void **state)
{
  struct fixture *x = *state;
  x->f.answer = GOOD;
  x->d.has_tokenize = true;
  x->d.tokenize_text_only = false;
  unsigned before = x->s.requests;
  build_exact(x, 8192, 8000);
  assert_true(x->s.requests - before <= 50); /* bounded probes */
  char v[64];
  assert_true(lb_header(x->s.last_head, "Authorization", v, sizeof v));
  assert_string_equal(v, "Bearer key");
  build_exact(x, 1024, 300);
  build_exact(x, 65536, 60001);
}

static void
test_text_tokenize(void **state)
{
  struct fixture *x = *state;
  x->f.answer = GOOD;
  x->d.has_tokenize = false;
  x->d.tokenize_text_only = true; /* SGLang: overhead from a calibration */
  build_exact(x, 8192, 7777);
  build_exact(x, 2048, 2000);
}

static void
test_template_tokenize(void **state)
{
  struct fixture *x = *state;
  x->f.answer = GOOD;
  x->f.no_template = false;
  x->d.has_tokenize = false;
  x->d.tokenize_text_only = false;
  x->d.apply_template = true; /* llama.cpp: /apply-template, then /tokenize */
  build_exact(x, 8192, 7777);
  build_exact(x, 1024, 1000);
  /* context 0: the tag alone, counted with the template */
  struct tb_prompt_ctx *c = tb_prompt_ctx_new(&x->d, NULL, "run1");
  struct tb_prompt p;
  char *err = NULL;
  assert_int_equal(tb_prompt_build(c, 0, 0, &p, &err), 0);
  assert_true(p.exact);
  assert_int_equal(p.tokens, 1 + TEMPLATE);
  assert_string_equal(p.source, "tokenizer");
  tb_prompt_free(&p);
  tb_prompt_ctx_free(c);
  /* a server without /apply-template: the calibration, not exact */
  x->f.no_template = true;
  c = tb_prompt_ctx_new(&x->d, NULL, "run1");
  assert_int_equal(tb_prompt_build(c, 2048, 2000, &p, &err), 0);
  assert_null(err);
  assert_false(p.exact);
  assert_string_equal(p.source, "calibration");
  tb_prompt_free(&p);
  tb_prompt_ctx_free(c);
  x->f.no_template = false;
  x->d.apply_template = false;
}

static void
test_linear_estimate(void **state)
{
  struct fixture *x = *state;
  x->f.answer = GOOD;
  x->d.has_tokenize = false;
  x->d.tokenize_text_only = false;
  struct tb_prompt_ctx *c = tb_prompt_ctx_new(&x->d, NULL, "run1");
  struct tb_prompt p;
  char *err = NULL;
  assert_int_equal(tb_prompt_build(c, 8192, 8000, &p, &err), 0);
  assert_false(p.exact);
  assert_true(p.tokens <= 8000);
  int64_t real = tokens_of(p.text) + TEMPLATE;
  /* an estimate from two calibrations: within 2 % of the target */
  assert_true(real > 8000 * 98 / 100 && real < 8000 * 102 / 100);
  tb_prompt_free(&p);
  tb_prompt_ctx_free(c);
}

static void
test_too_small(void **state)
{
  struct fixture *x = *state;
  x->f.answer = GOOD;
  x->d.has_tokenize = true;
  x->d.tokenize_text_only = false;
  struct tb_prompt_ctx *c = tb_prompt_ctx_new(&x->d, NULL, "r");
  struct tb_prompt p;
  char *err = NULL;
  /* the tag and the template alone are over the target */
  assert_int_equal(tb_prompt_build(c, 8192, 3, &p, &err), -1);
  assert_non_null(err);
  assert_non_null(strstr(err, "cannot size"));
  assert_null(p.text);
  free(err);
  tb_prompt_ctx_free(c);
}

/* A broken or hostile answer: -1 with an error, no prompt, no crash. */
static void
expect_failure(struct fixture *x, enum answer a, bool chat, const char *says)
{
  x->f.answer = a;
  x->d.has_tokenize = chat;
  x->d.tokenize_text_only = false;
  struct tb_prompt_ctx *c = tb_prompt_ctx_new(&x->d, NULL, "r");
  struct tb_prompt p;
  char *err = NULL;
  int rc = tb_prompt_build(c, 8192, 4000, &p, &err);
  assert_int_equal(rc, -1);
  assert_non_null(err);
  if (says != NULL)
    assert_non_null(strstr(err, says));
  assert_null(p.text);
  free(err);
  tb_prompt_ctx_free(c);
}

static void
test_bad_answers(void **state)
{
  struct fixture *x = *state;
  for (int chat = 0; chat <= 1; chat++) {
    expect_failure(x, HTTP500, chat, "HTTP 500");
    expect_failure(x, NOT_JSON, chat, "not a JSON object");
    if (chat) /* without tokenize, no usage is the estimate (test_no_usage_estimate) */
      expect_failure(x, NO_COUNT, chat, "no count");
    expect_failure(x, NEGATIVE, chat, chat ? "implausible" : "no usage.prompt_tokens");
    expect_failure(x, FLAT, chat, "grow");
    /* counts past any context window: refused, not overflowed */
    expect_failure(x, HUGE, chat, chat ? "implausible" : "no usage.prompt_tokens");
    /* a tokenizer that would size a prompt of millions of words */
    expect_failure(x, SPARSE, chat, "implausible");
  }
  /* nothing listening */
  struct tb_discover d;
  tb_discover_init(&d, "http://127.0.0.1:1");
  d.model = strdup("m");
  d.has_tokenize = true;
  struct tb_prompt_ctx *c = tb_prompt_ctx_new(&d, NULL, "r");
  struct tb_prompt p;
  char *err = NULL;
  assert_int_equal(tb_prompt_build(c, 8192, 4000, &p, &err), -1);
  assert_non_null(err);
  assert_non_null(strstr(err, "POST /tokenize"));
  free(err);
  tb_prompt_ctx_free(c);
  tb_discover_free(&d);
}

/* No /tokenize and no usage.prompt_tokens in the calibration answers (a
 * gateway): the stated estimate, flagged as one, never over the target. */
static void
test_no_usage_estimate(void **state)
{
  struct fixture *x = *state;
  x->f.answer = NO_COUNT;
  x->d.has_tokenize = false;
  x->d.tokenize_text_only = false;
  struct tb_prompt_ctx *c = tb_prompt_ctx_new(&x->d, NULL, "r");
  struct tb_prompt p;
  char *err = NULL;
  assert_int_equal(tb_prompt_build(c, 8192, 4000, &p, &err), 0);
  assert_null(err);
  assert_string_equal(p.source, "estimate");
  assert_false(p.exact);
  assert_true(p.tokens <= 4000 && p.tokens > 3990);
  /* the estimate: one token per filler word, the tag, the template */
  const char *tag = "[BENCH_r_CTX_8192]";
  int64_t words = 0;
  for (const char *q = p.text + strlen(tag); *q; q++)
    words += *q == ' ';
  assert_int_equal(p.tokens, words + (int64_t)(strlen(tag) + 2) / 3 + TB_PROMPT_ESTIMATE_TEMPLATE);
  tb_prompt_free(&p);
  /* a second context sizes on the same estimate, without asking again */
  assert_int_equal(tb_prompt_build(c, 1024, 1000, &p, &err), 0);
  assert_string_equal(p.source, "estimate");
  tb_prompt_free(&p);
  tb_prompt_ctx_free(c);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_text),
    cmocka_unit_test(test_chat_tokenize),
    cmocka_unit_test(test_text_tokenize),
    /* its own server: it makes two calls a count, past the shared one's
       * LB_CONNS_MAX connections */
    cmocka_unit_test_setup_teardown(test_template_tokenize, setup, teardown),
    cmocka_unit_test(test_linear_estimate),
    cmocka_unit_test(test_too_small),
    cmocka_unit_test(test_bad_answers),
    cmocka_unit_test(test_no_usage_estimate),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
