/* Unit tests: tb_cfg (file syntax, precedence of the environment, errors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tb_cfg.h"

static const struct tb_cfg_key keys[] = {
  { "TBT_A", "1", "a", false },
  { "TBT_B", NULL, "b", false },
  { "TBT_SECRET", NULL, "s", true },
};

static void
test_defaults(void **state)
{
  (void)state;
  struct tb_cfg *c = tb_cfg_new(keys, 3);
  assert_string_equal(tb_cfg_get(c, "TBT_A"), "1");
  assert_null(tb_cfg_get(c, "TBT_B"));
  tb_cfg_free(c);
}

static void
test_parse_text(void **state)
{
  (void)state;
  struct tb_cfg *c = tb_cfg_new(keys, 3);
  char *err = NULL;
  assert_true(tb_cfg_parse_text(c,
                                "# comment\n\n  TBT_A = 42  \r\nTBT_B=\"quoted value\"\n"
                                "TBT_SECRET='s3cret'",
                                &err));
  assert_string_equal(tb_cfg_get(c, "TBT_A"), "42");
  assert_string_equal(tb_cfg_get(c, "TBT_B"), "quoted value");
  assert_string_equal(tb_cfg_get(c, "TBT_SECRET"), "s3cret");
  int64_t v;
  assert_true(tb_cfg_get_int(c, "TBT_A", 0, 100, &v, &err));
  assert_int_equal(v, 42);
  assert_false(tb_cfg_get_int(c, "TBT_A", 0, 10, &v, &err));
  assert_non_null(strstr(err, "TBT_A"));
  free(err);
  tb_cfg_free(c);
}

static void
test_parse_errors(void **state)
{
  (void)state;
  struct tb_cfg *c = tb_cfg_new(keys, 3);
  char *err = NULL;
  assert_false(tb_cfg_parse_text(c, "TBT_A=1\nTBT_TYPO=2\n", &err));
  assert_non_null(strstr(err, "line 2"));
  assert_non_null(strstr(err, "TBT_TYPO"));
  free(err);
  err = NULL;
  assert_false(tb_cfg_parse_text(c, "just words\n", &err));
  assert_non_null(strstr(err, "KEY=VALUE"));
  free(err);
  tb_cfg_free(c);
}

static void
test_env_wins_over_file(void **state)
{
  (void)state;
  char path[] = "/tmp/tbcfgXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char text[] = "TBT_A=from-file\nTBT_B=file-b\n";
  assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  setenv("TBT_A", "from-env", 1);
  char *err = NULL;
  struct tb_cfg *c = tb_cfg_load(keys, 3, path, &err);
  assert_non_null(c);
  assert_string_equal(tb_cfg_get(c, "TBT_A"), "from-env");
  assert_string_equal(tb_cfg_get(c, "TBT_B"), "file-b");
  tb_cfg_free(c);
  unsetenv("TBT_A");
  unlink(path);
  assert_null(tb_cfg_load(keys, 3, "/nonexistent/tokbench.conf", &err));
  assert_non_null(strstr(err, "/nonexistent/tokbench.conf"));
  free(err);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_parse_text),
    cmocka_unit_test(test_parse_errors),
    cmocka_unit_test(test_env_wins_over_file),
  };
  return cmocka_run_group_tests_name("cfg", tests, NULL, NULL);
}
