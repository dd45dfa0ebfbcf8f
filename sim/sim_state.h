/*
 * sim_state: the simulator's shared state, private to sim/ (the server's
 * files: sim_server.c the loop, sim_conn.c connections, sim_routes.c the
 * routes, sim_inspect.c the /sim/ endpoints, sim_sched.c the scheduler,
 * sim_stream.c what a generation writes, sim_out.c where its bytes go).
 * Calls run one way, in that order (server, connection, routes, scheduler,
 * stream writer, output; lib/LAYERS ranks them); what runs back up is a
 * callback: the connection's handler table (sim_conn.h), an output's
 * operations (sim_out.h).  Design in sim_server.h, model and protocol in
 * sim/README.md.
 *
 * Lifetimes: a connection (struct conn) owns at most one generation request
 * (struct gen) at a time.  Closing is deferred: sim_conn_kill() only marks the
 * connection and queues it; sim_conn_reap() at the end of each loop iteration
 * aborts its request (removing it from the queue, the batch and the timer
 * heap, releasing its KV reservation) and frees it.  So nothing reachable
 * from the loop's current iteration is ever freed under its feet.
 *
 * Hot path: a decode step runs in two phases.  Prepare formats one chunk per
 * stream into that stream's output buffer, with a fixed-width placeholder
 * for the send stamp, and queues the connection instead of sending; it runs
 * ahead of the step's deadline (the timer fires early by the spin margin plus
 * the expected prepare time, a robust average per stream times the batch,
 * capped) whenever the step is the next deadline.  Send,
 * at the deadline, walks the queue in batch order (stable from step to step),
 * writes each stream's stamp (the clock read just before its send) into the
 * placeholder and issues one send() per connection.  So between the deadline
 * and each send there is nothing but the previous streams' sends.
 *
 * One thread owns all of it: no locks.  (The one other thread, sim_prep's
 * worker, prepares large prompts from copies of their bodies and touches
 * none of this: sim_prep.h.)
 */
#ifndef SIM_STATE_H
#define SIM_STATE_H

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_cache.h"
#include "sim_fault.h"
#include "sim_http.h"
#include "sim_out.h"
#include "sim_prep.h"
#include "sim_server.h"
#include "sim_tls.h"
#include "base/tb_util.h"

#define SIM_OUT_CAP (16 * 1024 * 1024) /* unsent bytes per connection */
#define SIM_IN_CAP (SIM_HTTP_HEAD_CAP + SIM_HTTP_BODY_CAP)
#define SIM_IN_INIT 4096
#define SIM_CACHE_ENTRIES 4096             /* whole-prompt cache entries */
#define SIM_REQLOG 4096                    /* requests /sim/requests remembers */
#define SIM_CACHE_MAX_BLOCKS (1 << 20)     /* block-level prefix cache: at most */
#define SIM_IDLE_NS (300 * 1000000000LL)   /* idle keep-alive connection */
#define SIM_PARTIAL_NS (60 * 1000000000LL) /* incomplete request */
#define SIM_DRAIN_NS (2 * 1000000000LL)    /* lingering close */
#define SIM_EVENT_CAP 4096                 /* one SSE event payload */
#define SIM_MAX_EVENTS 256
/* The timerfd fires this early; the rest is spun on the clock, because a
 * sleeping thread wakes up tens to hundreds of microseconds late (more in
 * a VM), which would show as gap jitter. */
#define SIM_SPIN_NS 300000
#define SIM_PREP_PER_MAX_NS 20000 /* prepare time per stream: at most */
#define SIM_PREP_MAX_NS 5000000   /* how early a step is prepared: at most */

enum {
  KIND_CONN = 1,
  KIND_LISTEN,
  KIND_TIMER,
  KIND_SIGNAL,
  KIND_PREP
};

enum gstate {
  G_FIRSTBYTE,
  G_QUEUED,
  G_PREFILL,
  G_DECODE,
  G_STALL
};

struct gen {
  struct sim_out *o; /* where its output goes (its connection's) */
  enum gstate st;
  bool chat, stream, usage, cont_usage, chunked;
  bool incl_usage; /* the request asked stream_options.include_usage */
  bool stamps;     /* ": t=<ns>" before each event (--stamps or
                                * X-Tokbench-Stamps: 1) */
  int nev;         /* events written (a gateway's pings) */
  bool role_sent, stall_done, malformed_done, cache_hit, aborted_by_api;
  int64_t prompt, max_tokens, limit, out, pending, cached_tokens, need_kv;
  const char *finish; /* "length" or "stop" */
  uint64_t hash;
  uint64_t *chain; /* the prompt's block chain (sim_cache), owned */
  size_t nchain;
  int32_t *tail; /* the prompt's ids after its last full block, owned */
  size_t ntail;
  int64_t t_arrival, t_admit, t_first; /* monotonic ns; 0: not yet */
  int64_t t_pstart;                    /* its prefill started (lane or cache-hit group) */
  int64_t t_last;                      /* its latest token was sent (a step's deadline) */
  bool completed;                      /* all its tokens were sent */
  struct sim_fault f;
  char id[64];
  uint64_t task; /* its number since start (llama.cpp's id_task) */
  int64_t created;
  int64_t due;               /* timer deadline (ns) when in the heap */
  int heap_i;                /* -1: not in the heap */
  int batch_i;               /* -1: not in the batch */
  int grp_i;                 /* -1: not in the cache-hit prefill group */
  struct gen *qnext, *qprev; /* FIFO queue links (G_QUEUED) */
};

struct conn {
  int kind;
  int fd;
  char *in;
  size_t in_len, in_cap;
  /* its output: the buffer, dead, close_after, the request writing (o.gen);
   * sim_conn implements its operations */
  struct sim_out o;
  bool draining, epollout, sent_continue, resume;
  int64_t last_active;
  int64_t req_start;         /* arrival of the first byte of the request */
  struct sim_prep_job *prep; /* its request's prompt with sim_prep's worker */
  struct conn *next, *prev;  /* all connections */
  struct conn *todo_next;    /* reap / resume list */
  struct sim_tls *tls;       /* NULL: plain HTTP; o holds plaintext */
  int64_t accepted;          /* for the TLS handshake's deadline */
  /* a llama.cpp slot erase held until the server is idle (sim_routes.c,
   * handle_slot_action): nothing else is read from the connection
   * meanwhile; linked in the server's FIFO of held erases */
  bool held, held_keep_alive;
  int64_t held_slot;
  uint64_t held_seq; /* its place in the order of held erases */
  struct conn *held_next, *held_prev;
};

struct cache_entry {
  uint64_t hash;
  int64_t tokens;
  int64_t used; /* LRU clock */
};

/* One request as the server saw it (GET /sim/requests). */
struct reqlog {
  uint64_t seq;
  char id[64];
  int64_t arrival_ns, admitted_ns, first_token_ns, end_ns; /* monotonic; 0: never */
  int64_t prompt, cached_tokens, output;
  const char *end; /* "completed", "aborted" or "disconnected" (static) */
};

/* llama.cpp b11669's /metrics as that server keeps them: prompt figures
 * added when a prompt is evaluated (cached tokens apart), predicted ones
 * when a request completes (an aborted one never adds), and a bucket of
 * the same since the last GET /metrics, which reads and empties it (its
 * gauges of prompt and predicted tokens/s). */
struct llama_bucket {
  uint64_t prompt_n, predicted_n;
  double prompt_ms, predicted_ms; /* predicted_n counts n - 1 per request,
                                   * the steps its predicted_ms spans */
};

struct llama_stats {
  uint64_t prompt_n, cached_n, predicted_n, decodes, busy; /* busy: slots over decodes */
  double prompt_ms, predicted_ms;
  int64_t n_tokens_max; /* largest prompt + output seen */
  struct llama_bucket b;
};

struct stats {
  uint64_t requests, completed, aborted, tokens_sent, prompt_tokens, cache_hits, cache_misses,
    steps, late_steps, conns_total, errors, tokens_generated;
  /* prefix cache: requests with some but not all blocks cached (counted
   * in cache_misses too), and tokens queried / found, as vLLM counts them */
  uint64_t cache_partial_hits, prefix_query_tokens, prefix_hit_tokens;
  /* calls of the prefix-cache reset routes received (/reset_prefix_cache,
   * /flush_cache, /slots/{id}?action=...), whatever they answered */
  uint64_t cache_reset_calls;
  int64_t max_late_ns;
  struct llama_stats llama;
};

struct server {
  const struct sim_config *cfg;
  const struct sim_profile *p;
  int ep, lfd, tfd, sfd;
  struct sockaddr_storage addr; /* the listener's (IPv4 or IPv6) */
  socklen_t addrlen;
  struct sim_tls_ctx *tls; /* NULL: plain HTTP */
  int listen_kind, timer_kind, signal_kind, prep_kind;
  struct sim_prep *prep; /* NULL: every prompt prepared on the loop */
  int prep_fd;           /* its eventfd */
  bool stop;
  struct conn *conns;
  int nconns;
  const struct sim_conn_handlers *conn_h; /* what connections call (sim_conn.h) */
  struct conn *todo;
  int64_t armed;       /* timerfd deadline, 0: disarmed */
  int64_t relisten_at; /* 0: listening */
  int64_t next_house;
  /* model */
  struct gen **heap;
  int heap_n, heap_cap;
  struct gen **batch;
  int batch_n, batch_cap;
  int64_t batch_prompt_sum;
  int64_t next_step; /* valid when batch_n > 0 */
  struct gen *q_head, *q_tail;
  int q_n;
  int running; /* admitted: prefill + decode + stall */
  /* The load as vLLM's gauges show it while it decodes: a snapshot at the
   * end of each step, its finished requests gone and the requests that
   * arrive meanwhile not yet counted (sim_sched_gauges) */
  int step_running, step_waiting;
  /* llama.cpp slot erases held while requests run or wait, oldest first
   * (each a connection's: bounded by max_conns) */
  struct conn *held_head, *held_tail;
  int held_n;
  uint64_t held_seq;   /* held erases so far */
  bool erase_orphaned; /* a held erase was hung up on: done when idle */
  uint64_t orphan_seq; /* the earliest such erase's held_seq */
  int64_t kv_used;
  int64_t lane_free; /* cold prefill lane busy until */
  /* Prefix-cache hits admitted while a previous hit's prefill is still
   * pending join its group and get their first token together, as an engine
   * batches the prefills it schedules in one step: the group's TTFT is
   * cached_ttft(running after the last join), counted from the first join. */
  struct gen **grp;
  int grp_n, grp_cap;
  int64_t grp_start, grp_due;
  struct cache_entry cache[SIM_CACHE_ENTRIES];
  int cache_n;
  int64_t cache_tokens, cache_clock;
  struct sim_cache *blocks; /* block-level prefix cache */
  int32_t *ids;             /* token ids of the request being parsed */
  size_t ids_len, ids_cap;
  struct reqlog *log; /* ring of SIM_REQLOG, the last at log_seq - 1 */
  uint64_t log_seq;
  uint64_t id_counter;
  char model_json[600];  /* the served model name as a JSON string */
  const char *version;   /* the engine version it reports, or NULL */
  double started_real_s; /* Unix time at start (vLLM 0.10's *_created) */
  int64_t started_ns;    /* monotonic, at start (sim_power's clock) */
  /* sim_power's gauge: the energy (J) at the last read it slopes from, and
   * the power it last gave */
  int64_t pw_t;
  double pw_e, pw_w;
  struct stats st;
  struct sim_noise noise; /* cfg's noise settings and their state */
  /* the decode step's send queue (see the design note at the top) */
  bool defer; /* prepare phase: sim_out_flush queues */
  struct sim_out **fq;
  int fq_n, fq_cap;
  bool prepared; /* a step is prepared, to send at prep_sched */
  int64_t prep_sched;
  int64_t prep_per_ns; /* prepare time per stream (robust average) */
  char ev[SIM_EVENT_CAP];
};

static inline int64_t
now_ns(void)
{
  return tb_time_mono_ns();
}

static inline int64_t
ms_to_ns(const struct server *s, double ms)
{
  double ns = ms * 1e6 / s->cfg->time_scale;
  return ns > 3.6e15 ? (int64_t)3.6e15 : (int64_t)ns;
}

/* llama.cpp builds from b11669 on (the llamacpp-b11669 flavour). */
#define SIM_LLAMA_B11669 11669

/* Whether the server plays a flavour of family f. */
static inline bool
flav(const struct server *s, enum sim_flavour f)
{
  return s->cfg->flavour == f;
}

/* Whether the server plays llama.cpp b11669 or later. */
static inline bool
llama_new(const struct server *s)
{
  return s->cfg->flavour == SIM_FLAVOUR_LLAMACPP && s->cfg->dialect->rev >= SIM_LLAMA_B11669;
}

#endif
