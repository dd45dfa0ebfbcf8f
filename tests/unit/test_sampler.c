/* Unit tests of tb_sampler: the dialect mapping over the conformance
 * fixtures (tests/fixtures/servers/), the series' summary math on series
 * whose answers are known by construction, the sampling grid and caps, and
 * the self-checks with their thresholds (rate cells' too: the CV tolerance
 * held against tb_arrival's own generator). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_arrival.h"
#include "base/tb_json.h"
#include "engine/tb_sampler.h"

#define DIR "tests/fixtures/servers/"
#define S 1000000000LL

static char *
slurp(const char *dir, size_t *len)
{
  char path[256];
  snprintf(path, sizeof path, DIR "%s/metrics.txt", dir);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}

/* What each fixture's metrics say, figure by figure (NAN: not published). */
struct expect {
  const char *dir;
  enum tb_engine_kind kind;
  double running, waiting, kv, pre, hits, queries, rate, gen;
};

static const struct expect table[] = {
  /* V0: gpu_cache_usage_perc, the hit-rate gauge, no counters */
  { "vllm-0.7", TB_KIND_VLLM, NAN, NAN, NAN, 7, NAN, NAN, 0.25, 98304 },
  /* 0.11: two engines: counters and gauges summed, the usage the larger */
  { "vllm-0.11", TB_KIND_VLLM, 3, 1, 0.02, 5, 4000, 10000, NAN, 3072 },
  /* 2026: only the gauges */
  { "vllm-2026", TB_KIND_VLLM, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN },
  /* 0.5: dp ranks; the hit-rate gauge the larger of the two */
  { "sglang-0.5", TB_KIND_SGLANG, 7, 1, NAN, 1, NAN, NAN, 0.3, 1200 },
  /* llama.cpp: no KV gauge in current builds, no preemption or prefix, and
   * no per-step generation counter (tokens_predicted_total grows at a
   * request's end) */
  { "llamacpp", TB_KIND_LLAMACPP, 3, 2, NAN, NAN, NAN, NAN, NAN, NAN },
  /* b11669-Debian, captured live: prompt tokens from the cache (581) and
   * evaluated without them (1,370) give hits 581 of 1,951 queries */
  { "llamacpp-b11669", TB_KIND_LLAMACPP, 4, 2, NAN, NAN, 581, 1951, NAN, NAN },
};

static void
near(double got, double want, const char *what, const char *dir)
{
  if (isnan(want)) {
    if (!isnan(got))
      fail_msg("%s %s: %g, not absent", dir, what, got);
    return;
  }
  if (isnan(got) || fabs(got - want) > 1e-9)
    fail_msg("%s %s: %g, not %g", dir, what, got, want);
}

static void
test_dialects_over_fixtures(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    const struct expect *e = &table[i];
    size_t len;
    char *text = slurp(e->dir, &len);
    struct tb_sampler_point p;
    bool ok = tb_sampler_parse(e->kind, text, len, &p);
    assert_true(ok);
    /* running and waiting must agree with readiness's own reading */
    double r2, w2;
    assert_true(tb_discover_parse_load(e->kind, text, len, &r2, &w2));
    near(p.running, r2, "running", e->dir);
    near(p.waiting, w2, "waiting", e->dir);
    if (!isnan(e->running)) {
      near(p.running, e->running, "running", e->dir);
      near(p.waiting, e->waiting, "waiting", e->dir);
    }
    if (!isnan(e->kv) || strncmp(e->dir, "llamacpp", 8) == 0)
      near(p.kv_frac, e->kv, "kv", e->dir);
    near(p.preemptions, e->pre, "preemptions", e->dir);
    near(p.prefix_hits, e->hits, "hits", e->dir);
    near(p.prefix_queries, e->queries, "queries", e->dir);
    near(p.prefix_rate, e->rate, "rate", e->dir);
    near(p.gen_tokens, e->gen, "gen", e->dir);
    /* another engine's dialect reads nothing of it */
    enum tb_engine_kind other = e->kind == TB_KIND_VLLM ? TB_KIND_SGLANG : TB_KIND_VLLM;
    assert_false(tb_sampler_parse(other, text, len, &p));
    free(text);
  }
  /* every vLLM version publishes a KV usage gauge under one of its names */
  static const char *const vllm[] = { "vllm-0.7", "vllm-0.8", "vllm-0.10", "vllm-0.11",
                                      "vllm-2026" };
  for (size_t i = 0; i < sizeof vllm / sizeof vllm[0]; i++) {
    size_t len;
    char *text = slurp(vllm[i], &len);
    struct tb_sampler_point p;
    assert_true(tb_sampler_parse(TB_KIND_VLLM, text, len, &p));
    if (!(p.kv_frac >= 0 && p.kv_frac <= 1))
      fail_msg("%s: kv %g", vllm[i], p.kv_frac);
    free(text);
  }
  /* a gateway's own /metrics has no running gauge of any engine */
  size_t len;
  char *text = slurp("gateway", &len);
  struct tb_sampler_point p;
  assert_false(tb_sampler_parse(TB_KIND_VLLM, text, len, &p));
  assert_false(tb_sampler_parse(TB_KIND_SGLANG, text, len, &p));
  assert_false(tb_sampler_parse(TB_KIND_LLAMACPP, text, len, &p));
  free(text);
}

/* 0.10 has both KV names: the current one wins over the deprecated one. */
static void
test_kv_name_preference(void **state)
{
  (void)state;
  const char *t = "vllm:num_requests_running 1\n"
                  "vllm:gpu_cache_usage_perc 0.9\n"
                  "vllm:kv_cache_usage_perc 0.4\n";
  struct tb_sampler_point p;
  assert_true(tb_sampler_parse(TB_KIND_VLLM, t, strlen(t), &p));
  assert_true(fabs(p.kv_frac - 0.4) < 1e-12);
  assert_true(fabs(p.waiting) < 1e-12); /* absent waiting is 0, as readiness reads it */
}

static json_t *
arr_get(const json_t *o, const char *k, size_t i)
{
  return json_array_get(json_object_get(o, k), i);
}

/* A series built by hand: 4 samples a second apart, counters with known
 * deltas. */
static void
test_summary_math(void **state)
{
  (void)state;
  struct tb_sampler s = { 0 };
  tb_sampler_begin(&s, 10 * S);
  static const double kv[] = { 0.10, 0.35, 0.30, 0.20 };
  static const double gen[] = { 1000, 1400, 1800, 2200 }; /* 400 tok/s */
  static const double pre[] = { 5, 5, 6, 8 };             /* 3 in the cell */
  static const double hits[] = { 100, 150, 150, 250 };
  static const double queries[] = { 200, 300, 400, 600 }; /* 150/400 */
  for (int i = 0; i < 4; i++) {
    struct tb_sampler_point p = { .running = 4,
                                  .waiting = i == 2,
                                  .kv_frac = kv[i],
                                  .preemptions = pre[i],
                                  .prefix_hits = hits[i],
                                  .prefix_queries = queries[i],
                                  .prefix_rate = NAN,
                                  .gen_tokens = gen[i] };
    assert_true(tb_sampler_due(&s, 10 * S + i * S));
    tb_sampler_add(&s, 10 * S + i * S, &p);
  }
  json_t *j = tb_sampler_json(&s, 380.0);
  assert_non_null(j);
  json_t *sum = json_object_get(j, "summary");
  assert_int_equal(json_integer_value(json_object_get(sum, "samples")), 4);
  assert_true(fabs(tb_json_num(sum, "peak_kv_pct") - 35.0) < 1e-9);
  assert_true(fabs(tb_json_num(sum, "preemptions") - 3.0) < 1e-9);
  assert_true(fabs(tb_json_num(sum, "server_tps") - 400.0) < 1e-9);
  assert_true(fabs(tb_json_num(sum, "client_tps") - 380.0) < 1e-9);
  assert_true(fabs(tb_json_num(sum, "server_client_ratio") - 400.0 / 380.0) < 1e-4);
  assert_true(fabs(tb_json_num(sum, "prefix_hit_pct") - 37.5) < 1e-9);
  assert_string_equal(tb_json_str(sum, "prefix_hit_source"), "counters");
  /* the arrays: t from the window's start, kv in %, per-interval rates */
  assert_int_equal(json_array_size(json_object_get(j, "t_s")), 4);
  assert_true(fabs(json_number_value(arr_get(j, "t_s", 3)) - 3.0) < 1e-9);
  assert_true(fabs(json_number_value(arr_get(j, "kv_pct", 1)) - 35.0) < 1e-9);
  assert_true(fabs(json_number_value(arr_get(j, "waiting", 2)) - 1.0) < 1e-9);
  assert_true(json_is_null(arr_get(j, "gen_tps", 0)));
  assert_true(fabs(json_number_value(arr_get(j, "gen_tps", 2)) - 400.0) < 1e-9);
  assert_true(fabs(json_number_value(arr_get(j, "preemptions", 3)) - 3.0) < 1e-9);
  assert_true(fabs(json_number_value(arr_get(j, "prefix_hit_pct", 1)) - 50.0) < 1e-9);
  assert_true(fabs(json_number_value(arr_get(j, "prefix_hit_pct", 2)) - 0.0) < 1e-9);
  assert_null(json_object_get(j, "truncated"));
  json_decref(j);
  tb_sampler_free(&s);
}

/* A sharded cell's series (issue 34, item 5): a watch's points cut to the
 * shards' window, t_s counted from the window's start, the rest left out. */
static void
test_cut_to_a_window(void **state)
{
  (void)state;
  struct tb_sampler s = { 0 };
  tb_sampler_begin(&s, 100 * S);
  for (int i = 0; i < 8; i++) { /* points at 100.5, 101.5, ..., 107.5 s */
    struct tb_sampler_point p = { .running = i,
                                  .waiting = 0,
                                  .kv_frac = 0.1 * i,
                                  .preemptions = 0,
                                  .prefix_hits = NAN,
                                  .prefix_queries = NAN,
                                  .prefix_rate = NAN,
                                  .gen_tokens = 1000.0 * i };
    tb_sampler_add(&s, 100 * S + S / 2 + i * S, &p);
  }
  s.skipped = 2;
  struct tb_sampler c;
  tb_sampler_cut(&s, 102 * S, 105 * S + S / 2, &c); /* keeps 102.5 .. 105.5 */
  assert_int_equal(c.n, 4);
  assert_int_equal(c.skipped, 2);
  assert_true(fabs(c.t[0] - 0.5) < 1e-9 && fabs(c.t[3] - 3.5) < 1e-9);
  assert_true(c.running[0] == 2 && c.running[3] == 5);
  json_t *j = tb_sampler_json(&c, 1000.0);
  assert_non_null(j);
  json_t *sum = json_object_get(j, "summary");
  assert_int_equal(json_integer_value(json_object_get(sum, "samples")), 4);
  assert_true(fabs(tb_json_num(sum, "server_tps") - 1000.0) < 1e-9);
  json_decref(j);
  tb_sampler_free(&c);
  tb_sampler_cut(&s, 200 * S, 201 * S, &c); /* a window after the watch: empty */
  assert_int_equal(c.n, 0);
  assert_null(tb_sampler_json(&c, 1000.0));
  tb_sampler_free(&c);
  tb_sampler_free(&s);
}

/* llama.cpp counts a request's tokens when it ends: its series has no
 * gen_tps, server_tps or ratio, and says why. */
static void
test_llamacpp_gen_unknown(void **state)
{
  (void)state;
  size_t len;
  char *text = slurp("llamacpp", &len);
  struct tb_sampler s = { 0 };
  tb_sampler_begin(&s, 0);
  for (int i = 0; i < 3; i++)
    tb_sampler_feed(&s, TB_KIND_LLAMACPP, i * S, text, len);
  json_t *j = tb_sampler_json(&s, 300.0);
  json_t *sum = json_object_get(j, "summary");
  assert_int_equal(json_integer_value(json_object_get(sum, "samples")), 3);
  assert_null(json_object_get(j, "gen_tps"));
  assert_null(json_object_get(sum, "server_tps"));
  assert_null(json_object_get(sum, "server_client_ratio"));
  assert_non_null(strstr(tb_json_str(sum, "server_tps_unknown"), "when it ends"));
  json_decref(j);
  tb_sampler_free(&s);
  free(text);
}

/* A counter that goes back (a restarted server) gives no figure rather
 * than a negative one; figures the engine lacks are left out. */
static void
test_counter_reset_and_absent(void **state)
{
  (void)state;
  struct tb_sampler s = { 0 };
  tb_sampler_begin(&s, 0);
  static const double gen[] = { 5000, 5100, 20 };
  for (int i = 0; i < 3; i++) {
    struct tb_sampler_point p = { .running = 1,
                                  .waiting = 0,
                                  .kv_frac = NAN,
                                  .preemptions = NAN,
                                  .prefix_hits = NAN,
                                  .prefix_queries = NAN,
                                  .prefix_rate = NAN,
                                  .gen_tokens = gen[i] };
    tb_sampler_add(&s, i * S, &p);
  }
  json_t *j = tb_sampler_json(&s, NAN);
  json_t *sum = json_object_get(j, "summary");
  assert_true(isnan(tb_json_num(sum, "server_tps")));
  assert_null(json_object_get(j, "kv_pct"));
  assert_null(json_object_get(j, "preemptions"));
  assert_null(json_object_get(j, "prefix_hit_pct"));
  assert_null(json_object_get(sum, "peak_kv_pct"));
  assert_null(json_object_get(sum, "server_client_ratio"));
  assert_true(json_is_null(arr_get(j, "gen_tps", 2)));
  json_decref(j);
  tb_sampler_free(&s);
  /* no samples: no series */
  tb_sampler_begin(&s, 0);
  assert_null(tb_sampler_json(&s, 1.0));
  tb_sampler_free(&s);
}

/* Bodies offered 4 times a second are sampled once a second, on a grid
 * that a late read does not shift; oversized bodies are skipped; the
 * series stops at its cap. */
static void
test_grid_and_caps(void **state)
{
  (void)state;
  const char *t = "sglang:num_running_reqs 2\nsglang:num_queue_reqs 0\n"
                  "sglang:token_usage 0.5\n";
  struct tb_sampler s = { 0 };
  assert_false(tb_sampler_due(&s, 0)); /* not begun */
  tb_sampler_begin(&s, 0);
  for (int64_t now = 0; now < 10 * S; now += S / 4 + 1000000) /* 251 ms */
    tb_sampler_feed(&s, TB_KIND_SGLANG, now, t, strlen(t));
  assert_int_equal(s.n, 10);
  for (size_t i = 1; i < s.n; i++) {
    double dt = s.t[i] - s.t[i - 1];
    if (dt < 0.75 || dt > 1.26)
      fail_msg("sample %zu: %.3f s after the previous", i, dt);
  }
  tb_sampler_free(&s);
  /* over the body cap: skipped, not parsed */
  tb_sampler_begin(&s, 0);
  char *big = malloc(TB_SAMPLER_BODY_MAX + 2);
  assert_non_null(big);
  memset(big, '#', TB_SAMPLER_BODY_MAX + 1);
  memcpy(big, t, strlen(t));
  tb_sampler_feed(&s, TB_KIND_SGLANG, 0, big, TB_SAMPLER_BODY_MAX + 1);
  assert_int_equal(s.n, 0);
  assert_int_equal(s.skipped, 1);
  free(big);
  tb_sampler_feed(&s, TB_KIND_SGLANG, 1 * S, t, strlen(t));
  assert_int_equal(s.n, 1);
  tb_sampler_free(&s);
  /* the cap */
  tb_sampler_begin(&s, 0);
  struct tb_sampler_point p;
  assert_true(tb_sampler_parse(TB_KIND_SGLANG, t, strlen(t), &p));
  for (int64_t i = 0; i < (int64_t)TB_SAMPLER_MAX_POINTS + 5; i++)
    tb_sampler_add(&s, i * S, &p);
  assert_int_equal(s.n, TB_SAMPLER_MAX_POINTS);
  json_t *j = tb_sampler_json(&s, NAN);
  assert_true(json_is_true(json_object_get(j, "truncated")));
  json_decref(j);
  tb_sampler_free(&s);
}

static json_t *
checks(unsigned c, double achieved, double cpu, double kern, int before, int after)
{
  struct tb_checks_in in = {
    .requested = c,
    .achieved = achieved,
    .achieved_server = true,
    .cpu_share = cpu,
    .kernel_stamped = kern,
    .kernel_wanted = true,
    .drained_before = before,
    .drained_after = after,
    .before_running = 2,
    .before_waiting = 1,
  };
  return tb_checks_json(&in);
}

static size_t
n_failed(const json_t *ch)
{
  return json_array_size(json_object_get(ch, "failed"));
}

static void
test_checks_thresholds(void **state)
{
  (void)state;
  json_t *ch = checks(128, 127.9, 0.3, 1.0, 1, 1);
  assert_true(json_is_true(json_object_get(ch, "ok")));
  assert_int_equal(n_failed(ch), 0);
  assert_true(json_is_true(json_object_get(ch, "drained_after")));
  json_decref(ch);
  /* concurrency: max(0.5, 5% of C) either way */
  ch = checks(1, 0.6, NAN, NAN, -1, -1); /* 0.4 off at C = 1: within 0.5 */
  assert_true(json_is_true(json_object_get(ch, "ok")));
  assert_true(json_is_null(json_object_get(ch, "drained_before")));
  json_decref(ch);
  ch = checks(4, 5.0, NAN, NAN, 1, 1); /* a foreign request */
  assert_false(json_is_true(json_object_get(ch, "ok")));
  assert_int_equal(n_failed(ch), 1);
  assert_non_null(strstr(json_string_value(json_array_get(json_object_get(ch, "failed"), 0)),
                         "achieved concurrency 5.00"));
  json_decref(ch);
  ch = checks(128, 122.0, NAN, NAN, 1, 1); /* 6 off: within 6.4 */
  assert_true(json_is_true(json_object_get(ch, "ok")));
  json_decref(ch);
  ch = checks(128, 121.0, NAN, NAN, 1, 1);
  assert_int_equal(n_failed(ch), 1);
  json_decref(ch);
  /* CPU, stamps, drains: each its own reason */
  ch = checks(8, 8, 0.95, 0.5, 0, 0);
  assert_int_equal(n_failed(ch), 4);
  char buf[600];
  json_t *cell = json_pack("{s:O}", "checks", ch);
  tb_checks_failed_text(cell, buf, sizeof buf);
  assert_non_null(strstr(buf, "client CPU-bound: 95%"));
  assert_non_null(strstr(buf, "50% of reads kernel-stamped"));
  assert_non_null(strstr(buf, "not drained before the cell (2 running, 1 waiting)"));
  assert_non_null(strstr(buf, "not drained after"));
  /* a short buffer is cut, never overrun */
  char small[10];
  tb_checks_failed_text(cell, small, sizeof small);
  assert_true(strlen(small) < sizeof small);
  json_decref(cell);
  json_decref(ch);
  /* client stamps asked for: a low kernel share is no failure */
  struct tb_checks_in in = { .requested = 2,
                             .achieved = 2,
                             .cpu_share = NAN,
                             .kernel_stamped = 0,
                             .kernel_wanted = false,
                             .drained_before = 1,
                             .drained_after = 1 };
  ch = tb_checks_json(&in);
  assert_true(json_is_true(json_object_get(ch, "ok")));
  assert_string_equal(tb_json_str(ch, "achieved_source"), "client");
  json_decref(ch);
  /* a cell without checks has no failed text */
  cell = json_object();
  assert_string_equal(tb_checks_failed_text(cell, buf, sizeof buf), "");
  json_decref(cell);
}

/* A rate cell's checks: cpu, stamps and drains as for decode cells, no
 * concurrency, and its arrivals' figures. */
static json_t *
rate_checks(double rate, double lag, double cv, double expected, double gaps, double dropped)
{
  struct tb_checks_in in = {
    .requested = 0,
    .achieved = NAN,
    .cpu_share = 0.1,
    .kernel_stamped = 1,
    .kernel_wanted = true,
    .drained_before = 1,
    .drained_after = 1,
    .rate = true,
    .rate_rps = rate,
    .lag_p99_ms = lag,
    .cv = cv,
    .cv_expected = expected,
    .gaps = gaps,
    .dropped = dropped,
    .server_peak = NAN,
    .max_in_flight = NAN,
  };
  return tb_checks_json(&in);
}

static const char *
failed0(const json_t *ch)
{
  return json_string_value(json_array_get(json_object_get(ch, "failed"), 0));
}

static void
test_rate_checks(void **state)
{
  (void)state;
  /* the lag limit: a tenth of the mean gap, at least 5 ms */
  assert_true(fabs(tb_checks_lag_limit_ms(200) - TB_CHECK_LAG_MIN_MS) < 1e-12);
  assert_true(fabs(tb_checks_lag_limit_ms(1) - 100.0) < 1e-9);
  assert_true(fabs(tb_checks_lag_limit_ms(0.5) - 200.0) < 1e-9);
  assert_true(fabs(tb_checks_lag_limit_ms(0) - TB_CHECK_LAG_MIN_MS) < 1e-12);
  /* the CV tolerance: 4 standard errors c sqrt((1 + c^2) / 2n), floor 0.05 */
  assert_true(fabs(tb_checks_cv_tolerance(1, 100) - 4 * sqrt(1.0 / 100)) < 1e-12);
  assert_true(fabs(tb_checks_cv_tolerance(2, 50) - 4 * 2 * sqrt(5.0 / 100)) < 1e-12);
  assert_true(fabs(tb_checks_cv_tolerance(0, 1000) - TB_CHECK_CV_ABS) < 1e-12);
  assert_true(isnan(tb_checks_cv_tolerance(1, 1)));
  /* all good: no concurrency members, the arrivals' figures beside */
  json_t *ch = rate_checks(10, 0.4, 0.95, 1, 99, 0);
  assert_true(json_is_true(json_object_get(ch, "ok")));
  assert_null(json_object_get(ch, "requested_concurrency"));
  assert_null(json_object_get(ch, "achieved_concurrency"));
  assert_true(fabs(tb_json_num(ch, "schedule_lag_limit_ms") - 10.0) < 1e-9);
  assert_true(fabs(tb_json_num(ch, "interarrival_cv_tolerance") - 0.4020) < 1e-4);
  assert_int_equal(json_integer_value(json_object_get(ch, "dropped")), 0);
  json_decref(ch);
  /* each failure with its reason */
  ch = rate_checks(200, 5.2, 1, 1, 999, 0);
  assert_int_equal(n_failed(ch), 1);
  assert_non_null(strstr(failed0(ch), "start lag p99 5.200 ms over 5.000 ms"));
  json_decref(ch);
  ch = rate_checks(10, 1, 1, 1, 99, 3);
  assert_int_equal(n_failed(ch), 1);
  assert_non_null(strstr(failed0(ch), "3 arrivals dropped"));
  json_decref(ch);
  ch = rate_checks(10, 1, 0.55, 1, 99, 0); /* 0.45 off, tolerance 0.402 */
  assert_int_equal(n_failed(ch), 1);
  assert_non_null(strstr(failed0(ch), "inter-arrival CV 0.550 vs 1.000 expected"));
  json_decref(ch);
  ch = rate_checks(10, 1, 0.06, 0, 500, 0); /* constant: the floor */
  assert_int_equal(n_failed(ch), 1);
  json_decref(ch);
  ch = rate_checks(10, 1, 0.04, 0, 500, 0);
  assert_true(json_is_true(json_object_get(ch, "ok")));
  json_decref(ch);
  /* the server held more than the cell ever had in flight */
  struct tb_checks_in in = {
    .achieved = NAN,
    .cpu_share = NAN,
    .kernel_stamped = NAN,
    .drained_before = -1,
    .drained_after = -1,
    .rate = true,
    .rate_rps = 10,
    .lag_p99_ms = NAN,
    .cv = NAN,
    .dropped = NAN,
    .server_peak = 7,
    .max_in_flight = 7,
  };
  ch = tb_checks_json(&in);
  assert_true(json_is_true(json_object_get(ch, "ok")));
  assert_int_equal(json_integer_value(json_object_get(ch, "max_in_flight")), 7);
  json_decref(ch);
  in.server_peak = 9;
  ch = tb_checks_json(&in);
  assert_int_equal(n_failed(ch), 1);
  assert_non_null(strstr(failed0(ch), "the server held 9 requests, more than the 7"));
  json_decref(ch);
  /* unknown figures are not judged */
  ch = rate_checks(10, NAN, NAN, NAN, 0, NAN);
  assert_true(json_is_true(json_object_get(ch, "ok")));
  assert_null(json_object_get(ch, "interarrival_cv"));
  assert_null(json_object_get(ch, "dropped"));
  json_decref(ch);
}

/* The CV tolerance against the generator the rate cells use: over many
 * seeded schedules of n gaps, the spread of the sample CV is the standard
 * error the tolerance is built on (within 20%), and a schedule that the
 * client kept exactly fails the check rarely (at most 1% of them). */
static void
test_cv_tolerance_vs_generator(void **state)
{
  (void)state;
  static const char *const procs[] = { "poisson", "gamma:4", "gamma:0.25" };
  enum {
    TRIALS = 400,
    N = 400
  };
  for (size_t p = 0; p < TB_ARRAY_LEN(procs); p++) {
    double sum = 0, sum2 = 0, expected = NAN;
    unsigned alarms = 0;
    for (unsigned t = 0; t < TRIALS; t++) {
      struct tb_arrival a;
      assert_true(tb_arrival_init(&a, procs[p], 10, 1000 + t));
      expected = tb_arrival_cv(&a);
      double m = 0, m2 = 0;
      for (unsigned i = 0; i < N; i++) {
        double g = tb_arrival_gap_s(&a);
        m += g;
        m2 += g * g;
      }
      double mean = m / N, var = (m2 - m * mean) / (N - 1);
      double cv = sqrt(var) / mean;
      sum += cv;
      sum2 += cv * cv;
      json_t *ch = rate_checks(10, 1, cv, expected, N, 0);
      alarms += !json_is_true(json_object_get(ch, "ok"));
      json_decref(ch);
    }
    double mean = sum / TRIALS, sd = sqrt((sum2 - sum * mean) / (TRIALS - 1));
    double se = tb_checks_cv_tolerance(expected, N) / TB_CHECK_CV_SE;
    assert_true(fabs(sd / se - 1) < 0.2);
    assert_true(alarms <= TRIALS / 100);
  }
}

/* Repeats: the combined cell's checks fail when one repeat's did, with the
 * pass named; figures combine as documented. */
static void
test_combine_checks(void **state)
{
  (void)state;
  json_t *r1 = json_pack("{s:i, s:o}", "repeat", 1, "checks", checks(4, 4.0, 0.2, 1.0, 1, 1));
  json_t *r2 = json_pack("{s:i, s:o}", "repeat", 2, "checks", checks(4, 6.0, 0.4, 0.8, 1, -1));
  json_t *reps[] = { r1, r2 };
  json_t *c = tb_checks_combine(reps, 2);
  assert_non_null(c);
  assert_false(json_is_true(json_object_get(c, "ok")));
  /* repeat 2: concurrency and stamps */
  assert_int_equal(n_failed(c), 2);
  assert_non_null(strstr(json_string_value(json_array_get(json_object_get(c, "failed"), 0)),
                         "repeat 2: achieved concurrency 6.00"));
  assert_true(fabs(tb_json_num(c, "achieved_concurrency") - 5.0) < 1e-9);
  assert_true(fabs(tb_json_num(c, "client_cpu_share") - 0.4) < 1e-9);
  assert_true(fabs(tb_json_num(c, "kernel_stamped") - 0.8) < 1e-9);
  assert_true(json_is_true(json_object_get(c, "drained_before")));
  assert_true(json_is_null(json_object_get(c, "drained_after")));
  json_decref(c);
  c = tb_checks_combine(reps, 1);
  assert_true(json_is_true(json_object_get(c, "ok")));
  json_decref(c);
  json_t *bare = json_object();
  assert_null(tb_checks_combine(&bare, 1));
  json_decref(bare);
  json_decref(r1);
  json_decref(r2);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dialects_over_fixtures),
    cmocka_unit_test(test_kv_name_preference),
    cmocka_unit_test(test_summary_math),
    cmocka_unit_test(test_cut_to_a_window),
    cmocka_unit_test(test_counter_reset_and_absent),
    cmocka_unit_test(test_llamacpp_gen_unknown),
    cmocka_unit_test(test_grid_and_caps),
    cmocka_unit_test(test_checks_thresholds),
    cmocka_unit_test(test_rate_checks),
    cmocka_unit_test(test_cv_tolerance_vs_generator),
    cmocka_unit_test(test_combine_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
