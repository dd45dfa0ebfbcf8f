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
  /* one request over [0, 1 s): open loop, one arrival offers no span, so
   * no level and no window */
  struct tb_steady_req r[] = { rq(0, 1, true, 100, 10, 10) };
  struct tb_steady w;
  tb_steady_compute(r, 1, NULL, 0, 0, &w);
  assert_false(w.found);
  assert_int_equal(w.peak, 1);
  assert_string_equal(w.reason, "fewer than 2 requests arrived");
  assert_true(isnan(w.level) && isnan(w.threshold));
  json_t *j = tb_steady_json(&w);
  assert_string_equal(json_string_value(json_object_get(j, "reference")), "level");
  assert_true(json_is_null(json_object_get(j, "level")));
  assert_true(json_is_null(json_object_get(j, "threshold")));
  assert_null(json_object_get(j, "start_s"));
  json_decref(j);
  /* closed loop, one user: the whole second; its 10 tokens all fall in its
   * decode span [0.1, 1] */
  tb_steady_compute(r, 1, NULL, 0, 1, &w);
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
  j = tb_steady_json(&w);
  assert_true(fabs(tb_json_num(j, "length_s") - 1) < 1e-9);
  assert_string_equal(json_string_value(json_object_get(j, "reference")), "target");
  assert_null(json_object_get(j, "level"));
  assert_true(fabs(tb_json_num(j, "threshold") - 0.95) < 1e-9);
  assert_true(fabs(tb_json_num(json_object_get(j, "ttft_ms"), "p99") - 100) < 1e-9);
  json_decref(j);
}

static void
test_ramp(void **state)
{
  (void)state;
  /* A [0, 10), B [2, 10), C [4, 8): in flight 1, 2, 3, 2.  Open loop: the
   * offered span is [0, 4) (arrivals at 0, 2, 4), 1 in flight on [0, 2)
   * and 2 on [2, 4): level 6 / 4 = 1.5, threshold 1.425, so from the first
   * instant at 2 (at 2 s) to the last arrival (4 s) */
  struct tb_steady_req r[] = { rq(0, 10, true, 50, 5, 100), rq(2, 10, true, 50, 5, 100),
                               rq(4, 8, true, 50, 5, 100) };
  struct tb_steady w;
  tb_steady_compute(r, 3, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 3);
  assert_true(fabs(w.level - 1.5) < 1e-12 && fabs(w.threshold - 1.425) < 1e-12);
  assert_int_equal(w.start_us, 2 * S);
  assert_int_equal(w.end_us, 4 * S);
  assert_int_equal(w.requests, 1);  /* B; C started at the end */
  assert_int_equal(w.completed, 0); /* none ended in (2, 4] */
  assert_true(fabs(w.rps) < 1e-12);
  /* A: 2 s of [0.05, 10] inside; B: 1.95 s of [2.05, 10]; C: none */
  double lv = (100 * 2 / 9.95 + 100 * 1.95 / 7.95) / 2;
  assert_true(fabs(w.output_tps - lv) < 1e-9);
  json_t *j = tb_steady_json(&w);
  assert_string_equal(json_string_value(json_object_get(j, "reference")), "level");
  assert_true(fabs(tb_json_num(j, "level") - 1.5) < 1e-12);
  assert_true(fabs(tb_json_num(j, "threshold") - 1.425) < 1e-12);
  assert_true(fabs(tb_json_num(j, "length_s") - 2) < 1e-12);
  json_decref(j);
  /* held to 95% of its peak (a target of 3, counted on the requests) the
   * window is the crest: 3 in flight on [4, 8) only (95% of 3 is 2.85) */
  tb_steady_compute(r, 3, NULL, 0, 3, &w);
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
   * in flight throughout, never two and never none: level 1, from 0 to the
   * last arrival at 5 s (open loop); to the last end (a target of 1) */
  struct tb_steady_req r[] = { rq(0, 5, true, 10, 1, 5), rq(5, 10, true, 10, 1, 5) };
  struct tb_steady w;
  tb_steady_compute(r, 2, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 1);
  assert_true(fabs(w.level - 1) < 1e-12);
  assert_int_equal(w.start_us, 0);
  assert_int_equal(w.end_us, 5 * S);
  assert_int_equal(w.completed, 1);
  tb_steady_compute(r, 2, NULL, 0, 1, &w);
  assert_true(w.found);
  assert_int_equal(w.start_us, 0);
  assert_int_equal(w.end_us, 10 * S);
  assert_int_equal(w.completed, 2);
  /* two spans of two in flight, each 1 s long: held to 2 (a target), the
   * earlier is the window; open loop, the offered span [0, 3) holds 1, 2, 1:
   * level 4 / 3, threshold 1.27, so from 1 s (2 in flight) to 3 s */
  struct tb_steady_req q[] = { rq(0, 6, true, 10, 1, 5), rq(1, 2, true, 10, 1, 5),
                               rq(3, 4, true, 10, 1, 5) };
  tb_steady_compute(q, 3, NULL, 0, 2, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 2);
  assert_int_equal(w.start_us, 1 * S);
  assert_int_equal(w.end_us, 2 * S);
  tb_steady_compute(q, 3, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_true(fabs(w.level - 4.0 / 3) < 1e-12);
  assert_int_equal(w.start_us, 1 * S);
  assert_int_equal(w.end_us, 3 * S);
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
   * and Z on [2, 4): three in flight there, one elsewhere.  Z failed.
   * Held to 3 (a target), the window is [2, 4). */
  struct tb_steady_req r[] = {
    rq(0, 5, true, 1000, 25, 40),
    rq(2, 4, true, 100, 5, 20),
    rq(2, 4, false, NAN, NAN, 3),
  };
  struct tb_steady w;
  tb_steady_compute(r, 3, NULL, 0, 3, &w);
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
  tb_steady_compute(p, 6, NULL, 0, 6, &w);
  assert_true(w.found);
  assert_int_equal(w.start_us, 1 * S);
  assert_int_equal(w.requests, 5);
  assert_true(fabs(w.ttft_p50 - 30) < 1e-9);
  assert_true(fabs(w.ttft_p99 - 49.6) < 1e-9);
  assert_true(fabs(w.tpot_p99 - 9.92) < 1e-9);
}

/* Open loop, Poisson-like: six requests of 1 s each arriving at 0, 0.4,
 * 0.5, 1.1, 1.6 and 2 s.  On the offered span [0, 2) the count is 1, 2, 3,
 * 2, 3, 2, 1, 2 on [0, .4), [.4, .5), [.5, 1), [1, 1.1), [1.1, 1.4),
 * [1.4, 1.5), [1.5, 1.6), [1.6, 2): 4.3 request-seconds, level 2.15,
 * threshold 2.0425, so from the first instant at 3 (0.5 s) to 2 s.  Held to
 * 95% of the peak 3 it was [0.5, 1): a third of this. */
static void
test_poisson(void **state)
{
  (void)state;
  const double at[] = { 0, 0.4, 0.5, 1.1, 1.6, 2.0 };
  struct tb_steady_req r[6];
  for (int i = 0; i < 6; i++)
    r[i] = rq(at[i], at[i] + 1, true, 0, 1, 10);
  struct tb_steady w;
  tb_steady_compute(r, 6, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 3);
  assert_true(fabs(w.level - 2.15) < 1e-12);
  assert_true(fabs(w.threshold - 0.95 * 2.15) < 1e-12);
  assert_int_equal(w.start_us, 500000);
  assert_int_equal(w.end_us, 2 * S);
  assert_int_equal(w.requests, 3);  /* at 0.5, 1.1 and 1.6 */
  assert_int_equal(w.completed, 3); /* ended at 1, 1.4 and 1.5 */
  assert_true(fabs(w.rps - 2) < 1e-9);
  /* tokens over [start, start + 1]: 5 + 9 + 10 + 9 + 4 + 0 in [0.5, 2] */
  assert_true(fabs(w.output_tps - 37 / 1.5) < 1e-9);
  tb_steady_compute(r, 6, NULL, 0, 3, &w);
  assert_true(w.found);
  assert_int_equal(w.start_us, 500000);
  assert_int_equal(w.end_us, 1 * S);
}

/* Open loop, bursts: one request at a time back to back on [0, 3) (at 0, 1,
 * 2) and at 3 and 4 s, a burst of six of 1 s at 2.5: on the offered span
 * [0, 4) the count is 1 on [0, 2.5), 7 on [2.5, 3.5), 1 on [3.5, 4): level
 * (2.5 + 7 + 0.5) / 4 = 2.5, threshold 2.375, so from the burst (the first
 * instant at 3) to 4 s.  Every request
 * arriving at one instant offers no span. */
static void
test_burst(void **state)
{
  (void)state;
  struct tb_steady_req r[11];
  for (int i = 0; i < 3; i++)
    r[i] = rq(i, i + 1, true, 0, NAN, 0);
  for (int i = 3; i < 9; i++)
    r[i] = rq(2.5, 3.5, true, 0, NAN, 0);
  r[9] = rq(3, 4, true, 0, NAN, 0);
  r[10] = rq(4, 5, true, 0, NAN, 0);
  struct tb_steady w;
  tb_steady_compute(r, 11, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_int_equal(w.peak, 7);
  assert_true(fabs(w.level - 2.5) < 1e-12);
  assert_int_equal(w.start_us, 2500000);
  assert_int_equal(w.end_us, 4 * S);
  assert_int_equal(w.requests, 7);  /* the burst and the one at 3 */
  assert_int_equal(w.completed, 8); /* at 3, the burst at 3.5, at 4 */
  assert_true(fabs(w.rps - 8 / 1.5) < 1e-9);
  /* the burst alone */
  tb_steady_compute(r + 3, 6, NULL, 0, 0, &w);
  assert_false(w.found);
  assert_int_equal(w.peak, 6);
  assert_string_equal(w.reason, "every request arrived at one instant");
  assert_true(isnan(w.level));
}

/* Open loop, ramps: a count that rises to the last arrival (arrivals at 0,
 * 1, 2, 3, 4 s, all in flight to 10 s: 1, 2, 3, 4 on the offered span, level
 * 2.5, threshold 2.375) holds its top from 2 s to 4 s.  The count reaches
 * its level's share before the last arrival whenever the level is above 0
 * (a mean is never above the most); at 0 (requests of no length, or in
 * flight only from the last arrival) there is no window. */
static void
test_ramp_level(void **state)
{
  (void)state;
  struct tb_steady_req r[5];
  for (int i = 0; i < 5; i++)
    r[i] = rq(i, 10, true, 0, NAN, 0);
  struct tb_steady w;
  tb_steady_compute(r, 5, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_true(fabs(w.level - 2.5) < 1e-12);
  assert_int_equal(w.start_us, 2 * S);
  assert_int_equal(w.end_us, 4 * S);
  assert_int_equal(w.requests, 2);
  assert_int_equal(w.completed, 0);
  const char *late = "requests in flight reached 95% of their level only at the last arrival";
  struct tb_steady_req z[] = { rq(0, 0, true, 0, NAN, 0), rq(1, 1, true, 0, NAN, 0),
                               rq(2, 2, true, 0, NAN, 0) };
  tb_steady_compute(z, 3, NULL, 0, 0, &w);
  assert_false(w.found);
  assert_int_equal(w.peak, 0);
  assert_true(w.level == 0);
  assert_string_equal(w.reason, "no request was in flight for any time");
  struct tb_steady_req y[] = { rq(0, 0, true, 0, NAN, 0), rq(1, 2, true, 0, NAN, 0) };
  tb_steady_compute(y, 2, NULL, 0, 0, &w);
  assert_false(w.found);
  assert_int_equal(w.peak, 1);
  assert_string_equal(w.reason, late);
  json_t *j = tb_steady_json(&w);
  assert_true(fabs(tb_json_num(j, "level")) < 1e-12);
  assert_true(fabs(tb_json_num(j, "threshold")) < 1e-12);
  assert_string_equal(json_string_value(json_object_get(j, "reason")), late);
  json_decref(j);
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
  tb_steady_compute(r, n, NULL, 0, 3, &w);
  /* the requests of test_figures: the same window and figures */
  assert_true(w.found);
  assert_int_equal(w.start_us, 2 * S);
  assert_int_equal(w.end_us, 4 * S);
  assert_int_equal(w.requests, 2);
  assert_true(fabs(w.output_tps - 20) < 1e-9);
  /* open loop: arrivals at 0, 2 and 2 s, X alone in flight on the offered
   * span [0, 2): level 1, so the window is [0, 2), X's 10 tokens a second */
  tb_steady_compute(r, n, NULL, 0, 0, &w);
  assert_true(w.found);
  assert_true(fabs(w.level - 1) < 1e-12);
  assert_int_equal(w.start_us, 0);
  assert_int_equal(w.end_us, 2 * S);
  assert_int_equal(w.requests, 1);
  assert_true(fabs(w.output_tps - 5) < 1e-9);
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
    cmocka_unit_test(test_empty),      cmocka_unit_test(test_single),
    cmocka_unit_test(test_ramp),       cmocka_unit_test(test_ties),
    cmocka_unit_test(test_target),     cmocka_unit_test(test_users),
    cmocka_unit_test(test_figures),    cmocka_unit_test(test_from_samples),
    cmocka_unit_test(test_poisson),    cmocka_unit_test(test_burst),
    cmocka_unit_test(test_ramp_level),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
