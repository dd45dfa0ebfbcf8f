/*
 * tb_ratewatch: a rate cell's server view and self-checks.  See
 * tb_ratewatch.h.
 *
 * The thread runs under SCHED_IDLE: it gets the CPU only when the cell's
 * loop (and anything else of normal priority) does not want it, so a
 * sample can come late, never a request's start.  It sleeps on a condition
 * variable (CLOCK_MONOTONIC) until the next slot of the sampler's 1 s grid
 * or until end asks it to stop, then makes one blocking call (tb_http_call:
 * egress guard, TLS trust, body cap, the key wiped after use; 0.1-0.2 ms of
 * CPU against tokbench-sim, a fresh loopback connection included).  A call
 * that fails or a body that does not parse is fed as an empty body, so the
 * sampler counts it as skipped.  The sampler is touched by the thread alone
 * until pthread_join, which orders its writes before the cell's thread
 * reads it.
 */
#include "engine/tb_ratewatch.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/tb_arrival.h"
#include "net/tb_http.h"
#include "base/tb_json.h"
#include "engine/tb_sampler.h"
#include "engine/tb_stream.h"

#define NS_PER_S 1000000000LL

struct tb_ratewatch {
  const struct tb_discover *d;
  const char *api_key;
  char *url;
  /* drained before / after: 1 yes, 0 no, -1 unknown */
  int before, after;
  double before_running, before_waiting;
  /* the cell thread's CPU time and the wall clock over the cell */
  int64_t cpu0, cpu1, wall0, wall1;
  /* the sampling thread */
  struct tb_sampler smp;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool started, stop;
};

/* One /metrics read fed at once, off the grid (the sample at the cell's
 * end). */
static void
sample_now(struct tb_ratewatch *w)
{
  struct tb_http_resp resp;
  struct tb_sampler_point p;
  if (tb_http_call("GET", w->url, w->api_key, NULL, 0, TB_RATEWATCH_TIMEOUT_MS, TB_SAMPLER_BODY_MAX,
                   &resp) == 0 &&
      resp.status == 200 && tb_sampler_parse(w->d->kind, resp.body, resp.len, &p))
    tb_sampler_add(&w->smp, tb_time_mono_ns(), &p);
  else
    w->smp.skipped++;
  tb_http_resp_free(&resp);
}

static void *
watch_main(void *arg)
{
  struct tb_ratewatch *w = arg;
  /* never take the CPU from the cell's loop: it wakes on its timerfd and
   * must start each request on time (on one CPU, a sample at normal
   * priority delayed starts by milliseconds in bench_rate.sh) */
  struct sched_param sp = { 0 };
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    int64_t now = tb_time_mono_ns();
    if (now < w->smp.next) {
      struct timespec ts = { (time_t)(w->smp.next / NS_PER_S), (long)(w->smp.next % NS_PER_S) };
      int rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
      if (rc != 0 && rc != ETIMEDOUT && rc != EINTR)
        break;
      continue;
    }
    pthread_mutex_unlock(&w->mu);
    struct tb_http_resp resp;
    bool ok = tb_http_call("GET", w->url, w->api_key, NULL, 0, TB_RATEWATCH_TIMEOUT_MS,
                           TB_SAMPLER_BODY_MAX, &resp) == 0 &&
              resp.status == 200;
    int64_t at = tb_time_mono_ns();
    if (ok)
      tb_sampler_feed(&w->smp, w->d->kind, at, resp.body, resp.len);
    else
      tb_sampler_feed(&w->smp, w->d->kind, at, "", 0); /* counted as skipped */
    tb_http_resp_free(&resp);
    pthread_mutex_lock(&w->mu);
    if (w->smp.truncated)
      break;
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

struct tb_ratewatch *
tb_ratewatch_begin(const struct tb_discover *d, const char *api_key, bool series)
{
  struct tb_ratewatch *w = tb_xcalloc(1, sizeof *w);
  w->d = d;
  w->api_key = api_key;
  w->before = w->after = -1;
  w->before_running = w->before_waiting = NAN;
  w->before = tb_stream_drained(d, api_key, &w->before_running, &w->before_waiting);
  w->url = tb_xasprintf("%s/metrics", d->base_url);
  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  w->wall0 = tb_time_mono_ns();
  w->cpu0 = tb_time_thread_cpu_ns();
  if (series && d->has_metrics) {
    tb_sampler_begin(&w->smp, w->wall0);
    w->started = pthread_create(&w->th, NULL, watch_main, w) == 0;
    if (!w->started)
      tb_sampler_free(&w->smp);
  }
  return w;
}

/* Stops and joins the thread (once). */
static void
stop_thread(struct tb_ratewatch *w)
{
  if (!w->started)
    return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->th, NULL);
  w->started = false;
}

void
tb_ratewatch_end(struct tb_ratewatch *w, double drain_s, bool (*cancelled)(void *cls), void *cls)
{
  w->cpu1 = tb_time_thread_cpu_ns();
  w->wall1 = tb_time_mono_ns();
  bool series = w->started;
  stop_thread(w);
  if (!w->d->has_metrics || !(drain_s > 0))
    return;
  /* the series ends when the cell did, so that the server's tokens are
   * counted over the span the client's are */
  if (series && !w->smp.truncated)
    sample_now(w);
  w->after = tb_stream_drain_wait(w->d, w->api_key, drain_s, cancelled, cls);
}

void
tb_ratewatch_cell(const struct tb_ratewatch *w, json_t *cell, bool kernel_wanted)
{
  const char *status = tb_json_str(cell, "status");
  if (status == NULL || strcmp(status, "valid") != 0)
    return;
  static const struct tb_ratewatch none = {
    .before = -1, .after = -1, .before_running = NAN, .before_waiting = NAN, .cpu0 = -1
  };
  if (w == NULL)
    w = &none;
  json_t *ss = tb_sampler_json(&w->smp, tb_json_num(cell, "total_tps"));
  if (ss != NULL)
    json_object_set_new(cell, "server_series", ss);
  /* Open loop: the arrival process gives the starts' CV and pace; with
   * conversations, arrivals are conversations and turns follow think
   * times, so only the pace (rate x turns) is known.  Closed loop: no
   * schedule of arrivals, but a concurrency (its users). */
  double rate = tb_json_num(cell, "rate_rps");
  const json_t *turns = json_object_get(cell, "turns");
  size_t n_turns = json_is_array(turns) ? json_array_size(turns) : 0;
  int64_t users = 0;
  bool closed = tb_json_int(cell, "users", &users) && users > 0;
  const char *arrival = tb_json_str(cell, "arrival");
  struct tb_arrival a;
  double expected = NAN;
  if (!closed && n_turns == 0 && arrival != NULL && isfinite(rate) && rate > 0 &&
      tb_arrival_init(&a, arrival, rate, 0))
    expected = tb_arrival_cv(&a);
  double pace = closed ? NAN : n_turns > 0 ? rate * (double)n_turns : rate;
  /* the series: its peak of requests in the server, and (closed loop
   * without think times) their mean while the users were sending: from the
   * second sample (the first is read before the first arrival) to the
   * arrivals' end */
  double peak = NAN, in_sum = 0, arrivals_s = tb_json_num(cell, "arrivals_s");
  size_t in_n = 0;
  for (size_t i = 0; i < w->smp.n; i++) {
    double v = w->smp.running[i] + (isfinite(w->smp.waiting[i]) ? w->smp.waiting[i] : 0);
    if (!isfinite(v))
      continue;
    if (!(v <= peak))
      peak = v;
    if (i > 0 && w->smp.t[i] <= arrivals_s) {
      in_sum += v;
      in_n++;
    }
  }
  bool judge_users = closed && n_turns == 0 && in_n > 0 && users <= (int64_t)UINT32_MAX;
  double wall = (double)(w->wall1 - w->wall0) / 1e9;
  struct tb_checks_in in = {
    .requested = judge_users ? (unsigned)users : 0,
    .achieved = judge_users ? in_sum / (double)in_n : NAN,
    .achieved_server = true,
    .achieved_what = "server's running + waiting while the users sent",
    .cpu_share = w->cpu0 >= 0 && w->cpu1 >= w->cpu0 && wall > 0
                   ? (double)(w->cpu1 - w->cpu0) / 1e9 / wall
                   : NAN,
    .kernel_stamped = tb_json_num(cell, "kernel_stamped"),
    .kernel_wanted = kernel_wanted,
    .drained_before = w->before,
    .drained_after = w->after,
    .before_running = w->before_running,
    .before_waiting = w->before_waiting,
    .rate = true,
    .rate_rps = pace,
    .lag_p99_ms = tb_json_pct(cell, "schedule_lag_ms", "p99"),
    .cv = tb_json_num(cell, "interarrival_cv"),
    .cv_expected = expected,
    .gaps = tb_json_num(cell, "requests_started") - 1,
    .dropped = tb_json_num(cell, "dropped"),
    .server_peak = peak,
    .max_in_flight = tb_json_num(cell, "max_in_flight"),
  };
  json_object_set_new(cell, "checks", tb_checks_json(&in));
}

void
tb_ratewatch_decode_cell(const struct tb_ratewatch *w, json_t *cell, int64_t w0, int64_t w1,
                         unsigned conc, bool kernel_wanted, int drained_after)
{
  const char *status = tb_json_str(cell, "status");
  if (status == NULL || strcmp(status, "valid") != 0)
    return;
  struct tb_sampler cut;
  memset(&cut, 0, sizeof cut);
  bool windowed = w->smp.on && w0 > 0 && w1 > w0;
  if (windowed) {
    tb_sampler_cut(&w->smp, w0, w1, &cut);
    json_t *ss = tb_sampler_json(&cut, tb_json_num(cell, "total_tps"));
    if (ss != NULL)
      json_object_set_new(cell, "server_series", ss);
  }
  /* the streams in the server over the window: its running gauge counts
   * every shard's (the merged cell's own avg_active adds the shards') */
  double run_sum = 0;
  size_t run_n = 0;
  for (size_t i = 0; i < cut.n; i++)
    if (isfinite(cut.running[i])) {
      run_sum += cut.running[i];
      run_n++;
    }
  struct tb_checks_in in = {
    .requested = conc,
    .achieved = run_n > 0 ? run_sum / (double)run_n : tb_json_num(cell, "avg_active"),
    .achieved_server = run_n > 0,
    .achieved_what = run_n > 0 ? NULL : "shards' own streams in flight, added",
    .cpu_share = NAN, /* each shard's own, not this process's */
    .kernel_stamped = tb_json_num(cell, "kernel_stamped"),
    .kernel_wanted = kernel_wanted,
    .drained_before = w->before,
    .drained_after = drained_after,
    .before_running = w->before_running,
    .before_waiting = w->before_waiting,
  };
  json_object_set_new(cell, "checks", tb_checks_json(&in));
  tb_sampler_free(&cut);
}

void
tb_ratewatch_window(struct tb_ratewatch *w, int64_t w0, int64_t w1)
{
  w->cpu0 = -1; /* the shards' CPU, not this process's */
  if (!w->smp.on)
    return;
  struct tb_sampler cut;
  tb_sampler_cut(&w->smp, w0, w1, &cut);
  tb_sampler_free(&w->smp);
  w->smp = cut;
}

void
tb_ratewatch_free(struct tb_ratewatch *w)
{
  if (w == NULL)
    return;
  stop_thread(w);
  tb_sampler_free(&w->smp);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w->url);
  free(w);
}
