/*
 * bare_timer: the least a scheduler of arrivals can do, for bench_rate.sh.
 * The same seeded Poisson schedule as a rate cell (tb_arrival), the same
 * absolute timerfd deadline and epoll_wait, and nothing else: no sockets, no
 * parsing.  Its lateness (wake-up - scheduled time) is what the machine
 * allows any open-loop client; tokbench's start lag is compared with it.
 *
 *   bare_timer RATE SECONDS  ->  "n lag50_ms lag99_ms lagmax_ms cv"
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/tb_arrival.h"

static int64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int
cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
  if (argc != 3)
    return 2;
  double rate = strtod(argv[1], NULL), secs = strtod(argv[2], NULL);
  struct tb_arrival a;
  if (!tb_arrival_init(&a, "poisson", rate, 1))
    return 2;
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, 0);
  struct epoll_event ev = { .events = EPOLLIN };
  epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
  size_t cap = (size_t)(rate * secs * 2) + 16, n = 0;
  double *lag = malloc(cap * sizeof *lag);
  int64_t t0 = now_ns() + 20000000, next = t0, prev = 0;
  double gs = 0, gs2 = 0;
  size_t gn = 0;
  while (next - t0 < (int64_t)(secs * 1e9) && n < cap) {
    struct itimerspec its = { { 0, 0 }, { next / 1000000000LL, next % 1000000000LL } };
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    struct epoll_event e;
    while (now_ns() < next)
      if (epoll_wait(ep, &e, 1, 10) > 0) {
        uint64_t t;
        (void)!read(tfd, &t, sizeof t);
      }
    int64_t t = now_ns();
    lag[n++] = (double)(t - next) / 1e6;
    if (prev != 0) {
      double g = (double)(t - prev);
      gs += g;
      gs2 += g * g;
      gn++;
    }
    prev = t;
    next += (int64_t)llround(tb_arrival_gap_s(&a) * 1e9);
  }
  qsort(lag, n, sizeof *lag, cmp);
  double m = gs / (double)gn, var = (gs2 - gs * m) / (double)(gn - 1);
  printf("%zu %.3f %.3f %.3f %.4f\n", n, lag[n / 2], lag[(size_t)(0.99 * (double)(n - 1))],
         lag[n - 1], sqrt(var) / m);
  free(lag);
  return 0;
}
