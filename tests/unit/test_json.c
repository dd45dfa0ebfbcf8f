/* Unit tests: tb_json's lenient member reads, with members of every JSON
 * type, absent members, non-objects and non-finite or non-integral numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "base/tb_json.h"

static json_t *
doc(void)
{
  json_error_t e;
  json_t *o = json_loads("{\"s\":\"text\",\"i\":42,\"neg\":-7,\"r\":2.5,\"ri\":8.0,"
                         "\"big\":1e300,\"huge_int\":9223372036854775807,"
                         "\"edge\":9e15,\"below\":8999999999999998.0,"
                         "\"t\":true,\"n\":null,\"a\":[1],\"o\":{\"x\":1},\"e\":\"\"}",
                         0, &e);
  assert_non_null(o);
  return o;
}

static void
test_str(void **state)
{
  (void)state;
  json_t *o = doc();
  assert_string_equal(tb_json_str(o, "s"), "text");
  assert_string_equal(tb_json_str(o, "e"), "");
  assert_null(tb_json_str(o, "i"));
  assert_null(tb_json_str(o, "n"));
  assert_null(tb_json_str(o, "a"));
  assert_null(tb_json_str(o, "missing"));
  assert_null(tb_json_str(NULL, "s"));
  json_t *arr = json_array();
  assert_null(tb_json_str(arr, "s"));
  json_decref(arr);
  json_decref(o);
}

static void
test_num(void **state)
{
  (void)state;
  json_t *o = doc();
  assert_true(tb_json_num(o, "i") == 42);
  assert_true(tb_json_num(o, "neg") == -7);
  assert_true(tb_json_num(o, "r") == 2.5);
  assert_true(tb_json_num(o, "big") == 1e300);
  assert_true(isnan(tb_json_num(o, "s")));
  assert_true(isnan(tb_json_num(o, "t")));
  assert_true(isnan(tb_json_num(o, "n")));
  assert_true(isnan(tb_json_num(o, "o")));
  assert_true(isnan(tb_json_num(o, "missing")));
  assert_true(isnan(tb_json_num(NULL, "i")));
  /* a non-finite real (made in C: JSON text has none) reads as absent */
  json_object_set_new(o, "inf", json_real(INFINITY));
  if (json_object_get(o, "inf") != NULL)
    assert_true(isnan(tb_json_num(o, "inf")));
  json_decref(o);
}

static void
test_int(void **state)
{
  (void)state;
  json_t *o = doc();
  int64_t v = -1;
  assert_true(tb_json_int(o, "i", &v));
  assert_int_equal(v, 42);
  assert_true(tb_json_int(o, "neg", &v));
  assert_int_equal(v, -7);
  assert_true(tb_json_int(o, "ri", &v)); /* an integral real counts */
  assert_int_equal(v, 8);
  assert_true(tb_json_int(o, "huge_int", &v));
  assert_true(v == INT64_MAX);
  assert_true(tb_json_int(o, "below", &v));
  assert_true(v == 8999999999999998LL);
  v = 123;
  assert_false(tb_json_int(o, "r", &v));   /* 2.5 is not an integer */
  assert_false(tb_json_int(o, "big", &v)); /* beyond exact doubles: not a count */
  assert_false(tb_json_int(o, "edge", &v));
  assert_false(tb_json_int(o, "s", &v));
  assert_false(tb_json_int(o, "t", &v));
  assert_false(tb_json_int(o, "n", &v));
  assert_false(tb_json_int(o, "missing", &v));
  assert_false(tb_json_int(NULL, "i", &v));
  assert_int_equal(v, 123); /* untouched when false */
  json_decref(o);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_str),
    cmocka_unit_test(test_num),
    cmocka_unit_test(test_int),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
