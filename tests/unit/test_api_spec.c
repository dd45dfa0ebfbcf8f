/* Unit tests: the api's endpoint and key bodies (service/api_spec.c; a
 * job spec is tests/unit/test_spec.c), routing and the error registry
 * (api_routes.c, api_error.c) and tb_auth's pure helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_spec.h"
#include "db/tb_auth.h"

#define EP "0e7e4b2a-4524-4bd4-9cd9-a930e616e5be"

static void
test_endpoint_patch_and_redaction(void **state)
{
  (void)state;
  json_t *out = NULL, *errors = NULL;
  const char *t = "{\"launch_command\":\"vllm serve --api-key sk-1 --port 1\",\"api_key\":null}";
  assert_int_equal(tb_api_spec_endpoint(t, strlen(t), true, &out, &errors), TB_SPEC_OK);
  assert_string_equal(json_string_value(json_object_get(out, "launch_command")),
                      "vllm serve --api-key <redacted> --port 1");
  assert_true(json_is_null(json_object_get(out, "api_key")));
  json_decref(out);
  /* create needs name and base_url; null api_key is a patch-only thing */
  assert_int_equal(tb_api_spec_endpoint(t, strlen(t), false, &out, &errors), TB_SPEC_INVALID);
  assert_true(json_array_size(errors) >= 3);
  json_decref(errors);
  const char *u = "{\"name\":\"a\",\"base_url\":\"http://user:pw@host/\"}";
  assert_int_equal(tb_api_spec_endpoint(u, strlen(u), false, &out, &errors), TB_SPEC_INVALID);
  json_decref(errors);
}

static void
test_auth_helpers(void **state)
{
  (void)state;
  unsigned m;
  assert_true(tb_scope_parse("read,write", &m));
  assert_int_equal(m, TB_SCOPE_READ | TB_SCOPE_WRITE);
  assert_false(tb_scope_parse("read,", &m));
  assert_false(tb_scope_parse("root", &m));
  assert_int_equal(tb_scope_effective(TB_SCOPE_ADMIN),
                   TB_SCOPE_ADMIN | TB_SCOPE_WRITE | TB_SCOPE_READ);
  char buf[32];
  tb_scope_csv(TB_SCOPE_READ | TB_SCOPE_ADMIN, buf, sizeof buf);
  assert_string_equal(buf, "read,admin");
  int64_t s;
  assert_true(tb_scope_parse_duration("30d", &s));
  assert_int_equal(s, 30 * 86400);
  assert_true(tb_scope_parse_duration("3600", &s));
  assert_false(tb_scope_parse_duration("0", &s));
  assert_false(tb_scope_parse_duration("-5m", &s));
  assert_false(tb_scope_parse_duration("99999999999w", &s));
  assert_true(tb_auth_key_wellformed("tkb_0123456789abcdefghijABCDEFGHIJ0123456789", 44));
  assert_false(tb_auth_key_wellformed("tkb_0123456789abcdefghijABCDEFGHIJ012345678!", 44));
  assert_false(tb_auth_key_wellformed("tkx_0123456789abcdefghijABCDEFGHIJ0123456789", 44));
}

static void
test_routes(void **state)
{
  (void)state;
  struct tb_api_req r;
  memset(&r, 0, sizeof r);
  assert_int_equal(tb_api_route_find(&r, "GET", "/v1/jobs/" EP), TB_API_MATCH_OK);
  assert_string_equal(r.id, EP);
  assert_int_equal(tb_api_route_find(&r, "GET", "/v1/jobs/0E7E4B2A-4524-4BD4-9CD9-A930E616E5BE"),
                   TB_API_MATCH_OK);
  assert_string_equal(r.id, EP);
  assert_int_equal(tb_api_route_find(&r, "POST", "/v1/jobs/" EP "/cancel"), TB_API_MATCH_OK);
  assert_int_equal(tb_api_route_find(&r, "GET", "/v1/jobs/123"), TB_API_MATCH_NO_PATH);
  assert_int_equal(tb_api_route_find(&r, "GET", "/v1/jobs/" EP "/"), TB_API_MATCH_NO_PATH);
  assert_int_equal(tb_api_route_find(&r, "DELETE", "/v1/jobs"), TB_API_MATCH_NO_METHOD);
  assert_non_null(strstr(r.allow, "GET"));
  assert_non_null(strstr(r.allow, "POST"));
  assert_int_equal(tb_api_route_find(&r, "GET", "/healthz"), TB_API_MATCH_OK);
  assert_int_equal(r.route->scope, TB_SCOPE_NONE);
  assert_int_equal(tb_api_route_find(&r, "GET", "//healthz"), TB_API_MATCH_NO_PATH);
}

static void
test_error_registry(void **state)
{
  (void)state;
  for (int c = 0; c < TB_EC_COUNT_; c++) {
    const struct tb_api_error_def *d = tb_api_error_def((enum tb_api_ec)c);
    assert_non_null(d->title);
    assert_true(d->status >= 300 && d->status <= 599);
  }
  assert_int_equal(tb_api_error_def(TB_EC_INVALID)->status, 422);
  assert_int_equal(tb_api_error_def(TB_EC_RATE_LIMITED)->status, 429);
  assert_int_equal(tb_api_error_def((enum tb_api_ec)9999)->status, 500);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_endpoint_patch_and_redaction),
    cmocka_unit_test(test_auth_helpers),
    cmocka_unit_test(test_routes),
    cmocka_unit_test(test_error_registry),
  };
  return cmocka_run_group_tests_name("api_spec", tests, NULL, NULL);
}
