/* Unit tests: tb_rxts (kernel receive stamps on a loopback TCP pair). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/tb_rxts.h"
#include "base/tb_util.h"

static void
sleep_ms(long ms)
{
  struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

struct pair {
  int rx, tx;
};

static void
pair_open(struct pair *p, bool stamps)
{
  int l = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(l >= 0);
  struct sockaddr_in a = { .sin_family = AF_INET };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(l, 1), 0);
  assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
  p->rx = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(p->rx >= 0);
  if (stamps) {
    assert_true(tb_rxts_enable(p->rx));
    sleep_ms(50); /* the kernel turns stamping on from a work queue */
  }
  assert_int_equal(connect(p->rx, (struct sockaddr *)&a, sizeof a), 0);
  p->tx = accept(l, NULL, NULL);
  assert_true(p->tx >= 0);
  close(l);
}

static void
pair_close(struct pair *p)
{
  close(p->rx);
  if (p->tx >= 0)
    close(p->tx);
}

/* The stamp is the arrival, not the time of the peek, and the peek leaves
 * the bytes for the reader. */
static void
test_stamp_is_arrival(void **state)
{
  (void)state;
  struct pair p;
  pair_open(&p, true);
  int64_t sent = tb_time_mono_ns();
  assert_int_equal(send(p.tx, "hello", 5, 0), 5);
  sleep_ms(60);
  int64_t now = tb_time_mono_ns();
  enum tb_rxts_src k = TB_RXTS_NONE;
  int64_t t = tb_rxts_peek(p.rx, now, tb_rxts_offset(), &k);
  assert_int_equal(k, TB_RXTS_KERNEL);
  assert_true(t >= sent - 1000000);     /* clock offset: within 1 ms */
  assert_true(t <= now - 40 * 1000000); /* 60 ms sleep, 20 ms of slack */
  char buf[8];
  assert_int_equal(recv(p.rx, buf, sizeof buf, 0), 5);
  assert_memory_equal(buf, "hello", 5);
  /* nothing queued now: the caller's clock */
  k = TB_RXTS_KERNEL;
  assert_int_equal(tb_rxts_peek(p.rx, now, tb_rxts_offset(), &k), now);
  assert_int_equal(k, TB_RXTS_NONE);
  pair_close(&p);
}

static void
test_no_stamps_falls_back(void **state)
{
  (void)state;
  struct pair p;
  pair_open(&p, false);
  assert_int_equal(send(p.tx, "x", 1, 0), 1);
  sleep_ms(5);
  int64_t now = tb_time_mono_ns();
  enum tb_rxts_src k = TB_RXTS_KERNEL;
  assert_int_equal(tb_rxts_peek(p.rx, now, tb_rxts_offset(), &k), now);
  assert_int_equal(k, TB_RXTS_CLOCK);
  pair_close(&p);
}

/* A wall clock stepped by an hour either way: the stamp is not believed. */
static void
test_implausible_stamp(void **state)
{
  (void)state;
  struct pair p;
  pair_open(&p, true);
  assert_int_equal(send(p.tx, "x", 1, 0), 1);
  sleep_ms(5);
  int64_t now = tb_time_mono_ns();
  int64_t off = tb_rxts_offset();
  int64_t hour = 3600LL * 1000000000LL;
  enum tb_rxts_src k = TB_RXTS_KERNEL;
  assert_int_equal(tb_rxts_peek(p.rx, now, off + hour, &k), now);
  assert_int_equal(k, TB_RXTS_CLOCK);
  assert_int_equal(tb_rxts_peek(p.rx, now, off - hour, &k), now);
  assert_int_equal(k, TB_RXTS_CLOCK);
  assert_true(tb_rxts_peek(p.rx, now, off, &k) < now);
  assert_int_equal(k, TB_RXTS_KERNEL);
  pair_close(&p);
}

/* End of stream and a closed descriptor: the caller's clock, no crash. */
static void
test_eof_and_bad_fd(void **state)
{
  (void)state;
  struct pair p;
  pair_open(&p, true);
  close(p.tx);
  p.tx = -1;
  sleep_ms(5);
  int64_t now = tb_time_mono_ns();
  enum tb_rxts_src k = TB_RXTS_KERNEL;
  assert_int_equal(tb_rxts_peek(p.rx, now, tb_rxts_offset(), &k), now);
  assert_int_equal(k, TB_RXTS_NONE);
  pair_close(&p);
  assert_int_equal(tb_rxts_peek(-1, now, 0, NULL), now);
  assert_false(tb_rxts_enable(-1));
}

/* The holder asks for stamps, so the kernel keeps stamping on. */
static void
test_hold(void **state)
{
  (void)state;
  int fd = tb_rxts_hold();
  assert_true(fd >= 0);
  int on = 0;
  socklen_t len = sizeof on;
  assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, &len), 0);
  assert_int_equal(on, 1);
  close(fd);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_stamp_is_arrival),
    cmocka_unit_test(test_no_stamps_falls_back),
    cmocka_unit_test(test_implausible_stamp),
    cmocka_unit_test(test_eof_and_bad_fd),
    cmocka_unit_test(test_hold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
