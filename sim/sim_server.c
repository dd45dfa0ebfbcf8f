/*
 * sim_server: the simulator's event loop (design in sim_server.h, shared
 * state and its lifetimes in sim_state.h): the listener, the epoll loop over
 * connections, the timerfd and the signalfd, and the timers (the decode
 * step's deadline, prepared early and spun on the clock; generations' own
 * deadlines; housekeeping).  Connections, scheduler, stream output and routes
 * are sim_conn, sim_sched, sim_stream and sim_routes.
 */
#include "sim_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
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

#include "sim_state.h"
#include "sim_conn.h"
#include "sim_routes.h"
#include "sim_sched.h"
#include "sim_tls.h"

/* What connections call back (sim_conn.h): the routes serve their
 * requests, the scheduler admits. */
static const struct sim_conn_handlers conn_handlers = {
  .dispatch = sim_routes_dispatch,
  .closed = sim_routes_closed,
  .admit = sim_sched_try_admit,
  .release = sim_routes_held_release,
};

/* ------------------------------------------------------------------ */
/* loop */

static int
open_listener(struct server *s)
{
  int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&s->addr, s->addrlen) < 0 || listen(fd, 4096) < 0) {
    close(fd);
    return -1;
  }
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->listen_kind };
  if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void
do_accept(struct server *s)
{
  for (int i = 0; i < 256 && s->lfd >= 0; i++) {
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    sim_conn_new(s, fd);
  }
}

static void
housekeeping(struct server *s, int64_t now)
{
  for (struct conn *c = s->conns; c; c = c->next) {
    if (c->o.dead)
      continue;
    if (c->tls && !sim_tls_ready(c->tls) && now - c->accepted > SIM_TLS_HANDSHAKE_NS) {
      sim_conn_kill(s, c); /* a handshake that never ends */
      continue;
    }
    if (c->o.gen || c->prep || c->held)
      continue; /* a held erase waits as long as the requests before it */
    int64_t idle = now - c->last_active;
    if ((c->draining && idle > SIM_DRAIN_NS) || (c->in_len > 0 && idle > SIM_PARTIAL_NS) ||
        idle > SIM_IDLE_NS)
      sim_conn_kill(s, c);
  }
}

static void
run_timers(struct server *s)
{
  int64_t now = now_ns();
  if (s->prepared && s->prep_sched <= now) {
    sim_sched_decode_send(s);
    now = now_ns();
  }
  while (s->heap_n > 0 && s->heap[0]->due <= now) {
    struct gen *g = s->heap[0];
    sim_sched_heap_remove(s, g);
    if (!g->o->dead)
      sim_sched_on_timer_gen(s, g, now);
  }
  if (s->batch_n > 0 && s->next_step <= now)
    sim_sched_decode_step(s, s->next_step, now);
  if (s->relisten_at && s->relisten_at <= now) {
    s->lfd = open_listener(s);
    s->relisten_at = s->lfd >= 0 ? 0 : now + 10000000;
  }
  if (now >= s->next_house) {
    housekeeping(s, now);
    s->next_house = now + 1000000000LL;
  }
}

static int64_t
next_deadline(const struct server *s)
{
  if (s->prepared)
    return s->prep_sched;
  int64_t next = s->next_house;
  if (s->heap_n > 0 && s->heap[0]->due < next)
    next = s->heap[0]->due;
  if (s->batch_n > 0 && s->next_step < next)
    next = s->next_step;
  if (s->relisten_at && s->relisten_at < next)
    next = s->relisten_at;
  return next;
}

/* True when the next deadline is a decode step and nothing else is due
 * before it: its chunks may be prepared ahead. */
static bool
step_is_next(const struct server *s)
{
  return !s->prepared && s->batch_n > 0 && next_deadline(s) == s->next_step &&
         (s->heap_n == 0 || s->heap[0]->due > s->next_step);
}

/* How long before a deadline the loop must be awake for it. */
static int64_t
lead_ns(const struct server *s)
{
  if (!step_is_next(s))
    return SIM_SPIN_NS;
  int64_t prep = s->prep_per_ns * s->batch_n;
  return SIM_SPIN_NS + (prep < SIM_PREP_MAX_NS ? prep : SIM_PREP_MAX_NS);
}

/* Runs the deadlines that are less than lead_ns() away, spinning until
 * each is due (a few rounds at most, so input is never starved); a decode
 * step is prepared first and sent at its deadline. */
static void
spin_timers(struct server *s)
{
  for (int round = 0; round < 8; round++) {
    int64_t d = next_deadline(s), now = now_ns();
    if (d - now > lead_ns(s))
      return;
    if (step_is_next(s)) {
      /* prepare the step's bytes now, stamp and send them at d */
      sim_sched_decode_prepare(s, d, now > d ? now : d);
      d = s->prep_sched;
      now = now_ns();
    }
    while (now < d)
      now = now_ns();
    run_timers(s);
  }
}

static void
arm_timer(struct server *s)
{
  int64_t next = next_deadline(s) - lead_ns(s);
  if (next == s->armed)
    return;
  if (next <= 0)
    next = 1;
  struct itimerspec its = { .it_value = { .tv_sec = next / 1000000000LL,
                                          .tv_nsec = next % 1000000000LL } };
  (void)timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  s->armed = next;
}

/* The listen address from host (an IPv4 or IPv6 literal; IPv6 with or
 * without brackets) and port; host_out gets it as printed (IPv6 in
 * brackets). */
static bool
listen_addr(struct server *s, const char *host, int port, char *host_out, size_t out_len)
{
  char buf[INET6_ADDRSTRLEN + 2];
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    host++;
    n -= 2;
  }
  if (n >= sizeof(buf))
    return false;
  memcpy(buf, host, n);
  buf[n] = '\0';
  memset(&s->addr, 0, sizeof(s->addr));
  struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)&s->addr;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)&s->addr;
  if (inet_pton(AF_INET, buf, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    s->addrlen = sizeof(*a4);
    snprintf(host_out, out_len, "%s", buf);
    return true;
  }
  if (inet_pton(AF_INET6, buf, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    s->addrlen = sizeof(*a6);
    snprintf(host_out, out_len, "[%s]", buf);
    return true;
  }
  return false;
}

/* A new server for cfg: its fixed state, the model's JSON name, the
 * version it reports, its clocks, block cache and request log. */
static struct server *
server_new(const struct sim_config *cfg)
{
  struct server *s = tb_xcalloc(1, sizeof(*s));
  s->cfg = cfg;
  s->p = cfg->profile;
  s->conn_h = &conn_handlers;
  s->ep = s->lfd = s->tfd = s->sfd = -1;
  s->listen_kind = KIND_LISTEN;
  s->timer_kind = KIND_TIMER;
  s->signal_kind = KIND_SIGNAL;
  s->prep_kind = KIND_PREP;
  s->prep_fd = -1;
  json_t *ms = json_string(s->p->model);
  char *mj = ms ? json_dumps(ms, JSON_ENCODE_ANY) : NULL;
  json_decref(ms);
  snprintf(s->model_json, sizeof(s->model_json), "%s", mj ? mj : "\"model\"");
  free(mj);
  s->version = cfg->profile_version || cfg->dialect->version == NULL
                 ? (cfg->dialect->family == SIM_FLAVOUR_GATEWAY ||
                        cfg->dialect->family == SIM_FLAVOUR_OPENAI || cfg->dialect->rev == 3
                      ? NULL
                      : s->p->engine_version)
                 : cfg->dialect->version;
  s->started_real_s = (double)tb_time_real_us() / 1e6;
  s->started_ns = s->pw_t = tb_time_mono_ns();
  int64_t bs = s->p->block_size > 0 ? s->p->block_size : 1;
  int64_t nb = s->p->kv_budget / bs;
  s->blocks = sim_cache_new(nb < SIM_CACHE_MAX_BLOCKS ? nb : SIM_CACHE_MAX_BLOCKS);
  s->log = tb_xcalloc(SIM_REQLOG, sizeof(*s->log));
  return s;
}

/* The process's settings: timer slack, --realtime, the file limit, and
 * SIGTERM/SIGINT blocked (into *mask, for the signalfd), SIGPIPE ignored. */
static void
set_process(const struct sim_config *cfg, sigset_t *mask)
{
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (cfg->realtime) {
    /* Best effort: other processes on the core must not delay a step. */
    struct sched_param sp = { .sched_priority = 10 };
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
      fprintf(stderr, "tokbench-sim: --realtime: %s (going on without)\n", strerror(errno));
    (void)mlockall(MCL_CURRENT | MCL_FUTURE);
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  sigemptyset(mask);
  sigaddset(mask, SIGTERM);
  sigaddset(mask, SIGINT);
  sigprocmask(SIG_BLOCK, mask, NULL);
  signal(SIGPIPE, SIG_IGN);
}

/* The epoll set with the timerfd, the signalfd (for mask) and the prompt
 * worker's fd; false after the message. */
static bool
open_loop(struct server *s, const sigset_t *mask)
{
  s->ep = epoll_create1(EPOLL_CLOEXEC);
  s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  s->sfd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (s->ep < 0 || s->tfd < 0 || s->sfd < 0) {
    perror("tokbench-sim: epoll/timerfd/signalfd");
    return false;
  }
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->timer_kind };
  epoll_ctl(s->ep, EPOLL_CTL_ADD, s->tfd, &ev);
  ev.data.ptr = &s->signal_kind;
  epoll_ctl(s->ep, EPOLL_CTL_ADD, s->sfd, &ev);
  s->prep = sim_prep_start(&s->prep_fd); /* after the signal mask: it inherits it */
  if (s->prep != NULL) {
    ev.data.ptr = &s->prep_kind;
    epoll_ctl(s->ep, EPOLL_CTL_ADD, s->prep_fd, &ev);
  }
  return true;
}

/* The port the listener got, kept in s->addr for a relisten. */
static int
bound_port(struct server *s)
{
  struct sockaddr_storage bound;
  socklen_t al = sizeof(bound);
  getsockname(s->lfd, (struct sockaddr *)&bound, &al);
  int port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)(void *)&bound)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)(void *)&bound)->sin_port);
  /* a relisten after a refuse fault takes the same port */
  if (s->addr.ss_family == AF_INET6)
    ((struct sockaddr_in6 *)(void *)&s->addr)->sin6_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in *)(void *)&s->addr)->sin_port = htons((uint16_t)port);
  return port;
}

/* The listen address, the TLS context and the listener, then the
 * "listening on" line; false after the message. */
static bool
start_listening(struct server *s)
{
  const struct sim_config *cfg = s->cfg;
  char host[INET6_ADDRSTRLEN + 16];
  if (!listen_addr(s, cfg->host ? cfg->host : "127.0.0.1", cfg->port, host, sizeof(host))) {
    fprintf(stderr, "tokbench-sim: bad listen address %s\n", cfg->host);
    return false;
  }
  if (cfg->tls_cert != NULL) {
    char err[512];
    s->tls = sim_tls_ctx_new(cfg->tls_cert, cfg->tls_key, err, sizeof(err));
    if (s->tls == NULL) {
      fprintf(stderr, "tokbench-sim: %s\n", err);
      return false;
    }
  }
  s->lfd = open_listener(s);
  if (s->lfd < 0) {
    fprintf(stderr, "tokbench-sim: cannot listen on %s:%d: %s\n", host, cfg->port, strerror(errno));
    return false;
  }
  int port = bound_port(s);
  printf("tokbench-sim: listening on %s:%d (profile %s, flavour %s, time scale %g%s)\n", host, port,
         s->p->name, cfg->dialect->name, cfg->time_scale, s->tls ? ", https" : "");
  fflush(stdout);
  return true;
}

/* Handles one event of the epoll set. */
static void
on_event(struct server *s, const struct epoll_event *e)
{
  int kind = *(int *)e->data.ptr;
  if (kind == KIND_LISTEN) {
    do_accept(s);
  } else if (kind == KIND_TIMER) {
    uint64_t x;
    if (read(s->tfd, &x, sizeof(x)) < 0) {
      /* EAGAIN: nothing to do */
    }
    s->armed = 0;
  } else if (kind == KIND_PREP) {
    for (struct sim_prep_job *j = sim_prep_take(s->prep), *nx; j != NULL; j = nx) {
      nx = j->next;
      sim_routes_prepared(s, j);
    }
  } else if (kind == KIND_SIGNAL) {
    struct signalfd_siginfo si;
    if (read(s->sfd, &si, sizeof(si)) > 0)
      s->stop = true;
  } else {
    struct conn *c = e->data.ptr;
    if (c->o.dead)
      return;
    if (e->events & EPOLLOUT)
      sim_conn_flush(s, c);
    if (!c->o.dead && (e->events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
      sim_conn_read(s, c);
  }
}

/* The event loop, until SIGTERM/SIGINT (or epoll_wait fails). */
static void
event_loop(struct server *s)
{
  s->next_house = now_ns() + 1000000000LL;
  s->noise = s->cfg->noise;
  sim_noise_start(&s->noise, now_ns());

  struct epoll_event evs[SIM_MAX_EVENTS];
  while (!s->stop) {
    arm_timer(s);
    int n = epoll_wait(s->ep, evs, SIM_MAX_EVENTS, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      perror("tokbench-sim: epoll_wait");
      break;
    }
    for (int i = 0; i < n; i++)
      on_event(s, &evs[i]);
    run_timers(s);
    spin_timers(s);
    sim_conn_reap(s);
  }
}

/* Closes the connections, the worker and the fds, and frees s. */
static void
server_free(struct server *s)
{
  while (s->conns) {
    sim_conn_kill(s, s->conns);
    sim_conn_reap(s);
  }
  sim_prep_stop(s->prep); /* after the connections: no job points to one */
  if (s->lfd >= 0)
    close(s->lfd);
  if (s->tfd >= 0)
    close(s->tfd);
  if (s->sfd >= 0)
    close(s->sfd);
  if (s->ep >= 0)
    close(s->ep);
  sim_tls_ctx_free(s->tls);
  free(s->heap);
  free(s->fq);
  free(s->batch);
  free(s->grp);
  sim_cache_free(s->blocks);
  free(s->ids);
  free(s->log);
  free(s);
}

int
sim_server_run(const struct sim_config *cfg)
{
  int rc = 1;
  struct server *s = server_new(cfg);
  sigset_t mask;
  set_process(cfg, &mask);
  if (open_loop(s, &mask) && start_listening(s)) {
    event_loop(s);
    rc = 0;
  }
  server_free(s);
  return rc;
}
