/* Unit tests for tb_checks' cold-cell check (issue 25): what a cell's own
 * prompts explain of the server's prefix-cache hits, held to cases computed
 * by hand, and the check on a cell: only after a cache reset, the numbers
 * in its members and its reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "result/tb_checks.h"

static void
test_explained(void **state)
{
  (void)state;
  /* cold prompts: only the template and the run's tag, 64 of 1,000 tokens */
  struct tb_checks_prefix cold = { .requests = 10, .prompt_mean = 1000, .implied_pct = NAN };
  assert_true(fabs(tb_checks_prefix_explained(&cold) - 6.4) < 1e-9);
  /* a shared prefix of 2,000 tokens, 4 user messages, 16 requests of 2,200:
   * each explains 2,064; the 12 repeats explain all of theirs:
   * (0.25 x 16 x 2,064 + 0.75 x 35,200) / 35,200 */
  struct tb_checks_prefix px = { .requests = 16,
                                 .prompt_mean = 2200,
                                 .prefix_tokens = 2000,
                                 .suffixes = 4,
                                 .first_turns = 16,
                                 .implied_pct = NAN };
  assert_true(fabs(tb_checks_prefix_explained(&px) - 100.0 * 34656 / 35200) < 1e-9);
  /* conversations of 3 turns (200, 432, 664 tokens, 6 each): the later
   * turns carry 232 and 464 tokens of the earlier ones:
   * 6 x (64 + 296 + 528) of 18 x 432 */
  double n[] = { 6, 6, 6 }, pr[] = { 200, 432, 664 };
  struct tb_checks_prefix cv = { .requests = 18,
                                 .prompt_mean = 432,
                                 .first_turns = 6,
                                 .turn_requests = n,
                                 .turn_prompt = pr,
                                 .turns = 3,
                                 .implied_pct = NAN };
  assert_true(fabs(tb_checks_prefix_explained(&cv) - 100.0 * 5328 / 7776) < 1e-9);
  /* a trace: what it implies, the template besides */
  struct tb_checks_prefix tr = { .requests = 100, .prompt_mean = 2000, .implied_pct = 43.6 };
  assert_true(fabs(tb_checks_prefix_explained(&tr) - 46.8) < 1e-9);
  /* never above 100; unknown prompts: NAN */
  struct tb_checks_prefix tiny = { .requests = 3, .prompt_mean = 10, .implied_pct = NAN };
  assert_true(tb_checks_prefix_explained(&tiny) == 100.0);
  struct tb_checks_prefix none = { .requests = 0, .prompt_mean = NAN, .implied_pct = NAN };
  assert_true(isnan(tb_checks_prefix_explained(&none)));
}

static json_t *
cell_with(const char *reset, double series_pct, double usage_pct)
{
  json_t *c = json_pack("{s:s, s:{s:b, s:[]}}", "phase", "rate", "checks", "ok", 1, "failed");
  if (reset != NULL)
    json_object_set_new(c, "cache_reset", json_string(reset));
  if (isfinite(series_pct))
    json_object_set_new(c, "server_series",
                        json_pack("{s:{s:f, s:s}}", "summary", "prefix_hit_pct", series_pct,
                                  "prefix_hit_source", "counters"));
  if (isfinite(usage_pct))
    json_object_set_new(c, "prefix_cache", json_pack("{s:f}", "hit_pct", usage_pct));
  return c;
}

static void
test_cell(void **state)
{
  (void)state;
  struct tb_checks_prefix cold = { .requests = 40, .prompt_mean = 1000, .implied_pct = NAN };
  /* after a reset, 40% held by the server: unexplained, with the numbers */
  json_t *c = cell_with("done", 39.976, 0);
  tb_checks_prefix_cell(c, &cold);
  const json_t *ch = json_object_get(c, "checks");
  assert_true(json_is_false(json_object_get(ch, "ok")));
  assert_true(json_is_true(json_object_get(ch, "prefix_hits_unexplained")));
  assert_true(fabs(tb_json_num(ch, "prefix_hit_pct") - 39.976) < 1e-9);
  assert_true(fabs(tb_json_num(ch, "prefix_hit_explained_pct") - 6.4) < 1e-9);
  assert_string_equal(tb_json_str(ch, "prefix_hit_source"), "server series, counters");
  char why[400];
  assert_string_equal(tb_checks_failed_text(c, why, sizeof why),
                      "prefix hits unexplained: after a cache reset the server's prefix cache "
                      "held 40.0% of prompt tokens (server series, counters), this cell's own "
                      "prompts explain at most 6.4% (+2 points)");
  json_decref(c);
  /* within 2 points of what the prompts explain: passes */
  c = cell_with("done", 8.3, NAN);
  tb_checks_prefix_cell(c, &cold);
  ch = json_object_get(c, "checks");
  assert_true(json_is_true(json_object_get(ch, "ok")));
  assert_true(json_is_false(json_object_get(ch, "prefix_hits_unexplained")));
  json_decref(c);
  /* no series: the usage's hit rate */
  c = cell_with("done", NAN, 12.5);
  tb_checks_prefix_cell(c, &cold);
  ch = json_object_get(c, "checks");
  assert_string_equal(tb_json_str(ch, "prefix_hit_source"), "usage");
  assert_true(json_is_true(json_object_get(ch, "prefix_hits_unexplained")));
  json_decref(c);
  /* not a cold cell (kept, unsupported, refused) or no hit rate: not judged */
  const char *warm[] = { NULL, "unsupported", "refused" };
  for (size_t i = 0; i < 3; i++) {
    c = cell_with(warm[i], 99, 99);
    tb_checks_prefix_cell(c, &cold);
    ch = json_object_get(c, "checks");
    assert_null(json_object_get(ch, "prefix_hits_unexplained"));
    assert_true(json_is_true(json_object_get(ch, "ok")));
    json_decref(c);
  }
  c = cell_with("done", NAN, NAN);
  tb_checks_prefix_cell(c, &cold);
  assert_null(json_object_get(json_object_get(c, "checks"), "prefix_hit_pct"));
  json_decref(c);
  /* a prefill scout: no series, no prefix_cache, its one answer's share */
  struct tb_checks_prefix scout = {
    .requests = 1, .prompt_mean = 8000, .implied_pct = NAN, .have_hit = true, .hit_pct = 50.0
  };
  c = cell_with("done", NAN, NAN);
  tb_checks_prefix_cell(c, &scout);
  ch = json_object_get(c, "checks");
  assert_true(json_is_true(json_object_get(ch, "prefix_hits_unexplained")));
  assert_true(fabs(tb_json_num(ch, "prefix_hit_explained_pct") - 0.8) < 1e-9);
  json_decref(c);
  scout.hit_pct = 0.4; /* the template's tokens */
  c = cell_with("done", NAN, NAN);
  tb_checks_prefix_cell(c, &scout);
  assert_true(json_is_true(json_object_get(json_object_get(c, "checks"), "ok")));
  json_decref(c);
  /* a cell without checks gets them */
  c = json_pack("{s:s, s:{s:f}}", "cache_reset", "done", "prefix_cache", "hit_pct", 50.0);
  tb_checks_prefix_cell(c, &cold);
  assert_true(json_is_false(json_object_get(json_object_get(c, "checks"), "ok")));
  json_decref(c);
}

/* A scout's check over its repeats: failed when one repeat's was, its
 * reason named for the repeat, the largest hit rate and the smallest
 * explained share; none when no repeat was judged. */
static void
test_combine(void **state)
{
  (void)state;
  json_t *reps[2];
  reps[0] = json_loads("{\"repeat\":1,\"checks\":{\"ok\":true,\"failed\":[],"
                       "\"prefix_hit_pct\":0.5,\"prefix_hit_source\":\"usage\","
                       "\"prefix_hit_explained_pct\":0.8,\"prefix_hits_unexplained\":false}}",
                       0, NULL);
  reps[1] = json_loads("{\"repeat\":2,\"checks\":{\"ok\":false,\"failed\":[\"prefix hits "
                       "unexplained: x\"],\"prefix_hit_pct\":50,\"prefix_hit_source\":\"usage\","
                       "\"prefix_hit_explained_pct\":0.7,\"prefix_hits_unexplained\":true}}",
                       0, NULL);
  json_t *c = tb_checks_combine_prefix(reps, 2);
  assert_non_null(c);
  assert_true(json_is_false(json_object_get(c, "ok")));
  assert_true(json_is_true(json_object_get(c, "prefix_hits_unexplained")));
  assert_true(tb_json_num(c, "prefix_hit_pct") == 50);
  assert_true(fabs(tb_json_num(c, "prefix_hit_explained_pct") - 0.7) < 1e-12);
  assert_string_equal(json_string_value(json_array_get(json_object_get(c, "failed"), 0)),
                      "repeat 2: prefix hits unexplained: x");
  json_decref(c);
  json_object_del(reps[0], "checks");
  json_object_del(reps[1], "checks");
  assert_null(tb_checks_combine_prefix(reps, 2));
  json_decref(reps[0]);
  json_decref(reps[1]);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_explained),
    cmocka_unit_test(test_cell),
    cmocka_unit_test(test_combine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
