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

/* A switch: 0 or 1; unset or empty is the key's default; anything else is
 * refused with the key's name.  tb_cfg_help_keys lists the keys without the
 * heading. */
static void
test_bool_and_help_keys(void **state)
{
  (void)state;
  static const struct tb_cfg_key sw[] = {
    { "TBT_ON", "1", "on", false },
    { "TBT_OFF", NULL, "off", false },
  };
  struct tb_cfg *c = tb_cfg_new(sw, 2);
  char *err = NULL;
  bool on = false, off = true;
  assert_true(tb_cfg_get_bool(c, "TBT_ON", &on, &err));
  assert_true(tb_cfg_get_bool(c, "TBT_OFF", &off, &err));
  assert_true(on);
  assert_false(off);
  tb_cfg_set(c, "TBT_ON", "");
  tb_cfg_set(c, "TBT_OFF", "1");
  on = off = false;
  assert_true(tb_cfg_get_bool(c, "TBT_ON", &on, &err));
  assert_true(tb_cfg_get_bool(c, "TBT_OFF", &off, &err));
  assert_true(on);
  assert_true(off);
  tb_cfg_set(c, "TBT_ON", "0");
  assert_true(tb_cfg_get_bool(c, "TBT_ON", &on, &err));
  assert_false(on);
  const char *bad[] = { "yes", "true", "2", "01", " 1" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tb_cfg_set(c, "TBT_OFF", bad[i]);
    off = false;
    assert_false(tb_cfg_get_bool(c, "TBT_OFF", &off, &err));
    assert_false(off);
    assert_string_equal(err, "TBT_OFF must be 0 or 1");
    free(err);
    err = NULL;
  }
  tb_cfg_free(c);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  tb_cfg_help_keys(sw, 2, f);
  fclose(f);
  assert_string_equal(buf, "  TBT_ON                       on (default: 1)\n"
                           "  TBT_OFF                      off\n");
  free(buf);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),           cmocka_unit_test(test_parse_text),
    cmocka_unit_test(test_parse_errors),       cmocka_unit_test(test_env_wins_over_file),
    cmocka_unit_test(test_bool_and_help_keys),
  };
  return cmocka_run_group_tests_name("cfg", tests, NULL, NULL);
}
