/*
 * tb_plan: see tb_plan.h.  Nothing here does I/O: the plan is a function of
 * the spec and the facts, so that the api (before discovery), the engine
 * and the rate cells (after it) cannot disagree on it.
 */
#include "spec/tb_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t
tb_plan_top_context(int64_t max_model_len, int64_t max_output)
{
  int64_t room = max_model_len - max_output - TB_PLAN_CTX_MARGIN;
  if (room < 1024)
    return room > 0 ? room : 0;
  return room / 1024 * 1024;
}

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void
sort_unique(int64_t *v, size_t *n)
{
  qsort(v, *n, sizeof *v, cmp_i64);
  size_t o = 0;
  for (size_t i = 0; i < *n; i++)
    if (o == 0 || v[o - 1] != v[i])
      v[o++] = v[i];
  *n = o;
}

static void
copy_list(int64_t *dst, size_t *n, const struct tb_spec_list *l)
{
  *n = l->n < TB_SPEC_MAX_LIST ? l->n : TB_SPEC_MAX_LIST;
  memcpy(dst, l->v, *n * sizeof *dst);
}

static bool
in_list(const int64_t *v, size_t n, int64_t x)
{
  for (size_t i = 0; i < n; i++)
    if (v[i] == x)
      return true;
  return false;
}

/* The matrix's axes: the spec's lists, and the ones it leaves to the
 * engine from the length mml (tb_plan.h). */
static void
axes(struct tb_plan *p, int64_t mml)
{
  const struct tb_spec *s = p->spec;
  copy_list(p->concurrency, &p->n_concurrency, &s->concurrency);
  copy_list(p->contexts, &p->n_contexts, &s->contexts);
  copy_list(p->prefill, &p->n_prefill, &s->prefill_contexts);
  int64_t top = tb_plan_top_context(mml, s->max_output);
  if (!s->contexts.given) {
    p->n_contexts = 0;
    for (int64_t c = 8192; c < top && c <= 131072; c *= 2)
      p->contexts[p->n_contexts++] = c;
    if (top >= 1)
      p->contexts[p->n_contexts++] = top;
  }
  if (!s->prefill_contexts.given) {
    p->n_prefill = 0;
    for (size_t i = 0; i < p->n_contexts; i++)
      if (p->contexts[i] > 0) /* context 0 is a decode row only */
        p->prefill[p->n_prefill++] = p->contexts[i];
    int64_t full = mml / 1024 * 1024;
    if (full > 0 && p->n_prefill < TB_SPEC_MAX_LIST)
      p->prefill[p->n_prefill++] = full;
    sort_unique(p->prefill, &p->n_prefill);
  }
  for (size_t i = 0; i < p->n_concurrency; i++)
    if (p->concurrency[i] > p->max_concurrency)
      p->max_concurrency = p->concurrency[i];
}

static enum tb_plan_gate
gate(const struct tb_plan *p, int64_t ctx, int64_t conc)
{
  int64_t out = p->spec->max_output;
  if (p->facts.max_model_len > 0 && ctx + out > p->facts.max_model_len)
    return TB_PLAN_TOO_LONG;
  if (p->facts.max_running > 0 && conc > p->facts.max_running)
    return TB_PLAN_TOO_MANY;
  if (tb_over_capacity(conc, ctx, out, p->kv_budget))
    return TB_PLAN_OVER_KV;
  return TB_PLAN_RUN;
}

static struct tb_plan_cell *
add(struct tb_plan *p, enum tb_plan_phase phase)
{
  struct tb_plan_cell *c = &p->cells[p->n_cells++];
  memset(c, 0, sizeof *c);
  c->phase = phase;
  return c;
}

/* One pass of the matrix: by context over the union of both lists, the
 * scout first. */
static void
matrix_cells(struct tb_plan *p)
{
  int64_t all[2 * TB_SPEC_MAX_LIST];
  size_t n_all = 0;
  for (size_t i = 0; i < p->n_contexts; i++)
    all[n_all++] = p->contexts[i];
  for (size_t i = 0; i < p->n_prefill; i++)
    all[n_all++] = p->prefill[i];
  sort_unique(all, &n_all);
  for (size_t k = 0; k < n_all; k++) {
    if (in_list(p->prefill, p->n_prefill, all[k])) {
      struct tb_plan_cell *c = add(p, TB_PLAN_PREFILL);
      c->context = all[k];
      c->concurrency = 1;
    }
    if (!in_list(p->contexts, p->n_contexts, all[k]))
      continue;
    for (size_t j = 0; j < p->n_concurrency; j++) {
      struct tb_plan_cell *c = add(p, TB_PLAN_DECODE);
      c->context = all[k];
      c->concurrency = p->concurrency[j];
      c->gate = gate(p, all[k], p->concurrency[j]);
    }
  }
  for (size_t i = 0; i < p->n_cells; i++) {
    p->cells[i].window_s = p->spec->duration_s;
    p->cells[i].settle_s = p->spec->settle_s;
  }
  p->n_matrix = p->n_cells;
}

/* How long one rate cell's arrivals last at rate (a closed-loop cell: its
 * window), with a conversation's later turns (their mean think times). */
static double
rate_seconds(const struct tb_spec *s, double rate)
{
  double t =
    s->rate_requests > 0 && rate > 0 ? (double)s->rate_requests / rate : s->rate_duration_s;
  double tail = s->conversation.turns > 1
                  ? (double)(s->conversation.turns - 1) * s->conversation.think_time_s
                  : 0;
  return t + tail;
}

/* The rate cells, then the sweep's probes; the seconds they take at most. */
static double
rate_cells(struct tb_plan *p)
{
  const struct tb_spec *s = p->spec;
  double secs = 0;
  for (size_t i = 0; i < s->rates.n; i++) {
    struct tb_plan_cell *c = add(p, TB_PLAN_RATE);
    c->rate_rps = s->rates.v[i];
    c->window_s = rate_seconds(s, c->rate_rps);
    secs += c->window_s;
    p->n_rate++;
  }
  if (p->trace) { /* its window when the spec bounds it (the file is the engine's) */
    struct tb_plan_cell *c = add(p, TB_PLAN_TRACE);
    const struct tb_spec_trace *t = &s->trace;
    c->window_s = t->duration_s > 0 ? t->duration_s / t->speedup / t->rate_scale : 0;
    secs += c->window_s;
    p->n_trace = 1;
  }
  if (!p->sweep)
    return secs;
  double found, hi;
  double first = tb_plan_sweep_next(&s->sweep, NULL, NULL, 0, &found, &hi);
  double probe_s = rate_seconds(s, p->sweep_closed ? 0 : first);
  for (int64_t i = 0; i < s->sweep.max_probes; i++) {
    struct tb_plan_cell *c = add(p, TB_PLAN_SWEEP);
    if (i == 0 && p->sweep_closed)
      c->users = (unsigned)llround(first);
    else if (i == 0)
      c->rate_rps = first;
    c->window_s = probe_s;
    p->n_sweep++;
  }
  secs += (double)s->sweep.max_probes * probe_s;
  return secs;
}

void
tb_plan_init(struct tb_plan *p, const struct tb_spec *spec, const struct tb_plan_facts *facts)
{
  memset(p, 0, sizeof *p);
  p->spec = spec;
  if (facts != NULL)
    p->facts = *facts;
  p->sweep = spec->sweep.attainment_pct > 0;
  p->sweep_closed = p->sweep && strcmp(spec->sweep.over, "concurrency") == 0;
  p->trace = spec->trace.format[0] != '\0';
  p->rate = spec->rates.n > 0 || p->sweep || p->trace;
  p->matrix = !(p->rate && !spec->contexts.given && !spec->concurrency.given &&
                !spec->prefill_contexts.given);
  p->repeats = (unsigned)spec->repeats;
  p->kv_override = spec->kv_budget > 0;
  p->kv_budget = p->kv_override ? spec->kv_budget : p->facts.kv_budget;
  p->max_concurrency = 1;
  int64_t mml = facts == NULL                ? TB_SPEC_MAX_CONTEXT
                : p->facts.max_model_len > 0 ? p->facts.max_model_len
                                             : TB_PLAN_DEFAULT_LENGTH;
  if (p->matrix)
    axes(p, mml);
  size_t n = p->n_prefill + p->n_contexts * p->n_concurrency + spec->rates.n + p->trace +
             (p->sweep ? (size_t)spec->sweep.max_probes : 0);
  p->cells = tb_xcalloc(n > 0 ? n : 1, sizeof *p->cells);
  if (p->matrix)
    matrix_cells(p);
  double rate_s = rate_cells(p);
  /* as the limit always counted it: a pass's cells x repeats x (window +
   * settle), then the rate cells */
  p->bound_s =
    (double)p->n_matrix * (double)p->repeats * (spec->duration_s + spec->settle_s) + rate_s;
}

void
tb_plan_free(struct tb_plan *p)
{
  if (p == NULL)
    return;
  free(p->cells);
  p->cells = NULL;
  p->n_cells = 0;
}

/* The replay of a whole trace (no duration_s) of span_s seconds, in the
 * job's seconds (the plan's trace window counts only a given duration_s). */
static double
trace_replay_s(const struct tb_plan *p, double span_s)
{
  const struct tb_spec_trace *t = &p->spec->trace;
  if (p->n_trace == 0 || t->duration_s > 0 || !(span_s > t->start_s))
    return 0;
  return (span_s - t->start_s) / t->speedup / t->rate_scale;
}

double
tb_plan_job_seconds(const json_t *spec, double trace_span_s)
{
  struct tb_spec s;
  char *err = NULL;
  double secs = -1;
  if (tb_spec_parse(&s, spec, &err)) {
    struct tb_plan p;
    tb_plan_init(&p, &s, NULL);
    secs = p.bound_s + trace_replay_s(&p, trace_span_s);
    tb_plan_free(&p);
  }
  free(err);
  tb_spec_free(&s);
  return secs;
}

double
tb_plan_sweep_next(const struct tb_spec_sweep *sw, const double *vals, const bool *pass, size_t n,
                   double *found, double *hi)
{
  bool closed = strcmp(sw->over, "concurrency") == 0;
  double vmin = closed ? (double)sw->min_concurrency : sw->min_rps;
  double vmax = closed ? (double)sw->max_concurrency : sw->max_rps;
  double step = closed ? (double)sw->step_concurrency : sw->step_rps;
  double lo = 0;
  *found = 0;
  *hi = 0;
  for (size_t i = 0; i < n; i++)
    if (pass[i] && vals[i] > lo)
      lo = vals[i];
  for (size_t i = 0; i < n; i++)
    if (!pass[i] && vals[i] > lo && (*hi == 0 || vals[i] < *hi))
      *hi = vals[i];
  *found = lo;
  if (n == 0)
    return vmin;
  if (lo == 0 || n >= (size_t)sw->max_probes)
    return 0; /* the lowest value fails already, or out of probes */
  if (*hi == 0) {
    if (lo >= vmax)
      return 0;
    return fmin(2 * lo, vmax);
  }
  if (*hi - lo <= step * (1 + 1e-9))
    return 0;
  double k = floor((*hi - lo) / (2 * step) + 0.5);
  if (k < 1)
    k = 1;
  double next = lo + k * step;
  if (next >= *hi)
    next = lo + step;
  return next;
}

/* ------------------------------------------------------------- shards */

int
tb_plan_shards(int64_t spec_shards, int64_t conc, int64_t max_streams)
{
  int64_t n = spec_shards;
  if (n <= 0)
    n = max_streams > 0 ? (conc + max_streams - 1) / max_streams : 1;
  if (n > conc)
    n = conc;
  if (n > TB_SPEC_MAX_SHARDS)
    n = TB_SPEC_MAX_SHARDS;
  return n < 1 ? 1 : (int)n;
}

int64_t
tb_plan_shard_share(int64_t conc, int n, int k)
{
  if (n < 1 || k < 0 || k >= n || conc < 0)
    return 0;
  return conc / n + (k < conc % n ? 1 : 0);
}

int
tb_plan_rate_shards(int64_t spec_shards, double rate, double max_rps, int64_t arrivals)
{
  int64_t n = spec_shards;
  if (n <= 0)
    n = max_rps > 0 && rate > 0 ? (int64_t)ceil(rate / max_rps - 1e-9) : 1;
  if (arrivals > 0 && n > arrivals)
    n = arrivals;
  if (n > TB_SPEC_MAX_SHARDS)
    n = TB_SPEC_MAX_SHARDS;
  return n < 1 ? 1 : (int)n;
}

double
tb_plan_rate_window_s(const struct tb_spec *s, double rate)
{
  return s->rate_requests > 0 && rate > 0 ? (double)s->rate_requests / rate : s->rate_duration_s;
}
