/* Unit tests: the job-document cache (service/api_jobcache.c): hits only for
 * the owning project, invalidation and flush, tickets that refuse a copy
 * read before an invalidation, the TTL, the size cap, references that
 * outlive an invalidation, and "off" (ttl 0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_jobcache.h"

#define J1 "0e7e4b2a-4524-4bd4-9cd9-a930e616e5be"
#define J2 "1f8f5c3b-5635-4ce5-8dea-b041f727f6cf"
#define P1 "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
#define P2 "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"

static void
put(struct tb_api_jobcache *c, uint64_t t, const char *job, const char *doc)
{
  tb_api_jobcache_put(c, t, job, P1, "running", 3, "W/\"running-3-1\"", doc, strlen(doc));
}

static void
test_hit_and_isolation(void **state)
{
  (void)state;
  struct tb_api_jobcache *c = tb_api_jobcache_new(60000);
  assert_null(tb_api_jobcache_get(c, J1, P1));
  put(c, tb_api_jobcache_ticket(c, J1), J1, "{\"id\":1}");
  struct tb_api_jobdoc *d = tb_api_jobcache_get(c, J1, P1);
  assert_non_null(d);
  assert_string_equal(d->doc, "{\"id\":1}");
  assert_int_equal(d->len, 8);
  assert_string_equal(d->state, "running");
  assert_int_equal(d->cells_done, 3);
  assert_string_equal(d->etag, "W/\"running-3-1\"");
  tb_api_jobcache_release(c, d);
  assert_null(tb_api_jobcache_get(c, J1, P2)); /* another project: miss */
  assert_null(tb_api_jobcache_get(c, J2, P1));
  tb_api_jobcache_free(c);
}

static void
test_invalidate_and_tickets(void **state)
{
  (void)state;
  struct tb_api_jobcache *c = tb_api_jobcache_new(60000);
  uint64_t t = tb_api_jobcache_ticket(c, J1);
  put(c, t, J1, "{\"v\":1}");
  struct tb_api_jobdoc *held = tb_api_jobcache_get(c, J1, P1);
  tb_api_jobcache_invalidate(c, J1);
  assert_null(tb_api_jobcache_get(c, J1, P1));
  /* the holder's reference outlives the invalidation */
  assert_string_equal(held->doc, "{\"v\":1}");
  tb_api_jobcache_release(c, held);
  /* a copy read with the ticket taken before the invalidation is refused */
  put(c, t, J1, "{\"v\":1}");
  assert_null(tb_api_jobcache_get(c, J1, P1));
  put(c, tb_api_jobcache_ticket(c, J1), J1, "{\"v\":2}");
  struct tb_api_jobdoc *d = tb_api_jobcache_get(c, J1, P1);
  assert_non_null(d);
  assert_string_equal(d->doc, "{\"v\":2}");
  tb_api_jobcache_release(c, d);
  /* a flush refuses every older ticket */
  uint64_t t2 = tb_api_jobcache_ticket(c, J2);
  tb_api_jobcache_flush(c);
  assert_null(tb_api_jobcache_get(c, J1, P1));
  put(c, t2, J2, "{}");
  assert_null(tb_api_jobcache_get(c, J2, P1));
  tb_api_jobcache_invalidate(c, NULL); /* no-op */
  tb_api_jobcache_free(c);
}

static void
test_ttl_cap_and_off(void **state)
{
  (void)state;
  struct tb_api_jobcache *c = tb_api_jobcache_new(20);
  put(c, tb_api_jobcache_ticket(c, J1), J1, "{}");
  struct tb_api_jobdoc *d = tb_api_jobcache_get(c, J1, P1);
  assert_non_null(d);
  tb_api_jobcache_release(c, d);
  usleep(40 * 1000);
  assert_null(tb_api_jobcache_get(c, J1, P1)); /* expired */
  size_t big = TB_JOBCACHE_DOC_MAX + 1;
  char *doc = malloc(big + 1);
  assert_non_null(doc);
  memset(doc, ' ', big);
  doc[big] = '\0';
  tb_api_jobcache_put(c, tb_api_jobcache_ticket(c, J2), J2, P1, "queued", 0, "e", doc, big);
  assert_null(tb_api_jobcache_get(c, J2, P1)); /* over the cap: not stored */
  free(doc);
  tb_api_jobcache_free(c);
  struct tb_api_jobcache *off = tb_api_jobcache_new(0);
  put(off, tb_api_jobcache_ticket(off, J1), J1, "{}");
  assert_null(tb_api_jobcache_get(off, J1, P1));
  tb_api_jobcache_free(off);
  tb_api_jobcache_free(NULL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_hit_and_isolation),
    cmocka_unit_test(test_invalidate_and_tickets),
    cmocka_unit_test(test_ttl_cap_and_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
