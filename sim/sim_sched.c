/*
 * sim_sched: see sim_sched.h for what it does and sim_state.h for the
 * lifetimes and the hot path it keeps to.
 */
#include "sim_sched.h"

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

#include "sim_out.h"
#include "sim_stream.h"
#include "sim_tok.h"

/* ------------------------------------------------------------------ */
/* timer heap (gens with a deadline: first byte, prefill, stall) */

static void
heap_swap(struct server *s, int a, int b)
{
  struct gen *t = s->heap[a];
  s->heap[a] = s->heap[b];
  s->heap[b] = t;
  s->heap[a]->heap_i = a;
  s->heap[b]->heap_i = b;
}

static void
heap_up(struct server *s, int i)
{
  while (i > 0 && s->heap[(i - 1) / 2]->due > s->heap[i]->due) {
    heap_swap(s, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static void
heap_down(struct server *s, int i)
{
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < s->heap_n && s->heap[l]->due < s->heap[m]->due)
      m = l;
    if (r < s->heap_n && s->heap[r]->due < s->heap[m]->due)
      m = r;
    if (m == i)
      return;
    heap_swap(s, i, m);
    i = m;
  }
}

void
sim_sched_heap_push(struct server *s, struct gen *g, int64_t due)
{
  if (s->heap_n == s->heap_cap) {
    s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 256;
    s->heap = tb_xrealloc(s->heap, (size_t)s->heap_cap * sizeof(*s->heap));
  }
  g->due = due;
  g->heap_i = s->heap_n;
  s->heap[s->heap_n++] = g;
  heap_up(s, g->heap_i);
}

void
sim_sched_heap_remove(struct server *s, struct gen *g)
{
  int i = g->heap_i;
  if (i < 0)
    return;
  s->heap_n--;
  if (i != s->heap_n) {
    s->heap[i] = s->heap[s->heap_n];
    s->heap[i]->heap_i = i;
    heap_down(s, i);
    heap_up(s, i);
  }
  g->heap_i = -1;
}

/* ------------------------------------------------------------------ */
/* batch and queue */

static void
batch_add(struct server *s, struct gen *g, int64_t now)
{
  if (s->batch_n == s->batch_cap) {
    s->batch_cap = s->batch_cap ? s->batch_cap * 2 : 256;
    s->batch = tb_xrealloc(s->batch, (size_t)s->batch_cap * sizeof(*s->batch));
  }
  g->batch_i = s->batch_n;
  s->batch[s->batch_n++] = g;
  s->batch_prompt_sum += g->prompt;
  g->st = G_DECODE;
  if (s->batch_n == 1) {
    /* The step clock starts with the first stream (its first token was
     * emitted now). */
    double ms = sim_profile_step_ms(s->p, 1, (double)g->prompt) *
                sim_noise_step_factor(&s->noise, now, s->cfg->time_scale);
    s->next_step = now + ms_to_ns(s, ms);
  }
}

static void
batch_remove(struct server *s, struct gen *g)
{
  int i = g->batch_i;
  if (i < 0)
    return;
  s->batch_n--;
  if (i != s->batch_n) {
    s->batch[i] = s->batch[s->batch_n];
    s->batch[i]->batch_i = i;
  }
  s->batch_prompt_sum -= g->prompt;
  g->batch_i = -1;
}

void
sim_sched_queue_push(struct server *s, struct gen *g)
{
  g->st = G_QUEUED;
  g->qnext = NULL;
  g->qprev = s->q_tail;
  if (s->q_tail)
    s->q_tail->qnext = g;
  else
    s->q_head = g;
  s->q_tail = g;
  s->q_n++;
}

static void
queue_remove(struct server *s, struct gen *g)
{
  if (g->qprev)
    g->qprev->qnext = g->qnext;
  else
    s->q_head = g->qnext;
  if (g->qnext)
    g->qnext->qprev = g->qprev;
  else
    s->q_tail = g->qprev;
  g->qnext = g->qprev = NULL;
  s->q_n--;
}

/* ------------------------------------------------------------------ */
/* prefix cache: whole templated prompts, LRU within the KV budget */

static struct cache_entry *
cache_find(struct server *s, uint64_t hash)
{
  for (int i = 0; i < s->cache_n; i++)
    if (s->cache[i].hash == hash)
      return &s->cache[i];
  return NULL;
}

static void
cache_evict_one(struct server *s)
{
  int lru = 0;
  for (int i = 1; i < s->cache_n; i++)
    if (s->cache[i].used < s->cache[lru].used)
      lru = i;
  s->cache_tokens -= s->cache[lru].tokens;
  s->cache[lru] = s->cache[--s->cache_n];
}

static void
cache_insert(struct server *s, uint64_t hash, int64_t tokens)
{
  struct cache_entry *e = cache_find(s, hash);
  if (e) {
    e->used = ++s->cache_clock;
    return;
  }
  if (tokens > s->p->kv_budget)
    return;
  while (s->cache_n > 0 &&
         (s->cache_n == SIM_CACHE_ENTRIES || s->cache_tokens + tokens > s->p->kv_budget))
    cache_evict_one(s);
  s->cache[s->cache_n++] = (struct cache_entry){ hash, tokens, ++s->cache_clock };
  s->cache_tokens += tokens;
}

/* ------------------------------------------------------------------ */
/* request lifecycle */

static void
grp_remove(struct server *s, struct gen *g)
{
  int i = g->grp_i;
  if (i < 0)
    return;
  s->grp[i] = s->grp[--s->grp_n];
  s->grp[i]->grp_i = i;
  g->grp_i = -1;
}

/* Schedules the first token of a prefix-cache hit (see struct server). */
static int64_t
grp_join(struct server *s, struct gen *g, int64_t now)
{
  if (s->grp_n == 0 || s->grp_due <= now) {
    for (int i = 0; i < s->grp_n; i++)
      s->grp[i]->grp_i = -1;
    s->grp_n = 0;
    s->grp_start = now;
    s->grp_due = 0;
  }
  if (s->grp_n == s->grp_cap) {
    s->grp_cap = s->grp_cap ? s->grp_cap * 2 : 64;
    s->grp = tb_xrealloc(s->grp, (size_t)s->grp_cap * sizeof(*s->grp));
  }
  g->grp_i = s->grp_n;
  s->grp[s->grp_n++] = g;
  int64_t due =
    s->grp_start + ms_to_ns(s, sim_profile_cached_ms(s->p, s->running, (double)g->prompt));
  if (due > s->grp_due) {
    s->grp_due = due;
    for (int i = 0; i < s->grp_n; i++) {
      struct gen *m = s->grp[i];
      if (m->heap_i >= 0 && m->due < due) {
        m->due = due;
        heap_down(s, m->heap_i);
      }
    }
  }
  return s->grp_due;
}

/* Detaches g from every structure and releases its reservation. */
static void
gen_detach(struct server *s, struct gen *g)
{
  sim_sched_heap_remove(s, g);
  batch_remove(s, g);
  grp_remove(s, g);
  if (g->st == G_QUEUED)
    queue_remove(s, g);
  if (g->st == G_PREFILL || g->st == G_DECODE || g->st == G_STALL) {
    s->running--;
    s->kv_used -= g->need_kv;
  }
  g->o->gen = NULL;
}

/* Remembers g in the request log (GET /sim/requests). */
static void
log_request(struct server *s, const struct gen *g)
{
  if (g->t_arrival == 0)
    return; /* refused before it was a request */
  struct reqlog *e = &s->log[s->log_seq % SIM_REQLOG];
  *e = (struct reqlog){ .seq = s->log_seq++,
                        .arrival_ns = g->t_arrival,
                        .admitted_ns = g->t_admit,
                        .first_token_ns = g->t_first,
                        .end_ns = now_ns(),
                        .prompt = g->prompt,
                        .cached_tokens = g->cached_tokens,
                        .output = g->out,
                        .end = g->completed                      ? "completed"
                               : strcmp(g->finish, "abort") == 0 ? "aborted"
                                                                 : "disconnected" };
  snprintf(e->id, sizeof(e->id), "%s", g->id);
}

void
sim_sched_gen_free(struct server *s, struct gen *g)
{
  log_request(s, g);
  gen_detach(s, g);
  free(g->chain);
  free(g->tail);
  free(g);
}

/* llama.cpp's metrics (struct llama_stats): a prompt evaluated. */
static void
llama_prompt_done(struct server *s, const struct gen *g)
{
  struct llama_stats *l = &s->st.llama;
  uint64_t n = (uint64_t)(g->prompt - g->cached_tokens);
  double ms = sim_stream_prompt_ms(g);
  l->prompt_n += n;
  l->cached_n += (uint64_t)g->cached_tokens;
  l->prompt_ms += ms;
  l->decodes++; /* the prompt's own llama_decode(), one slot busy */
  l->busy++;
  l->b.prompt_n += n;
  l->b.prompt_ms += ms;
  if (g->prompt + 1 > l->n_tokens_max)
    l->n_tokens_max = g->prompt + 1;
}

/* ... and a request completed: only now are its tokens counted. */
static void
llama_predicted_done(struct server *s, const struct gen *g)
{
  struct llama_stats *l = &s->st.llama;
  double ms = sim_stream_predicted_ms(g);
  l->predicted_n += (uint64_t)g->out;
  l->predicted_ms += ms;
  if (g->out > 1) {
    l->b.predicted_n += (uint64_t)(g->out - 1);
    l->b.predicted_ms += ms;
  }
  if (g->prompt + g->out > l->n_tokens_max)
    l->n_tokens_max = g->prompt + g->out;
}

/* A finished request's output enters the prefix cache: the blocks that its
 * prompt's tail and its output tokens fill, chained after the prompt's, as
 * vLLM V1 caches a request's full blocks while it decodes (docs.vllm.ai,
 * design/v1/prefix_caching).  The last output token has no KV yet (it was
 * sampled, not computed), so out - 1 tokens count.  A follow-up turn that
 * carries this answer then finds it cached, block by block. */
static void
cache_output(struct server *s, struct gen *g)
{
  int64_t bs = s->p->block_size > 0 ? s->p->block_size : 1;
  if (g->out < 2)
    return;
  size_t n = g->ntail + (size_t)(g->out - 1), nb = n / (size_t)bs;
  if (nb == 0)
    return;
  int32_t *ids = tb_xmalloc(n * sizeof(*ids));
  if (g->ntail > 0)
    memcpy(ids, g->tail, g->ntail * sizeof(*ids));
  for (int64_t i = 0; i < g->out - 1; i++)
    ids[g->ntail + (size_t)i] = sim_tok_output_id(i);
  uint64_t *chain = tb_xmalloc((g->nchain + nb) * sizeof(*chain));
  if (g->nchain > 0)
    memcpy(chain, g->chain, g->nchain * sizeof(*chain));
  size_t k = sim_cache_chain_from(g->nchain > 0 ? g->chain[g->nchain - 1] : 0, ids, n, bs,
                                  chain + g->nchain, nb);
  sim_cache_insert(s->blocks, chain, g->nchain + k);
  free(chain);
  free(ids);
}

/* The request is over (all tokens or aborted through the API): finish the
 * protocol, free the request, let the connection take its next request. */
static void
gen_finish(struct server *s, struct gen *g)
{
  struct sim_out *o = g->o;
  if (strcmp(g->finish, "abort") != 0) {
    cache_output(s, g);
    llama_predicted_done(s, g);
  }
  if (g->stream) {
    if (g->usage && !g->f.no_usage) {
      char *b = s->ev;
      size_t cap = sizeof(s->ev) - 2;
      int n = sim_stream_chunk_head(s, g, b, cap);
      char u[512];
      sim_stream_usage_json(u, sizeof(u), g, true);
      n += snprintf(b + n, cap - (size_t)n, "[],\"usage\":%s", u);
      if (llama_new(s)) { /* b11669: the usage chunk carries the timings */
        n += snprintf(b + n, cap - (size_t)n,
                      ",\"system_fingerprint\":\"%s\",\"timings\":", s->version ? s->version : "");
        n += sim_stream_timings_json(s, g, b + n, cap - (size_t)n);
      }
      n += snprintf(b + n, cap - (size_t)n, "}");
      sim_stream_sse_data(s, g, n);
    }
    static const char done[] = "data: [DONE]\n\n";
    sim_stream_sse_event(s, g, done, sizeof(done) - 1);
    if (g->chunked)
      sim_out_append(o, "0\r\n\r\n", 5);
    else
      o->close_after = true;
  } else {
    sim_stream_reply_complete(s, g);
  }
  s->st.completed++;
  g->completed = strcmp(g->finish, "abort") != 0;
  sim_sched_gen_free(s, g);
  sim_out_resume(s, o);
  sim_out_flush(s, o);
}

/* An in-band error event (fault error=N), then the end of the stream
 * without [DONE], as TGI ends one that failed during generation. */
static void
gen_fail(struct server *s, struct gen *g)
{
  struct sim_out *o = g->o;
  sim_out_flush_stamped(s, o); /* what came before goes out first */
  sim_stream_emit_error(s, g);
  if (g->chunked)
    sim_out_append(o, "0\r\n\r\n", 5);
  else
    o->close_after = true;
  s->st.errors++;
  sim_sched_gen_free(s, g);
  sim_out_resume(s, o);
  sim_out_flush(s, o);
}

/* Sends an API abort (SGLang /abort_request) to the client. */
void
sim_sched_gen_abort_api(struct server *s, struct gen *g)
{
  g->finish = "abort";
  s->st.aborted++;
  if (g->stream && g->st != G_FIRSTBYTE) {
    if (g->chat && !g->role_sent)
      sim_stream_emit_role(s, g);
    g->role_sent = true;
    sim_stream_emit_tokens(s, g, 0, true);
  }
  if (g->st == G_FIRSTBYTE && g->stream)
    sim_stream_headers(s, g);
  gen_finish(s, g);
}

/* Token bookkeeping after tokens were written: faults that trigger at a
 * token count.  Returns false when the stream left the batch or the
 * connection (g may then be freed). */
static bool
after_tokens(struct server *s, struct gen *g, int64_t now)
{
  if (g->f.malformed_after >= 0 && !g->malformed_done && g->out >= g->f.malformed_after) {
    g->malformed_done = true;
    sim_stream_emit_malformed(s, g);
  }
  if (g->f.error_after >= 0 && g->out >= g->f.error_after && g->out < g->limit) {
    gen_fail(s, g);
    return false;
  }
  if (g->f.cut_after >= 0 && g->out >= g->f.cut_after) {
    sim_out_flush_stamped(s, g->o); /* what came before the cut goes out first */
    sim_out_kill(s, g->o);
    return false;
  }
  if (g->f.stall_after >= 0 && !g->stall_done && g->out >= g->f.stall_after && g->out < g->limit) {
    g->stall_done = true;
    batch_remove(s, g);
    g->st = G_STALL;
    sim_sched_heap_push(s, g, now + ms_to_ns(s, g->f.stall_ms));
    return false;
  }
  return true;
}

/* Prefill done: the first token. */
static void
first_token(struct server *s, struct gen *g, int64_t now)
{
  s->st.tokens_generated++;
  g->t_first = g->t_last = now;
  llama_prompt_done(s, g);
  cache_insert(s, g->hash, g->prompt);
  sim_cache_insert(s->blocks, g->chain, g->nchain);
  s->st.prompt_tokens += (uint64_t)g->prompt;
  if (g->stream) {
    if (g->f.cut_after == 0) {
      sim_out_kill(s, g->o);
      return;
    }
    if (g->chat)
      sim_stream_emit_role(s, g);
    g->role_sent = true;
    sim_stream_emit_tokens(s, g, 1, g->limit == 1);
  } else {
    g->out = 1;
  }
  if (g->out >= g->limit) {
    gen_finish(s, g);
    return;
  }
  struct sim_out *o = g->o;
  if (g->stream && !after_tokens(s, g, now)) {
    sim_out_flush(s, o);
    return;
  }
  batch_add(s, g, now);
  if (g->stream)
    sim_out_flush(s, g->o);
}

static void
start_prefill(struct server *s, struct gen *g, int64_t now)
{
  g->st = G_PREFILL;
  s->running++;
  s->kv_used += g->need_kv;
  g->t_admit = now;
  /* What the prefix cache holds: the whole prompt (its hash), or its
   * leading full blocks.  At most all but the last token count as cached
   * (the last is computed to give the first token), in whole blocks. */
  struct cache_entry *e = cache_find(s, g->hash);
  int64_t bs = s->p->block_size > 0 ? s->p->block_size : 1;
  int64_t most = ((g->prompt - 1) / bs) * bs;
  int64_t blocks = (int64_t)sim_cache_match(s->blocks, g->chain, g->nchain) * bs;
  int64_t due;
  s->st.prefix_query_tokens += (uint64_t)g->prompt;
  if (e || (most > 0 && blocks >= most)) {
    if (e)
      e->used = ++s->cache_clock;
    g->cache_hit = true;
    g->cached_tokens = most;
    s->st.cache_hits++;
    due = grp_join(s, g, now);
    g->t_pstart = s->grp_start; /* the group's prefill started then */
  } else {
    s->st.cache_misses++;
    /* Cold, or a shared prefix cached: the prefill lane computes the rest,
     * tokens [cached, prompt), and never faster than a full hit. */
    g->cached_tokens = blocks < most ? blocks : most;
    if (g->cached_tokens > 0)
      s->st.cache_partial_hits++;
    double ms =
      sim_profile_prefix_ms(s->p, s->running, (double)g->prompt, (double)g->cached_tokens);
    int64_t start = s->lane_free > now ? s->lane_free : now;
    due = start + ms_to_ns(s, ms);
    s->lane_free = due;
    g->t_pstart = start;
  }
  s->st.prefix_hit_tokens += (uint64_t)g->cached_tokens;
  sim_sched_heap_push(s, g, due);
}

void
sim_sched_try_admit(struct server *s, int64_t now)
{
  while (s->q_head) {
    struct gen *g = s->q_head;
    if (s->running >= s->p->max_running || s->kv_used + g->need_kv > s->p->kv_budget)
      return;
    queue_remove(s, g);
    start_prefill(s, g, now);
  }
}

void
sim_sched_on_timer_gen(struct server *s, struct gen *g, int64_t now)
{
  switch (g->st) {
  case G_FIRSTBYTE:
    if (g->stream)
      sim_stream_headers(s, g);
    sim_sched_queue_push(s, g);
    sim_sched_try_admit(s, now);
    break;
  case G_PREFILL: first_token(s, g, now); break;
  case G_STALL: batch_add(s, g, now); break;
  default: break;
  }
}

/* How far behind its schedule the decode loop may fall and still catch up. */
#define SIM_CATCHUP_NS (50 * 1000000LL)

/* A decode step, first phase: every stream in the batch advances one token;
 * the chunks are formatted and their connections queued, not sent (see the
 * design note at the top).  `now` is the step's time for the model. */
void
sim_sched_decode_prepare(struct server *s, int64_t sched, int64_t now)
{
  int64_t t0 = now_ns();
  int n0 = s->batch_n;
  s->defer = true;
  s->prepared = true;
  s->prep_sched = sched;
  int k = s->cfg->spec_k;
  /* Iterate backwards: removals swap the last element into place i. */
  for (int i = s->batch_n - 1; i >= 0; i--) {
    if (i >= s->batch_n)
      continue;
    struct gen *g = s->batch[i];
    if (g->o->dead)
      continue;
    g->pending++;
    g->t_last = sched; /* the step's tokens go out at its deadline */
    s->st.tokens_generated++;
    /* llama.cpp's n_tokens_max grows with a sequence, step by step (read
     * live on b11669: it moved while a request decoded) */
    if (g->prompt + g->out + g->pending > s->st.llama.n_tokens_max)
      s->st.llama.n_tokens_max = g->prompt + g->out + g->pending;
    bool last = g->out + g->pending >= g->limit;
    if (!g->stream) {
      if (last) {
        g->out += g->pending;
        g->pending = 0;
        gen_finish(s, g);
      }
      continue;
    }
    if (g->pending < k && !last)
      continue;
    int64_t n = g->pending;
    g->pending = 0;
    sim_stream_emit_tokens(s, g, n, last);
    if (last) {
      gen_finish(s, g);
      continue;
    }
    struct sim_out *o = g->o;
    after_tokens(s, g, now);
    sim_out_flush(s, o);
  }
  if (n0 > 0) { /* one llama_decode() call for the whole batch */
    s->st.llama.decodes++;
    s->st.llama.busy += (uint64_t)n0;
  }
  if (s->batch_n > 0) {
    double mean = (double)s->batch_prompt_sum / s->batch_n;
    /* the noise model (sim_noise.h): drift, jitter, slowdown; 1 when off */
    int64_t d = ms_to_ns(s, sim_profile_step_ms(s->p, s->batch_n, mean) *
                              sim_noise_step_factor(&s->noise, sched, s->cfg->time_scale));
    s->next_step = sched + d;
    /* A step that ran late (the process was preempted) is made up by the
     * next ones, so that throughput keeps to the model; only when far behind
     * (a stopped process) is the schedule reset rather than burst. */
    if (s->next_step < now - SIM_CATCHUP_NS)
      s->next_step = now;
  }
  s->defer = false;
  s->step_running = s->running;
  s->step_waiting = s->q_n;
  /* A prepare that was preempted must not make the next steps wake early
   * (the loop reads no input while it waits for the deadline): samples over
   * 4x the average are ignored, and the average is capped. */
  int64_t per = n0 > 0 ? (now_ns() - t0) / n0 : 0;
  if (s->prep_per_ns == 0)
    s->prep_per_ns = per < SIM_PREP_PER_MAX_NS ? per : SIM_PREP_PER_MAX_NS;
  else if (per < 4 * s->prep_per_ns)
    s->prep_per_ns = (7 * s->prep_per_ns + per) / 8;
}

/* Second phase, at the deadline: stamp and send, in batch order. */
void
sim_sched_decode_send(struct server *s)
{
  s->prepared = false;
  int64_t late = now_ns() - s->prep_sched;
  s->st.steps++;
  if (late > 200000)
    s->st.late_steps++;
  if (late > s->st.max_late_ns)
    s->st.max_late_ns = late;
  sim_out_flush_queued(s);
}

/* One decode step, both phases at once (the deadline has passed). */
void
sim_sched_decode_step(struct server *s, int64_t sched, int64_t now)
{
  sim_sched_decode_prepare(s, sched, now);
  sim_sched_decode_send(s);
}

int64_t
sim_sched_cache_reset(struct server *s)
{
  int64_t held = sim_cache_blocks(s->blocks) * s->p->block_size;
  if (s->cache_tokens > held)
    held = s->cache_tokens;
  sim_cache_clear(s->blocks);
  s->cache_n = 0;
  s->cache_tokens = 0;
  return held;
}
