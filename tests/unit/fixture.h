/*
 * fixture.h: a JSON fixture of tests/fixtures for the unit tests, read whole
 * (the test fails, naming the file and jansson's reason, when it cannot be).
 *
 * Header-only (a static inline function) because only the tests include it;
 * include it after <cmocka.h>.
 */
#ifndef TB_TEST_FIXTURE_H
#define TB_TEST_FIXTURE_H

#include <jansson.h>

static inline json_t *
fixture_json(const char *path)
{
  json_error_t e;
  json_t *d = json_load_file(path, 0, &e);
  if (d == NULL)
    fail_msg("%s: %s", path, e.text);
  return d;
}

#endif
