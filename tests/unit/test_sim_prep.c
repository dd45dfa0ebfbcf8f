/*
 * Unit tests for sim_prep: a prompt prepared by the worker is the one the
 * loop would prepare (token count, hash, block chain); a chat prompt and a
 * completions prompt of token ids; bad prompts and malformed bodies come
 * back with their reason; jobs come back in order, and stopping with jobs
 * still queued frees them (ASan checks the leaks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cache.h"
#include "sim_prep.h"
#include "sim_tok.h"
#include "base/tb_util.h"

#define BS 16

static char *
completion_body(size_t words)
{
  size_t cap = words * 5 + 64;
  char *b = tb_xmalloc(cap);
  size_t n = (size_t)snprintf(b, cap, "{\"prompt\":\"");
  for (size_t i = 0; i < words; i++)
    n += (size_t)snprintf(b + n, cap - n, "%s%c%c", i ? " " : "", 'a' + (char)(i % 26),
                          'b' + (char)(i % 7));
  snprintf(b + n, cap - n, "\",\"max_tokens\":4}");
  return b;
}

static void
test_prompt_matches_tokenizer(void **state)
{
  (void)state;
  char *b = completion_body(1000);
  json_t *doc = json_loads(b, 0, NULL);
  assert_non_null(doc);
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  struct sim_prompt pr;
  sim_prep_prompt(doc, false, BS, &ids, &len, &cap, &pr);
  const json_t *p = json_object_get(doc, "prompt");
  uint64_t h;
  assert_int_equal(
    pr.tokens, sim_tok_prompt(json_string_value(p), json_string_length(p), &h, NULL, NULL, NULL));
  assert_int_equal(pr.tokens, 1001);
  assert_true(pr.hash == h);
  assert_int_equal(len, 1001);
  assert_int_equal(pr.nchain, 1001 / BS);
  uint64_t chain[1001 / BS];
  assert_int_equal(sim_cache_chain(ids, len, BS, chain, 1001 / BS), pr.nchain);
  assert_memory_equal(chain, pr.chain, sizeof(chain));
  assert_int_equal(pr.ntail, 1001 % BS); /* the ids after the last full block */
  assert_memory_equal(pr.tail, ids + 1001 / BS * BS, pr.ntail * sizeof(*ids));
  free(pr.chain);
  free(pr.tail);
  /* token ids, and a chat prompt; errors */
  json_t *d2 = json_loads("{\"prompt\":[5,6,7]}", 0, NULL);
  sim_prep_prompt(d2, false, BS, &ids, &len, &cap, &pr);
  assert_int_equal(pr.tokens, 3);
  assert_null(pr.chain);
  assert_int_equal(pr.ntail, 3);
  free(pr.tail);
  json_decref(d2);
  d2 = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"hello world\"}]}", 0, NULL);
  sim_prep_prompt(d2, true, BS, &ids, &len, &cap, &pr);
  assert_int_equal(pr.tokens, 12); /* sim_tok.h's example */
  free(pr.tail);
  json_decref(d2);
  d2 = json_loads("{\"prompt\":[5,\"x\"]}", 0, NULL);
  sim_prep_prompt(d2, false, BS, &ids, &len, &cap, &pr);
  assert_true(pr.tokens < 0 && pr.err != NULL);
  json_decref(d2);
  d2 = json_loads("{}", 0, NULL);
  sim_prep_prompt(d2, false, BS, &ids, &len, &cap, &pr);
  assert_true(pr.tokens < 0 && strcmp(pr.err, "prompt is required") == 0);
  json_decref(d2);
  free(ids);
  json_decref(doc);
  free(b);
}

static struct sim_prep_job *
job_of(char *body, bool chat)
{
  struct sim_prep_job *j = tb_xcalloc(1, sizeof(*j));
  j->body = body;
  j->req.body = body;
  j->req.body_len = strlen(body);
  j->chat = chat;
  j->bs = BS;
  return j;
}

/* Waits for and takes n jobs (in order through ->next). */
static struct sim_prep_job *
take_n(struct sim_prep *p, int efd, int n)
{
  struct sim_prep_job *head = NULL, **tail = &head;
  int got = 0;
  for (int tries = 0; got < n && tries < 500; tries++) {
    struct pollfd pf = { .fd = efd, .events = POLLIN };
    (void)poll(&pf, 1, 20);
    for (struct sim_prep_job *j = sim_prep_take(p); j != NULL; j = j->next) {
      *tail = j;
      tail = &j->next;
      got++;
    }
  }
  assert_int_equal(got, n);
  return head;
}

static void
test_worker_round_trip(void **state)
{
  (void)state;
  int efd = -1;
  struct sim_prep *p = sim_prep_start(&efd);
  assert_non_null(p);
  assert_true(efd >= 0);
  char *big = completion_body(20000);
  json_t *ref = json_loads(big, 0, NULL);
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  struct sim_prompt want;
  sim_prep_prompt(ref, false, BS, &ids, &len, &cap, &want);
  sim_prep_submit(p, job_of(big, false));
  sim_prep_submit(p, job_of(tb_xstrdup("{\"prompt\": [1, 2"), false));
  sim_prep_submit(p, job_of(tb_xstrdup("[1]"), false));
  sim_prep_submit(
    p,
    job_of(tb_xstrdup("{\"messages\":[{\"role\":\"user\",\"content\":\"hello world\"}]}"), true));
  struct sim_prep_job *j = take_n(p, efd, 4);
  /* in order: the large prompt as the loop makes it */
  assert_non_null(j->doc);
  assert_int_equal(j->pr.tokens, want.tokens);
  assert_true(j->pr.hash == want.hash);
  assert_int_equal(j->pr.nchain, want.nchain);
  assert_memory_equal(j->pr.chain, want.chain, want.nchain * sizeof(*want.chain));
  /* malformed: jansson's message */
  struct sim_prep_job *k = j->next;
  assert_null(k->doc);
  assert_true(strlen(k->jerr) > 0);
  /* not an object: parsed, no prompt */
  k = k->next;
  assert_non_null(k->doc);
  assert_int_equal(k->pr.tokens, 0);
  k = k->next;
  assert_int_equal(k->pr.tokens, 12);
  assert_null(k->next);
  while (j) {
    struct sim_prep_job *n = j->next;
    sim_prep_job_free(j);
    j = n;
  }
  /* stopped with work queued: everything freed */
  for (int i = 0; i < 8; i++)
    sim_prep_submit(p, job_of(completion_body(5000), false));
  sim_prep_stop(p);
  free(want.chain);
  free(want.tail);
  free(ids);
  json_decref(ref);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_prompt_matches_tokenizer),
    cmocka_unit_test(test_worker_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
