/* Unit tests for tb_steady: the steady-state window of a cell, held to
 * cases computed by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "result/tb_steady.h"

#define S 1000000 /* a second in microseconds */

static struct tb_steady_req
rq(double start_s, double end_s, bool ok, double ttft_ms, double tpot_ms, int64_t tokens)
{
  return (struct tb_steady_req){ .start_us = (int64_t)llround(start_s * S),
                                 .end_us = (int64_t)llround(end_s * S),
                                 .ok = ok,
                                 .ttft_ms = ttft_ms,
                                 .tpot_ms = tpot_ms,
                                 .tokens = tokens };
}

static void
test_empty(void **state)
{
  (void)state;
  struct tb_steady w;
  tb_steady_compute(NULL, 0, NULL, 0, 0, &w);
  assert_false(w.found);
  assert_string_equal(w.reason, "no request started");
  json_t *j = tb_steady_json(&w);
  assert_false(json_is_true(json_object_get(j, "found")));
  assert_string_equal(json_string_value(json_object_get(j, "reason")), "no request started");
  assert_null(json_object_get(j, "length_s"));
  json_decref(j);
}

static void
test_single(void **state)
{
  (void)state;
  /* one request over [0, 1 s): peak 1, the whole second; its 10 tokens
   * all fall in its decode span [0.1, 1] */
  struct tb_steady_req r[] = { rq(0, 1, true, 100, 10, 10) };
  struct tb_steady w;
  tb_steady_compute(r, 1, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 1);
  assert_int_equal(w.start_us, 0);
  assert_int_equal(w.end_us, S);
  assert_int_equal(w.requests, 1);
  assert_int_equal(w.completed, 1);
  assert_true(fabs(w.rps - 1) < 1e-9);
  assert_true(fabs(w.output_tps - 10) < 1e-9);
  assert_true(fabs(w.ttft_p50 - 100) < 1e-9 && fabs(w.ttft_p99 - 100) < 1e-9);
  assert_true(fabs(w.tpot_p50 - 10) < 1e-9);
  json_t *j = tb_steady_json(&w);
  assert_true(fabs(tb_json_num(j, "length_s") - 1) < 1e-9);
  assert_string_equal(json_string_value(json_object_get(j, "reference")), "peak");
  assert_true(fabs(tb_json_num(j, "threshold") - 0.95) < 1e-9);
  assert_true(fabs(tb_json_num(json_object_get(j, "ttft_ms"), "p99") - 100) < 1e-9);
  json_decref(j);
}

static void
test_ramp(void **state)
{
  (void)state;
  /* A [0, 10), B [2, 10), C [4, 8): in flight 1, 2, 3, 2; the peak 3 holds
   * on [4, 8) only (95% of 3 is 2.85) */
  struct tb_steady_req r[] = { rq(0, 10, true, 50, 5, 100), rq(2, 10, true, 50, 5, 100),
                               rq(4, 8, true, 50, 5, 100) };
  struct tb_steady w;
  tb_steady_compute(r, 3, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 3);
  assert_int_equal(w.start_us, 4 * S);
  assert_int_equal(w.end_us, 8 * S);
  assert_int_equal(w.requests, 1);  /* C started in it */
  assert_int_equal(w.completed, 1); /* C ended at 8, in (4, 8] */
  assert_true(fabs(w.rps - 0.25) < 1e-9);
  /* A: 100 tokens over [0.05, 10], 4 s of it inside; B over [2.05, 10]: 4 s;
   * C over [4.05, 8]: all of it */
  double want = (100 * 4 / 9.95 + 100 * 4 / 7.95 + 100) / 4;
  assert_true(fabs(w.output_tps - want) < 1e-9);
}

static void
test_ties(void **state)
{
  (void)state;
  /* back to back at 5 s: the end goes before the start, so one request is
   * in flight throughout, never two and never none */
  struct tb_steady_req r[] = { rq(0, 5, true, 10, 1, 5), rq(5, 10, true, 10, 1, 5) };
  struct tb_steady w;
  tb_steady_compute(r, 2, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 1);
  assert_int_equal(w.start_us, 0);
  assert_int_equal(w.end_us, 10 * S);
  assert_int_equal(w.completed, 2);
  /* two spans of two in flight, each 1 s long: the earlier is the window */
  struct tb_steady_req q[] = { rq(0, 6, true, 10, 1, 5), rq(1, 2, true, 10, 1, 5),
                               rq(3, 4, true, 10, 1, 5) };
  tb_steady_compute(q, 3, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 2);
  assert_int_equal(w.start_us, 1 * S);
  assert_int_equal(w.end_us, 2 * S);
  /* a request of no length is never in flight */
  struct tb_steady_req z[] = { rq(1, 1, true, 0, NAN, 0) };
  tb_steady_compute(z, 1, NULL, 0, 0, &w);
  assert_false(w.found);
  assert_int_equal(w.peak, 0);
}

static void
test_target(void **state)
{
  (void)state;
  /* a closed-loop cell of 4 users that only ever had 3 in flight never
   * reaches its steady state (95% of 4 is 3.8) */
  struct tb_steady_req r[] = { rq(0, 10, true, 50, 5, 10), rq(0, 10, true, 50, 5, 10),
                               rq(1, 9, true, 50, 5, 10) };
  struct tb_steady w;
  tb_steady_compute(r, 3, NULL, 0, 4, &w);
  assert_false(w.found);
  assert_int_equal(w.peak, 3);
  assert_true(fabs(w.threshold - 3.8) < 1e-9);
  assert_string_equal(w.reason, "requests in flight never reached 95% of the target");
  json_t *j = tb_steady_json(&w);
  assert_string_equal(json_string_value(json_object_get(j, "reference")), "target");
  assert_int_equal(json_integer_value(json_object_get(j, "target")), 4);
  json_decref(j);
  /* with a target of 3 it holds on [1, 9) */
  tb_steady_compute(r, 3, NULL, 0, 3, &w);
  assert_true(w.found);
  assert_int_equal(w.start_us, 1 * S);
  assert_int_equal(w.end_us, 9 * S);
}

static void
test_users(void **state)
{
  (void)state;
  /* a closed loop of 2 users: A busy on [0, 10), B on [1, 9); between two
   * requests of a user (A's instant handoffs, B's half-second think) no
   * request of it is in flight, but the user is: the window is [1, 9) */
  struct tb_steady_req r[] = { rq(0, 3, true, 10, 1, 5), rq(3.001, 6, true, 10, 1, 5),
                               rq(6, 10, true, 10, 1, 5), rq(1, 5, true, 20, 2, 5),
                               rq(5.5, 9, true, 30, 3, 5) };
  struct tb_steady_span users[] = { { 0, 10 * S }, { 1 * S, 9 * S } };
  struct tb_steady w;
  tb_steady_compute(r, 5, users, 2, 2, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 2);
  assert_int_equal(w.start_us, 1 * S);
  assert_int_equal(w.end_us, 9 * S);
  assert_int_equal(w.requests, 4);  /* all but A's first */
  assert_int_equal(w.completed, 4); /* all but A's last */
  assert_true(fabs(w.rps - 0.5) < 1e-9);
  /* by their requests alone the two users dip to one at A's handoff at 3
   * and B's think on [5, 5.5) (not at A's handoff at 6: an end before a
   * start): two in flight on [1, 3), [3.001, 5) and [5.5, 9), the last the
   * longest */
  tb_steady_compute(r, 5, NULL, 0, 2, &w);
  assert_true(w.found);
  assert_int_equal(w.start_us, 5500000);
  assert_int_equal(w.end_us, 9 * S);
}

static void
test_figures(void **state)
{
  (void)state;
  /* X [0, 5) with its first token at 1 s and 40 tokens (10 a second); Y
   * and Z on [2, 4): three in flight there, one elsewhere.  Z failed. */
  struct tb_steady_req r[] = {
    rq(0, 5, true, 1000, 25, 40),
    rq(2, 4, true, 100, 5, 20),
    rq(2, 4, false, NAN, NAN, 3),
  };
  struct tb_steady w;
  tb_steady_compute(r, 3, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.start_us, 2 * S);
  assert_int_equal(w.end_us, 4 * S);
  assert_int_equal(w.requests, 2);  /* Y and Z */
  assert_int_equal(w.completed, 1); /* Y; X ends after, Z failed */
  assert_true(fabs(w.rps - 0.5) < 1e-9);
  /* X: 20 of its 40 tokens in [2, 4]; Y: all 20; Z: none */
  assert_true(fabs(w.output_tps - 20) < 1e-9);
  assert_true(fabs(w.ttft_p50 - 100) < 1e-9);
  assert_true(fabs(w.tpot_p99 - 5) < 1e-9);
  /* percentiles, type 7: five requests started in the window */
  struct tb_steady_req p[6];
  p[0] = rq(0, 10, true, 1, 1, 1);
  for (int i = 0; i < 5; i++)
    p[i + 1] = rq(1, 9, true, 10.0 * (i + 1), 2.0 * (5 - i), 1);
  tb_steady_compute(p, 6, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.start_us, 1 * S);
  assert_int_equal(w.requests, 5);
  assert_true(fabs(w.ttft_p50 - 30) < 1e-9);
  assert_true(fabs(w.ttft_p99 - 49.6) < 1e-9);
  assert_true(fabs(w.tpot_p99 - 9.92) < 1e-9);
}

/* A cell's samples read back into requests: the window of the samples
 * equals the window of the requests they came from; dropped requests (no
 * start) are left out; malformed samples give none. */
static void
test_from_samples(void **state)
{
  (void)state;
  json_t *s = json_loads("{\"start_ms\":[0,2000,null,2000],\"end_ms\":[5000,4000,null,4000],"
                         "\"ttft_ms\":[1000,100,null,null],\"tpot_ms\":[25,5,null,null],"
                         "\"output_tokens\":[40,20,0,3]}",
                         0, NULL);
  assert_non_null(s);
  struct tb_steady_req *r;
  size_t n = tb_steady_reqs_from_samples(s, &r);
  assert_int_equal(n, 3);
  assert_int_equal(r[1].start_us, 2 * S);
  assert_true(r[0].ok && r[1].ok && !r[2].ok);
  struct tb_steady w;
  tb_steady_compute(r, n, NULL, 0, 0, &w);
  /* the requests of test_figures: the same window and figures */
  assert_true(w.found);
  assert_int_equal(w.start_us, 2 * S);
  assert_int_equal(w.end_us, 4 * S);
  assert_int_equal(w.requests, 2);
  assert_true(fabs(w.output_tps - 20) < 1e-9);
  free(r);
  json_array_append_new(json_object_get(s, "end_ms"), json_integer(1)); /* lengths differ */
  assert_int_equal(tb_steady_reqs_from_samples(s, &r), 0);
  assert_null(r);
  assert_int_equal(tb_steady_reqs_from_samples(NULL, &r), 0);
  json_decref(s);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_empty),   cmocka_unit_test(test_single),
    cmocka_unit_test(test_ramp),    cmocka_unit_test(test_ties),
    cmocka_unit_test(test_target),  cmocka_unit_test(test_users),
    cmocka_unit_test(test_figures), cmocka_unit_test(test_from_samples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
