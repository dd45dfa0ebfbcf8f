/* Unit tests: tb_log (every line is one valid JSON object, whatever it holds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tb_log.h"

/* Runs fn with stderr redirected to a pipe; returns what it wrote (new). */
static char *
capture(void (*fn)(void))
{
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  int saved = dup(STDERR_FILENO);
  dup2(fds[1], STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  char *buf = calloc(1, 65536);
  size_t n = 0;
  ssize_t r;
  while ((r = read(fds[0], buf + n, 65535 - n)) > 0)
    n += (size_t)r;
  close(fds[0]);
  return buf;
}

static json_t *
parse_line(const char *text)
{
  const char *nl = strchr(text, '\n');
  assert_non_null(nl);
  assert_null(strchr(nl + 1, '\n')); /* exactly one line */
  json_error_t e;
  json_t *o = json_loadb(text, (size_t)(nl - text), 0, &e);
  if (o == NULL)
    fail_msg("not JSON: %s (%s)", text, e.text);
  return o;
}

static void
log_fields(void)
{
  tb_log_init("unit", TB_LOG_INFO);
  tb_log(TB_LOG_INFO, "hello", "s", TB_LS, "a\"b\\c\n\t\x01/é", "i", TB_LI, (int64_t)-42, "d",
         TB_LD, 1.5, "n", TB_LS, (const char *)NULL, NULL);
}

static void
test_fields_and_escapes(void **state)
{
  (void)state;
  char *out = capture(log_fields);
  json_t *o = parse_line(out);
  assert_string_equal(json_string_value(json_object_get(o, "msg")), "hello");
  assert_string_equal(json_string_value(json_object_get(o, "level")), "info");
  assert_string_equal(json_string_value(json_object_get(o, "component")), "unit");
  assert_string_equal(json_string_value(json_object_get(o, "s")), "a\"b\\c\n\t\x01/é");
  assert_int_equal(json_integer_value(json_object_get(o, "i")), -42);
  assert_true(json_real_value(json_object_get(o, "d")) == 1.5);
  assert_true(json_is_null(json_object_get(o, "n")));
  assert_non_null(json_object_get(o, "ts"));
  json_decref(o);
  free(out);
}

static void
log_bad_utf8(void)
{
  tb_log(TB_LOG_WARN, "x", "s", TB_LS,
         "ok\xff\xfe\xc3(\xed\xa0\x80"
         "end",
         "inf", TB_LD, 1.0 / 0.0, NULL);
}

static void
test_invalid_utf8_and_nonfinite(void **state)
{
  (void)state;
  char *out = capture(log_bad_utf8);
  json_t *o = parse_line(out);
  const char *s = json_string_value(json_object_get(o, "s"));
  assert_non_null(s);
  assert_memory_equal(s, "ok", 2);
  assert_non_null(strstr(s, "end"));
  assert_non_null(strstr(s, "\xEF\xBF\xBD"));
  assert_true(json_is_null(json_object_get(o, "inf")));
  json_decref(o);
  free(out);
}

static void
log_huge(void)
{
  char *big = malloc(20000);
  memset(big, 'x', 19999);
  big[19999] = '\0';
  tb_log(TB_LOG_ERROR, "huge", "a", TB_LI, (int64_t)1, "big", TB_LS, big, "after", TB_LI,
         (int64_t)2, NULL);
  free(big);
}

static void
test_long_line_is_cut_at_a_field(void **state)
{
  (void)state;
  char *out = capture(log_huge);
  json_t *o = parse_line(out);
  assert_int_equal(json_integer_value(json_object_get(o, "a")), 1);
  assert_null(json_object_get(o, "big"));
  assert_true(json_is_true(json_object_get(o, "truncated")));
  json_decref(o);
  free(out);
}

static void
log_below_level(void)
{
  tb_log_init("unit", TB_LOG_WARN);
  tb_log(TB_LOG_INFO, "hidden", NULL);
  tb_log_init("unit", TB_LOG_INFO);
}

static void
test_level_filter(void **state)
{
  (void)state;
  char *out = capture(log_below_level);
  assert_string_equal(out, "");
  free(out);
  assert_int_equal(tb_log_level_parse("warn"), TB_LOG_WARN);
  assert_int_equal(tb_log_level_parse("loud"), -1);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fields_and_escapes),
    cmocka_unit_test(test_invalid_utf8_and_nonfinite),
    cmocka_unit_test(test_long_line_is_cut_at_a_field),
    cmocka_unit_test(test_level_filter),
  };
  return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
