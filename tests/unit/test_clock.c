/* Unit tests: tb_clock, a worker's offset to the database's clock from
 * round trips (RFC 5905 section 8's on-wire arithmetic, by hand below) and
 * the start-skew limit of a sharded cell (issue 24: max(2 ms, 1% of the
 * window)).
 *
 * By hand: a server clock 5 s ahead of local.  A probe sent at local
 * 1,000,000 ns that takes 100 us out and 300 us back is stamped by the
 * server at 1,100,000 + 5e9 ns and received at 1,400,000: offset =
 * 5,001,100,000 - 1,200,000 = 4,999,900,000 ns, 100 us below the truth and
 * inside its bound of rtt / 2 = 200 us.  A probe of 20 us each way gives
 * the truth exactly and the tighter bound (20 us), so it is chosen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/tb_clock.h"

static void
test_offset_from_the_tightest_probe(void **state)
{
  (void)state;
  /* true offset 5 s; one-way delays out 100 us / back 300 us (asymmetric),
   * then a tight probe 20 / 20 us, then a slow one */
  const int64_t truth = 5000000000LL;
  struct tb_clock_probe p[3] = {
    { .sent_ns = 1000000, .recv_ns = 1400000, .server_us = (1000000 + 100000 + truth) / 1000 },
    { .sent_ns = 3000000, .recv_ns = 3040000, .server_us = (3000000 + 20000 + truth) / 1000 },
    { .sent_ns = 5000000, .recv_ns = 9000000, .server_us = (5000000 + 10000 + truth) / 1000 },
  };
  struct tb_clock_offset o;
  assert_true(tb_clock_offset(p, 3, &o));
  assert_int_equal(o.probes, 3);
  assert_int_equal(o.rtt_ns, 40000);
  assert_int_equal(o.uncert_ns, 20000);
  /* symmetric probe: exactly the truth */
  assert_int_equal(o.offset_ns, truth);
  /* the asymmetric probe alone: off by (100 - 300) / 2 = -100 us, inside
   * its bound of 200 us */
  assert_true(tb_clock_offset(p, 1, &o));
  assert_int_equal(o.offset_ns, truth - 100000);
  assert_true(o.offset_ns - truth <= o.uncert_ns && truth - o.offset_ns <= o.uncert_ns);
  /* mapping both ways */
  assert_true(tb_clock_offset(p, 3, &o));
  int64_t t0_server_us = 5000012345LL;
  int64_t local = tb_clock_to_local_ns(&o, t0_server_us);
  assert_int_equal(local, t0_server_us * 1000 - truth);
  assert_int_equal(tb_clock_to_server_us(&o, local), t0_server_us);
  struct tb_clock_offset neg = { .offset_ns = -1500 };
  assert_int_equal(tb_clock_to_server_us(&neg, 0), -2); /* floor */
}

static void
test_no_valid_probe(void **state)
{
  (void)state;
  struct tb_clock_probe p[1] = { { .sent_ns = 10, .recv_ns = 5, .server_us = 1 } };
  struct tb_clock_offset o;
  assert_false(tb_clock_offset(p, 1, &o));
  assert_int_equal(o.probes, 0);
  assert_false(tb_clock_offset(p, 0, &o));
}

static void
test_skew_limit(void **state)
{
  (void)state;
  assert_int_equal(tb_clock_skew_limit_us(30), 300000); /* 1% of 30 s */
  assert_int_equal(tb_clock_skew_limit_us(0.2), 2000);  /* the 2 ms floor */
  assert_int_equal(tb_clock_skew_limit_us(0.1), 2000);
  assert_int_equal(tb_clock_skew_limit_us(1), 10000);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_offset_from_the_tightest_probe),
    cmocka_unit_test(test_no_valid_probe),
    cmocka_unit_test(test_skew_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
