/*
 * tb_ratecell: one rate cell's loop (tb_rate.h: rate cells), and the
 * structures of a run of rate cells and of a cell.  This header is internal
 * to the rate cells' own files (tb_rate, tb_ratecell, tb_ratefig, tb_sweep,
 * tb_tracecell); nothing else includes it.
 *
 * A run (struct rrun) is what tb_rate_run sets up once for all its cells
 * (tb_rate.c): the transport, the prompt pool, the shared system prompt,
 * the trace's replay (tb_tracecell).  A cell (struct rcell) is one loop of
 * requests (struct rq) and sessions (struct sess: conversations,
 * closed-loop users, a trace's turns), and what it counts for its figures
 * (tb_ratefig).
 */
#ifndef TB_RATECELL_H
#define TB_RATECELL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_arrival.h"
#include "base/tb_stats.h"
#include "engine/tb_convo.h"
#include "engine/tb_rate.h"
#include "engine/tb_stream.h"
#include "net/tb_direct.h"
#include "result/tb_srvtime.h"
#include "result/tb_steady.h"
#include "spec/tb_plan.h"
#include "spec/tb_trace.h"
#include "spec/tb_tracesum.h"

struct tb_ratewatch;

/* The run's timerfd in the cells' epoll set (tb_direct's tags have
 * TB_DIRECT_TAG). */
#define TB_RATECELL_TIMER_TAG 1ULL
/* A pool entry's request body (tb_rate.c, make_entry), as each request's
 * copy is patched (tb_ratecell.c): the prompt's tag carries the marker, "RQ"
 * and TB_RATECELL_MARKER_DIGITS hex digits; max_tokens is rendered
 * space-padded in TB_RATECELL_MAXTOK_WIDTH columns (the template holds the
 * placeholder). */
#define TB_RATECELL_MARKER "RQ00000000"
#define TB_RATECELL_MARKER_DIGITS 8
#define TB_RATECELL_MAXTOK_WIDTH 8
#define TB_RATECELL_MAXTOK_PLACEHOLDER 99999999

struct rcell;
struct sess;

struct rq {
  struct tb_stream st; /* the consumer: bytes, counts, samples, reasons */
  struct rcell *c;
  struct sess *ss; /* its conversation or user (NULL: a lone arrival) */
  unsigned turn;   /* its turn in the conversation (0-based) */
  unsigned slot;
  unsigned pool;
  uint64_t k; /* its number in the cell's requests */
  int64_t t_sched;
  int64_t want;
  char *body;
  char *head; /* its own request head (a conversation's turn), or NULL */
};

struct pool_entry {
  char *tmpl; /* the request body, marker and max_tokens to patch */
  size_t len;
  size_t marker_at, maxtok_at;
  char *head; /* holds the key */
  size_t head_len;
  int64_t tokens; /* as the server counts the prompt (-1 unknown) */
  char *text;     /* the prompt's text (conversations' user messages) */
  size_t text_marker_at;
};

/* A conversation (conversation.turns > 0) or a closed-loop user: what
 * sends its next request when the last one ended. */
struct sess {
  uint64_t conv; /* its conversation's number in the cell */
  unsigned turn; /* turns sent in this conversation */
  bool user;     /* a closed-loop user: starts another when done */
  bool has_cv;
  int64_t due; /* when its next request is due (in the heap) */
  int64_t tri; /* a trace cell's request (its index in rrun.tr); -1 */
  /* a closed-loop user: its first request's start, its last one's end (the
   * steady-state window counts users busy, tb_steady) */
  int64_t busy_from, busy_to;
  struct tb_rng rng; /* its own draws: prompt, output length, think */
  struct tb_convo cv;
};

/* The prompts of finished requests, as the server counted them: their
 * tokens, and the share its prefix cache held (usage.prompt_tokens_details)
 * where it said. */
struct prompts {
  int64_t sum, cached_sum, cached_prompt_sum;
  uint64_t n, cached_n;
};

/* What a cell counts per turn of its conversations. */
struct turnstat {
  struct tb_stats ttft;
  uint64_t sent, ok;
  struct prompts pr;
};

struct rrun {
  const struct tb_plan *p;
  const struct tb_spec *s; /* p->spec */
  const struct tb_rate_env *env;
  struct tb_direct dt;
  bool direct;
  int epfd, tfd;
  char *auth;
  struct tb_length in, out;
  struct pool_entry pool[TB_RATE_INPUT_POOL];
  unsigned n_pool;
  double in_mean;
  char *sys;          /* the shared system prompt (spec prefix), or NULL */
  int64_t sys_tokens; /* as the server counts it alone (-1 unknown) */
  char *setup_err;    /* every cell is an error with this */
  bool cancelled;
  unsigned index; /* cells so far */
  int slack;      /* the thread's timer slack before (ns; 0: unchanged) */
  /* the trace cell (the spec's trace, env->trace): its replay, the roots in
   * order of arrival, each request's first turn after it and next sibling
   * (-1: none), its summary, the prompts' seed */
  struct tb_trace tr;
  struct tb_tracesum tr_sum;
  size_t *tr_roots, tr_nroots;
  int64_t *tr_child, *tr_sib;
  uint64_t tr_seed;
  char *tr_err;    /* the trace cell is an error with this */
  bool trace_cell; /* the cell running is the trace's */
};

struct rcell {
  struct rrun *r;
  double rate;    /* open loop: arrivals per second; 0 closed */
  unsigned users; /* closed loop: users; 0 open */
  unsigned index;
  struct tb_direct_set ds;
  struct rq **slots;
  unsigned *free_slots;
  unsigned n_free;
  unsigned inflight, max_inflight;
  /* what its requests share (tb_stream): the SSE budget, the TBT sample */
  struct tb_stream_cell sc;
  /* the server's own timing of each request, where it gives one */
  struct tb_srvtime srv;
  /* counts */
  uint64_t scheduled, started, ok, errors, dropped, good;
  int64_t out_tokens;
  struct prompts pr;
  char first_error[200];
  /* times */
  int64_t t0, t_end_arrivals, t_last_end;
  struct tb_stats ttft, tpot, tbt, e2e, lag;
  /* actual inter-start gaps */
  int64_t prev_start; /* the last request's start */
  double gap_sum, gap_sum2;
  uint64_t gap_n;
  /* per-request samples, in order of start */
  json_t *s_lag, *s_ttft, *s_tpot, *s_e2e, *s_maxtbt, *s_tokens, *s_good;
  json_t *s_sched;         /* when each was due, after t0 (issue 24: the schedule) */
  json_t *s_start, *s_end; /* ms from t0 (issue 25: the steady window) */
  /* every request that started, for the steady-state window (tb_steady) */
  struct tb_steady_req *sreq;
  size_t nsreq, capsreq;
  struct tb_steady_span *busy; /* closed loop: each user's span */
  size_t nbusy;
  struct tb_ratewatch *watch; /* the server's view and the checks */
  /* sessions (conversations, closed-loop users): those due, by due time */
  struct sess **heap;
  size_t nheap, nsess;
  uint64_t arrivals; /* conversations (or closed-loop requests) begun */
  uint64_t sess_made;
  int64_t flight_t;
  double flight_area; /* in flight x ns, for the time-weighted mean */
  uint64_t conv_started, conv_completed, conv_abandoned, conv_dropped;
  size_t text_bytes; /* the live conversations' text */
  struct turnstat *turns;
  int64_t t_window_end;  /* closed loop: no arrival begins after it */
  uint64_t tr_abandoned; /* trace turns not sent: their parent failed */
  uint64_t gk;           /* the arrival being launched: its number in the
                          * whole schedule (a shard's markers) */
  bool shard_ran;        /* a shard's cell got its t0 and ran */
};

/* Runs one cell of r into cell (its key set): open loop at rate (users 0),
 * or closed loop with users (r->trace_cell: the trace's replay); index: its
 * number in the run.  false: cancelled. */
bool tb_ratecell_run(struct rrun *r, double rate, unsigned users, unsigned index, json_t *cell);

/* A new session of c (a conversation, or a closed-loop user), or NULL when
 * the cell holds as many as it may. */
struct sess *tb_ratecell_sess_new(struct rcell *c, bool user);

/* ss is due at ss->due: into the cell's heap of sessions. */
void tb_ratecell_heap_push(struct rcell *c, struct sess *ss);

#endif
