/*
 * bare_writer: the baseline for bench_sim.sh, the least a writer can do to
 * emit tokbench-sim's token streams.
 *
 * One thread, one epoll loop, no model, no scheduler, no JSON beyond finding
 * "max_tokens".  It accepts connections on 127.0.0.1:PORT, reads each
 * streaming POST (head up to "\r\n\r\n" plus its Content-Length body),
 * answers with an SSE stream and, every step, sends one event to each active
 * stream, back to back, in a fixed order (connection slot order):
 *   ": t=<19-digit CLOCK_MONOTONIC ns>\ndata: {"choices":[{"text":"x"}]}\n\n"
 * with the clock read just before that stream's send() (one send() per
 * event).  After max_tokens events it sends "data: [DONE]\n\n" and reads the
 * next request on the same keep-alive connection; a stream that joins waits
 * for the next step.  Steps: a timerfd fires 300 us (--spin-us) before the
 * deadline, the loop spins on clock_gettime(CLOCK_MONOTONIC) up to the
 * deadline, then sends; next deadline = previous deadline + step (no drift).
 *
 * So its stamp gap error is what this machine gives a writer that does
 * nothing else: measured with the same client (sim_load) in the same run,
 * it is the reference the simulator's own figures are to be read against
 * (a noisy one: on a shared or virtualised machine it varies run to run).
 *
 * Framing: HTTP/1.1 chunked, as the simulator sends (one chunk per event,
 * "0\r\n\r\n" after [DONE]), so the client parses the same framing from both.
 * sim_load only splits lines and looks at ": t=" and "data: " lines, so the
 * chunk-size lines and CRLFs are ignored there; a real HTTP client also reads
 * the stream correctly and knows where the response ends.
 *
 * At exit (SIGTERM/SIGINT) it prints to stderr: steps, events, how often the
 * timer woke after the deadline (no spin left) and the worst such lateness,
 * how often two consecutive stamps of one step lay more than STALL_NS apart
 * (one send() took that long, or the CPU was away: both move every later
 * stamp of the step) and the worst such interval, and sends that met a full
 * socket buffer (buffered, sent on EPOLLOUT).
 *
 * usage: bare_writer --port P --step-ms X [--realtime] [--spin-us U]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, strcasestr */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS 300000 /* default: the timer fires this long before a deadline */
#define IN_CAP 8192    /* request head + body; sim_load's is ~200 bytes */
#define STAMP_DIGITS 19
#define STALL_NS 100000   /* stamp-to-stamp interval within a step counted as a stall */
#define OUT_MAX (4 << 20) /* a client this far behind is not reading: closed */

struct conn {
  int fd;
  int slot;            /* index in slots[]: the stream's place in a step */
  bool dead;           /* closed; freed at the end of the loop iteration */
  bool streaming;      /* a response is open */
  bool want_out;       /* EPOLLOUT armed */
  long left;           /* token events still to send */
  char in[IN_CAP + 1]; /* request bytes, NUL-terminated */
  size_t inl;
  char *out; /* bytes a full socket buffer did not take */
  size_t out_len, out_cap;
  struct conn *next_dead;
};

/* epoll tags for the fds that are not connections */
static char tag_listen, tag_timer, tag_signal;

static int ep;
static struct conn **slots; /* the fixed send order; NULL = free slot */
static int nslots, slots_cap;
static struct conn *graveyard;

/* The event of every step, chunk-framed, with the stamp patched in place
 * (the same bytes as ": t=%019lld\n" would give). */
static char event[128];
static size_t event_len, stamp_off;
static const char event_data[] = "data: {\"choices\":[{\"text\":\"x\"}]}\n\n";
/* The end of a stream: a stamped [DONE] chunk, then the last chunk. */
static char done_buf[64];
static size_t done_len, done_stamp_off;

static uint64_t n_steps, n_events, n_late, n_buffered, n_accepted, n_requests;
static uint64_t n_stalls;
static int64_t max_late_ns, max_stall_ns;

static int64_t
mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void
put_stamp(char *p, int64_t ns)
{
  for (int i = STAMP_DIGITS - 1; i >= 0; i--) {
    p[i] = (char)('0' + ns % 10);
    ns /= 10;
  }
}

static void
conn_kill(struct conn *c)
{
  if (c->dead)
    return;
  c->dead = true;
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  slots[c->slot] = NULL;
  c->next_dead = graveyard;
  graveyard = c;
}

/* Frees the connections closed during this loop iteration: an event later
 * in the same epoll batch may still point at one (it is seen dead). */
static void
reap(void)
{
  while (graveyard != NULL) {
    struct conn *c = graveyard;
    graveyard = c->next_dead;
    free(c->out);
    free(c);
  }
}

static void
want_out(struct conn *c, bool on)
{
  if (c->want_out == on)
    return;
  c->want_out = on;
  struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static bool
out_append(struct conn *c, const char *p, size_t n)
{
  if (c->out_len + n > c->out_cap) {
    size_t cap = c->out_cap ? c->out_cap : 4096;
    while (cap < c->out_len + n)
      cap *= 2;
    char *o = realloc(c->out, cap);
    if (o == NULL)
      return false;
    c->out = o;
    c->out_cap = cap;
  }
  memcpy(c->out + c->out_len, p, n);
  c->out_len += n;
  return true;
}

/* One send(); what the socket does not take is buffered (behind anything
 * already buffered) and sent on EPOLLOUT.  A dead peer closes the conn. */
static void
send_bytes(struct conn *c, const char *p, size_t n)
{
  if (c->dead)
    return;
  ssize_t r = 0;
  if (c->out_len == 0) {
    r = send(c->fd, p, n, MSG_NOSIGNAL);
    if (r == (ssize_t)n)
      return;
    if (r < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        conn_kill(c); /* EPIPE, ECONNRESET: the client went away */
        return;
      }
      r = 0;
    }
  }
  n_buffered++;
  if (c->out_len + n > OUT_MAX || !out_append(c, p + r, n - (size_t)r)) {
    conn_kill(c);
    return;
  }
  want_out(c, true);
}

static void
flush_out(struct conn *c)
{
  while (c->out_len > 0) {
    ssize_t r = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        conn_kill(c);
      return;
    }
    memmove(c->out, c->out + r, c->out_len - (size_t)r);
    c->out_len -= (size_t)r;
  }
  want_out(c, false);
}

/* Starts a stream if a whole request is buffered (and none is open). */
static void
try_request(struct conn *c)
{
  if (c->dead || c->streaming)
    return;
  char *end = strstr(c->in, "\r\n\r\n");
  if (end == NULL)
    return;
  size_t head = (size_t)(end - c->in) + 4;
  long body = 0;
  char *cl = strcasestr(c->in, "\r\ncontent-length:");
  if (cl != NULL && cl < end)
    body = strtol(cl + 17, NULL, 10);
  if (body < 0 || head + (size_t)body > IN_CAP) {
    conn_kill(c);
    return;
  }
  if (c->inl < head + (size_t)body)
    return; /* body still to come */
  long max_tokens = 16;
  char save = c->in[head + (size_t)body];
  c->in[head + (size_t)body] = '\0';
  char *mt = strstr(c->in + head, "\"max_tokens\":");
  if (mt != NULL)
    max_tokens = strtol(mt + 13, NULL, 10);
  c->in[head + (size_t)body] = save;
  if (max_tokens <= 0)
    max_tokens = 16;
  /* consume the request (anything after it is the next one) */
  c->inl -= head + (size_t)body;
  memmove(c->in, c->in + head + (size_t)body, c->inl + 1);
  n_requests++;
  c->streaming = true;
  c->left = max_tokens;
  static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                            "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
  send_bytes(c, hdr, sizeof(hdr) - 1);
}

static void
on_readable(struct conn *c)
{
  for (;;) {
    if (c->inl >= IN_CAP) {
      conn_kill(c); /* no request is that large */
      return;
    }
    ssize_t r = recv(c->fd, c->in + c->inl, IN_CAP - c->inl, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (r <= 0) {
      conn_kill(c); /* EOF or error: the client went away */
      return;
    }
    c->inl += (size_t)r;
    c->in[c->inl] = '\0';
  }
  try_request(c);
}

static void
on_accept(int lfd)
{
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return; /* EAGAIN, or out of fds: try again on the next event */
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct conn *c = calloc(1, sizeof(*c));
    int slot = 0;
    while (slot < nslots && slots[slot] != NULL)
      slot++;
    if (slot == slots_cap) {
      int cap = slots_cap ? slots_cap * 2 : 1024;
      struct conn **ns = realloc(slots, (size_t)cap * sizeof(*ns));
      if (ns == NULL) {
        free(c);
        c = NULL;
      } else {
        slots = ns;
        slots_cap = cap;
      }
    }
    if (c == NULL) {
      close(fd);
      continue;
    }
    c->fd = fd;
    c->slot = slot;
    slots[slot] = c;
    if (slot == nslots)
      nslots++;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    n_accepted++;
  }
}

/* One decode step, at its deadline: one event per active stream, in slot
 * order, each stamped just before its send(). */
static void
step(void)
{
  int64_t prev = 0;
  for (int i = 0; i < nslots; i++) {
    struct conn *c = slots[i];
    if (c == NULL || !c->streaming)
      continue;
    int64_t now = mono_ns();
    if (prev && now - prev > STALL_NS) {
      n_stalls++;
      if (now - prev > max_stall_ns)
        max_stall_ns = now - prev;
    }
    prev = now;
    put_stamp(event + stamp_off, now);
    send_bytes(c, event, event_len);
    n_events++;
    if (--c->left > 0 || c->dead)
      continue;
    put_stamp(done_buf + done_stamp_off, mono_ns());
    send_bytes(c, done_buf, done_len);
    c->streaming = false;
    try_request(c); /* a next request already here starts next step */
  }
  n_steps++;
}

static void
arm(int tfd, int64_t at)
{
  struct itimerspec its = { .it_value = { .tv_sec = at / 1000000000LL,
                                          .tv_nsec = at % 1000000000LL } };
  timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* The writer: its options, fds and the next step's deadline. */
struct writer {
  int port;
  double step_ms;
  bool realtime;
  int64_t spin_ns, step_ns;
  int lfd, tfd, sfd;
  int64_t deadline; /* the next step's */
};

/* The command line into w: -1 to go on, else the exit status (after the
 * message). */
static int
parse_args(struct writer *w, int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--realtime") == 0)
      w->realtime = true;
    else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
      w->port = (int)strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--step-ms") == 0 && i + 1 < argc)
      w->step_ms = strtod(argv[++i], NULL);
    else if (strcmp(argv[i], "--spin-us") == 0 && i + 1 < argc)
      w->spin_ns = (int64_t)(strtod(argv[++i], NULL) * 1e3);
    else {
      fprintf(stderr, "bare_writer: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (w->port <= 0 || w->port > 65535 || w->step_ms <= 0 || w->spin_ns < 0) {
    fprintf(stderr, "usage: bare_writer --port P --step-ms X [--realtime] [--spin-us U]\n");
    return 2;
  }
  return -1;
}

/* The step's bytes (event) and the end's (done_buf), stamps at zero. */
static void
make_events(void)
{
  /* the step's bytes: chunk size line, stamp line, data line, chunk end */
  size_t payload = 4 + STAMP_DIGITS + 1 + (sizeof(event_data) - 1);
  int hl = snprintf(event, sizeof(event), "%zx\r\n", payload);
  stamp_off = (size_t)hl + 4;
  event_len = (size_t)snprintf(event, sizeof(event), "%zx\r\n: t=%0*d\n%s\r\n", payload,
                               STAMP_DIGITS, 0, event_data);
  static const char done_data[] = "data: [DONE]\n\n";
  size_t dpay = 4 + STAMP_DIGITS + 1 + (sizeof(done_data) - 1);
  hl = snprintf(done_buf, sizeof(done_buf), "%zx\r\n", dpay);
  done_stamp_off = (size_t)hl + 4;
  done_len = (size_t)snprintf(done_buf, sizeof(done_buf), "%zx\r\n: t=%0*d\n%s\r\n0\r\n\r\n", dpay,
                              STAMP_DIGITS, 0, done_data);
}

/* The file limit, the timer slack and --realtime, as the simulator. */
static void
set_process(bool realtime)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* as the simulator */
  if (realtime) {
    struct sched_param sp = { .sched_priority = 10 };
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
      fprintf(stderr, "bare_writer: --realtime: %s (going on without)\n", strerror(errno));
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
      fprintf(stderr, "bare_writer: mlockall: %s (going on without)\n", strerror(errno));
  }
}

/* The signalfd (SIGTERM, SIGINT blocked), the listener, the timerfd and
 * the epoll set with them; false after the message. */
static bool
open_fds(struct writer *w)
{
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  w->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

  w->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(w->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)w->port) };
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (w->lfd < 0 || bind(w->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      listen(w->lfd, 4096) < 0) {
    perror("bare_writer: listen");
    return false;
  }
  w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (w->sfd < 0 || w->tfd < 0 || ep < 0) {
    perror("bare_writer: setup");
    return false;
  }
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_listen };
  epoll_ctl(ep, EPOLL_CTL_ADD, w->lfd, &ev);
  ev.data.ptr = &tag_timer;
  epoll_ctl(ep, EPOLL_CTL_ADD, w->tfd, &ev);
  ev.data.ptr = &tag_signal;
  epoll_ctl(ep, EPOLL_CTL_ADD, w->sfd, &ev);
  return true;
}

/* The timer's wake-up: spins to the deadline, runs the step, arms the
 * next. */
static void
on_timer(struct writer *w)
{
  uint64_t exp;
  if (read(w->tfd, &exp, sizeof(exp)) < 0)
    return; /* spurious wake-up */
  int64_t now = mono_ns();
  if (now > w->deadline) {
    n_late++; /* woke too late to spin: the wake-up cost the margin */
    if (now - w->deadline > max_late_ns)
      max_late_ns = now - w->deadline;
  }
  while (now < w->deadline)
    now = mono_ns();
  step();
  w->deadline += w->step_ns;
  arm(w->tfd, w->deadline - w->spin_ns);
}

/* The event loop until SIGTERM/SIGINT; false after the message when
 * epoll_wait fails. */
static bool
run_loop(struct writer *w)
{
  struct epoll_event evs[256];
  bool quit = false;
  while (!quit) {
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0 && errno != EINTR) {
      perror("bare_writer: epoll_wait");
      return false;
    }
    for (int e = 0; e < n; e++) {
      void *p = evs[e].data.ptr;
      if (p == &tag_listen) {
        on_accept(w->lfd);
      } else if (p == &tag_timer) {
        on_timer(w);
      } else if (p == &tag_signal) {
        quit = true;
      } else {
        struct conn *c = p;
        if (c->dead)
          continue;
        if (evs[e].events & EPOLLOUT)
          flush_out(c);
        if (!c->dead && (evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
          on_readable(c);
      }
    }
    reap();
  }
  return true;
}

/* Closes the connections and prints the figures to stderr. */
static void
finish(void)
{
  for (int i = 0; i < nslots; i++)
    if (slots[i] != NULL)
      conn_kill(slots[i]);
  reap();
  free(slots);
  fprintf(stderr,
          "bare_writer: steps %" PRIu64 " events %" PRIu64 " requests %" PRIu64
          " connections %" PRIu64 " late_wakeups %" PRIu64 " max_late_us %.0f"
          " stalls %" PRIu64 " max_stall_us %.0f buffered_sends %" PRIu64 "\n",
          n_steps, n_events, n_requests, n_accepted, n_late, (double)max_late_ns / 1e3, n_stalls,
          (double)max_stall_ns / 1e3, n_buffered);
}

int
main(int argc, char **argv)
{
  struct writer w = { .spin_ns = SPIN_NS };
  int rc = parse_args(&w, argc, argv);
  if (rc >= 0)
    return rc;
  w.step_ns = (int64_t)(w.step_ms * 1e6);
  make_events();
  set_process(w.realtime);
  if (!open_fds(&w))
    return 1;

  /* Steps tick from start-up on, streams or not: a joining stream simply
   * gets its first event at the next deadline. */
  w.deadline = mono_ns() + w.step_ns;
  arm(w.tfd, w.deadline - w.spin_ns);
  printf("bare_writer: listening on 127.0.0.1:%d\n", w.port);
  fflush(stdout);
  if (!run_loop(&w))
    return 1;
  finish();
  return 0;
}
