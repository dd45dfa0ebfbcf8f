/* Unit tests: tb_plan.  Every spec field that changes the plan, asserted on
 * the plan itself (no socket): the contexts the engine picks from
 * max_model_len (before and after discovery), the prefill scouts, the
 * order of the cells, concurrency, repeats, the window and settle, the
 * gates (max_output against max_model_len, the server's running requests,
 * the KV budget and its override), rate cells, conversations, sweeps over
 * rate and over concurrency, and the bound the job-size limit counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#include "spec/tb_plan.h"
#include "spec/tb_spec.h"

#define EP "\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\""

/* The spec of a JSON body's members (text: members after endpoint_id). */
static void
spec_of(struct tb_spec *s, const char *members)
{
  char *text = tb_xasprintf("{" EP "%s%s}", members[0] != '\0' ? "," : "", members);
  json_t *j = json_loads(text, 0, NULL);
  assert_non_null(j);
  char *err = NULL;
  assert_true(tb_spec_parse(s, j, &err));
  assert_null(err);
  json_decref(j);
  free(text);
}

/* The bound of a JSON body, through the api's path. */
static double
seconds_of(const char *members)
{
  char *text = tb_xasprintf("{" EP "%s%s}", members[0] != '\0' ? "," : "", members);
  json_t *j = json_loads(text, 0, NULL);
  double secs = tb_plan_job_seconds(j, 0);
  json_decref(j);
  free(text);
  return secs;
}

static void
assert_list(const int64_t *v, size_t n, const int64_t *want, size_t n_want)
{
  assert_int_equal(n, n_want);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(v[i], want[i]);
}

static const struct tb_plan_cell *
find(const struct tb_plan *p, enum tb_plan_phase ph, int64_t ctx, int64_t conc)
{
  for (size_t i = 0; i < p->n_matrix; i++)
    if (p->cells[i].phase == ph && p->cells[i].context == ctx && p->cells[i].concurrency == conc)
      return &p->cells[i];
  return NULL;
}

static void
test_defaults_before_discovery(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  spec_of(&s, "");
  tb_plan_init(&p, &s, NULL);
  assert_true(p.matrix);
  assert_false(p.rate);
  /* the most the engine picks: 8K..128K and a top one, scouts on those
   * and the full length */
  assert_int_equal(p.n_contexts, 6);
  assert_int_equal(p.n_prefill, 7);
  const int64_t conc[] = { 1, 2, 4, 8, 16, 32, 64, 128 };
  assert_list(p.concurrency, p.n_concurrency, conc, 8);
  assert_int_equal(p.max_concurrency, 128);
  assert_int_equal(p.n_matrix, 6 * 8 + 7);
  assert_int_equal(p.n_cells, p.n_matrix);
  assert_int_equal(p.repeats, 1);
  assert_float_equal(p.bound_s, 55 * 33.0, 1e-9);
  assert_false(p.kv_override);
  for (size_t i = 0; i < p.n_matrix; i++)
    assert_int_equal(p.cells[i].gate, TB_PLAN_RUN); /* nothing known: all run */
  tb_plan_free(&p);
  tb_spec_free(&s);
}

static void
test_defaults_on_a_server(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  spec_of(&s, "");
  struct tb_plan_facts f = { .max_model_len = 262144 };
  tb_plan_init(&p, &s, &f);
  const int64_t ctx[] = { 8192, 16384, 32768, 65536, 131072, 257024 };
  assert_list(p.contexts, p.n_contexts, ctx, 6);
  const int64_t pf[] = { 8192, 16384, 32768, 65536, 131072, 257024, 262144 };
  assert_list(p.prefill, p.n_prefill, pf, 7);
  /* the order: by context, the scout first, then decode by concurrency */
  assert_int_equal(p.cells[0].phase, TB_PLAN_PREFILL);
  assert_int_equal(p.cells[0].context, 8192);
  assert_int_equal(p.cells[0].concurrency, 1);
  assert_int_equal(p.cells[1].phase, TB_PLAN_DECODE);
  assert_int_equal(p.cells[1].context, 8192);
  assert_int_equal(p.cells[1].concurrency, 1);
  assert_int_equal(p.cells[8].concurrency, 128);
  assert_int_equal(p.cells[9].phase, TB_PLAN_PREFILL);
  assert_int_equal(p.cells[9].context, 16384);
  assert_int_equal(p.cells[p.n_matrix - 1].phase, TB_PLAN_PREFILL);
  assert_int_equal(p.cells[p.n_matrix - 1].context, 262144);
  tb_plan_free(&p);
  /* a server that does not say its length: TB_PLAN_DEFAULT_LENGTH */
  f.max_model_len = -1;
  tb_plan_init(&p, &s, &f);
  assert_list(p.contexts, p.n_contexts, ctx, 6);
  assert_list(p.prefill, p.n_prefill, pf, 7);
  assert_int_equal(p.cells[0].gate, TB_PLAN_RUN);
  tb_plan_free(&p);
  /* a small model: the contexts below its top one */
  f.max_model_len = 32768;
  tb_plan_init(&p, &s, &f);
  const int64_t small[] = { 8192, 16384, 27648 };
  assert_list(p.contexts, p.n_contexts, small, 3);
  const int64_t small_pf[] = { 8192, 16384, 27648, 32768 };
  assert_list(p.prefill, p.n_prefill, small_pf, 4);
  tb_plan_free(&p);
  /* max_output moves the top context */
  tb_spec_free(&s);
  spec_of(&s, "\"max_output\":16384");
  tb_plan_init(&p, &s, &f);
  const int64_t less[] = { 8192, 15360 };
  assert_list(p.contexts, p.n_contexts, less, 2);
  tb_plan_free(&p);
  /* no room at all: no decode context, the full length still scouted */
  f.max_model_len = 8192;
  tb_spec_free(&s);
  spec_of(&s, "\"max_output\":8192");
  tb_plan_init(&p, &s, &f);
  assert_int_equal(p.n_contexts, 0);
  const int64_t full[] = { 8192 };
  assert_list(p.prefill, p.n_prefill, full, 1);
  tb_plan_free(&p);
  tb_spec_free(&s);
}

static void
test_lists_given(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  struct tb_plan_facts f = { .max_model_len = 65536 };
  /* context 0 is a decode row only; the full length is scouted */
  spec_of(&s, "\"contexts\":[\"4k\",0,1024],\"concurrency\":[4,1]");
  tb_plan_init(&p, &s, &f);
  const int64_t ctx[] = { 0, 1024, 4096 };
  assert_list(p.contexts, p.n_contexts, ctx, 3);
  const int64_t pf[] = { 1024, 4096, 65536 };
  assert_list(p.prefill, p.n_prefill, pf, 3);
  const int64_t conc[] = { 1, 4 };
  assert_list(p.concurrency, p.n_concurrency, conc, 2);
  assert_int_equal(p.max_concurrency, 4);
  assert_int_equal(p.n_matrix, 3 * 2 + 3);
  assert_int_equal(p.cells[0].phase, TB_PLAN_DECODE); /* context 0: no scout */
  assert_int_equal(p.cells[0].context, 0);
  assert_int_equal(p.cells[2].phase, TB_PLAN_PREFILL);
  assert_int_equal(p.cells[2].context, 1024);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* scouts of their own: the union of both lists, in order */
  spec_of(&s, "\"contexts\":[1024,4096],\"concurrency\":[2],\"prefill_contexts\":[2048]");
  tb_plan_init(&p, &s, &f);
  assert_int_equal(p.n_matrix, 3);
  assert_int_equal(p.cells[0].phase, TB_PLAN_DECODE);
  assert_int_equal(p.cells[0].context, 1024);
  assert_int_equal(p.cells[1].phase, TB_PLAN_PREFILL);
  assert_int_equal(p.cells[1].context, 2048);
  assert_int_equal(p.cells[2].phase, TB_PLAN_DECODE);
  assert_int_equal(p.cells[2].context, 4096);
  assert_int_equal(p.cells[2].concurrency, 2);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* no prefill rows */
  spec_of(&s, "\"contexts\":[1024],\"concurrency\":[1,2],\"prefill_contexts\":[]");
  tb_plan_init(&p, &s, &f);
  assert_int_equal(p.n_prefill, 0);
  assert_int_equal(p.n_matrix, 2);
  assert_null(find(&p, TB_PLAN_PREFILL, 1024, 1));
  tb_plan_free(&p);
  tb_spec_free(&s);
}

static void
test_gates(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  /* max_output against max_model_len, the server's running requests */
  spec_of(&s, "\"contexts\":[1024,30000],\"concurrency\":[1,8],\"max_output\":4096");
  struct tb_plan_facts f = { .max_model_len = 32768, .max_running = 4 };
  tb_plan_init(&p, &s, &f);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 1024, 1)->gate, TB_PLAN_RUN);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 1024, 8)->gate, TB_PLAN_TOO_MANY);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 30000, 1)->gate, TB_PLAN_TOO_LONG);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 30000, 8)->gate, TB_PLAN_TOO_LONG);
  assert_int_equal(find(&p, TB_PLAN_PREFILL, 30000, 1)->gate, TB_PLAN_RUN); /* scouts run */
  tb_plan_free(&p);
  /* the server's KV budget: 8 x (1024 + 4096) = 40960 > 40000 */
  f = (struct tb_plan_facts){ .max_model_len = 32768, .kv_budget = 40000 };
  tb_plan_init(&p, &s, &f);
  assert_false(p.kv_override);
  assert_int_equal(p.kv_budget, 40000);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 1024, 1)->gate, TB_PLAN_RUN);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 1024, 8)->gate, TB_PLAN_OVER_KV);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* the spec's kv_budget overrides it, either way */
  spec_of(&s, "\"contexts\":[1024],\"concurrency\":[1,8],\"kv_budget\":100000");
  tb_plan_init(&p, &s, &f);
  assert_true(p.kv_override);
  assert_int_equal(p.kv_budget, 100000);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 1024, 8)->gate, TB_PLAN_RUN);
  tb_plan_free(&p);
  tb_spec_free(&s);
  spec_of(&s, "\"contexts\":[1024],\"concurrency\":[1,8],\"kv_budget\":5120");
  tb_plan_init(&p, &s, NULL); /* known before discovery too */
  assert_int_equal(find(&p, TB_PLAN_DECODE, 1024, 1)->gate, TB_PLAN_RUN);
  assert_int_equal(find(&p, TB_PLAN_DECODE, 1024, 8)->gate, TB_PLAN_OVER_KV);
  tb_plan_free(&p);
  tb_spec_free(&s);
}

static void
test_window_repeats_bound(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  spec_of(&s, "\"contexts\":[1024],\"concurrency\":[1,2],\"duration_s\":10,\"settle_s\":1.5,"
              "\"repeats\":3");
  tb_plan_init(&p, &s, NULL);
  assert_int_equal(p.repeats, 3);
  /* one pass held, repeats passes run: 2 decode cells, 2 scouts (1K and
   * the full length, before discovery TB_SPEC_MAX_CONTEXT) */
  assert_int_equal(p.n_matrix, 4);
  assert_int_equal(p.prefill[1], TB_SPEC_MAX_CONTEXT);
  for (size_t i = 0; i < p.n_matrix; i++) {
    assert_float_equal(p.cells[i].window_s, 10, 1e-12);
    assert_float_equal(p.cells[i].settle_s, 1.5, 1e-12);
  }
  assert_float_equal(p.bound_s, 4 * 3 * 11.5, 1e-9);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* the api's figures (tb_tenancy's limit): README's quick start */
  assert_float_equal(seconds_of("\"contexts\":[\"1k\",\"4k\"],\"concurrency\":[1,2,4],"
                                "\"duration_s\":2"),
                     9 * 5.0, 1e-9);
  json_t *bad = json_pack("{s:s}", "duration_s", "long");
  assert_true(tb_plan_job_seconds(bad, 0) < 0);
  json_decref(bad);
}

static void
test_rate_cells(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  /* rates alone: no matrix; rates in order, each its arrivals' window */
  spec_of(&s, "\"rates\":[4,1],\"rate_duration_s\":30");
  tb_plan_init(&p, &s, NULL);
  assert_false(p.matrix);
  assert_true(p.rate);
  assert_false(p.sweep);
  assert_int_equal(p.n_matrix, 0);
  assert_int_equal(p.n_contexts + p.n_prefill + p.n_concurrency, 0);
  assert_int_equal(p.max_concurrency, 1);
  assert_int_equal(p.n_rate, 2);
  assert_int_equal(p.cells[0].phase, TB_PLAN_RATE);
  assert_float_equal(p.cells[0].rate_rps, 1, 1e-12);
  assert_float_equal(p.cells[1].rate_rps, 4, 1e-12);
  assert_float_equal(p.cells[0].window_s, 30, 1e-12);
  assert_float_equal(p.cells[0].settle_s, 0, 1e-12);
  assert_float_equal(p.bound_s, 60, 1e-9);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* a count of requests: rate_requests / rate */
  spec_of(&s, "\"rates\":[2,5],\"rate_requests\":100");
  tb_plan_init(&p, &s, NULL);
  assert_float_equal(p.cells[0].window_s, 50, 1e-12);
  assert_float_equal(p.cells[1].window_s, 20, 1e-12);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* conversations: the later turns' think times */
  spec_of(&s, "\"rates\":[1],\"rate_duration_s\":20,"
              "\"conversation\":{\"turns\":4,\"think_time_s\":2.5}");
  tb_plan_init(&p, &s, NULL);
  assert_float_equal(p.cells[0].window_s, 20 + 3 * 2.5, 1e-12);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* the matrix asked for too: both, the matrix first */
  spec_of(&s, "\"concurrency\":[1],\"rates\":[2],\"rate_duration_s\":5");
  tb_plan_init(&p, &s, NULL);
  assert_true(p.matrix);
  assert_int_equal(p.n_contexts, 6); /* contexts left to the engine */
  assert_int_equal(p.n_rate, 1);
  assert_int_equal(p.n_cells, p.n_matrix + 1);
  assert_int_equal(p.cells[p.n_matrix].phase, TB_PLAN_RATE);
  tb_plan_free(&p);
  tb_spec_free(&s);
}

static void
test_sweeps(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  /* over rate: max_probes probes, the first at min_rps, each counted at
   * the first's (longest) window */
  spec_of(&s, "\"rates\":[4],\"rate_requests\":100,"
              "\"sweep\":{\"attainment_pct\":90,\"min_rps\":2,\"max_probes\":5}");
  tb_plan_init(&p, &s, NULL);
  assert_true(p.sweep);
  assert_false(p.sweep_closed);
  assert_int_equal(p.n_rate, 1);
  assert_int_equal(p.n_sweep, 5);
  const struct tb_plan_cell *probe = &p.cells[p.n_rate];
  assert_int_equal(probe[0].phase, TB_PLAN_SWEEP);
  assert_float_equal(probe[0].rate_rps, 2, 1e-12);
  assert_int_equal(probe[0].users, 0);
  assert_float_equal(probe[1].rate_rps, 0, 1e-12); /* decided by the outcomes */
  assert_float_equal(probe[4].window_s, 50, 1e-12);
  assert_float_equal(p.bound_s, 25 + 5 * 50.0, 1e-9);
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* over concurrency: users, the window rate_duration_s */
  spec_of(&s, "\"rate_duration_s\":10,\"sweep\":{\"attainment_pct\":90,"
              "\"over\":\"concurrency\",\"min_concurrency\":3,\"max_probes\":4}");
  tb_plan_init(&p, &s, NULL);
  assert_false(p.matrix);
  assert_true(p.sweep_closed);
  assert_int_equal(p.n_rate, 0);
  assert_int_equal(p.n_sweep, 4);
  assert_int_equal(p.cells[0].users, 3);
  assert_float_equal(p.cells[0].rate_rps, 0, 1e-12);
  assert_float_equal(p.bound_s, 40, 1e-9);
  tb_plan_free(&p);
  /* the first probe is the search's (tb_plan_sweep_next) */
  double found, hi;
  assert_float_equal(tb_plan_sweep_next(&s.sweep, NULL, NULL, 0, &found, &hi), 3, 1e-12);
  tb_spec_free(&s);
}

static void
test_list_caps(void **state)
{
  (void)state;
  /* 64 contexts, all scouted: the list is full, no room for the full length */
  char members[1024];
  size_t o = (size_t)snprintf(members, sizeof members, "\"contexts\":[");
  for (int i = 1; i <= TB_SPEC_MAX_LIST; i++)
    o += (size_t)snprintf(members + o, sizeof members - o, "%s%d", i > 1 ? "," : "", i * 1024);
  snprintf(members + o, sizeof members - o, "],\"concurrency\":[1]");
  struct tb_spec s;
  struct tb_plan p;
  spec_of(&s, members);
  tb_plan_init(&p, &s, NULL);
  assert_int_equal(p.n_contexts, TB_SPEC_MAX_LIST);
  assert_int_equal(p.n_prefill, TB_SPEC_MAX_LIST);
  assert_int_equal(p.prefill[TB_SPEC_MAX_LIST - 1], TB_SPEC_MAX_LIST * 1024);
  assert_int_equal(p.n_matrix, 2 * TB_SPEC_MAX_LIST);
  tb_plan_free(&p);
  tb_spec_free(&s);
}

/* Shards (issue 24): the count ("auto" from the per-shard budget, capped
 * by the streams and TB_SPEC_MAX_SHARDS) and the shares, which add up to
 * the cell's streams and differ by at most one. */
static void
test_shards(void **state)
{
  (void)state;
  assert_int_equal(tb_plan_shards(3, 8, 2048), 3);
  assert_int_equal(tb_plan_shards(4, 2, 2048), 2);
  assert_int_equal(tb_plan_shards(0, 2048, 2048), 1);
  assert_int_equal(tb_plan_shards(0, 2049, 2048), 2);
  assert_int_equal(tb_plan_shards(0, 1000, 1), TB_SPEC_MAX_SHARDS);
  /* a rate cell's: the spec's, or "auto" by the arrivals one shard sends */
  assert_int_equal(tb_plan_rate_shards(3, 10, 500, 0), 3);
  assert_int_equal(tb_plan_rate_shards(0, 500, 500, 0), 1);
  assert_int_equal(tb_plan_rate_shards(0, 501, 500, 0), 2);
  assert_int_equal(tb_plan_rate_shards(0, 2000, 500, 0), 4);
  assert_int_equal(tb_plan_rate_shards(0, 100000, 1, 0), TB_SPEC_MAX_SHARDS);
  assert_int_equal(tb_plan_rate_shards(0, 10, 0, 0), 1);
  /* never more shards than a counted cell has arrivals */
  assert_int_equal(tb_plan_rate_shards(8, 10, 500, 3), 3);
  assert_int_equal(tb_plan_rate_shards(0, 2000, 500, 2), 2);
  assert_int_equal(tb_plan_rate_shards(3, 10, 500, 100), 3);
  struct tb_spec rs;
  tb_spec_init(&rs);
  rs.rate_duration_s = 7;
  assert_true(tb_plan_rate_window_s(&rs, 10) == 7);
  rs.rate_requests = 50;
  assert_true(tb_plan_rate_window_s(&rs, 10) == 5);
  tb_spec_free(&rs);
  for (int64_t conc = 1; conc <= 130; conc++)
    for (int n = 1; n <= 9; n++) {
      int64_t sum = 0, lo = INT64_MAX, hi = 0;
      for (int k = 0; k < n; k++) {
        int64_t v = tb_plan_shard_share(conc, n, k);
        sum += v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      }
      assert_int_equal(sum, conc);
      assert_true(hi - lo <= 1);
    }
  assert_int_equal(tb_plan_shard_share(10, 3, 0), 4);
  assert_int_equal(tb_plan_shard_share(10, 3, 2), 3);
  assert_int_equal(tb_plan_shard_share(10, 3, 3), 0);
  assert_int_equal(tb_plan_shard_share(10, 0, 0), 0);
}

/* The spec's trace: one trace cell after the rate cells, the matrix only
 * when asked for; its window in the bound when the spec bounds it. */
static void
test_trace_cell(void **state)
{
  (void)state;
  struct tb_spec s;
  struct tb_plan p;
  spec_of(&s, "\"trace\":{\"format\":\"mooncake\",\"duration_s\":60,\"speedup\":2,"
              "\"rate_scale\":1.5}");
  tb_plan_init(&p, &s, NULL);
  assert_false(p.matrix);
  assert_true(p.rate && p.trace);
  assert_int_equal(p.n_cells, 1);
  assert_int_equal(p.n_trace, 1);
  assert_int_equal(p.cells[0].phase, TB_PLAN_TRACE);
  assert_true(fabs(p.bound_s - 20.0) < 1e-9);
  tb_plan_free(&p);
  tb_spec_free(&s);
  spec_of(&s, "\"rates\":[2,4],\"rate_duration_s\":10,\"contexts\":[1024],"
              "\"concurrency\":[1],\"trace\":{\"format\":\"azure\"}");
  tb_plan_init(&p, &s, NULL);
  assert_true(p.matrix);
  assert_int_equal(p.n_rate, 2);
  assert_int_equal(p.n_trace, 1);
  assert_int_equal(p.cells[p.n_cells - 1].phase, TB_PLAN_TRACE);
  assert_int_equal(p.cells[p.n_matrix].phase, TB_PLAN_RATE);
  assert_true(p.cells[p.n_cells - 1].window_s == 0); /* unbounded: the file says */
  tb_plan_free(&p);
  tb_spec_free(&s);
  /* no trace: as before */
  spec_of(&s, "\"rates\":[2]");
  tb_plan_init(&p, &s, NULL);
  assert_false(p.trace);
  assert_int_equal(p.n_trace, 0);
  tb_plan_free(&p);
  tb_spec_free(&s);
}

/* A whole trace's replay counts in the job's seconds (issue 34, item 2): its
 * span from start_s, at speedup x rate_scale; a given duration_s bounds it
 * instead; no trace, no span. */
static void
test_trace_span_seconds(void **state)
{
  (void)state;
  const char *whole =
    "\"trace\":{\"format\":\"mooncake\",\"id\":\"00000000-0000-4000-8000-000000000002\"}";
  char *text = tb_xasprintf("{" EP ",%s}", whole);
  json_t *j = json_loads(text, 0, NULL);
  assert_non_null(j);
  /* 10^12 ms between two requests: 31 years, counted whole */
  assert_true(fabs(tb_plan_job_seconds(j, 1e9) - 1e9) < 1e-3);
  assert_true(tb_plan_job_seconds(j, 0) == 0); /* a span not known: as before */
  json_decref(j);
  free(text);
  text = tb_xasprintf(
    "{" EP ",\"trace\":{\"format\":\"mooncake\",\"id\":\"00000000-0000-4000-8000-000000000002\","
    "\"speedup\":4,\"rate_scale\":2.5,\"start_s\":100}}");
  j = json_loads(text, 0, NULL);
  assert_true(fabs(tb_plan_job_seconds(j, 1100) - 100.0) < 1e-9); /* (1100 - 100) / 10 */
  assert_true(tb_plan_job_seconds(j, 50) == 0);                   /* starts past its end */
  json_decref(j);
  free(text);
  text = tb_xasprintf("{" EP ",\"trace\":{\"format\":\"mooncake\",\"duration_s\":60,"
                      "\"speedup\":2}}");
  j = json_loads(text, 0, NULL);
  assert_true(fabs(tb_plan_job_seconds(j, 1e9) - 30.0) < 1e-9); /* the window bounds it */
  json_decref(j);
  free(text);
  /* no trace: a span changes nothing */
  text = tb_xasprintf("{" EP ",\"rates\":[2],\"rate_duration_s\":10}");
  j = json_loads(text, 0, NULL);
  assert_true(tb_plan_job_seconds(j, 1e9) == tb_plan_job_seconds(j, 0));
  assert_true(tb_plan_job_seconds(j, 0) > 0);
  json_decref(j);
  free(text);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults_before_discovery),
    cmocka_unit_test(test_defaults_on_a_server),
    cmocka_unit_test(test_lists_given),
    cmocka_unit_test(test_gates),
    cmocka_unit_test(test_window_repeats_bound),
    cmocka_unit_test(test_rate_cells),
    cmocka_unit_test(test_sweeps),
    cmocka_unit_test(test_list_caps),
    cmocka_unit_test(test_shards),
    cmocka_unit_test(test_trace_cell),
    cmocka_unit_test(test_trace_span_seconds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
