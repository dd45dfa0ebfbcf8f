/*
 * tb_tracecell: the trace cell.  See tb_tracecell.h.
 *
 * Set up once a run (tb_tracecell_setup): the replay, its roots in order
 * of arrival, and for each request its first turn after it and its next
 * sibling (a tree in two arrays).  The cell is a rate cell
 * (tb_ratecell_run with r->trace_cell set): its arrivals are the roots
 * (tb_tracecell_root_ns), each a session of its own; a request's body is
 * its own (tb_tracecell_body); when it ends, the turns after it are due
 * (tb_tracecell_after).  Its own figures: tb_ratefig (trace_figures).
 */
#include "engine/tb_tracecell.h"

#include <math.h>
#include <stdlib.h>

#include "engine/tb_rate.h"
#include "engine/tb_ratecell.h"
#include "result/tb_result.h"
#include "spec/tb_spec.h"
#include "spec/tb_trace.h"
#include "spec/tb_traceplay.h"

#define NS_PER_S 1000000000LL

static int
cmp_root(const void *a, const void *b, void *cls)
{
  const struct tb_trace *t = cls;
  double x = t->req[*(const size_t *)a].t_s, y = t->req[*(const size_t *)b].t_s;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  return x < y ? -1 : x > y ? 1 : (i > j) - (i < j);
}

/* The trace cell's replay of env->trace as the spec's trace object asks
 * (inputs capped to fit the server's length with their output), its roots
 * in order of arrival, the turns after each request, the summary, the
 * prompts' seed (the spec's seed and the run: no two runs share a block). */
void
tb_tracecell_setup(struct rrun *r)
{
  const struct tb_spec *s = r->s;
  const struct tb_spec_trace *t = &s->trace;
  if (r->env->trace == NULL) {
    r->tr_err = tb_xstrdup("the spec's trace names no trace (tokbench run --trace FILE, or an "
                           "uploaded trace's id)");
    return;
  }
  int64_t mml = r->env->d->max_model_len;
  int64_t cap_out = t->max_output > 0 ? t->max_output : 0;
  struct tb_traceplay_opts o = {
    .start_s = t->start_s,
    .duration_s = t->duration_s,
    .speedup = t->speedup,
    .rate_scale = t->rate_scale,
    .max_output = cap_out,
    .max_requests = (size_t)t->max_requests,
  };
  if (mml > 0) { /* input + output + the template's few tokens within the length */
    if (o.max_output == 0 || o.max_output > mml / 2)
      o.max_output = mml / 2;
    o.max_input = mml - o.max_output - 64;
  }
  tb_traceplay_window(r->env->trace, &o, &r->tr);
  tb_tracesum_of(&r->tr, &r->tr_sum);
  size_t n = r->tr.n ? r->tr.n : 1;
  r->tr_roots = tb_xmalloc(n * sizeof *r->tr_roots);
  r->tr_child = tb_xmalloc(n * sizeof *r->tr_child);
  r->tr_sib = tb_xmalloc(n * sizeof *r->tr_sib);
  for (size_t i = 0; i < r->tr.n; i++)
    r->tr_child[i] = r->tr_sib[i] = -1;
  for (size_t i = r->tr.n; i-- > 0;) { /* children in file order */
    int64_t p = r->tr.req[i].parent;
    if (p < 0) {
      r->tr_roots[r->tr_nroots++] = i;
    } else {
      r->tr_sib[i] = r->tr_child[p];
      r->tr_child[p] = (int64_t)i;
    }
  }
  qsort_r(r->tr_roots, r->tr_nroots, sizeof *r->tr_roots, cmp_root, &r->tr);
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = r->env->run_id ? r->env->run_id : ""; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  r->tr_seed = h ^ (uint64_t)s->seed;
  if (r->tr.n == 0)
    r->tr_err = tb_xstrdup("the trace's window holds no request");
}

/* The trace cell: the spec's trace replayed (kept from done_cells when
 * an earlier attempt measured it).  false: stop. */
bool
tb_tracecell_run(struct rrun *r)
{
  const struct tb_rate_env *env = r->env;
  unsigned index = ++r->index;
  int64_t ctx = (int64_t)llround(r->tr_sum.in.mean);
  json_t *cell = tb_result_cell_new("rate", ctx, index);
  json_object_set_new(cell, "trace_format", json_string(r->s->trace.format));
  const json_t *done = tb_result_find_cell(env->done_cells, "rate", ctx, index);
  if (done != NULL && json_object_get(done, "trace") != NULL) {
    json_decref(cell);
    if (env->keep != NULL)
      env->keep(env->cls, done);
    return true;
  }
  json_object_set_new(cell, "role", json_string("trace"));
  if (env->progress != NULL)
    env->progress(env->cls, cell);
  if (r->setup_err != NULL || r->tr_err != NULL) {
    tb_result_cell_set_status(cell, "error", r->setup_err ? r->setup_err : r->tr_err);
  } else {
    tb_rate_cache_reset(r, cell);
    r->trace_cell = true;
    bool ok = tb_ratecell_run(r, 0, 0, index, cell);
    r->trace_cell = false;
    if (!ok) {
      r->cancelled = true;
      json_decref(cell);
      return false;
    }
  }
  if (!env->emit(env->cls, cell)) {
    r->cancelled = true;
    return false;
  }
  return true;
}

/* Root k's arrival in the replay, ns after the cell's t0. */
int64_t
tb_tracecell_root_ns(const struct rrun *r, size_t k)
{
  return (int64_t)llround(r->tr.req[r->tr_roots[k]].t_s * NS_PER_S);
}

/* The body of trace request i: its prompt (tb_traceplay_text: the trace's
 * block sharing, seeded by the run) as the user's message, want output
 * tokens; NULL when it cannot be made. */
char *
tb_tracecell_body(struct rrun *r, int64_t i, int64_t want)
{
  int64_t words;
  char *text = tb_traceplay_text(&r->tr, (size_t)i, r->tr_seed, TB_SPEC_MAX_CONTEXT, &words);
  json_t *b = json_pack("{s:s, s:[{s:s, s:s}], s:I, s:b, s:b, s:{s:b, s:b}}", "model",
                        r->env->d->model, "messages", "role", "user", "content", text, "max_tokens",
                        (json_int_t)want, "stream", 1, "ignore_eos", 1, "stream_options",
                        "include_usage", 1, "continuous_usage_stats", 1);
  free(text);
  char *body = b != NULL ? json_dumps(b, JSON_COMPACT) : NULL;
  json_decref(b);
  return body;
}

/* A trace request ended: each turn that follows it in its session is due
 * its recorded delay after now, or (no delay in the trace) at its recorded
 * time and never before now; after a failure they are not sent. */
void
tb_tracecell_after(struct rcell *c, const struct sess *ss, bool failed, int64_t now)
{
  struct rrun *r = c->r;
  for (int64_t j = r->tr_child[ss->tri]; j >= 0; j = r->tr_sib[j]) {
    struct sess *k = failed ? NULL : tb_ratecell_sess_new(c, false);
    if (k == NULL) {
      c->tr_abandoned++;
      continue;
    }
    const struct tb_trace_req *q = &r->tr.req[j];
    int64_t at = c->t0 + (int64_t)llround(q->t_s * NS_PER_S);
    k->tri = j;
    k->due = q->delay_s >= 0 ? now + (int64_t)llround(q->delay_s * NS_PER_S) : at > now ? at : now;
    tb_ratecell_heap_push(c, k);
  }
}
