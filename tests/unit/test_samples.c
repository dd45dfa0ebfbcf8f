/* Unit tests: tb_samples, a shard's samples of a cell and their exact merge
 * (issue 24).
 *
 *  - identity: random samples (seeded xoshiro via tb_arrival's generator
 *    is not needed: a local splitmix64) dealt at random to N shards, each
 *    shard encoded and decoded, the decoded shards merged: every quantile
 *    of every series, at 201 points of q, equals bit for bit the quantile
 *    of all samples held in one place; and the merged cell document equals
 *    member for member the one-place cell's;
 *  - the additive figures add, the slices add element-wise, and the
 *    batch-means SE is that of the summed series (issue 14, by hand);
 *  - an average of shard percentiles is not the union's (the reason this
 *    module exists: a case where it is far off);
 *  - encoding: round trip of extremes, compactness of a sorted series, and
 *    every malformed blob (truncations at every length, a bad magic, an
 *    over-long varint, a count over the bytes left, trailing bytes, a
 *    negative running value) refused with a reason;
 *  - shards on different timelines are refused, into unchanged;
 *  - a rate cell's section (issue 24, part 1): round trip, counters add
 *    (the two instants as their maximum), series and turns merge by number,
 *    a rate shard beside a decode one refused, a bad section refused; the
 *    union's requests in flight and inter-start gaps by hand;
 *  - the server's own timings (issue 34, item 5): a shard with them is
 *    "TBS2", round trip exact (negative TTFT-minus-prompt too), the merged
 *    cell's server_timings equal those of one place holding every request,
 *    a shard without them still "TBS1" byte for byte, a bad source or
 *    count refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_stats.h"
#include "result/tb_samples.h"
#include "result/tb_srvtime.h"

static uint64_t
next(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* a latency-like value in us: mostly near base, a long tail */
static int64_t
draw(uint64_t *seed, int64_t base)
{
  uint64_t r = next(seed);
  int64_t v = base + (int64_t)(r % (uint64_t)base);
  if ((r >> 40) % 50 == 0)
    v *= 1 + (int64_t)((r >> 20) % 40);
  return v;
}

#define NSLICES 20

static void
fill_one(struct tb_samples *whole, struct tb_samples *shards, int nshards, uint64_t *seed,
         size_t nreq)
{
  static const int64_t base[TB_SAMPLES_NSERIES] = { 80000, 12000, 900000, 11000 };
  int64_t slices[8][NSLICES] = { { 0 } };
  int64_t all[NSLICES] = { 0 };
  for (size_t i = 0; i < nreq; i++) {
    int k = (int)(next(seed) % (uint64_t)nshards);
    for (int s = 0; s < TB_SAMPLES_NSERIES; s++) {
      int reps = s == TB_SAMPLES_GAP ? 1 + (int)(next(seed) % 30) : 1;
      for (int r = 0; r < reps; r++) {
        int64_t v = draw(seed, base[s]);
        tb_samples_add(whole, (enum tb_samples_series)s, v);
        tb_samples_add(&shards[k], (enum tb_samples_series)s, v);
      }
    }
    int sl = (int)(next(seed) % NSLICES);
    int64_t toks = 1 + (int64_t)(next(seed) % 500);
    slices[k][sl] += toks;
    all[sl] += toks;
    shards[k].tokens += toks;
    whole->tokens += toks;
    shards[k].completed++;
    whole->completed++;
    shards[k].started++;
    whole->started++;
    if (next(seed) % 3 == 0) {
      shards[k].good++;
      whole->good++;
    }
  }
  for (int k = 0; k < nshards; k++) {
    shards[k].streams = 8;
    shards[k].resolution = 8;
    assert_true(tb_samples_set_slices(&shards[k], 500000, slices[k], NSLICES));
  }
  whole->streams = 8 * nshards;
  whole->resolution = 8 * nshards;
  assert_true(tb_samples_set_slices(whole, 500000, all, NSLICES));
}

/* encode, decode and merge shards into *merged */
static void
through_the_wire(struct tb_samples *shards, int nshards, struct tb_samples *merged)
{
  char err[200];
  tb_samples_init(merged);
  for (int k = 0; k < nshards; k++) {
    unsigned char *buf;
    size_t len;
    tb_samples_encode(&shards[k], &buf, &len);
    struct tb_samples back;
    if (!tb_samples_decode(buf, len, &back, err, sizeof err))
      fail_msg("%s", err);
    assert_true(tb_samples_merge(merged, &back, err, sizeof err));
    tb_samples_free(&back);
    free(buf);
  }
}

static void
test_union_is_identical_to_one_place(void **state)
{
  (void)state;
  uint64_t seed = 24;
  for (int round = 0; round < 12; round++) {
    int nshards = 1 + round % 8;
    size_t nreq = 1 + (size_t)(next(&seed) % 3000);
    struct tb_samples whole, shards[8], merged;
    tb_samples_init(&whole);
    for (int k = 0; k < 8; k++)
      tb_samples_init(&shards[k]);
    fill_one(&whole, shards, nshards, &seed, nreq);
    through_the_wire(shards, nshards, &merged);
    for (int s = 0; s < TB_SAMPLES_NSERIES; s++) {
      assert_int_equal(merged.s[s].n, whole.s[s].n);
      for (int i = 0; i <= 200; i++) {
        double q = i / 200.0;
        double a = tb_samples_quantile(&merged, (enum tb_samples_series)s, q);
        double b = tb_samples_quantile(&whole, (enum tb_samples_series)s, q);
        assert_memory_equal(&a, &b, sizeof a); /* bit for bit */
      }
    }
    assert_int_equal(merged.tokens, whole.tokens);
    assert_int_equal(merged.completed, whole.completed);
    assert_int_equal(merged.started, whole.started);
    assert_int_equal(merged.good, whole.good);
    assert_int_equal(merged.streams, whole.streams);
    assert_int_equal(merged.nslices, NSLICES);
    for (size_t i = 0; i < NSLICES; i++)
      assert_int_equal(merged.slices[i], whole.slices[i]);
    /* the cell documents: member for member */
    char err[200];
    json_t *c1 = json_object(), *c2 = json_object();
    assert_true(tb_samples_cell(c1, &merged, NULL, err, sizeof err));
    assert_true(tb_samples_cell(c2, &whole, NULL, err, sizeof err));
    /* the samples' arrays keep each's arrival order (shard by shard in the
     * merge); everything else is equal */
    const char *order[] = { "ttft_ms", "tbt_ms" };
    for (int i = 0; i < 2; i++) {
      json_object_del(json_object_get(c1, "samples"), order[i]);
      json_object_del(json_object_get(c2, "samples"), order[i]);
    }
    assert_true(json_equal(c1, c2));
    assert_non_null(json_object_get(c1, "e2e_ms"));
    assert_non_null(json_object_get(c1, "itl_ms"));
    assert_int_equal(json_integer_value(json_object_get(c1, "output_tokens")), whole.tokens);
    json_decref(c1);
    json_decref(c2);
    tb_samples_free(&whole);
    tb_samples_free(&merged);
    for (int k = 0; k < 8; k++)
      tb_samples_free(&shards[k]);
  }
}

/* Two shards, one fast (100 x 10 ms) and one slow (10 x 1000 ms): the
 * mean of their p50s is 505 ms, the union's p50 is 10 ms. */
static void
test_average_of_percentiles_is_not_the_union(void **state)
{
  (void)state;
  struct tb_samples a, b, m;
  tb_samples_init(&a);
  tb_samples_init(&b);
  tb_samples_init(&m);
  for (int i = 0; i < 100; i++)
    tb_samples_add(&a, TB_SAMPLES_TTFT, 10000);
  for (int i = 0; i < 10; i++)
    tb_samples_add(&b, TB_SAMPLES_TTFT, 1000000);
  double avg = (tb_samples_quantile(&a, TB_SAMPLES_TTFT, 0.5) +
                tb_samples_quantile(&b, TB_SAMPLES_TTFT, 0.5)) /
               2;
  char err[100];
  assert_true(tb_samples_merge(&m, &a, err, sizeof err));
  assert_true(tb_samples_merge(&m, &b, err, sizeof err));
  assert_true(avg == 505000.0);
  assert_true(tb_samples_quantile(&m, TB_SAMPLES_TTFT, 0.5) == 10000.0);
  /* p95 of the union: h = 109 x 0.95 = 103.55, into the slow shard */
  assert_true(tb_samples_quantile(&m, TB_SAMPLES_TTFT, 0.95) == 1000000.0);
  tb_samples_free(&a);
  tb_samples_free(&b);
  tb_samples_free(&m);
}

/* Batch means over the merged timeline, by hand: shard A gives 1,1,1,1,
 * 3,3,3,3 x2 tokens per 1 s slice and B the same; the sum is 2,...,6,...
 * (16 slices): batches of 4 with means 2,6,2,6, SE stdev([2,6,2,6]) / 2 =
 * 1.1547005 (tb_stats' test, doubled); the count's resolution (2 x 2 = 4
 * tokens over 16 s: 0.125 tok/s) adds in quadrature: sqrt(1.1547005^2 +
 * 0.125^2) = 1.1614466. */
static void
test_batch_means_over_the_merged_timeline(void **state)
{
  (void)state;
  int64_t x[16] = { 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3 };
  struct tb_samples a, b, m;
  tb_samples_init(&a);
  tb_samples_init(&b);
  tb_samples_init(&m);
  assert_true(tb_samples_set_slices(&a, 1000000, x, 16));
  assert_true(tb_samples_set_slices(&b, 1000000, x, 16));
  a.tokens = b.tokens = 32;
  a.streams = b.streams = 2;
  a.resolution = b.resolution = 2;
  for (int i = 0; i < 8; i++) {
    tb_samples_add(&a, TB_SAMPLES_TTFT, 1000 + i);
    tb_samples_add(&b, TB_SAMPLES_TTFT, 2000 + i);
  }
  char err[100];
  a.active_milli = b.active_milli = 2000;
  a.reads = 10;
  a.stamped_reads = 9;
  b.reads = 10;
  b.stamped_reads = 10;
  b.chunked = 1;
  assert_true(tb_samples_merge(&m, &a, err, sizeof err));
  assert_true(tb_samples_merge(&m, &b, err, sizeof err));
  json_t *cell = json_object();
  assert_true(tb_samples_cell(cell, &m, "no /metrics", err, sizeof err));
  assert_true(fabs(json_real_value(json_object_get(cell, "avg_active")) - 4.0) < 1e-12);
  assert_true(fabs(json_real_value(json_object_get(cell, "kernel_stamped")) - 0.95) < 1e-12);
  assert_string_equal(json_string_value(json_object_get(cell, "token_source")), "chunks");
  assert_string_equal(json_string_value(json_object_get(cell, "readiness")), "client");
  assert_true(fabs(json_real_value(json_object_get(cell, "total_tps")) - 4.0) < 1e-12);
  assert_true(fabs(json_real_value(json_object_get(cell, "total_tps_se")) - 1.1614466) < 1e-6);
  assert_true(fabs(json_real_value(json_object_get(cell, "measured_s")) - 16.0) < 1e-12);
  assert_true(fabs(json_real_value(json_object_get(cell, "per_request_tps")) - 1.0) < 1e-12);
  json_decref(cell);
  tb_samples_free(&a);
  tb_samples_free(&b);
  tb_samples_free(&m);
}

static void
test_encoding_round_trip_and_size(void **state)
{
  (void)state;
  struct tb_samples m, back;
  tb_samples_init(&m);
  int64_t ext[] = { 0, INT64_MAX, 0, 1, INT64_MAX - 1, 5 };
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
    tb_samples_add(&m, TB_SAMPLES_E2E, ext[i]);
  tb_samples_add(&m, TB_SAMPLES_TTFT, -7); /* clamped to 0 */
  m.tokens = INT64_MAX;
  unsigned char *buf;
  size_t len;
  char err[200];
  tb_samples_encode(&m, &buf, &len);
  assert_true(tb_samples_decode(buf, len, &back, err, sizeof err));
  assert_int_equal(back.s[TB_SAMPLES_E2E].n, 6);
  for (size_t i = 0; i < 6; i++) /* order kept */
    assert_true(back.s[TB_SAMPLES_E2E].v[i] == ext[i]);
  assert_true(back.s[TB_SAMPLES_TTFT].v[0] == 0);
  assert_true(back.tokens == INT64_MAX);
  assert_int_equal(back.nslices, 0);
  tb_samples_free(&back);
  free(buf);
  tb_samples_free(&m);
  /* 100,000 sorted token gaps around 11 ms: under 2 bytes a value */
  uint64_t seed = 7;
  struct tb_stats s = { 0 };
  for (int i = 0; i < 100000; i++)
    tb_stats_add(&s, draw(&seed, 11000));
  (void)tb_stats_quantile(&s, 0.5); /* sorts */
  tb_samples_init(&m);
  for (size_t i = 0; i < s.n; i++)
    tb_samples_add(&m, TB_SAMPLES_GAP, s.v[i]);
  tb_samples_encode(&m, &buf, &len);
  assert_true(len < 2 * 100000);
  assert_true(tb_samples_decode(buf, len, &back, err, sizeof err));
  assert_memory_equal(back.s[TB_SAMPLES_GAP].v, s.v, s.n * sizeof *s.v);
  tb_samples_free(&back);
  free(buf);
  tb_samples_free(&m);
  tb_stats_free(&s);
}

static void
expect_refused(const unsigned char *buf, size_t len, const char *why)
{
  struct tb_samples m;
  char err[200] = "";
  assert_false(tb_samples_decode(buf, len, &m, err, sizeof err));
  if (why == NULL ? err[0] == '\0' : strstr(err, why) == NULL)
    fail_msg("expected '%s', got '%s'", why, err);
  tb_samples_free(&m);
}

static void
test_malformed_blobs_are_refused(void **state)
{
  (void)state;
  struct tb_samples m;
  tb_samples_init(&m);
  int64_t sl[3] = { 5, 6, 7 };
  assert_true(tb_samples_set_slices(&m, 1000, sl, 3));
  for (int i = 0; i < 50; i++)
    tb_samples_add(&m, TB_SAMPLES_TPOT, 300 * i);
  unsigned char *buf;
  size_t len;
  tb_samples_encode(&m, &buf, &len);
  tb_samples_free(&m);
  for (size_t cut = 0; cut < len; cut++)                     /* every truncation */
    expect_refused(buf, cut, cut < 4 ? "not a TBS1" : NULL); /* truncated, or a
                                                            * count beyond */
  unsigned char *more = malloc(len + 1);
  memcpy(more, buf, len);
  more[len] = 0;
  expect_refused(more, len + 1, "trailing bytes");
  free(more);
  buf[0] = 'X';
  expect_refused(buf, len, "not a TBS1");
  free(buf);
  /* an 11-byte varint */
  unsigned char longv[] = { 'T',  'B',  'S',  '1',  0xff, 0xff, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
  expect_refused(longv, sizeof longv, "varint over 64 bits");
  /* 127 slices promised, 2 bytes left */
  unsigned char many[] = { 'T', 'B', 'S', '1', 0x01, 0x7f, 0x01, 0x01 };
  expect_refused(many, sizeof many, "beyond the bytes left");
  /* slices of no width */
  unsigned char nowidth[] = { 'T', 'B', 'S', '1', 0x00, 0x01, 0x01, 0, 0, 0, 0, 0,
                              0,   0,   0,   0,   0,    0,    0,    0, 0, 0, 0, 0 };
  expect_refused(nowidth, sizeof nowidth, "no width");
  /* a series whose running value goes below 0: slice width and count 0,
   * the ten counters 0, then one value, delta -1 (zz 1) */
  unsigned char neg[] = { 'T', 'B', 'S', '1', 0, 0,    0,    0, 0, 0, 0,
                          0,   0,   0,   0,   0, 0x01, 0x01, 0, 0, 0 };
  expect_refused(neg, sizeof neg, "out of range");
}

static void
test_different_timelines_are_refused(void **state)
{
  (void)state;
  struct tb_samples a, b, m;
  tb_samples_init(&a);
  tb_samples_init(&b);
  tb_samples_init(&m);
  int64_t x[4] = { 1, 2, 3, 4 };
  assert_true(tb_samples_set_slices(&a, 1000, x, 4));
  assert_true(tb_samples_set_slices(&b, 1000, x, 3));
  assert_false(tb_samples_set_slices(&b, 0, x, 3));
  char err[200];
  assert_true(tb_samples_merge(&m, &a, err, sizeof err));
  assert_false(tb_samples_merge(&m, &b, err, sizeof err));
  assert_non_null(strstr(err, "different timelines"));
  assert_int_equal(m.nslices, 4);
  assert_int_equal(m.slices[3], 4);
  assert_true(tb_samples_set_slices(&b, 2000, x, 4));
  assert_false(tb_samples_merge(&m, &b, err, sizeof err));
  /* no window: no cell */
  struct tb_samples e;
  tb_samples_init(&e);
  json_t *cell = json_object();
  assert_false(tb_samples_cell(cell, &e, NULL, err, sizeof err));
  assert_non_null(strstr(err, "no window"));
  json_decref(cell);
  tb_samples_free(&a);
  tb_samples_free(&b);
  tb_samples_free(&m);
}

/* Start skews (ms) 0.4, -1.1, 0.9 over a 30 s window: |skew| p50 0.9, max
 * 1.1, limit 300 ms: valid.  Over a 0.1 s window the limit is the 2 ms
 * floor; a shard 2.5 ms late fails the cell with the reason. */
static void
test_shards_skew_and_where(void **state)
{
  (void)state;
  struct tb_samples_shard sh[3] = {
    { "w1", "host-a", 400, 150, -2500, true },
    { "w2", "host-b", -1100, 90, 0, false },
    { "w3", "host-a", 900, 300, 0, false },
  };
  json_t *cell = json_pack("{s:s}", "status", "valid");
  assert_true(tb_samples_cell_shards(cell, sh, 3, 30));
  json_t *o = json_object_get(cell, "shards");
  assert_int_equal(json_integer_value(json_object_get(o, "count")), 3);
  assert_true(fabs(json_real_value(json_object_get(o, "skew_p50_ms")) - 0.9) < 1e-12);
  assert_true(fabs(json_real_value(json_object_get(o, "skew_max_ms")) - 1.1) < 1e-12);
  assert_true(fabs(json_real_value(json_object_get(o, "clock_uncertainty_max_ms")) - 0.3) < 1e-12);
  assert_true(fabs(json_real_value(json_object_get(o, "skew_limit_ms")) - 300) < 1e-12);
  json_t *w = json_array_get(json_object_get(o, "where"), 1);
  assert_string_equal(json_string_value(json_object_get(w, "worker")), "w2");
  assert_string_equal(json_string_value(json_object_get(w, "host")), "host-b");
  assert_true(fabs(json_real_value(json_object_get(w, "skew_ms")) + 1.1) < 1e-12);
  assert_null(json_object_get(w, "clock_offset_ms")); /* not measured: absent */
  w = json_array_get(json_object_get(o, "where"), 0); /* issue 35: its wall-clock offset */
  assert_true(fabs(json_real_value(json_object_get(w, "clock_offset_ms")) + 2.5) < 1e-12);
  assert_string_equal(json_string_value(json_object_get(cell, "status")), "valid");
  json_decref(cell);
  sh[2].skew_us = 2500;
  cell = json_pack("{s:s}", "status", "valid");
  assert_false(tb_samples_cell_shards(cell, sh, 3, 0.1));
  assert_string_equal(json_string_value(json_object_get(cell, "status")), "error");
  assert_non_null(
    strstr(json_string_value(json_object_get(cell, "reason")), "start skew 2.500 ms"));
  json_decref(cell);
  cell = json_object();
  assert_true(tb_samples_cell_shards(cell, sh, 0, 30));
  assert_null(json_object_get(cell, "shards"));
  json_decref(cell);
}

/* a rate shard: its counters, series and turns from seed */
static void
rate_shard(struct tb_samples *m, uint64_t *seed, size_t nturns)
{
  tb_samples_init(m);
  int n = 5 + (int)(next(seed) % 20);
  for (int i = 0; i < n; i++) {
    int64_t st = (int64_t)(next(seed) % 4000000);
    tb_samples_add(m, TB_SAMPLES_TTFT, draw(seed, 20000));
    tb_samples_radd(m, TB_SAMPLES_LAG, (int64_t)(next(seed) % 900));
    tb_samples_radd(m, TB_SAMPLES_START, st);
    tb_samples_radd(m, TB_SAMPLES_END, st + draw(seed, 200000));
    tb_samples_radd(m, TB_SAMPLES_SCHED, st - 100);
    tb_samples_radd(m, TB_SAMPLES_ROK, 1);
    tb_samples_radd(m, TB_SAMPLES_RTTFT, 1 + draw(seed, 20000));
    tb_samples_radd(m, TB_SAMPLES_RTPOT, 0);
    tb_samples_radd(m, TB_SAMPLES_RTOKENS, 100);
  }
  m->tokens = 100 * n;
  m->completed = n;
  m->rate.scheduled = n + 1;
  m->rate.errors = 1;
  m->rate.arrivals_us = 4000000;
  m->rate.last_end_us = 4000000 + (int64_t)(next(seed) % 500000);
  for (size_t t = 0; t < nturns; t++) {
    struct tb_samples_turn *tn = tb_samples_turn(m, t);
    tn->sent = 3;
    tn->ok = 2;
    tn->pr_sum = 700 * (int64_t)(t + 1);
    tb_stats_add(&tn->ttft, draw(seed, 9000));
    tb_stats_add(&tn->ttft, draw(seed, 9000));
  }
}

static void
test_rate_section_round_trip_and_merge(void **state)
{
  (void)state;
  uint64_t seed = 77;
  struct tb_samples sh[3], merged;
  tb_samples_init(&merged);
  int64_t last = 0, n_all = 0;
  for (int k = 0; k < 3; k++) {
    struct tb_samples one;
    rate_shard(&one, &seed, (size_t)k + 1); /* 1, 2 and 3 turns */
    if (k > 0) /* the first shard has none: the merge keeps the second's */
      snprintf(one.rate.first_error, sizeof one.rate.first_error, "HTTP 50%d", k);
    unsigned char *buf;
    size_t len;
    tb_samples_encode(&one, &buf, &len);
    char err[200] = "";
    assert_true(tb_samples_decode(buf, len, &sh[k], err, sizeof err));
    assert_true(sh[k].rate.on);
    assert_int_equal(sh[k].rate.nturns, (size_t)k + 1);
    for (int r = 0; r < TB_SAMPLES_NRSERIES; r++) {
      assert_int_equal(sh[k].rate.s[r].n, one.rate.s[r].n);
      assert_memory_equal(sh[k].rate.s[r].v, one.rate.s[r].v,
                          one.rate.s[r].n * sizeof *one.rate.s[r].v);
    }
    assert_true(sh[k].rate.last_end_us == one.rate.last_end_us);
    assert_string_equal(sh[k].rate.first_error, one.rate.first_error);
    /* a NUL in the first error (its last byte: it is the blob's last) */
    if (k > 0) {
      buf[len - 1] = 0;
      struct tb_samples t3;
      assert_false(tb_samples_decode(buf, len, &t3, err, sizeof err));
      assert_non_null(strstr(err, "first error out of range"));
      tb_samples_free(&t3);
    }
    /* a truncated rate section, and one of another counter count */
    for (size_t cut = len - 3; cut < len; cut++) {
      struct tb_samples t2;
      assert_false(tb_samples_decode(buf, cut, &t2, err, sizeof err));
      tb_samples_free(&t2);
    }
    tb_samples_free(&one);
    free(buf);
    assert_true(tb_samples_merge(&merged, &sh[k], err, sizeof err));
    last = sh[k].rate.last_end_us > last ? sh[k].rate.last_end_us : last;
    n_all += sh[k].completed;
  }
  assert_true(merged.rate.on);
  assert_true(merged.completed == n_all);
  assert_true(merged.rate.scheduled == n_all + 3);
  assert_true(merged.rate.errors == 3);
  assert_true(merged.rate.arrivals_us == 4000000); /* the maximum, not the sum */
  assert_true(merged.rate.last_end_us == last);
  assert_int_equal(merged.rate.nturns, 3);
  assert_true(merged.rate.turns[0].sent == 9 && merged.rate.turns[0].ok == 6);
  assert_true(merged.rate.turns[2].sent == 3 && merged.rate.turns[2].ttft.n == 2);
  assert_true(merged.rate.turns[1].pr_sum == 2 * 1400);
  assert_string_equal(merged.rate.first_error, "HTTP 501");
  for (int r = 0; r < TB_SAMPLES_NRSERIES; r++)
    assert_int_equal(merged.rate.s[r].n, (size_t)n_all);
  /* a decode shard beside rate shards: refused, with why */
  struct tb_samples dec;
  tb_samples_init(&dec);
  int64_t sl[2] = { 5, 6 };
  assert_true(tb_samples_set_slices(&dec, 1000, sl, 2));
  char err[200] = "";
  assert_false(tb_samples_merge(&merged, &dec, err, sizeof err));
  assert_non_null(strstr(err, "a decode cell's shard beside a rate cell's"));
  tb_samples_free(&dec);
  for (int k = 0; k < 3; k++)
    tb_samples_free(&sh[k]);
  tb_samples_free(&merged);
  /* after a decode document, bytes that are no rate section */
  unsigned char junk[] = { 'T', 'B', 'S', '1', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                           0,   0,   0,   0,   0, 0, 7, 1, 2, 3, 4, 5, 6, 7 };
  struct tb_samples bad;
  assert_false(tb_samples_decode(junk, sizeof junk, &bad, err, sizeof err));
  assert_non_null(strstr(err, "not a rate cell's section"));
  tb_samples_free(&bad);
}

static void
test_in_flight_and_gaps_of_the_union(void **state)
{
  (void)state;
  /* shard A: [0, 10) and [10, 20); shard B: [5, 15); us */
  struct tb_samples a, b, m;
  tb_samples_init(&a);
  tb_samples_init(&b);
  tb_samples_init(&m);
  const int64_t sa[] = { 0, 10 }, ea[] = { 10, 20 };
  for (int i = 0; i < 2; i++) {
    tb_samples_radd(&a, TB_SAMPLES_START, sa[i]);
    tb_samples_radd(&a, TB_SAMPLES_END, ea[i]);
  }
  tb_samples_radd(&b, TB_SAMPLES_START, 5);
  tb_samples_radd(&b, TB_SAMPLES_END, 15);
  char err[100];
  assert_true(tb_samples_merge(&m, &a, err, sizeof err));
  assert_true(tb_samples_merge(&m, &b, err, sizeof err));
  unsigned max;
  double area;
  tb_samples_in_flight(&m, &max, &area);
  /* at 10 one ends as another starts: 2 at once, never 3 */
  assert_int_equal(max, 2);
  assert_true(fabs(area - 30 * 1e3) < 1e-6); /* 30 request-us, in ns */
  double sum, sum2;
  uint64_t n;
  tb_samples_start_gaps(&m, &sum, &sum2, &n);
  /* starts 0, 5, 10: gaps 5 and 5 us */
  assert_true(n == 2 && fabs(sum - 10e3) < 1e-6 && fabs(sum2 - 2 * 25e6) < 1e-3);
  tb_samples_free(&a);
  tb_samples_free(&b);
  tb_samples_free(&m);
}

/* One llama.cpp request of the test: its timings and tokbench's figures. */
static void
srv_request(struct tb_srvtime *t, uint64_t *seed, int i)
{
  struct tb_srvtime_req q = {
    .cache_n = (double)(i % 3),
    .prompt_n = 100.0 + (double)(i % 50),
    .prompt_ms = 5.0 + (double)(next(seed) % 4000) / 100.0,
    .predicted_n = 2.0 + (double)(i % 30),
    .predicted_per_token_ms = 0.5 + (double)(next(seed) % 3000) / 1000.0,
    .tokens = 2 + (i % 30) - (i % 17 == 0), /* now and then one token off */
  };
  q.predicted_ms = (q.predicted_n - 1) * q.predicted_per_token_ms;
  q.tpot_ms = q.predicted_per_token_ms * (1 + (double)(i % 7 - 3) / 1000.0);
  /* TTFT a little before the server's prompt time now and then */
  q.ttft_ms = q.prompt_ms + (double)((int64_t)(next(seed) % 900) - 100) / 100.0;
  t->source = TB_SRVTIME_LLAMACPP;
  tb_srvtime_add(t, &q);
}

static void
test_server_timings_merge_as_one_place(void **state)
{
  (void)state;
  uint64_t seed = 7;
  struct tb_samples sh[3], m;
  struct tb_srvtime whole;
  memset(&whole, 0, sizeof whole);
  tb_samples_init(&m);
  int64_t tok[NSLICES];
  for (int k = 0; k < NSLICES; k++)
    tok[k] = 10;
  for (int k = 0; k < 3; k++) {
    tb_samples_init(&sh[k]);
    assert_true(tb_samples_set_slices(&sh[k], 100000, tok, NSLICES));
    tb_samples_add(&sh[k], TB_SAMPLES_TTFT, 1000 + k);
    tb_samples_add(&sh[k], TB_SAMPLES_TPOT, 900);
  }
  /* the same draws (seed2 in step with seed) into a shard and the one place */
  uint64_t seed2 = seed;
  for (int i = 0; i < 600; i++) {
    srv_request(&sh[(i * 7 + i / 5) % 3].srv, &seed, i);
    srv_request(&whole, &seed2, i);
  }
  char err[200];
  for (int k = 0; k < 3; k++) {
    unsigned char *blob;
    size_t len;
    tb_samples_encode(&sh[k], &blob, &len);
    assert_memory_equal(blob, "TBS2", 4);
    struct tb_samples d;
    assert_true(tb_samples_decode(blob, len, &d, err, sizeof err));
    assert_int_equal(d.srv.requests, sh[k].srv.requests);
    assert_int_equal(d.srv.tokens_equal, sh[k].srv.tokens_equal);
    assert_int_equal(d.srv.gap_us.n, sh[k].srv.gap_us.n);
    for (size_t i = 0; i < d.srv.gap_us.n; i++)
      assert_true(d.srv.gap_us.v[i] == sh[k].srv.gap_us.v[i]);
    assert_true(tb_samples_merge(&m, &d, err, sizeof err));
    tb_samples_free(&d);
    free(blob);
  }
  bool negative = false;
  for (size_t i = 0; i < whole.gap_us.n; i++)
    negative = negative || whole.gap_us.v[i] < 0;
  assert_true(negative); /* the signed series was exercised */
  json_t *cell = json_object();
  assert_true(tb_samples_cell(cell, &m, NULL, err, sizeof err));
  json_t *want = tb_srvtime_json(&whole);
  assert_non_null(want);
  assert_true(json_equal(json_object_get(cell, "server_timings"), want));
  assert_int_equal(json_integer_value(json_object_get(want, "requests")), 600);
  json_decref(want);
  json_decref(cell);
  tb_srvtime_free(&whole);
  for (int k = 0; k < 3; k++)
    tb_samples_free(&sh[k]);
  tb_samples_free(&m);
}

static void
test_server_timings_section_bad_and_absent(void **state)
{
  (void)state;
  struct tb_samples a;
  tb_samples_init(&a);
  tb_samples_add(&a, TB_SAMPLES_TTFT, 5);
  unsigned char *blob;
  size_t len;
  tb_samples_encode(&a, &blob, &len); /* no timings: TBS1 as before */
  assert_memory_equal(blob, "TBS1", 4);
  free(blob);
  uint64_t seed = 3;
  srv_request(&a.srv, &seed, 1);
  tb_samples_encode(&a, &blob, &len);
  assert_memory_equal(blob, "TBS2", 4);
  char err[200];
  struct tb_samples d;
  /* byte 4 is the source: 1 is llama.cpp, 2 is nobody's */
  blob[4] = 2;
  assert_false(tb_samples_decode(blob, len, &d, err, sizeof err));
  assert_non_null(strstr(err, "source"));
  tb_samples_free(&d);
  blob[4] = 1;
  blob[5] = 0; /* no requests */
  assert_false(tb_samples_decode(blob, len, &d, err, sizeof err));
  assert_non_null(strstr(err, "counts"));
  tb_samples_free(&d);
  blob[5] = 1;
  for (size_t cut = 4; cut < len; cut++) { /* every truncation */
    assert_false(tb_samples_decode(blob, cut, &d, err, sizeof err));
    tb_samples_free(&d);
  }
  assert_true(tb_samples_decode(blob, len, &d, err, sizeof err));
  tb_samples_free(&d);
  free(blob);
  tb_samples_free(&a);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_union_is_identical_to_one_place),
    cmocka_unit_test(test_average_of_percentiles_is_not_the_union),
    cmocka_unit_test(test_batch_means_over_the_merged_timeline),
    cmocka_unit_test(test_encoding_round_trip_and_size),
    cmocka_unit_test(test_malformed_blobs_are_refused),
    cmocka_unit_test(test_different_timelines_are_refused),
    cmocka_unit_test(test_shards_skew_and_where),
    cmocka_unit_test(test_rate_section_round_trip_and_merge),
    cmocka_unit_test(test_in_flight_and_gaps_of_the_union),
    cmocka_unit_test(test_server_timings_merge_as_one_place),
    cmocka_unit_test(test_server_timings_section_bad_and_absent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
