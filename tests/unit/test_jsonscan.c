/* Unit tests: tb_jsonscan.  The cost is held to what jansson really
 * allocates (a counting allocator, glibc's chunk rounding and header
 * included) over shapes of every kind: it must never be below the tree it
 * stands for, nor so far above that honest traces are refused.  The value
 * end is checked on nested values, strings with escaped quotes and scalars. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/tb_jsonscan.h"
#include "jsoncount.h"

/* The tree's peak bytes against the estimate. */
static void
check_shape(const char *text)
{
  size_t n = strlen(text);
  size_t cost = tb_jsonscan_cost(text, n);
  jsoncount_start();
  json_error_t e;
  json_t *v = json_loadb(text, n, JSON_REJECT_DUPLICATES, &e);
  size_t tree = jsoncount_peak;
  json_decref(v);
  jsoncount_stop();
  assert_non_null(v);
  print_message("# %zu bytes of text: tree %zu, estimate %zu (%.2fx)\n", n, tree, cost,
                (double)cost / (double)tree);
  assert_true(cost >= tree);
  assert_true(cost <= 4 * tree);
}

static void
test_cost_bounds_the_tree(void **state)
{
  (void)state;
  const struct {
    const char *head, *item, *tail;
    size_t reps;
  } shapes[] = {
    { "[", "{}", "]", 20000 },
    { "{\"requests\":[", "{}", "]}", 20000 },
    { "[", "[]", "]", 20000 },
    { "[", "7", "]", 50000 },
    { "[", "-1.5e3", "]", 50000 },
    { "[", "\"abc\"", "]", 20000 },
    { "[", "true", "]", 50000 },
    { "[", "null", "]", 50000 },
    { "[", "{\"a\":1,\"b\":2,\"c\":3}", "]", 5000 },
    { "{\"timestamp\":27482,\"input_length\":6955,\"output_length\":52,\"hash_ids\":[", "46", "]}",
      60000 },
    { "{\"block_size\":64,\"requests\":[",
      "{\"t\":0.5,\"type\":\"n\",\"in\":900,\"out\":40,"
      "\"hash_ids\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14]}",
      "]}", 3000 },
  };
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    char *s = jsoncount_repeat(shapes[i].head, shapes[i].item, shapes[i].reps, shapes[i].tail);
    assert_non_null(s);
    check_shape(s);
    free(s);
  }
  /* members with long keys, deep nesting */
  char *s = malloc(200000);
  assert_non_null(s);
  size_t o = (size_t)snprintf(s, 200000, "{");
  for (int i = 0; i < 2000; i++)
    o += (size_t)snprintf(s + o, 200000 - o, "%s\"key-%06d-with-a-longer-name\":{\"x\":[%d]}",
                          i ? "," : "", i, i);
  snprintf(s + o, 200000 - o, "}");
  check_shape(s);
  free(s);
}

static void
test_cost_skips_strings(void **state)
{
  (void)state;
  /* brackets inside a string are text, not trees */
  const char *a = "\"{{{{[[[[::::,,,,\"";
  const char *b = "\"aaaaaaaaaaaaaaaa\"";
  assert_int_equal(tb_jsonscan_cost(a, strlen(a)), tb_jsonscan_cost(b, strlen(b)));
  const char *esc = "\"\\\"{{{{\"";
  const char *plain = "\"aa{{{{\"";
  assert_int_equal(tb_jsonscan_cost(esc, strlen(esc)), tb_jsonscan_cost(plain, strlen(plain)));
  assert_true(tb_jsonscan_cost("{}", 2) > tb_jsonscan_cost("[]", 2));
  assert_int_equal(tb_jsonscan_cost("", 0), 0);
}

static void
test_value_end(void **state)
{
  (void)state;
  const struct {
    const char *text;
    size_t end;
  } cases[] = {
    { "{\"a\":[1,{\"b\":\"]}\"}]} , {}", 20 },
    { "[[],[[]]],[1]", 9 },
    { "\"a\\\"b\",1", 6 },
    { "123,4", 3 },
    { "-1.5e3]", 6 },
    { "true }", 4 },
    { "{\"open\":[1,2", 12 }, /* ends first: the whole text */
    { "\"unterminated", 13 },
    { "", 0 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    assert_int_equal(tb_jsonscan_value_end(cases[i].text, strlen(cases[i].text)), cases[i].end);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cost_bounds_the_tree),
    cmocka_unit_test(test_cost_skips_strings),
    cmocka_unit_test(test_value_end),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
