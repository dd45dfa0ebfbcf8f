/*
 * tb_matrix: the speed test matrix of a run (METHOD.md): each context's
 * cold scout (its prefill cell, and the warm-up of the server's cache for
 * its decode cells), then its decode cells, each measured by tb_cell or
 * kept from an earlier attempt, gated by the plan (too long, too many, over
 * the KV budget) or by a scheduler cap measured at a smaller context, or
 * measured by the caller's shards; the server aborted and drained after
 * each; and the passes of repeats, whose measurements of a cell are held
 * until its last pass and combined.  See tb_matrix.h.
 */
#include "engine/tb_matrix.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tb_cell.h"
#include "engine/tb_ratewatch.h"
#include "engine/tb_telemetry.h"
#include "net/tb_http.h"
#include "result/tb_checks.h"
#include "result/tb_result.h"
#include "result/tb_srvtime.h"

/* A run's repeats (tb_spec repeats): each measurement of a cell is held
 * until the last pass measures it, then the cell that combines them
 * (tb_result_combine) is emitted; a measurement in error closes its cell at
 * once (it is not measured again).  With one repeat a measurement is the
 * cell, emitted as it comes. */
struct repeats {
  unsigned n, pass;
  unsigned seq;   /* measurements so far: each one's place in the run */
  json_t *held;   /* "phase/context/concurrency" -> [measurements] */
  json_t *closed; /* keys emitted before the last pass */
};

static void
repeats_key(char *buf, size_t len, const char *phase, int64_t ctx, int64_t conc)
{
  snprintf(buf, len, "%s/%" PRId64 "/%" PRId64, phase, ctx, conc);
}

static bool
repeats_closed(const struct repeats *rp, const char *phase, int64_t ctx, int64_t conc)
{
  char key[96];
  repeats_key(key, sizeof key, phase, ctx, conc);
  return json_object_get(rp->closed, key) != NULL;
}

/* One measurement of a cell (stolen). */
static void
repeats_measured(struct tb_run *r, json_t *cells, struct repeats *rp, json_t *cell)
{
  if (rp->n <= 1) {
    tb_run_emit(r, cells, cell);
    return;
  }
  char key[96];
  repeats_key(key, sizeof key, json_string_value(json_object_get(cell, "phase")),
              json_integer_value(json_object_get(cell, "context")),
              json_integer_value(json_object_get(cell, "concurrency")));
  json_object_set_new(cell, "repeat", json_integer(rp->pass));
  json_object_set_new(cell, "seq", json_integer(rp->seq++));
  bool valid = strcmp(json_string_value(json_object_get(cell, "status")), "valid") == 0;
  json_t *held = json_object_get(rp->held, key);
  if (held == NULL) {
    held = json_array();
    json_object_set_new(rp->held, key, held);
  }
  json_array_append_new(held, cell);
  if (valid && rp->pass < rp->n)
    return;
  size_t n = json_array_size(held);
  json_t **reps = tb_xcalloc(n, sizeof *reps);
  for (size_t i = 0; i < n; i++)
    reps[i] = json_array_get(held, i);
  json_t *combined = tb_result_combine(reps, n);
  free(reps);
  json_object_del(rp->held, key);
  json_object_set_new(rp->closed, key, json_true());
  tb_run_emit(r, cells, combined);
}

/* Aborts what is left and waits for the server to drain: 1 drained, 0 not
 * within drain_s, -1 unknown (no metrics, or cancelled). */
static int
abort_and_drain(struct tb_run *r)
{
  /* a shard leaves the server to its cell's coordinator: the other shards'
   * streams run on it, and an abort would end theirs too */
  if (r->tgt->shard != NULL)
    return -1;
  if (r->d.kind == TB_KIND_SGLANG) {
    char *url = tb_xasprintf("%s/abort_request", r->d.base_url);
    const char *body = "{\"rid\":\"\",\"abort_all\":true}";
    struct tb_http_resp resp;
    if (tb_http_call("POST", url, r->api_key, body, strlen(body), 5000L, 65536, &resp) == 0) {
      /* any answer will do: older servers know only per-request aborts */
    }
    tb_http_resp_free(&resp);
    free(url);
  }
  /* metrics gone (server down?): -1, the next cell will tell */
  return tb_stream_drain_wait(&r->d, r->api_key, r->spec->drain_timeout_s, tb_run_cancelled, r);
}

/* Before a decode cell (between cells, so a blocking call is fine): is the
 * server drained?  Recorded in the cell for its checks. */
static void
drained_before(struct tb_run *r, struct tb_cell *c)
{
  c->drained_before = tb_stream_drained(&r->d, r->api_key, &c->before_running, &c->before_waiting);
}

static char *
request_body(struct tb_run *r, const char *prompt, int64_t max_tokens, size_t *len)
{
  json_t *b =
    json_pack("{s:s, s:[{s:s, s:s}], s:I, s:b, s:b, s:{s:b, s:b}}", "model", r->d.model, "messages",
              "role", "user", "content", prompt, "max_tokens", (json_int_t)max_tokens, "stream", 1,
              "ignore_eos", 1, "stream_options", "include_usage", 1, "continuous_usage_stats", 1);
  char *s = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  *len = strlen(s);
  return s;
}

/* Whether the decode cell c does not run: the plan's gate (the server's
 * length, running requests, KV budget), or a scheduler cap measured at
 * this context or a smaller one, which holds here too (a scheduler cap is
 * the same, a KV cache admits fewer of longer ones). */
static bool
gated(const struct tb_run *r, const struct tb_plan_cell *c)
{
  return c->gate != TB_PLAN_RUN ||
         (r->cap_requests > 0 && c->context >= r->cap_ctx && c->concurrency > r->cap_requests);
}

/* The cell of a gated decode cell c (new), or NULL when c runs. */
static json_t *
gated_cell(const struct tb_run *r, const struct tb_plan_cell *c)
{
  if (!gated(r, c))
    return NULL;
  int64_t ctx = c->context, conc = c->concurrency, out = r->spec->max_output;
  json_t *cell = tb_result_cell_new("decode", ctx, conc);
  char *why = NULL;
  switch (c->gate) {
  case TB_PLAN_TOO_LONG:
    why = tb_xasprintf("context + max output (%" PRId64 ") exceeds max_model_len (%" PRId64 ")",
                       ctx + out, r->d.max_model_len);
    tb_result_cell_set_status(cell, "skipped", why);
    break;
  case TB_PLAN_TOO_MANY:
    why =
      tb_xasprintf("more requests than the server runs at once (%" PRId64 ")", r->d.max_running);
    tb_result_cell_set_status(cell, "skipped", why);
    break;
  case TB_PLAN_OVER_KV:
    why = tb_xasprintf("%" PRId64 " x (%" PRId64 " + %" PRId64 ") = %" PRId64
                       " tokens > KV budget %" PRId64,
                       conc, ctx, out, conc * (ctx + out), r->plan.kv_budget);
    tb_result_cell_set_status(cell, "over_capacity", why);
    break;
  case TB_PLAN_RUN: {
    char lab[32];
    tb_format_tokens(r->cap_ctx, lab, sizeof lab);
    why = tb_xasprintf("more requests than the server runs at once: %" PRId64
                       " (its scheduler cap, measured at context %s with %" PRId64 ")",
                       r->cap_requests, lab, r->cap_conc);
    tb_result_cell_set_sched_cap(cell, r->cap_requests, why);
    break;
  }
  }
  free(why);
  return cell;
}

/* What the matrix carries across its contexts and passes. */
struct matrix {
  json_t *cells;      /* the result's */
  const json_t *done; /* cells of an earlier attempt (may be NULL) */
  struct repeats rp;
  unsigned runnable_left, scouts_left; /* for the ETA */
};

/* One context of one pass: its cells in the plan (its prefill scout
 * first, when planned), and what its scout made for its decode cells. */
struct ctxrun {
  const struct tb_plan_cell *cells;
  size_t n;
  int64_t ctx;
  unsigned pass;
  bool open_pf; /* its prefill cell is to be measured */
  struct tb_prompt prompt;
  char *dbody, *sbody;
  size_t dlen, slen;
  char *ctx_err; /* when set, every runnable cell here is an error */
};

/* The end of the plan's context starting at matrix cell i. */
static size_t
context_end(const struct tb_plan *p, size_t i)
{
  size_t j = i + 1;
  while (j < p->n_matrix && p->cells[j].context == p->cells[i].context)
    j++;
  return j;
}

/* Whether the decode cell c is still to be measured in this pass. */
static bool
decode_open(const struct tb_run *r, const struct matrix *m, const struct tb_plan_cell *c)
{
  return c->phase == TB_PLAN_DECODE && !gated(r, c) &&
         tb_result_find_cell(m->done, "decode", c->context, c->concurrency) == NULL &&
         !repeats_closed(&m->rp, "decode", c->context, c->concurrency);
}

/* The cells left to measure and the scouts that go with them, every pass
 * measuring them all again (the ETA's counts). */
static void
matrix_count(struct tb_run *r, struct matrix *m)
{
  const struct tb_plan *p = &r->plan;
  for (size_t i = 0; i < p->n_matrix; i = context_end(p, i)) {
    bool any = false;
    for (size_t k = i; k < context_end(p, i); k++) {
      const struct tb_plan_cell *c = &p->cells[k];
      if (c->phase == TB_PLAN_PREFILL)
        any |= tb_result_find_cell(m->done, "prefill", c->context, 1) == NULL;
      else if (decode_open(r, m, c)) {
        m->runnable_left++;
        any = true;
      }
    }
    m->scouts_left += any;
  }
  m->runnable_left *= p->repeats;
  m->scouts_left *= p->repeats;
}

/* The prefill cell of a scout that ran (new). */
static json_t *
scout_cell(struct tb_run *r, struct tb_cell *sc, const struct ctxrun *x)
{
  json_t *cell = tb_result_cell_new("prefill", x->ctx, 1);
  if (sc->failed) {
    tb_result_cell_set_status(cell, "error", sc->reason);
    return cell;
  }
  bool from_usage = sc->scout_prompt_tokens > 0;
  tb_result_cell_set_prefill(cell, from_usage ? sc->scout_prompt_tokens : x->prompt.tokens,
                             from_usage, (double)sc->scout_ttft_ns / 1e9);
  /* a scout is cold but for what the server's cache held of the chat
   * template before the tag: it counts only the tokens the server evaluated */
  if (from_usage && sc->scout_cached_tokens > 0)
    tb_result_cell_set_prefill_cached(cell, sc->scout_cached_tokens);
  json_t *st = tb_srvtime_json(&sc->srv);
  if (st != NULL)
    json_object_set_new(cell, "server_timings", st);
  if (!from_usage && r->prompt_estimate)
    tb_result_cell_set_prompt_estimate(cell, TB_PROMPT_ESTIMATE);
  return cell;
}

/* A cold scout (issue 25): its one prompt is its own, so the server's
 * cache can hold only the chat template's tokens of it
 * (tb_checks_prefix_cell, prefix_hits_unexplained). */
static void
scout_prefix_check(const struct tb_cell *sc, json_t *pf)
{
  if (sc->failed || sc->scout_prompt_tokens <= 0 || sc->scout_cached_tokens < 0)
    return;
  const struct tb_checks_prefix in = {
    .requests = 1,
    .prompt_mean = (double)sc->scout_prompt_tokens,
    .implied_pct = NAN,
    .have_hit = true,
    .hit_pct = 100.0 * (double)sc->scout_cached_tokens / (double)sc->scout_prompt_tokens,
  };
  tb_checks_prefix_cell(pf, &in);
}

/* The context's scout: its prompt and request bodies, one request that
 * warms the server's cache for the decode cells and measures the prefill
 * cell; then the server drains. */
static void
run_scout(struct tb_run *r, struct matrix *m, struct ctxrun *x)
{
  json_t *key = tb_result_cell_new("prefill", x->ctx, 1);
  if (r->plan.repeats > 1)
    json_object_set_new(key, "repeat", json_integer(x->pass));
  tb_run_progress(r, key, m->runnable_left, m->scouts_left);
  json_decref(key);
  int64_t target = x->ctx;
  if (r->d.max_model_len > 0 && target + 1 > r->d.max_model_len)
    target = r->d.max_model_len - 1 - 16;
  char *perr = NULL;
  if (tb_prompt_build(r->pc, x->ctx, target, &x->prompt, &perr) != 0) {
    x->ctx_err = tb_xasprintf("prompt: %s", perr ? perr : "failed");
    free(perr);
    return;
  }
  r->prompt_estimate = x->prompt.source != NULL && strcmp(x->prompt.source, "estimate") == 0;
  x->sbody = request_body(r, x->prompt.text, 1, &x->slen);
  x->dbody = request_body(r, x->prompt.text, r->spec->max_output, &x->dlen);
  /* a cold prefill: the server's prefix cache emptied first (cache: reset) */
  char why[TB_CACHERESET_WHY_MAX] = "";
  bool reset = strcmp(r->spec->cache, "reset") == 0;
  enum tb_cache_reset cr =
    reset ? tb_cache_reset_once(&r->reset_memo, &r->d, r->api_key, why, sizeof why)
          : TB_CACHE_RESET_UNSUPPORTED;
  struct tb_cell sc;
  tb_cell_init(&sc, r, x->ctx, 1, true, x->sbody, x->slen);
  tb_cell_loop(&sc);
  if (sc.cancelled)
    r->cancelled = true;
  if (sc.failed && !sc.cancelled)
    x->ctx_err = tb_xasprintf("warm-up request: %s", sc.reason);
  if (sc.failed && sc.global[0] != '\0' && r->stop == NULL)
    r->stop = tb_xstrdup(sc.global);
  if (x->open_pf && !r->cancelled) {
    json_t *pf = scout_cell(r, &sc, x);
    if (reset) {
      json_object_set_new(pf, "cache_reset", json_string(tb_cache_reset_name(cr)));
      json_object_set_new(pf, "cache_reset_detail", json_string(why));
      scout_prefix_check(&sc, pf);
    }
    repeats_measured(r, m->cells, &m->rp, pf);
  }
  tb_cell_free(&sc);
  if (m->scouts_left > 0)
    m->scouts_left--;
  if (!r->cancelled)
    (void)abort_and_drain(r);
}

/* A decode cell the caller's shards measure (true: cell filled; false: the
 * engine measures it).  While they run this process watches the server
 * (tb_ratewatch), and the merged cell gets what a whole cell has of it: the
 * server series and the checks over the shards' common window, its energy
 * from the telemetry over that window, its price from the merged tokens.
 * Stopped while its shards ran: r->cancelled, cell freed. */
static bool
measure_sharded(struct tb_run *r, struct ctxrun *x, const struct tb_plan_cell *pc, json_t *cell)
{
  struct tb_ratewatch *w = tb_ratewatch_begin(&r->d, r->api_key, r->server_series);
  int64_t win[2] = { 0, 0 };
  if (!r->hooks->shard_cell(r->hooks->cls, x->ctx, pc->concurrency, cell, win)) {
    tb_ratewatch_free(w);
    return false;
  }
  tb_ratewatch_end(w, 0, NULL, NULL); /* the series ends with the window */
  if (tb_run_cancelled(r)) {          /* stopped while its shards ran: not measured */
    r->cancelled = true;
    tb_ratewatch_free(w);
    json_decref(cell);
    return true;
  }
  int after = abort_and_drain(r); /* what the shards left on the server */
  tb_ratewatch_decode_cell(w, cell, win[0], win[1], (unsigned)pc->concurrency, r->tp.kernel_stamps,
                           after);
  tb_ratewatch_free(w);
  if (win[0] > 0 && win[1] > win[0])
    tb_telemetry_cell(r->tel, r->tgt->endpoint, cell, win[0], win[1]);
  else /* priced from its merged tokens and window, its energy unknown */
    tb_telemetry_cell(NULL, r->tgt->endpoint, cell, 0, 0);
  return true;
}

/* Measures the decode cell cell (its key; stolen) on the context's body. */
static void
measure_decode(struct tb_run *r, struct matrix *m, struct ctxrun *x, const struct tb_plan_cell *pc,
               json_t *cell)
{
  if (r->plan.repeats > 1)
    json_object_set_new(cell, "repeat", json_integer(x->pass));
  tb_run_progress(r, cell, m->runnable_left, m->scouts_left);
  json_object_del(cell, "repeat");
  /* a sharded cell: measured by the caller's shards (worker_shard.h) */
  if (r->hooks != NULL && r->hooks->shard_cell != NULL && measure_sharded(r, x, pc, cell)) {
    if (r->cancelled)
      return;
    repeats_measured(r, m->cells, &m->rp, cell);
    m->runnable_left--;
    return;
  }
  int64_t t0 = tb_time_mono_ns();
  struct tb_cell dc;
  tb_cell_init(&dc, r, x->ctx, (unsigned)pc->concurrency, false, x->dbody, x->dlen);
  drained_before(r, &dc);
  tb_cell_loop(&dc);
  if (dc.cancelled) {
    r->cancelled = true;
    tb_cell_free(&dc);
    json_decref(cell);
    return;
  }
  if (dc.sched_cap > 0 && (r->cap_requests == 0 || dc.sched_cap < r->cap_requests)) {
    r->cap_requests = dc.sched_cap;
    r->cap_ctx = x->ctx;
    r->cap_conc = pc->concurrency;
  }
  if (!dc.failed && dc.sched_cap == 0)
    r->valid_decodes++;
  if (dc.failed && dc.global[0] != '\0' && r->stop == NULL)
    r->stop = tb_xstrdup(dc.global);
  /* drained after the cell is one of its checks: drain, then emit */
  int drained = abort_and_drain(r);
  tb_cell_proofs(r, &dc, tb_cell_result(&dc, cell), drained);
  repeats_measured(r, m->cells, &m->rp, cell);
  tb_cell_free(&dc);
  m->runnable_left--;
  if (r->stop != NULL)
    return;
  double took = (double)(tb_time_mono_ns() - t0) / 1e9;
  r->avg_cell_s = (r->avg_cell_s * r->n_cell_timed + took) / (r->n_cell_timed + 1);
  r->n_cell_timed++;
}

/* One decode cell of the context: kept from an earlier attempt, gated,
 * closed at an earlier pass, an error of its context, or measured.  False:
 * the context stops here (cancelled, or the run stops). */
static bool
run_decode(struct tb_run *r, struct matrix *m, struct ctxrun *x, const struct tb_plan_cell *pc)
{
  const json_t *done = tb_result_find_cell(m->done, "decode", x->ctx, pc->concurrency);
  if (done != NULL) {
    if (x->pass == 1)
      json_array_append(m->cells, (json_t *)done);
    return true;
  }
  json_t *cell = gated_cell(r, pc);
  if (cell != NULL) {
    if (x->pass == 1)
      tb_run_emit(r, m->cells, cell);
    else
      json_decref(cell);
    return true;
  }
  if (repeats_closed(&m->rp, "decode", x->ctx, pc->concurrency))
    return true; /* in error at an earlier pass */
  cell = tb_result_cell_new("decode", x->ctx, pc->concurrency);
  if (x->ctx_err != NULL) {
    tb_result_cell_set_status(cell, "error", x->ctx_err);
    repeats_measured(r, m->cells, &m->rp, cell);
    m->runnable_left--;
    return r->stop == NULL;
  }
  measure_decode(r, m, x, pc, cell);
  return !r->cancelled && r->stop == NULL;
}

/* One context of a pass: its scout when any of its cells is still to be
 * measured, then its decode cells. */
static void
run_context(struct tb_run *r, struct matrix *m, const struct tb_plan_cell *cells, size_t n,
            unsigned pass)
{
  struct ctxrun x = { .cells = cells, .n = n, .ctx = cells[0].context, .pass = pass };
  const json_t *done_pf = tb_result_find_cell(m->done, "prefill", x.ctx, 1);
  x.open_pf = cells[0].phase == TB_PLAN_PREFILL && done_pf == NULL &&
              !repeats_closed(&m->rp, "prefill", x.ctx, 1);
  bool need_scout = x.open_pf;
  for (size_t j = 0; j < n; j++)
    need_scout |= decode_open(r, m, &cells[j]);
  if (done_pf != NULL && pass == 1)
    json_array_append(m->cells, (json_t *)done_pf);
  if (need_scout)
    run_scout(r, m, &x);
  /* A global failure at the warm-up: its prefill cell says it; else the
   * first decode cell does, and the run stops there. */
  bool stop_now = r->stop != NULL && x.open_pf;
  for (size_t j = 0; j < n && !r->cancelled && !stop_now; j++)
    if (cells[j].phase == TB_PLAN_DECODE && !run_decode(r, m, &x, &cells[j]))
      break;
  free(x.ctx_err);
  free(x.dbody);
  free(x.sbody);
  tb_prompt_free(&x.prompt);
}

/* The plan's matrix: pass 1 over the whole matrix, then pass 2, ...  A pass
 * has prompts of its own (the run id and the pass in the tag), so each
 * pass's scouts are cold and its cells warm only on their own scout. */
void
tb_matrix_run(struct tb_run *r, json_t *cells, const json_t *done_cells)
{
  const struct tb_plan *p = &r->plan;
  struct matrix m = { .cells = cells, .done = done_cells };
  m.rp = (struct repeats){ .n = p->repeats, .held = json_object(), .closed = json_object() };
  matrix_count(r, &m);
  for (unsigned pass = 1; pass <= p->repeats && !r->cancelled && r->stop == NULL; pass++) {
    m.rp.pass = pass;
    if (pass > 1) {
      char *tag = tb_xasprintf("%s-r%u", r->run_id, pass);
      tb_prompt_ctx_free(r->pc);
      r->pc = tb_prompt_ctx_new(&r->d, r->api_key, tag);
      free(tag);
    }
    for (size_t i = 0; i < p->n_matrix && !r->cancelled && r->stop == NULL;) {
      size_t j = context_end(p, i);
      run_context(r, &m, &p->cells[i], j - i, pass);
      i = j;
    }
  }
  json_decref(m.rp.held);
  json_decref(m.rp.closed);
}
