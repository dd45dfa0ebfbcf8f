/*
 * Unit tests for sim_sched, the simulator's scheduler, without a socket:
 * each request writes into a fake sink (struct sim_out with operations
 * over memory), and a virtual clock runs the scheduler's deadlines the way
 * sim_server's loop does (a generation's deadline, else the decode step),
 * each at exactly its time.  Checked against the tiny profile's numbers
 * (sim/profiles/tiny.json): admission within the running cap and the KV
 * budget, FIFO, the serial prefill lane, the decode step's time per batch
 * size, a prefix-cache hit, the time scale, the two phases of a step and
 * their stamps, the stall and cut faults, and the abort API.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_out.h"
#include "sim_sched.h"
#include "sim_state.h"

#define MS 1000000LL /* ns */
#define NSINK 24
#define COLD_512 25600000LL /* ns: tiny's cold prefill of 512 tokens at 20,000 tok/s */

/* A request's output over memory: what was sent, how often, and what the
 * scheduler asked of its owner. */
struct sink {
  struct sim_out o; /* first: the operations get it back by a cast */
  char *text;       /* everything sent, NUL-terminated */
  size_t len, cap;
  int sends, kills, resumes;
};

struct fx {
  struct sim_profile p;
  struct sim_config cfg;
  struct server *s;
  struct sink k[NSINK];
  int64_t now; /* the virtual clock */
};

static void
fake_send(struct server *s, struct sim_out *o)
{
  (void)s;
  struct sink *k = (struct sink *)(void *)o;
  size_t n = o->len - o->off;
  if (k->len + n + 1 > k->cap) {
    k->cap = (k->len + n + 1) * 2;
    k->text = tb_xrealloc(k->text, k->cap);
  }
  memcpy(k->text + k->len, o->buf + o->off, n);
  k->len += n;
  k->text[k->len] = '\0';
  o->off = o->len = 0;
  k->sends++;
}

static void
fake_kill(struct server *s, struct sim_out *o)
{
  (void)s;
  o->dead = true;
  ((struct sink *)(void *)o)->kills++;
}

static void
fake_resume(struct server *s, struct sim_out *o)
{
  (void)s;
  ((struct sink *)(void *)o)->resumes++;
}

static const struct sim_out_ops fake_ops = {
  .send = fake_send,
  .kill = fake_kill,
  .resume = fake_resume,
};

static int
setup_scaled(void **state, double scale)
{
  struct fx *f = tb_xcalloc(1, sizeof(*f));
  char err[256];
  if (!sim_profile_load(&f->p, "sim/profiles/tiny.json", err, sizeof(err))) {
    fprintf(stderr, "%s\n", err);
    free(f);
    return -1;
  }
  bool pv;
  f->cfg.dialect = sim_flavour_find("vllm-0.8", &pv);
  f->cfg.flavour = f->cfg.dialect->family;
  f->cfg.profile = &f->p;
  f->cfg.time_scale = scale;
  f->cfg.spec_k = 1;
  sim_fault_init(&f->cfg.fault);
  struct server *s = tb_xcalloc(1, sizeof(*s));
  s->cfg = &f->cfg;
  s->p = &f->p;
  s->blocks = sim_cache_new(f->p.kv_budget / f->p.block_size);
  s->log = tb_xcalloc(SIM_REQLOG, sizeof(*s->log));
  snprintf(s->model_json, sizeof(s->model_json), "\"tiny\"");
  f->s = s;
  for (int i = 0; i < NSINK; i++)
    f->k[i].o.ops = &fake_ops;
  f->now = 1000 * MS;
  *state = f;
  return 0;
}

static int
setup(void **state)
{
  return setup_scaled(state, 1.0);
}

static int
setup_x2(void **state)
{
  return setup_scaled(state, 2.0);
}

static int
teardown(void **state)
{
  struct fx *f = *state;
  struct server *s = f->s;
  for (int i = 0; i < NSINK; i++) {
    if (f->k[i].o.gen != NULL)
      sim_sched_gen_free(s, f->k[i].o.gen);
    free(f->k[i].o.buf);
    free(f->k[i].text);
  }
  free(s->heap);
  free(s->batch);
  free(s->grp);
  free(s->fq);
  sim_cache_free(s->blocks);
  free(s->log);
  free(s);
  sim_profile_free(&f->p);
  free(f);
  return 0;
}

/* A streaming completion on sink i, as sim_routes makes one: prompt tokens
 * whose whole-prompt hash is hash, max_tokens of output. */
static struct gen *
mk_gen(struct fx *f, int i, int64_t prompt, int64_t max_tokens, uint64_t hash)
{
  struct gen *g = tb_xcalloc(1, sizeof(*g));
  g->o = &f->k[i].o;
  f->k[i].o.gen = g;
  g->stream = g->chunked = true;
  g->prompt = prompt;
  g->max_tokens = g->limit = max_tokens;
  g->finish = "length";
  g->need_kv = prompt + max_tokens;
  if (g->need_kv > f->p.kv_budget)
    g->need_kv = f->p.kv_budget;
  g->hash = hash;
  sim_fault_init(&g->f);
  g->heap_i = g->batch_i = g->grp_i = -1;
  snprintf(g->id, sizeof(g->id), "cmpl-%d", i);
  g->t_arrival = f->now;
  return g;
}

/* Queues g and admits, now. */
static void
submit(struct fx *f, struct gen *g)
{
  sim_sched_queue_push(f->s, g);
  sim_sched_try_admit(f->s, f->now);
}

/* What the connections' reap does once a request has ended: a killed
 * sink's request is aborted and freed, then the queue is admitted. */
static void
reap(struct fx *f)
{
  for (int i = 0; i < NSINK; i++) {
    struct sink *k = &f->k[i];
    if (k->o.dead && k->o.gen != NULL) {
      f->s->st.aborted++;
      sim_sched_gen_free(f->s, k->o.gen);
    }
  }
  sim_sched_try_admit(f->s, f->now);
}

/* Runs the next deadline (a generation's, else the decode step's, as
 * sim_server's run_timers orders them) at its time if it is at or before
 * until; false when there is none. */
static bool
step(struct fx *f, int64_t until)
{
  struct server *s = f->s;
  int64_t heap = s->heap_n > 0 ? s->heap[0]->due : INT64_MAX;
  int64_t dec = s->batch_n > 0 ? s->next_step : INT64_MAX;
  int64_t t = heap <= dec ? heap : dec;
  if (t == INT64_MAX || t > until)
    return false;
  f->now = t;
  if (heap <= dec) {
    struct gen *g = s->heap[0];
    sim_sched_heap_remove(s, g);
    if (!g->o->dead)
      sim_sched_on_timer_gen(s, g, t);
  } else {
    sim_sched_decode_step(s, t, t);
  }
  reap(f);
  return true;
}

static void
run_until(struct fx *f, int64_t until)
{
  while (step(f, until))
    ;
}

static void
run_all(struct fx *f)
{
  run_until(f, INT64_MAX);
}

/* The n-th ended request of the log. */
static const struct reqlog *
logged(struct fx *f, uint64_t n)
{
  assert_true(n < f->s->log_seq);
  return &f->s->log[n % SIM_REQLOG];
}

static int
count(const char *text, const char *what)
{
  int n = 0;
  for (const char *p = text ? strstr(text, what) : NULL; p; p = strstr(p + 1, what))
    n++;
  return n;
}

/* Admission stops at max_running_requests (16 in tiny) although the KV
 * budget holds more; the rest wait, and all are served in the end. */
static void
test_running_cap(void **state)
{
  struct fx *f = *state;
  for (int i = 0; i < 20; i++)
    submit(f, mk_gen(f, i, 100, 4, (uint64_t)i + 1));
  assert_int_equal(f->s->running, 16);
  assert_int_equal(f->s->q_n, 4);
  assert_int_equal(f->s->kv_used, 16 * 104);
  run_all(f);
  assert_int_equal(f->s->running, 0);
  assert_int_equal(f->s->q_n, 0);
  assert_int_equal(f->s->kv_used, 0);
  assert_int_equal(f->s->st.completed, 20);
  for (int i = 0; i < 20; i++) {
    assert_int_equal(f->k[i].resumes, 1);
    assert_int_equal(count(f->k[i].text, "data: [DONE]"), 1);
    assert_int_equal(count(f->k[i].text, "\"text\":"), 4); /* one chunk a token */
  }
}

/* The KV budget (24,576 in tiny) admits FIFO: a request that does not fit
 * waits, and so does a small one behind it that would; both go in once
 * the request before them gives its reservation back. */
static void
test_kv_fifo(void **state)
{
  struct fx *f = *state;
  struct gen *a = mk_gen(f, 0, 8000, 2000, 1); /* 10,000: long */
  struct gen *b = mk_gen(f, 1, 8000, 2, 2);    /* 8,002: short */
  struct gen *c = mk_gen(f, 2, 8000, 2000, 3); /* 10,000: does not fit */
  struct gen *d = mk_gen(f, 3, 100, 10, 4);    /* 110: fits, but behind c */
  submit(f, a);
  submit(f, b);
  submit(f, c);
  submit(f, d);
  assert_int_equal(f->s->running, 2);
  assert_int_equal(f->s->q_n, 2);
  assert_int_equal(f->s->kv_used, 18002);
  assert_int_equal(c->st, G_QUEUED);
  assert_int_equal(d->st, G_QUEUED);
  while (f->k[1].resumes == 0)
    assert_true(step(f, INT64_MAX));
  /* b is done: c and d are admitted, in order, at that moment */
  assert_int_equal(f->s->running, 3);
  assert_int_equal(f->s->q_n, 0);
  assert_int_equal(f->s->kv_used, 10000 + 10000 + 110);
  assert_int_equal(c->t_admit, f->now);
  assert_int_equal(d->t_admit, f->now);
  assert_true(a->st == G_DECODE);
}

/* Cold prefills go through one lane: the second request's first token
 * comes one whole prefill after the first's (512 tokens at 20,000 tok/s:
 * 25.6 ms each). */
static void
test_prefill_lane(void **state)
{
  struct fx *f = *state;
  int64_t t0 = f->now;
  struct gen *a = mk_gen(f, 0, 512, 1, 1), *b = mk_gen(f, 1, 512, 1, 2);
  submit(f, a);
  submit(f, b);
  assert_int_equal(a->st, G_PREFILL);
  assert_int_equal(b->st, G_PREFILL);
  int64_t pf = a->due - t0;
  assert_in_range(pf, COLD_512 - 1000, COLD_512 + 1000);
  assert_int_equal(b->due - t0, 2 * pf);
  run_all(f);
  assert_int_equal(logged(f, 0)->first_token_ns - t0, pf);
  assert_int_equal(logged(f, 1)->first_token_ns - t0, 2 * pf);
  assert_int_equal(logged(f, 1)->admitted_ns, t0); /* admitted at once, waits in the lane */
}

/* The decode step follows the model: step_ms(batch, mean prompt) of
 * tiny's table, 8 ms for one stream of 512, 10 ms for four. */
static void
test_step_time(void **state)
{
  struct fx *f = *state;
  struct gen *a = mk_gen(f, 0, 512, 6, 1);
  submit(f, a);
  run_until(f, a->due); /* the first token */
  assert_int_equal(f->s->batch_n, 1);
  int64_t t1 = f->now;
  assert_int_equal(f->s->next_step - t1, 8 * MS);
  assert_true(step(f, INT64_MAX)); /* step 1 */
  assert_int_equal(f->now - t1, 8 * MS);
  assert_int_equal(f->s->next_step - f->now, 8 * MS);
  assert_int_equal(count(f->k[0].text, "\"text\":"), 2);
  run_all(f);
  const struct reqlog *e = logged(f, 0);
  assert_int_equal(e->output, 6);
  assert_int_equal(f->s->st.steps, 5);
}

static void
test_step_grows_with_batch(void **state)
{
  struct fx *f = *state;
  /* four streams of 512: three more join while the first decodes */
  for (int i = 0; i < 4; i++)
    submit(f, mk_gen(f, i, 512, 100, (uint64_t)i + 1));
  run_until(f, f->now + 4 * 25600000); /* every first token */
  assert_int_equal(f->s->batch_n, 4);
  /* the step after the last join is at the batch of four's pace */
  run_until(f, f->s->next_step);
  int64_t t = f->now;
  int before[4];
  for (int i = 0; i < 4; i++)
    before[i] = count(f->k[i].text, "\"text\":");
  assert_true(step(f, INT64_MAX));
  assert_int_equal(f->now - t, 10 * MS);
  assert_true(step(f, INT64_MAX));
  assert_int_equal(f->now - t, 20 * MS);
  for (int i = 0; i < 4; i++) /* every stream got its token each step */
    assert_int_equal(count(f->k[i].text, "\"text\":") - before[i], 2);
}

/* A prompt the cache holds whole comes at the cached TTFT (15 ms for 512
 * alone in tiny), not the cold prefill (25.6 ms), with all but the last
 * block cached. */
static void
test_prefix_hit(void **state)
{
  struct fx *f = *state;
  submit(f, mk_gen(f, 0, 512, 2, 42));
  run_all(f);
  assert_int_equal(f->s->st.cache_misses, 1);
  int64_t t0 = f->now;
  struct gen *b = mk_gen(f, 1, 512, 2, 42);
  submit(f, b);
  assert_true(b->cache_hit);
  assert_int_equal(b->due - t0, 15 * MS);
  run_all(f);
  const struct reqlog *e = logged(f, 1);
  assert_int_equal(e->first_token_ns - e->admitted_ns, 15 * MS);
  assert_int_equal(e->cached_tokens, 496); /* (512 - 1) / 16 whole blocks */
  assert_int_equal(f->s->st.cache_hits, 1);
  /* a different prompt is cold again */
  t0 = f->now;
  struct gen *c = mk_gen(f, 2, 512, 2, 43);
  submit(f, c);
  assert_false(c->cache_hit);
  assert_in_range(c->due - t0, COLD_512 - 1000, COLD_512 + 1000);
}

/* --time-scale 2: every modelled duration halves. */
static void
test_time_scale(void **state)
{
  struct fx *f = *state;
  int64_t t0 = f->now;
  struct gen *a = mk_gen(f, 0, 512, 3, 1);
  submit(f, a);
  assert_in_range(a->due - t0, COLD_512 / 2 - 1000, COLD_512 / 2 + 1000);
  run_until(f, a->due);
  assert_int_equal(f->s->next_step - f->now, 4 * MS);
}

/* A step's chunks are formatted first (nothing sent, the outputs queued),
 * then stamped and sent at the deadline, in batch order, with the clock
 * of their send in the stamp's place. */
static void
test_two_phases(void **state)
{
  struct fx *f = *state;
  struct gen *a = mk_gen(f, 0, 512, 50, 1), *b = mk_gen(f, 1, 512, 50, 2);
  a->stamps = b->stamps = true;
  submit(f, a);
  submit(f, b);
  run_until(f, b->due);
  assert_int_equal(f->s->batch_n, 2);
  int sa = f->k[0].sends, sb = f->k[1].sends;
  size_t la = f->k[0].len;
  int64_t t = f->s->next_step;
  sim_sched_decode_prepare(f->s, t, t);
  assert_int_equal(f->k[0].sends, sa);
  assert_int_equal(f->k[1].sends, sb);
  assert_int_equal(f->s->fq_n, 2);
  assert_true(f->k[0].o.queued);
  assert_int_equal(f->k[0].o.nst, 1);
  sim_sched_decode_send(f->s);
  assert_int_equal(f->k[0].sends, sa + 1);
  assert_int_equal(f->k[1].sends, sb + 1);
  assert_int_equal(f->s->fq_n, 0);
  assert_int_equal(f->k[0].o.nst, 0);
  const char *ev = strstr(f->k[0].text + la, ": t=");
  assert_non_null(ev);
  assert_true(strncmp(ev + 4, "0000000000000000000", SIM_STAMP_DIGITS) != 0);
  assert_int_equal(ev[4 + SIM_STAMP_DIGITS], '\n');
}

/* stall=2:100: after its second token the stream leaves the batch for
 * 100 ms, keeping its KV, then goes on to its end. */
static void
test_stall(void **state)
{
  struct fx *f = *state;
  struct gen *a = mk_gen(f, 0, 512, 5, 1);
  a->f.stall_after = 2;
  a->f.stall_ms = 100;
  submit(f, a);
  while (a->st != G_STALL)
    assert_true(step(f, INT64_MAX));
  assert_int_equal(a->out, 2);
  assert_int_equal(f->s->batch_n, 0);
  assert_int_equal(f->s->kv_used, 517);
  assert_int_equal(a->due - f->now, 100 * MS);
  int64_t t = f->now;
  assert_true(step(f, INT64_MAX)); /* back into the batch */
  assert_int_equal(f->now - t, 100 * MS);
  assert_int_equal(a->st, G_DECODE);
  run_all(f);
  assert_int_equal(logged(f, 0)->output, 5);
  assert_string_equal(logged(f, 0)->end, "completed");
}

/* cut=3: the sink is killed after three tokens, which it got; no [DONE];
 * the request then ends as its connection's does. */
static void
test_cut(void **state)
{
  struct fx *f = *state;
  struct gen *a = mk_gen(f, 0, 512, 10, 1);
  a->f.cut_after = 3;
  submit(f, a);
  run_all(f);
  assert_int_equal(f->k[0].kills, 1);
  assert_int_equal(f->k[0].resumes, 0);
  assert_int_equal(count(f->k[0].text, "\"text\":"), 3);
  assert_int_equal(count(f->k[0].text, "[DONE]"), 0);
  assert_null(f->k[0].o.gen);
  assert_string_equal(logged(f, 0)->end, "disconnected");
  assert_int_equal(f->s->running, 0);
  assert_int_equal(f->s->kv_used, 0);
}

/* The abort API (SGLang's /abort_request): a decoding stream ends with
 * finish_reason "abort" and [DONE], its slot and KV given back; a queued
 * one leaves the queue. */
static void
test_abort(void **state)
{
  struct fx *f = *state;
  struct gen *a = mk_gen(f, 0, 8000, 2000, 1);
  struct gen *b = mk_gen(f, 1, 8000, 2000, 2);
  struct gen *c = mk_gen(f, 2, 8000, 2000, 3); /* waits: over the KV budget */
  submit(f, a);
  submit(f, b);
  submit(f, c);
  assert_int_equal(c->st, G_QUEUED);
  run_until(f, a->due);
  assert_int_equal(a->st, G_DECODE);
  sim_sched_gen_abort_api(f->s, a);
  assert_int_equal(f->k[0].resumes, 1);
  assert_non_null(strstr(f->k[0].text, "\"finish_reason\":\"abort\""));
  assert_int_equal(count(f->k[0].text, "data: [DONE]"), 1);
  assert_string_equal(logged(f, 0)->end, "aborted");
  assert_int_equal(f->s->st.aborted, 1);
  assert_int_equal(f->s->running, 1);
  sim_sched_gen_abort_api(f->s, c);
  assert_int_equal(f->s->q_n, 0);
  assert_string_equal(logged(f, 1)->end, "aborted");
  sim_sched_try_admit(f->s, f->now);
  assert_int_equal(f->s->running, 1);
  assert_int_equal(f->s->kv_used, 10000);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_running_cap, setup, teardown),
    cmocka_unit_test_setup_teardown(test_kv_fifo, setup, teardown),
    cmocka_unit_test_setup_teardown(test_prefill_lane, setup, teardown),
    cmocka_unit_test_setup_teardown(test_step_time, setup, teardown),
    cmocka_unit_test_setup_teardown(test_step_grows_with_batch, setup, teardown),
    cmocka_unit_test_setup_teardown(test_prefix_hit, setup, teardown),
    cmocka_unit_test_setup_teardown(test_time_scale, setup_x2, teardown),
    cmocka_unit_test_setup_teardown(test_two_phases, setup, teardown),
    cmocka_unit_test_setup_teardown(test_stall, setup, teardown),
    cmocka_unit_test_setup_teardown(test_cut, setup, teardown),
    cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
