/*
 * tb_rate: rate cells and sweeps.  See tb_rate.h.
 *
 * This file: the settings (settings.rate), the driver (tb_rate_run: the
 * set-up every cell of the run shares, each cell kept from an earlier
 * attempt or measured, the trace cell, the sweep, the teardown) and a
 * sharded cell's figures from its shards' samples (tb_rate_cell_merged).
 * One cell's loop: tb_ratecell; a cell's figures: tb_ratefig; the sweep's
 * search: tb_sweep; the trace cell: tb_tracecell.
 *
 * Prompts.  Each request's prompt is the pool's prompt of its length
 * (sized once on the server's tokenizer, tb_prompt) whose tag carries a
 * marker, "RQ" and eight hex digits, replaced in a copy of the request body
 * by the request's own number: every prompt differs from the first bytes
 * on, so no request finds another's prefix in the server's cache (with a
 * shared prefix, the system prompt before it is the same for all, and the
 * marker carries k mod prefix.suffixes).  The
 * body's max_tokens is rendered space-padded to a fixed width so that each
 * request's own output length is patched in place, and one request head
 * (Content-Length) serves every body of a pool entry.
 */
#include "engine/tb_rate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/tb_arrival.h"
#include "base/tb_json.h"
#include "base/tb_stats.h"
#include "engine/tb_cachereset.h"
#include "engine/tb_engine.h"
#include "engine/tb_prompt.h"
#include "engine/tb_ratecell.h"
#include "engine/tb_ratefig.h"
#include "engine/tb_ratewatch.h"
#include "engine/tb_sweep.h"
#include "engine/tb_telemetry.h"
#include "engine/tb_tracecell.h"
#include "net/tb_direct.h"
#include "net/tb_http.h"
#include "result/tb_result.h"
#include "result/tb_samples.h"
#include "result/tb_steady.h"

/* ------------------------------------------------------------- settings */

/* The workload, as settings.rate.workload: cold prompts, a shared system
 * prompt, conversations (with the prefix when both); everything a run
 * needs to be repeated exactly, with the seed and lengths beside it. */
static json_t *
workload_json(const struct tb_spec *s)
{
  const struct tb_spec_convo *cv = &s->conversation;
  json_t *o = json_pack("{s:s}", "kind",
                        cv->turns > 0          ? "multi_turn"
                        : s->prefix.tokens > 0 ? "shared_prefix"
                                               : "cold");
  if (s->prefix.tokens > 0) {
    json_object_set_new(o, "prefix_tokens", json_integer(s->prefix.tokens));
    json_object_set_new(o, "suffixes", json_integer(s->prefix.suffixes));
  }
  if (cv->turns > 0) {
    json_object_set_new(o, "turns", json_integer(cv->turns));
    json_object_set_new(o, "think_time_s", json_real(cv->think_time_s));
    json_object_set_new(o, "think", json_string(cv->think));
  }
  return o;
}

json_t *
tb_rate_settings_json(const struct tb_spec *s)
{
  json_t *rates = json_array();
  for (size_t i = 0; i < s->rates.n; i++)
    json_array_append_new(rates, json_real(s->rates.v[i]));
  json_t *o = json_pack(
    "{s:o, s:f, s:o, s:s, s:I, s:s, s:s, s:o}", "rates", rates, "duration_s", s->rate_duration_s,
    "requests", s->rate_requests > 0 ? json_integer(s->rate_requests) : json_null(), "arrival",
    s->arrival, "seed", (json_int_t)s->seed, "input_tokens", s->input_tokens, "output_tokens",
    s->output_tokens, "slo", tb_ratefig_slo(&s->slo));
  json_object_set_new(o, "workload", workload_json(s));
  return o;
}

/* ------------------------------------------------------------- set-up */

/* The request body of a prompt: model, the prompt, max_tokens padded to
 * TB_RATECELL_MAXTOK_WIDTH columns; offsets of the marker and of max_tokens' digits. */
static bool
make_entry(struct rrun *r, const struct tb_prompt *p, struct pool_entry *pe)
{
  json_t *b =
    json_pack("{s:s, s:[{s:s, s:s}], s:I, s:b, s:b, s:{s:b, s:b}}", "model", r->env->d->model,
              "messages", "role", "user", "content", p->text, "max_tokens",
              (json_int_t)TB_RATECELL_MAXTOK_PLACEHOLDER, "stream", 1, "ignore_eos", 1,
              "stream_options", "include_usage", 1, "continuous_usage_stats", 1);
  if (r->sys != NULL) /* the shared system prompt goes first */
    json_array_insert_new(json_object_get(b, "messages"), 0,
                          json_pack("{s:s, s:s}", "role", "system", "content", r->sys));
  char *text = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  if (text == NULL)
    return false;
  char ph[48];
  snprintf(ph, sizeof ph, "\"max_tokens\":%d", TB_RATECELL_MAXTOK_PLACEHOLDER);
  char *m = strstr(text, TB_RATECELL_MARKER), *t = strstr(text, ph);
  if (m == NULL || t == NULL) {
    free(text);
    return false;
  }
  pe->tmpl = text;
  pe->len = strlen(text);
  pe->marker_at = (size_t)(m - text) + 2;
  pe->maxtok_at = (size_t)(t - text) + strlen("\"max_tokens\":");
  pe->tokens = p->tokens;
  pe->text = tb_xstrdup(p->text);
  pe->text_marker_at = (size_t)(strstr(pe->text, TB_RATECELL_MARKER) - pe->text) + 2;
  pe->head = tb_direct_head_new(&r->dt, r->auth, pe->len);
  pe->head_len = strlen(pe->head);
  return true;
}

static void
setup(struct rrun *r)
{
  const struct tb_spec *s = r->s;
  const struct tb_rate_env *env = r->env;
  if (tb_length_parse(s->input_tokens, 1, TB_SPEC_MAX_CONTEXT, &r->in) != NULL ||
      tb_length_parse(s->output_tokens, 1, TB_SPEC_MAX_OUTPUT, &r->out) != NULL) {
    r->setup_err = tb_xstrdup("input_tokens or output_tokens: bad length");
    return;
  }
  /* a conversation's last turn carries every earlier one: each turn's
   * message and answer, and a template's few tokens a message (counted
   * as 8, more than the engines' templates take) */
  int64_t turns = s->conversation.turns > 0 ? s->conversation.turns : 1;
  int64_t last = turns * (r->in.hi + r->out.hi + 16) + s->prefix.tokens;
  if (s->conversation.turns > 0 && env->d->max_model_len > 0 && last > env->d->max_model_len) {
    r->setup_err =
      tb_xasprintf("a conversation's last turn (%" PRId64 " turns of up to %" PRId64 " + %" PRId64
                   " tokens, with the prefix: %" PRId64 ") exceeds max_model_len (%" PRId64 ")",
                   turns, r->in.hi, r->out.hi, last, env->d->max_model_len);
    return;
  }
  if (env->d->max_model_len > 0 && r->in.hi + r->out.hi > env->d->max_model_len) {
    r->setup_err = tb_xasprintf("input + output tokens (%" PRId64 " + %" PRId64
                                ") exceed max_model_len (%" PRId64 ")",
                                r->in.hi, r->out.hi, env->d->max_model_len);
    return;
  }
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (r->epfd < 0 || r->tfd < 0) {
    r->setup_err = tb_xstrdup("cannot set up the event loop");
    return;
  }
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TB_RATECELL_TIMER_TAG };
  (void)epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->tfd, &ev);
  char *chat_url = tb_xasprintf("%s/v1/chat/completions", env->d->base_url);
  r->direct = tb_direct_setup(&r->dt, chat_url, env->kernel_stamps, env->curl_streams, r->epfd);
  free(chat_url);
  if (!r->direct) {
    r->setup_err = tb_xstrdup("rate cells need the engine's own transport: a plain-HTTP "
                              "endpoint without a proxy (and TB_ENGINE_CURL_STREAMS unset)");
    return;
  }
  /* the timerfd's wake-ups: 1 us of slack instead of the default 50 us
   * (the thread's own setting comes back in teardown) */
  r->slack = prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  r->auth = tb_http_auth_header(env->api_key);
  /* a shared prefix: one system prompt for every request, tagged with the
   * run only (the same in every cell; never the marker) */
  r->sys_tokens = -1;
  if (s->prefix.tokens > 0) {
    char *stag = tb_xasprintf("%s-SYSTEM", env->run_id);
    struct tb_prompt_ctx *sc = tb_prompt_ctx_new(env->d, env->api_key, stag);
    free(stag);
    struct tb_prompt p = { 0 };
    char *perr = NULL;
    if (tb_prompt_build(sc, s->prefix.tokens, s->prefix.tokens, &p, &perr) != 0) {
      r->setup_err = tb_xasprintf("shared prefix of %" PRId64 " tokens: %s", s->prefix.tokens,
                                  perr ? perr : "failed");
      free(perr);
    } else {
      r->sys = p.text;
      r->sys_tokens = p.tokens;
      p.text = NULL;
    }
    tb_prompt_free(&p);
    tb_prompt_ctx_free(sc);
    if (r->setup_err != NULL)
      return;
  }
  /* the prompts: one per length of the pool, tagged with the marker */
  char *tag = tb_xasprintf("%s-" TB_RATECELL_MARKER, env->run_id);
  struct tb_prompt_ctx *pc = tb_prompt_ctx_new(env->d, env->api_key, tag);
  free(tag);
  r->n_pool = r->in.hi > r->in.lo ? TB_RATE_INPUT_POOL : 1;
  double sum = 0;
  for (unsigned i = 0; i < r->n_pool && r->setup_err == NULL; i++) {
    int64_t len = r->n_pool == 1
                    ? r->in.lo
                    : r->in.lo + (r->in.hi - r->in.lo) * (int64_t)i / (int64_t)(r->n_pool - 1);
    struct tb_prompt p = { 0 };
    char *perr = NULL;
    if (tb_prompt_build(pc, len, len, &p, &perr) != 0) {
      r->setup_err = tb_xasprintf("prompt of %" PRId64 " tokens: %s", len, perr ? perr : "failed");
      free(perr);
    } else if (!make_entry(r, &p, &r->pool[i])) {
      r->setup_err = tb_xstrdup("prompt: its tag is not in the request body");
    }
    sum += (double)len;
    tb_prompt_free(&p);
  }
  r->in_mean = sum / r->n_pool;
  tb_prompt_ctx_free(pc);
}

static void
teardown(struct rrun *r)
{
  tb_trace_free(&r->tr);
  free(r->tr_roots);
  free(r->tr_child);
  free(r->tr_sib);
  free(r->tr_err);
  for (unsigned i = 0; i < TB_RATE_INPUT_POOL; i++) {
    free(r->pool[i].tmpl);
    free(r->pool[i].text);
    if (r->pool[i].head != NULL)
      tb_http_secret_free(r->pool[i].head);
  }
  tb_http_secret_free(r->auth);
  free(r->sys);
  if (r->slack > 0)
    (void)prctl(PR_SET_TIMERSLACK, (unsigned long)r->slack, 0UL, 0UL, 0UL);
  if (r->direct)
    tb_direct_free(&r->dt);
  if (r->tfd >= 0)
    close(r->tfd);
  if (r->epfd >= 0)
    close(r->epfd);
  free(r->setup_err);
}

/* ------------------------------------------------------------- the run */

static json_t *
cell_key(const struct rrun *r, unsigned index, double rate, unsigned users)
{
  int64_t ctx = (r->in.lo + r->in.hi) / 2;
  json_t *cell = tb_result_cell_new("rate", ctx, index);
  if (users > 0) {
    json_object_set_new(cell, "users", json_integer(users));
  } else {
    json_object_set_new(cell, "rate_rps", json_real(rate));
    json_object_set_new(cell, "arrival", json_string(r->s->arrival));
  }
  return cell;
}

/* Whether done (a cell of an earlier attempt) is the cell at rate (or of
 * users). */
static bool
same_load(const json_t *done, double rate, unsigned users)
{
  if (users > 0)
    return json_integer_value(json_object_get(done, "users")) == (json_int_t)users;
  return fabs(json_number_value(json_object_get(done, "rate_rps")) - rate) < 1e-9 * rate;
}

/* The server's prefix cache emptied before a rate or trace cell when the
 * spec says so (cache: reset; tb_cachereset), the outcome in the cell:
 * cache_reset "done", "unsupported" or "refused", and why. */
void
tb_rate_cache_reset(const struct rrun *r, json_t *cell)
{
  if (strcmp(r->s->cache, "reset") != 0)
    return;
  char why[TB_CACHERESET_WHY_MAX];
  enum tb_cache_reset cr =
    tb_cache_reset_once(r->env->reset_memo, r->env->d, r->env->api_key, why, sizeof why);
  json_object_set_new(cell, "cache_reset", json_string(tb_cache_reset_name(cr)));
  json_object_set_new(cell, "cache_reset_detail", json_string(why));
}

/* A rate cell the caller's shards measure (issue 24): 1 measured (cell
 * filled), 0 not sharded (the engine measures it), -1 stopped while its
 * shards ran.  This process watches the server meanwhile, and the merged
 * cell gets what a whole cell has of it (issue 34, item 5): the series over
 * the shards' span from t0 (their common start on this clock) to the last
 * request's end, the checks judged with it, the drains, the energy over
 * that span, the price from the merged tokens. */
static int
rate_sharded(struct rrun *r, double rate, unsigned index, json_t *cell)
{
  const struct tb_rate_env *env = r->env;
  struct tb_ratewatch *w = tb_ratewatch_begin(env->d, env->api_key, env->server_series);
  int64_t win[2] = { 0, 0 };
  if (!env->shard_cell(env->cls, rate, index, cell, win)) {
    tb_ratewatch_free(w);
    return 0;
  }
  bool stopped = env->cancelled != NULL && env->cancelled(env->cls);
  tb_ratewatch_end(w, stopped ? 0 : r->s->drain_timeout_s, env->cancelled, env->cls);
  if (stopped) {
    tb_ratewatch_free(w);
    return -1;
  }
  double span = tb_json_num(cell, "measured_s");
  int64_t w1 = win[0] > 0 && span > 0 ? win[0] + (int64_t)(span * 1e9) : 0;
  if (w1 > 0) {
    tb_ratewatch_window(w, win[0], w1);
    tb_ratewatch_cell(w, cell, env->kernel_stamps);
    tb_telemetry_cell(env->telemetry, env->endpoint, cell, win[0], w1);
  } else { /* no common start here: priced from its merged tokens and span */
    tb_telemetry_cell(NULL, env->endpoint, cell, 0, 0);
  }
  tb_ratewatch_free(w);
  return 1;
}

/* One cell, open loop at rate (users 0) or closed loop with users: kept
 * from done_cells, or measured and emitted.  The cell's attainment into
 * *att (NAN when not valid).  false: stop. */
bool
tb_rate_one_cell(struct rrun *r, double rate, unsigned users, const char *role, double *att)
{
  const struct tb_rate_env *env = r->env;
  int sharded = 0;
  /* a shard's one cell carries its number in the whole run (markers, seeds) */
  unsigned index = ++r->index;
  if (env->shard != NULL && env->shard->index > 0)
    index = r->index = env->shard->index;
  *att = NAN;
  json_t *cell = cell_key(r, index, rate, users);
  const json_t *done = tb_result_find_cell(
    env->done_cells, "rate", json_integer_value(json_object_get(cell, "context")), index);
  if (done != NULL && same_load(done, rate, users)) {
    json_decref(cell);
    const json_t *a = json_object_get(done, "attainment");
    if (json_is_number(a))
      *att = json_number_value(a);
    if (env->keep != NULL)
      env->keep(env->cls, done);
    return true;
  }
  json_object_set_new(cell, "role", json_string(role));
  if (env->progress != NULL)
    env->progress(env->cls, cell);
  if (r->setup_err == NULL && env->shard == NULL)
    tb_rate_cache_reset(r, cell);
  if (r->setup_err != NULL) {
    tb_result_cell_set_status(cell, "error", r->setup_err);
  } else if (users == 0 && strcmp(role, "rate") == 0 && env->shard_cell != NULL &&
             (sharded = rate_sharded(r, rate, index, cell)) != 0) {
    if (sharded < 0) { /* stopped while its shards ran: not measured, never emitted */
      r->cancelled = true;
      json_decref(cell);
      return false;
    }
  } else if (!tb_ratecell_run(r, rate, users, index, cell)) {
    r->cancelled = true;
    json_decref(cell);
    return false;
  }
  const json_t *a = json_object_get(cell, "attainment");
  if (json_is_number(a))
    *att = json_number_value(a);
  if (!env->emit(env->cls, cell)) {
    r->cancelled = true;
    return false;
  }
  return true;
}

enum tb_rate_status
tb_rate_run(const struct tb_plan *p, const struct tb_rate_env *env, json_t **sweep)
{
  struct rrun run;
  struct rrun *r = &run;
  memset(r, 0, sizeof *r);
  r->p = p;
  r->s = p->spec;
  r->env = env;
  r->epfd = r->tfd = -1;
  *sweep = NULL;
  setup(r);
  if (p->trace)
    tb_tracecell_setup(r);
  double att;
  const struct tb_plan_cell *rate = p->cells + p->n_matrix;
  for (size_t i = 0; i < p->n_rate && !r->cancelled; i++)
    if (!tb_rate_one_cell(r, rate[i].rate_rps, 0, "rate", &att))
      break;
  if (p->trace && !r->cancelled)
    (void)tb_tracecell_run(r);
  if (p->sweep && !r->cancelled)
    *sweep = tb_sweep_run(r);
  enum tb_rate_status st = r->cancelled ? TB_RATE_CANCELLED : TB_RATE_OK;
  teardown(r);
  return st;
}

/* ------------------------------------------------------ a merged cell */

/* A series of us as ns. */
static void
us_to_ns(const struct tb_stats *us, struct tb_stats *ns)
{
  for (size_t i = 0; i < us->n; i++)
    tb_stats_add(ns, us->v[i] > INT64_MAX / 1000 ? INT64_MAX : us->v[i] * 1000);
}

/* The union's requests, each whole, for the steady-state window
 * (tb_steady, issue 25) on the common timeline: the shards' aligned series
 * (tb_samples_rseries), every request (no cap of the samples arrays); none
 * when they do not align. */
static void
merged_requests(const struct tb_samples *m, struct rcell *c)
{
  const struct tb_stats *x = m->rate.s;
  size_t n = x[TB_SAMPLES_START].n;
  const enum tb_samples_rseries al[] = { TB_SAMPLES_END, TB_SAMPLES_ROK, TB_SAMPLES_RTTFT,
                                         TB_SAMPLES_RTPOT, TB_SAMPLES_RTOKENS };
  for (size_t k = 0; k < TB_ARRAY_LEN(al); k++)
    if (x[al[k]].n != n)
      return;
  c->sreq = n ? tb_xcalloc(n, sizeof *c->sreq) : NULL;
  c->nsreq = c->capsreq = n;
  for (size_t i = 0; i < n; i++) {
    bool ok = x[TB_SAMPLES_ROK].v[i] != 0;
    int64_t ttft = x[TB_SAMPLES_RTTFT].v[i], tpot = x[TB_SAMPLES_RTPOT].v[i];
    c->sreq[i] = (struct tb_steady_req){ .start_us = x[TB_SAMPLES_START].v[i],
                                         .end_us = x[TB_SAMPLES_END].v[i],
                                         .ok = ok,
                                         .ttft_ms = ttft > 0 ? (double)(ttft - 1) / 1e3 : NAN,
                                         .tpot_ms = tpot > 0 ? (double)(tpot - 1) / 1e3 : NAN,
                                         .tokens = ok ? x[TB_SAMPLES_RTOKENS].v[i] : 0 };
  }
}

bool
tb_rate_cell_merged(const struct tb_spec *s, struct tb_samples *m, json_t *cell, char *err,
                    size_t errlen)
{
  if (!m->rate.on) {
    snprintf(err, errlen, "merged rate cell: no shard gave a rate cell's samples");
    return false;
  }
  const struct tb_samples_rate *x = &m->rate;
  const struct tb_rate_env env = { .kernel_stamps = false };
  struct rrun r = { .s = s, .env = &env };
  struct rcell c = { .r = &r, .rate = json_number_value(json_object_get(cell, "rate_rps")) };
  c.scheduled = (uint64_t)x->scheduled;
  c.started = (uint64_t)m->started;
  c.ok = (uint64_t)m->completed;
  c.errors = (uint64_t)x->errors;
  c.dropped = (uint64_t)x->dropped;
  c.good = (uint64_t)m->good;
  c.out_tokens = m->tokens;
  c.pr = (struct prompts){ .sum = x->pr_sum,
                           .n = (uint64_t)x->pr_n,
                           .cached_sum = x->cached_sum,
                           .cached_prompt_sum = x->cached_prompt_sum,
                           .cached_n = (uint64_t)x->cached_n };
  /* the common timeline: t0 is 0 */
  c.t_end_arrivals = x->arrivals_us * 1000;
  c.t_last_end = x->last_end_us * 1000;
  c.flight_t = c.t_last_end;
  tb_samples_in_flight(m, &c.max_inflight, &c.flight_area);
  merged_requests(m, &c); /* before the starts are sorted */
  tb_samples_start_gaps(m, &c.gap_sum, &c.gap_sum2, &c.gap_n);
  us_to_ns(&m->s[TB_SAMPLES_TTFT], &c.ttft);
  us_to_ns(&m->s[TB_SAMPLES_TPOT], &c.tpot);
  us_to_ns(&m->s[TB_SAMPLES_E2E], &c.e2e);
  us_to_ns(&m->s[TB_SAMPLES_GAP], &c.tbt);
  us_to_ns(&x->s[TB_SAMPLES_LAG], &c.lag);
  c.conv_started = (uint64_t)x->conv_started;
  c.conv_completed = (uint64_t)x->conv_completed;
  c.conv_abandoned = (uint64_t)x->conv_abandoned;
  c.conv_dropped = (uint64_t)x->conv_dropped;
  size_t nt = s->conversation.turns > 0 ? (size_t)s->conversation.turns : 0;
  if (nt > 0)
    c.turns = tb_xcalloc(nt, sizeof *c.turns);
  for (size_t t = 0; t < nt && t < x->nturns; t++) {
    const struct tb_samples_turn *o = &x->turns[t];
    struct turnstat *ts = &c.turns[t];
    ts->sent = (uint64_t)o->sent;
    ts->ok = (uint64_t)o->ok;
    ts->pr = (struct prompts){ .sum = o->pr_sum,
                               .n = (uint64_t)o->pr_n,
                               .cached_sum = o->cached_sum,
                               .cached_prompt_sum = o->cached_prompt_sum };
    us_to_ns(&o->ttft, &ts->ttft);
  }
  snprintf(c.first_error, sizeof c.first_error, "%s", x->first_error);
  c.ds.rx_kernel = (uint64_t)m->stamped_reads;
  c.ds.rx_user = (uint64_t)(m->reads - m->stamped_reads);
  tb_srvtime_merge(&c.srv, &m->srv); /* the shards' server timings together */
  tb_ratefig_cell(&c, cell);
  tb_srvtime_free(&c.srv);
  struct tb_stats *const stats[] = { &c.ttft, &c.tpot, &c.tbt, &c.e2e, &c.lag };
  for (size_t i = 0; i < TB_ARRAY_LEN(stats); i++)
    tb_stats_free(stats[i]);
  for (size_t t = 0; t < nt; t++)
    tb_stats_free(&c.turns[t].ttft);
  free(c.turns);
  free(c.sreq);
  return true;
}
