/* Unit tests: tb_egress (CIDR parsing, IPv4/IPv6, IPv4 inside IPv6, host
 * names, the built-in refusals, precedence, origins). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tb_egress.h"

/* Judges a numeric address under p. */
static bool
ok_addr(const struct tb_egress *p, const char *text)
{
  char why[TB_EGRESS_WHY_MAX] = "";
  struct sockaddr_in a4 = { .sin_family = AF_INET };
  struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
  if (inet_pton(AF_INET, text, &a4.sin_addr) == 1)
    return tb_egress_addr_ok(p, (struct sockaddr *)&a4, why, sizeof why);
  assert_int_equal(inet_pton(AF_INET6, text, &a6.sin6_addr), 1);
  return tb_egress_addr_ok(p, (struct sockaddr *)&a6, why, sizeof why);
}

static struct tb_egress *
policy(const char *allow, const char *deny)
{
  char *err = NULL;
  struct tb_egress *p = tb_egress_new(allow, deny, &err);
  if (p == NULL)
    fail_msg("policy: %s", err);
  return p;
}

static void
test_defaults(void **state)
{
  (void)state;
  struct tb_egress *p = policy(NULL, NULL);
  /* refused: metadata, link-local, loopback, this host, multicast */
  const char *refused[] = { "169.254.169.254", "169.254.1.1", "fd00:ec2::254", "100.100.100.200",
                            "fe80::1",         "127.0.0.1",   "127.9.9.9",     "::1",
                            "0.0.0.0",         "::",          "224.0.0.1",     "ff02::1",
                            "255.255.255.255" };
  for (size_t i = 0; i < TB_ARRAY_LEN(refused); i++)
    if (ok_addr(p, refused[i]))
      fail_msg("%s allowed by default", refused[i]);
  /* allowed: private ranges, CGNAT other than the metadata address, public */
  const char *allowed[] = { "10.0.0.1",     "172.16.5.4", "192.168.1.10", "100.100.100.201",
                            "fd12:3456::1", "8.8.8.8",    "2001:db8::1" };
  for (size_t i = 0; i < TB_ARRAY_LEN(allowed); i++)
    if (!ok_addr(p, allowed[i]))
      fail_msg("%s refused by default", allowed[i]);
  tb_egress_free(p);
}

static void
test_v4_in_v6(void **state)
{
  (void)state;
  struct tb_egress *p = policy(NULL, "10.1.0.0/16");
  assert_false(ok_addr(p, "::ffff:169.254.169.254")); /* mapped */
  assert_false(ok_addr(p, "::ffff:127.0.0.1"));
  assert_false(ok_addr(p, "::169.254.169.254"));  /* compatible */
  assert_false(ok_addr(p, "64:ff9b::a9fe:a9fe")); /* NAT64 of 169.254.169.254 */
  assert_false(ok_addr(p, "::ffff:10.1.2.3"));    /* operator's IPv4 deny */
  assert_true(ok_addr(p, "::ffff:10.2.0.1"));
  tb_egress_free(p);
}

static void
test_precedence(void **state)
{
  (void)state;
  /* a broad allow does not open a more specific built-in refusal */
  struct tb_egress *p = policy("0.0.0.0/0, ::/0", NULL);
  assert_false(ok_addr(p, "169.254.169.254"));
  assert_false(ok_addr(p, "127.0.0.1"));
  tb_egress_free(p);
  /* an allow as specific as the built-in one opens it */
  p = policy("169.254.169.254, loopback", NULL);
  assert_true(ok_addr(p, "169.254.169.254"));
  assert_false(ok_addr(p, "169.254.169.253")); /* the rest of link-local stays shut */
  assert_true(ok_addr(p, "127.0.0.1"));
  assert_true(ok_addr(p, "::1"));
  tb_egress_free(p);
  /* operator: most specific wins, deny beats allow on a tie */
  p = policy("10.1.2.3, 192.168.0.0/24", "10.0.0.0/8, 192.168.0.0/24");
  assert_true(ok_addr(p, "10.1.2.3"));
  assert_false(ok_addr(p, "10.1.2.4"));
  assert_false(ok_addr(p, "192.168.0.9"));
  tb_egress_free(p);
  /* host bits are cleared: 172.16.9.9/12 is 172.16.0.0/12 */
  p = policy(NULL, "172.16.9.9/12, 2001:db8::5/32");
  assert_false(ok_addr(p, "172.31.0.1"));
  assert_true(ok_addr(p, "172.32.0.1"));
  assert_false(ok_addr(p, "2001:db8:ffff::1"));
  assert_true(ok_addr(p, "2001:db9::1"));
  tb_egress_free(p);
}

static void
test_bad_lists(void **state)
{
  (void)state;
  const char *bad[] = { "10.0.0.0/33",          "::/129",   "10.0.0.0/",
                        "10.0.0.0/x",           "a b",      "1.2.3.4/8/8",
                        "gpu.example.com:8000", "http://x", "*" };
  for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
    char *err = NULL;
    struct tb_egress *p = tb_egress_new(bad[i], NULL, &err);
    if (p != NULL)
      fail_msg("\"%s\" accepted", bad[i]);
    assert_non_null(strstr(err, "TOKBENCH_EGRESS_ALLOW"));
    free(err);
  }
  /* empty entries and spaces are fine */
  struct tb_egress *p = policy(" , 10.0.0.0/8 ,,", "");
  tb_egress_free(p);
}

static void
test_hosts(void **state)
{
  (void)state;
  struct tb_egress *p = policy("trusted.example.com, *.lab.example", "evil.example.com, .corp");
  char why[TB_EGRESS_WHY_MAX];
  assert_int_equal(tb_egress_host_check(p, "metadata.google.internal", why, sizeof why),
                   TB_EGRESS_HOST_REFUSED);
  assert_non_null(strstr(why, "metadata"));
  assert_int_equal(tb_egress_host_check(p, "METADATA.Google.Internal.", why, sizeof why),
                   TB_EGRESS_HOST_REFUSED);
  assert_int_equal(tb_egress_host_check(p, "evil.example.com", why, sizeof why),
                   TB_EGRESS_HOST_REFUSED);
  assert_non_null(strstr(why, "TOKBENCH_EGRESS_DENY"));
  assert_int_equal(tb_egress_host_check(p, "a.b.corp", why, sizeof why), TB_EGRESS_HOST_REFUSED);
  assert_int_equal(tb_egress_host_check(p, "corp", why, sizeof why),
                   TB_EGRESS_HOST_DECIDE_BY_ADDRESS);
  assert_int_equal(tb_egress_host_check(p, "trusted.example.com", why, sizeof why),
                   TB_EGRESS_HOST_ALLOWED);
  assert_int_equal(tb_egress_host_check(p, "gpu1.lab.example", why, sizeof why),
                   TB_EGRESS_HOST_ALLOWED);
  assert_int_equal(tb_egress_host_check(p, "xlab.example", why, sizeof why),
                   TB_EGRESS_HOST_DECIDE_BY_ADDRESS);
  assert_int_equal(tb_egress_host_check(p, "gpu.example.com", why, sizeof why),
                   TB_EGRESS_HOST_DECIDE_BY_ADDRESS);
  tb_egress_free(p);
  /* an operator may allow a built-in name explicitly */
  p = policy("metadata.google.internal", NULL);
  assert_int_equal(tb_egress_host_check(p, "metadata.google.internal", why, sizeof why),
                   TB_EGRESS_HOST_ALLOWED);
  tb_egress_free(p);
}

static void
test_urls(void **state)
{
  (void)state;
  struct tb_egress *p = policy(NULL, NULL);
  char why[TB_EGRESS_WHY_MAX];
  const char *refused[] = {
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://127.0.0.1:8000",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://127.1:80/",
    "http://[::ffff:169.254.169.254]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://localhost:8000",
    "http://a.localhost/",
    "http://[fe80::1%25eth0]/",
    "https://0.0.0.0/",
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(refused); i++)
    if (tb_egress_url_ok(p, refused[i], why, sizeof why))
      fail_msg("%s passed", refused[i]);
  assert_true(tb_egress_url_ok(p, "http://10.0.0.5:8000/v1", why, sizeof why));
  assert_true(tb_egress_url_ok(p, "https://gpu.example.com/", why, sizeof why));
  assert_false(tb_egress_url_ok(p, "http://169.254.169.254/", why, sizeof why));
  assert_non_null(strstr(why, "cloud metadata"));
  tb_egress_free(p);
  /* loopback allowed (make run, the tests) */
  p = policy("loopback", NULL);
  assert_true(tb_egress_url_ok(p, "http://127.0.0.1:8000", why, sizeof why));
  assert_true(tb_egress_url_ok(p, "http://localhost:8000", why, sizeof why));
  assert_true(tb_egress_url_ok(p, "http://[::1]:8000", why, sizeof why));
  assert_false(tb_egress_url_ok(p, "http://169.254.169.254/", why, sizeof why));
  tb_egress_free(p);
  /* no policy: nothing is judged */
  assert_true(tb_egress_url_ok(NULL, "http://169.254.169.254/", why, sizeof why));
}

static void
test_origin(void **state)
{
  (void)state;
  char *o = tb_egress_origin("HTTP://GPU.Example.com./v1");
  assert_string_equal(o, "http://gpu.example.com:80");
  free(o);
  o = tb_egress_origin("https://gpu.example.com/v1?x=1");
  assert_string_equal(o, "https://gpu.example.com:443");
  free(o);
  o = tb_egress_origin("http://[::1]:8001");
  assert_string_equal(o, "http://[::1]:8001");
  free(o);
  char *a = tb_egress_origin("http://10.0.0.1:8000/a");
  char *b = tb_egress_origin("http://10.0.0.1:8000/b/c");
  assert_string_equal(a, b); /* the path is not part of the origin */
  free(a);
  free(b);
  assert_null(tb_egress_origin("not a url"));
}

/* Issue 27, finding 3: a host is judged in one spelling, so registration
 * refuses what connection would: trailing dots, case, every spelling of an
 * address literal, and names that IDNA would turn into other names. */
static void
test_url_spellings(void **state)
{
  (void)state;
  struct tb_egress *p = policy(NULL, "evil.example.com");
  char why[TB_EGRESS_WHY_MAX];
  const char *refused[] = {
    "http://169.254.169.254.:80/",
    "http://169.254.169.254../",
    "http://2852039166./",
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://0xA9FEA9FE/",
    "http://0251.0376.0251.0376/",
    "http://169.254.43518/",
    "http://169.16689662/",
    "http://%31%36%39.254.169.254/",
    "http://0x7f.1./",
    "http://127.000.000.001/",
    "http://0177.0.0.1/",
    "http://0/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[0:0:0:0:0:ffff:169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://LOCALHOST./",
    "http://a.LocalHost./",
    "http://METADATA.Google.Internal./",
    "http://metadata./",
    "http://Evil.Example.Com./",
    "http://\xef\xbd\x8d\xef\xbd\x85\xef\xbd\x94\xef\xbd\x81\xef\xbd\x84"
    "\xef\xbd\x81\xef\xbd\x94\xef\xbd\x81.google.internal/", /* full-width "metadata" */
    "http://\xef\xbc\x91\xef\xbc\x96\xef\xbc\x99"
    ".254.169.254/", /* full-width 169 */
    "http://169\xe3\x80\x82"
    "254\xe3\x80\x82"
    "169\xe3\x80\x82"
    "254/", /* "。" dots */
    "http://b\xc3\xbc"
    "cher.example/",
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(refused); i++)
    if (tb_egress_url_ok(p, refused[i], why, sizeof why))
      fail_msg("%s passed", refused[i]);
  assert_false(tb_egress_url_ok(p, "http://169.254.169.254.:80/", why, sizeof why));
  assert_non_null(strstr(why, "169.254.169.254 by rule 169.254.169.254/32"));
  assert_false(tb_egress_url_ok(p, "http://0xa9fea9fe/", why, sizeof why));
  assert_non_null(strstr(why, "cloud metadata"));
  assert_false(tb_egress_url_ok(p,
                                "http://b\xc3\xbc"
                                "cher.example/",
                                why, sizeof why));
  assert_non_null(strstr(why, "xn--"));
  const char *allowed[] = {
    "http://10.0.0.5.:8000/",        "http://0x0a000005/",    "http://GPU.Example.com./v1",
    "http://xn--bcher-kva.example/", "http://[2001:db8::1]/",
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(allowed); i++)
    if (!tb_egress_url_ok(p, allowed[i], why, sizeof why))
      fail_msg("%s refused: %s", allowed[i], why);
  /* the guard judges the same spelling before any socket */
  struct tb_egress_guard g;
  CURL *e = curl_easy_init();
  assert_non_null(e);
  assert_false(tb_egress_guard_easy(&g, p, e, "http://Evil.Example.Com./"));
  assert_true(g.refused);
  assert_false(tb_egress_guard_easy(&g, p, e,
                                    "http://b\xc3\xbc"
                                    "cher.example/"));
  assert_true(g.refused && strstr(g.why, "xn--") != NULL);
  assert_true(tb_egress_guard_easy(&g, p, e, "http://169.254.169.254.:9/"));
  curl_easy_setopt(e, CURLOPT_URL, "http://169.254.169.254.:9/");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
  assert_int_not_equal(curl_easy_perform(e), CURLE_OK);
  curl_easy_cleanup(e);
  tb_egress_free(p);
}

/* What a worker judges before a run: the URL, and a name no rule decides
 * by the addresses it resolves to. */
static void
test_url_reachable(void **state)
{
  (void)state;
  struct tb_egress *p = policy(NULL, "evil.example.com");
  char why[TB_EGRESS_WHY_MAX];
  assert_true(tb_egress_url_reachable(NULL, "http://127.0.0.1/", why, sizeof why));
  assert_false(tb_egress_url_reachable(p, "http://127.0.0.1:8000/", why, sizeof why));
  assert_non_null(strstr(why, "127.0.0.0/8 (built-in: loopback)"));
  assert_false(tb_egress_url_reachable(p, "http://169.254.169.254.:80/", why, sizeof why));
  assert_false(tb_egress_url_reachable(p, "http://Evil.Example.Com./", why, sizeof why));
  assert_true(tb_egress_url_reachable(p, "http://10.0.0.5:8000/", why, sizeof why));
  /* a name that does not resolve is the run's to report */
  assert_true(tb_egress_url_reachable(p, "http://no-such-host.invalid/", why, sizeof why));
  /* a name resolving only to loopback (the test machine's /etc/hosts) */
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) == 0) {
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    bool lo = getaddrinfo(host, NULL, &hints, &res) == 0;
    for (const struct addrinfo *a = res; lo && a != NULL; a = a->ai_next)
      lo = a->ai_family == AF_INET &&
           (ntohl(((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    if (res != NULL)
      freeaddrinfo(res);
    char *url = tb_xasprintf("http://%s:8000/", host);
    assert_int_equal(tb_egress_url_reachable(p, url, why, sizeof why), !lo);
    free(url);
  }
  tb_egress_free(p);
}

/* The guard on a real libcurl transfer: a refused address never gets a
 * socket, and the reason comes back. */
static void
test_guard(void **state)
{
  (void)state;
  struct tb_egress *p = policy(NULL, NULL);
  CURL *e = curl_easy_init();
  assert_non_null(e);
  struct tb_egress_guard g;
  assert_true(tb_egress_guard_easy(&g, p, e, "http://127.0.0.1:9/"));
  curl_easy_setopt(e, CURLOPT_URL, "http://127.0.0.1:9/");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
  CURLcode rc = curl_easy_perform(e);
  assert_int_not_equal(rc, CURLE_OK);
  assert_true(g.refused);
  assert_non_null(strstr(g.why, "127.0.0.0/8 (built-in: loopback)"));
  curl_easy_cleanup(e);
  e = curl_easy_init();
  assert_false(tb_egress_guard_easy(&g, p, e, "http://metadata.google.internal/"));
  assert_true(g.refused);
  curl_easy_cleanup(e);
  tb_egress_free(p);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),      cmocka_unit_test(test_v4_in_v6),
    cmocka_unit_test(test_precedence),    cmocka_unit_test(test_bad_lists),
    cmocka_unit_test(test_hosts),         cmocka_unit_test(test_urls),
    cmocka_unit_test(test_origin),        cmocka_unit_test(test_guard),
    cmocka_unit_test(test_url_spellings), cmocka_unit_test(test_url_reachable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
