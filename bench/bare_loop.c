/*
 * bare_loop: the baseline for bench_engine.sh, a bare C epoll SSE reader.
 * Opens STREAMS raw HTTP/1.1 streaming requests to tokbench-sim, then reads
 * them with epoll, one read() per ready fd (about one event per read), and
 * counts events ("data: " lines).  No parsing beyond that, no JSON: the
 * least CPU a client can spend per event.  Prints events/s and CPU time per
 * million events over DURATION seconds after every stream is open.
 * usage: bare_loop PORT STREAMS DURATION_S
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double
now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#define MAX_SAMPLES 4000000
#define MAX_FD 65536
static int64_t delays[MAX_SAMPLES], gaps[MAX_SAMPLES];
static int64_t last_st[MAX_FD], last_arr[MAX_FD];
static long nd, ng;

static int64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
cmp64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double
pct(int64_t *v, long n, double q)
{
  if (n == 0)
    return 0;
  qsort(v, (size_t)n, sizeof *v, cmp64);
  return (double)v[(long)(q * (double)(n - 1))] / 1e6;
}

static double
cpu_s(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: bare_loop PORT STREAMS DURATION_S\n");
    return 2;
  }
  int port = (int)strtol(argv[1], NULL, 10), n = (int)strtol(argv[2], NULL, 10);
  double dur = strtod(argv[3], NULL);
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  const char *body = "{\"model\":\"bench\",\"messages\":[{\"role\":\"user\","
                     "\"content\":\"bare loop baseline\"}],\"max_tokens\":15000,"
                     "\"ignore_eos\":true,\"stream\":true}";
  char req[1024];
  int rlen = snprintf(req, sizeof req,
                      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "\r\n%s",
                      strlen(body), body);
  int ep = epoll_create1(0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  for (int i = 0; i < n; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        write(fd, req, (size_t)rlen) != rlen) {
      perror("bare_loop: connect");
      return 1;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  static char buf[65536];
  struct epoll_event evs[256];
  long events = 0, reads = 0;
  double t0 = 0, c0 = 0, t_open = now_s();
  long ev0 = 0, rd0 = 0;
  for (;;) {
    double t = now_s();
    if (t0 == 0 && t - t_open > 1.0) { /* every stream open and flowing */
      t0 = t;
      c0 = cpu_s();
      ev0 = events;
      rd0 = reads;
    }
    if (t0 != 0 && t - t0 >= dur)
      break;
    int k = epoll_wait(ep, evs, 256, 100);
    for (int i = 0; i < k; i++) {
      ssize_t r = read(evs[i].data.fd, buf, sizeof buf);
      if (r <= 0) {
        epoll_ctl(ep, EPOLL_CTL_DEL, evs[i].data.fd, NULL);
        close(evs[i].data.fd);
        continue;
      }
      reads++;
      int64_t arrival = now_ns();
      for (char *p = buf; (p = memmem(p, (size_t)(buf + r - p), "data: ", 6)); p += 6)
        events++;
      /* the sim's send stamps: ": t=<ns>" before each event */
      for (char *p = buf; (p = memmem(p, (size_t)(buf + r - p), ": t=", 4)); p += 4) {
        if (t0 == 0 || nd >= MAX_SAMPLES)
          continue;
        int64_t st = strtoll(p + 4, NULL, 10);
        delays[nd++] = arrival - st;
        int fd = evs[i].data.fd;
        if (fd < MAX_FD) {
          if (last_st[fd] != 0 && ng < MAX_SAMPLES) {
            int64_t e = (arrival - last_arr[fd]) - (st - last_st[fd]);
            gaps[ng++] = e < 0 ? -e : e;
          }
          last_st[fd] = st;
          last_arr[fd] = arrival;
        }
      }
    }
  }
  double cpu = cpu_s() - c0, el = now_s() - t0;
  long ev = events - ev0;
  /* streams, events/s, CPU s per million events, events per CPU-second,
   * reads per event, delay p50/p99 ms, gap error p99 ms */
  printf("%d %.0f %.3f %.0f %.2f %.3f %.3f %.3f\n", n, ev / el, ev ? cpu / ev * 1e6 : 0.0,
         cpu > 0 ? ev / cpu : 0.0, (double)(reads - rd0) / (ev ? ev : 1), pct(delays, nd, 0.5),
         pct(delays, nd, 0.99), pct(gaps, ng, 0.99));
  return 0;
}
