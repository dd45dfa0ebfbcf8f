/*
 * Unit tests for sim_cache, the simulator's block-level prefix cache: chains
 * name a block by everything before it; the longest cached run of leading
 * blocks is found; LRU eviction takes a chain's tail first and keeps its
 * shared head; the table survives heavy churn (checked against a plain
 * model of the same cache).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_arrival.h"
#include "sim_cache.h"

#define BS 4

/* ids of a prompt: a shared head of `shared` ids, then ids unique to tag. */
static void
prompt(int32_t *ids, size_t n, size_t shared, int32_t tag)
{
  for (size_t i = 0; i < n; i++)
    ids[i] = i < shared ? (int32_t)(1000 + i) : (int32_t)(tag * 100000 + (int32_t)i);
}

static void
test_chain(void **state)
{
  (void)state;
  int32_t a[10], b[10];
  uint64_t ca[4], cb[4];
  prompt(a, 10, 6, 1);
  prompt(b, 10, 6, 2);
  assert_int_equal(sim_cache_chain(a, 10, BS, ca, 4), 2); /* full blocks only */
  assert_int_equal(sim_cache_chain(b, 10, BS, cb, 4), 2);
  assert_true(ca[0] == cb[0]);                            /* ids 0..3 shared */
  assert_true(ca[1] != cb[1]);                            /* ids 4..7 differ from 6 on */
  assert_int_equal(sim_cache_chain(a, 10, BS, ca, 1), 1); /* capped by out_cap */
  assert_int_equal(sim_cache_chain(a, 3, BS, ca, 4), 0);
  assert_int_equal(sim_cache_chain(a, 10, 0, ca, 4), 0);
  /* the same block content under another prefix is another block */
  int32_t c[8];
  memcpy(c, a + 4, 4 * sizeof(int32_t));
  memcpy(c + 4, a + 4, 4 * sizeof(int32_t));
  uint64_t cc[2];
  assert_int_equal(sim_cache_chain(c, 8, BS, cc, 2), 2);
  assert_true(cc[1] != cc[0]);
  assert_true(cc[1] != ca[0] && cc[0] != ca[1]);
}

static void
test_match_and_shared_prefix(void **state)
{
  (void)state;
  struct sim_cache *c = sim_cache_new(100);
  int32_t a[40], b[40];
  uint64_t ca[10], cb[10];
  prompt(a, 40, 17, 1); /* 4 full shared blocks (16 ids), then differs */
  prompt(b, 40, 17, 2);
  size_t na = sim_cache_chain(a, 40, BS, ca, 10), nb = sim_cache_chain(b, 40, BS, cb, 10);
  assert_int_equal(sim_cache_match(c, ca, na), 0);
  sim_cache_insert(c, ca, na);
  assert_int_equal(sim_cache_blocks(c), 10);
  assert_int_equal(sim_cache_match(c, ca, na), 10);
  assert_int_equal(sim_cache_match(c, cb, nb), 4);
  sim_cache_insert(c, cb, nb);
  assert_int_equal(sim_cache_blocks(c), 16); /* the shared 4 held once */
  assert_int_equal(sim_cache_match(c, cb, nb), 10);
  sim_cache_free(c);
}

/* A reset (the engines' prefix-cache resets) empties the cache; it fills
 * again to its capacity as before. */
static void
test_clear(void **state)
{
  (void)state;
  struct sim_cache *c = sim_cache_new(12);
  int32_t a[40];
  uint64_t ca[10];
  prompt(a, 40, 17, 1);
  size_t na = sim_cache_chain(a, 40, BS, ca, 10);
  sim_cache_insert(c, ca, na);
  assert_int_equal(sim_cache_match(c, ca, na), 10);
  sim_cache_clear(c);
  assert_int_equal(sim_cache_blocks(c), 0);
  assert_int_equal(sim_cache_match(c, ca, na), 0);
  sim_cache_insert(c, ca, na);
  assert_int_equal(sim_cache_blocks(c), 10);
  assert_int_equal(sim_cache_match(c, ca, na), 10);
  sim_cache_free(c);
}

/* Full cache: the least recently used chain goes first, from its tail, so
 * a chain cut short keeps its head. */
static void
test_eviction_order(void **state)
{
  (void)state;
  struct sim_cache *c = sim_cache_new(8);
  int32_t a[24], b[24];
  uint64_t ca[6], cb[6];
  prompt(a, 24, 0, 1);
  prompt(b, 24, 0, 2);
  size_t na = sim_cache_chain(a, 24, BS, ca, 6), nb = sim_cache_chain(b, 24, BS, cb, 6);
  sim_cache_insert(c, ca, na);
  sim_cache_insert(c, cb, nb); /* 12 blocks into 8: a loses its last 4 */
  assert_int_equal(sim_cache_blocks(c), 8);
  assert_int_equal(sim_cache_match(c, cb, nb), 6);
  assert_int_equal(sim_cache_match(c, ca, na), 2); /* a's head stayed */
  /* a touched last: inserting a again evicts b's tail, not a's head */
  sim_cache_insert(c, ca, na);
  assert_int_equal(sim_cache_match(c, ca, na), 6);
  assert_int_equal(sim_cache_match(c, cb, nb), 2);
  /* a chain longer than the cache keeps its head */
  struct sim_cache *small = sim_cache_new(3);
  sim_cache_insert(small, ca, na);
  assert_int_equal(sim_cache_blocks(small), 3);
  assert_int_equal(sim_cache_match(small, ca, na), 3);
  sim_cache_free(small);
  sim_cache_free(c);
}

/* Churn: many random chains into a small cache; every answer is checked
 * against a plain list model (most recent first). */
struct model {
  uint64_t k[64];
  size_t n, max;
};

static bool
model_has(const struct model *m, uint64_t key, size_t *at)
{
  for (size_t i = 0; i < m->n; i++)
    if (m->k[i] == key) {
      *at = i;
      return true;
    }
  return false;
}

static void
model_front(struct model *m, uint64_t key)
{
  size_t at;
  if (model_has(m, key, &at)) {
    memmove(m->k + 1, m->k, at * sizeof(*m->k));
  } else {
    if (m->n == m->max)
      m->n--;
    memmove(m->k + 1, m->k, m->n * sizeof(*m->k));
    m->n++;
  }
  m->k[0] = key;
}

/* 0 to 2^31 - 1, as rand() */
static int
rnd(struct tb_rng *r)
{
  return (int)(tb_rng_next(r) >> 33);
}

static void
test_churn_against_model(void **state)
{
  (void)state;
  struct model m = { .max = 37 };
  struct sim_cache *c = sim_cache_new(37);
  struct tb_rng rng;
  tb_rng_seed(&rng, 7);
  for (int round = 0; round < 20000; round++) {
    int32_t ids[48];
    /* prompts from 12 families sharing heads of varying length */
    int fam = rnd(&rng) % 12, shared = (rnd(&rng) % 12) * BS;
    for (int i = 0; i < 48; i++)
      ids[i] = i < shared ? fam * 1000 + i : rnd(&rng) % 3 ? fam * 1000 + i : rnd(&rng);
    uint64_t ch[12];
    size_t n = sim_cache_chain(ids, (size_t)(rnd(&rng) % 49), BS, ch, 12);
    size_t want = 0, at;
    while (want < n && model_has(&m, ch[want], &at))
      want++;
    if (rnd(&rng) % 2) {
      assert_int_equal(sim_cache_match(c, ch, n), want);
      for (size_t i = want; i-- > 0;)
        model_front(&m, ch[i]);
    } else {
      sim_cache_insert(c, ch, n);
      for (size_t i = n > m.max ? m.max : n; i-- > 0;)
        model_front(&m, ch[i]);
    }
    assert_int_equal(sim_cache_blocks(c), (int64_t)m.n);
  }
  sim_cache_free(c);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_chain),
    cmocka_unit_test(test_match_and_shared_prefix),
    cmocka_unit_test(test_clear),
    cmocka_unit_test(test_eviction_order),
    cmocka_unit_test(test_churn_against_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
