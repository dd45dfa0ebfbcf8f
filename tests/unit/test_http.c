/* Unit tests: tb_http's blocking calls over real loopback sockets (a tiny
 * server thread, loopback.h): status and body, the bearer header, POST
 * bodies, the body cap, redirects not followed, timeouts, the thread's
 * deadline, refused connections and the egress policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loopback.h"
#include "net/tb_egress.h"
#include "net/tb_http.h"
#include "base/tb_util.h"

/* Routes of the test server, by request target. */
static bool
handler(void *cls, int fd, const struct lb_req *req)
{
  (void)cls;
  if (strncmp(req->head, "GET /ok ", 8) == 0) {
    lb_respond(fd, 200, "application/json", "{\"a\":1}", false);
  } else if (strncmp(req->head, "POST /echo ", 11) == 0) {
    lb_respond(fd, 201, "application/json", req->body, false);
  } else if (strncmp(req->head, "GET /big ", 9) == 0) {
    char *big = malloc(100001);
    memset(big, 'x', 100000);
    big[100000] = '\0';
    lb_respond(fd, 200, "text/plain", big, false);
    free(big);
  } else if (strncmp(req->head, "GET /redirect ", 14) == 0) {
    const char *r = "HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 0\r\n\r\n";
    lb_write_all(fd, r, strlen(r));
  } else if (strncmp(req->head, "GET /slow ", 10) == 0) {
    struct timespec ts = { 2, 0 };
    nanosleep(&ts, NULL); /* the client gives up first */
    lb_respond(fd, 200, "text/plain", "late", true);
    return false;
  } else if (strncmp(req->head, "GET /empty ", 11) == 0) {
    lb_respond(fd, 204, "text/plain", "", false);
  } else if (strncmp(req->head, "GET /garbage ", 13) == 0) {
    const char *g = "this is not HTTP\r\n\r\n";
    lb_write_all(fd, g, strlen(g));
    return false;
  } else {
    lb_respond(fd, 404, "application/json", "{\"error\":\"no\"}", false);
  }
  return true;
}

static int
setup(void **state)
{
  struct lb_server *s = calloc(1, sizeof *s);
  if (!lb_start(s, handler, NULL))
    return -1;
  *state = s;
  return 0;
}

static int
teardown(void **state)
{
  lb_stop(*state);
  free(*state);
  return 0;
}

static char *
url(struct lb_server *s, const char *path)
{
  return tb_xasprintf("%s%s", s->url, path);
}

static void
test_get_and_auth(void **state)
{
  struct lb_server *s = *state;
  struct tb_http_resp r;
  char *u = url(s, "/ok");
  assert_int_equal(tb_http_call("GET", u, "sk-test-123", NULL, 0, 5000, 0, &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "{\"a\":1}");
  assert_int_equal(r.len, 7);
  char v[128];
  assert_true(lb_header(s->last_head, "Authorization", v, sizeof v));
  assert_string_equal(v, "Bearer sk-test-123");
  tb_http_resp_free(&r);
  assert_null(r.body);

  /* no key, or an empty one: no Authorization header at all */
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), 0);
  assert_false(lb_header(s->last_head, "Authorization", v, sizeof v));
  tb_http_resp_free(&r);
  assert_int_equal(tb_http_call("GET", u, "", NULL, 0, 5000, 0, &r), 0);
  assert_false(lb_header(s->last_head, "Authorization", v, sizeof v));
  tb_http_resp_free(&r);
  free(u);
}

static void
test_post_status_and_empty(void **state)
{
  struct lb_server *s = *state;
  struct tb_http_resp r;
  char *u = url(s, "/echo");
  const char *body = "{\"model\":\"m\",\"prompt\":\"hi\"}";
  /* only body_len bytes go: the tail after it is not sent */
  assert_int_equal(tb_http_call("POST", u, NULL, body, strlen(body), 5000, 0, &r), 0);
  assert_int_equal(r.status, 201);
  assert_string_equal(r.body, body);
  char v[128];
  assert_true(lb_header(s->last_head, "Content-Type", v, sizeof v));
  assert_string_equal(v, "application/json");
  tb_http_resp_free(&r);
  assert_int_equal(tb_http_call("POST", u, NULL, body, 5, 5000, 0, &r), 0);
  assert_string_equal(r.body, "{\"mod");
  tb_http_resp_free(&r);
  /* POST without a body */
  assert_int_equal(tb_http_call("POST", u, NULL, NULL, 99, 5000, 0, &r), 0);
  assert_int_equal(r.status, 201);
  assert_string_equal(r.body, "");
  tb_http_resp_free(&r);
  free(u);

  /* any status is an answer; an empty body is "" not NULL */
  u = url(s, "/nowhere");
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), 0);
  assert_int_equal(r.status, 404);
  tb_http_resp_free(&r);
  free(u);
  u = url(s, "/empty");
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), 0);
  assert_int_equal(r.status, 204);
  assert_non_null(r.body);
  assert_int_equal(r.len, 0);
  tb_http_resp_free(&r);
  free(u);
}

static void
test_cap_and_redirect(void **state)
{
  struct lb_server *s = *state;
  struct tb_http_resp r;
  char *u = url(s, "/big");
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 1000, &r), -1);
  assert_int_equal(r.status, 0);
  assert_null(r.body);
  assert_non_null(strstr(r.err, "over 1000 bytes"));
  tb_http_resp_free(&r);
  /* exactly at the cap is fine */
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 100000, &r), 0);
  assert_int_equal(r.len, 100000);
  tb_http_resp_free(&r);
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 99999, &r), -1);
  tb_http_resp_free(&r);
  free(u);

  unsigned before = s->requests;
  u = url(s, "/redirect");
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), 0);
  assert_int_equal(r.status, 302); /* not followed */
  assert_int_equal(s->requests, before + 1);
  tb_http_resp_free(&r);
  free(u);
}

static void
test_transport_errors(void **state)
{
  struct lb_server *s = *state;
  struct tb_http_resp r;
  char *u = url(s, "/slow");
  int64_t t0 = tb_time_mono_ns();
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 200, 0, &r), -1);
  assert_int_equal(r.status, 0);
  assert_true(r.err[0] != '\0');
  assert_true(tb_time_mono_ns() - t0 < 1900000000LL); /* gave up before the answer */
  tb_http_resp_free(&r);
  free(u);

  u = url(s, "/garbage");
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), -1);
  assert_true(r.err[0] != '\0');
  tb_http_resp_free(&r);
  free(u);

  int port = lb_closed_port();
  assert_true(port > 0);
  u = tb_xasprintf("http://127.0.0.1:%d/ok", port);
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), -1);
  assert_int_equal(r.status, 0);
  assert_true(r.err[0] != '\0');
  tb_http_resp_free(&r);
  free(u);

  /* only http and https */
  assert_int_equal(tb_http_call("GET", "file:///etc/passwd", NULL, NULL, 0, 5000, 0, &r), -1);
  assert_null(r.body);
  tb_http_resp_free(&r);
  assert_int_equal(tb_http_call("GET", "not a url", NULL, NULL, 0, 5000, 0, &r), -1);
  tb_http_resp_free(&r);
}

static void
test_deadline(void **state)
{
  struct lb_server *s = *state;
  struct tb_http_resp r;
  char *u = url(s, "/ok");
  unsigned before = s->requests;
  tb_http_set_deadline(tb_time_mono_ns() - 1);
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), -1);
  assert_string_equal(r.err, "deadline passed");
  assert_int_equal(s->requests, before); /* nothing was sent */
  tb_http_resp_free(&r);
  /* a deadline in the future cuts the timeout */
  char *slow = url(s, "/slow");
  tb_http_set_deadline(tb_time_mono_ns() + 300000000LL);
  int64_t t0 = tb_time_mono_ns();
  assert_int_equal(tb_http_call("GET", slow, NULL, NULL, 0, 60000, 0, &r), -1);
  assert_true(tb_time_mono_ns() - t0 < 1900000000LL);
  tb_http_resp_free(&r);
  tb_http_set_deadline(0);
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), 0);
  assert_int_equal(r.status, 200);
  tb_http_resp_free(&r);
  free(slow);
  free(u);
}

static void
test_egress_policy(void **state)
{
  struct lb_server *s = *state;
  struct tb_http_resp r;
  char *err = NULL;
  struct tb_egress *p = tb_egress_new(NULL, NULL, &err);
  assert_non_null(p);
  tb_egress_install(p); /* built-in rules: loopback refused */
  unsigned before = s->requests;
  char *u = url(s, "/ok");
  assert_int_equal(tb_http_call("GET", u, "k", NULL, 0, 5000, 0, &r), -1);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.err, "egress refused"));
  assert_non_null(strstr(r.err, TB_EGRESS_RULE_SEP));
  assert_int_equal(s->requests, before);
  tb_http_resp_free(&r);
  /* "localhost" is judged by its address too */
  char *lh = tb_xasprintf("http://localhost:%d/ok", s->port);
  assert_int_equal(tb_http_call("GET", lh, NULL, NULL, 0, 5000, 0, &r), -1);
  assert_non_null(strstr(r.err, "egress refused"));
  tb_http_resp_free(&r);
  free(lh);
  tb_egress_install(tb_egress_new("loopback", NULL, &err));
  assert_int_equal(tb_http_call("GET", u, NULL, NULL, 0, 5000, 0, &r), 0);
  assert_int_equal(r.status, 200);
  tb_http_resp_free(&r);
  tb_egress_install(NULL);
  free(u);
}

static void
test_auth_header(void **state)
{
  (void)state;
  assert_null(tb_http_auth_header(NULL));
  assert_null(tb_http_auth_header(""));
  char *h = tb_http_auth_header("abc");
  assert_string_equal(h, "Authorization: Bearer abc");
  tb_http_secret_free(h);
  tb_http_secret_free(NULL);
}

int
main(void)
{
  tb_http_global_init();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_get_and_auth),     cmocka_unit_test(test_post_status_and_empty),
    cmocka_unit_test(test_cap_and_redirect), cmocka_unit_test(test_transport_errors),
    cmocka_unit_test(test_deadline),         cmocka_unit_test(test_egress_policy),
    cmocka_unit_test(test_auth_header),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
