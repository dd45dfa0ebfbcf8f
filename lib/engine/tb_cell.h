/*
 * tb_cell: one decode cell of the matrix (METHOD.md), or a context's scout.
 *
 * C streams start at once on the run's transport (tb_transport); the cell
 * follows readiness (every stream producing, the server's running and
 * waiting gauges at C and 0, held settle_s), a scheduler cap or another
 * client's load the gauges show, then the window [w0, w0 + duration), and
 * cuts every stream at its end.  Its streams' bytes go to tb_stream, which
 * counts their tokens by arrival stamp; the cell adds up what they report
 * (TTFT, TBT, the window's tokens by slice, completions), samples /metrics
 * for the gauges and the server's series (tb_sampler), and turns it all into
 * the decode or prefill figures of its result cell (tb_cell_result) and its
 * proofs (tb_cell_proofs: the server's series, the self-checks, cost and
 * energy).  A shard's cell (tb_engine_shard) waits for the common start t0
 * and keeps its samples for the merge.
 *
 * Above tb_run and tb_transport; tb_matrix runs the cells.
 */
#ifndef TB_CELL_H
#define TB_CELL_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_stats.h"
#include "engine/tb_run.h"
#include "engine/tb_sampler.h"
#include "engine/tb_stream.h"
#include "net/tb_direct.h"
#include "result/tb_srvtime.h"

struct tb_cell_stream; /* one stream of a slot (tb_cell.c) */

enum tb_cell_phase {
  TB_CELL_READY,
  TB_CELL_WINDOW,
  TB_CELL_DONE
};

struct tb_cell {
  struct tb_run *run;
  int64_t ctx;
  unsigned conc;
  bool scout;
  const char *body;
  size_t body_len;
  struct tb_cell_stream **slots; /* the stream of each slot (NULL: none) */
  bool *warmed;                  /* slot's first stream produced a token */
  unsigned n_warmed;             /* slots warmed */
  int64_t all_warmed;            /* when the last slot warmed; 0 before */
  int64_t next_scan;             /* next per-stream first-token / stall scan */
  enum tb_cell_phase phase;
  /* what its streams share (tb_stream): the window [sc.w0, sc.w1), the
   * budget of their SSE buffers (run->cell_memory_max; issue 13, finding
   * 8) */
  struct tb_stream_cell sc;
  int64_t t_begin, ready_since, next_cancel_poll;
  bool failed, cancelled;
  char reason[300];
  /* the failure would be the same in every cell (auth refused, model not
   * found, every stream ended early): the run's one line, or "" */
  char global[300];
  /* readiness by the client alone (no usable running/waiting gauges):
   * why, or "" */
  char client_ready[200];
  /* the server holds R < C of ours running, the rest waiting: since when,
   * R (the most seen running), the samples since and how many of them
   * showed ours waiting; sched_cap > 0 once held SCHED_CAP_S (the cell is
   * over capacity) */
  int64_t cap_since;
  double cap_running;
  unsigned cap_samples, cap_queued, cap_seen;
  int64_t sched_cap;
  struct tb_stats ttft, tbt;
  /* a shard's (tb_engine_shard): every gap between two token chunks of a
   * stream in the window, per token, and each completed request's e2e (ns);
   * shard_wait: start() was called, the window waits for t0 */
  struct tb_stats gaps, e2e;
  bool shard_wait;
  int64_t win_tokens;
  int64_t max_chunk; /* the most tokens one chunk brought in the window */
  /* tokens by slice of the window (count_tokens), for the SE of total
   * tok/s: window_slices() of slice_ns each */
  int64_t *slice_tok;
  size_t n_slices;
  int64_t slice_ns;
  unsigned completed, started, active;
  bool chunk_source;
  /* metrics sampling */
  CURL *m_easy;
  char *m_buf;
  size_t m_len;
  bool m_over;
  int64_t m_next;
  int64_t m_t0; /* when the sample in flight was asked for */
  bool m_cond;
  /* our requests ended (a stream between two of them), and as many when
   * the last sample came back: the server's gauges may not yet count the
   * requests that replace those ended since (metrics_done) */
  uint64_t ends, m_ends;
  unsigned m_samples;          /* the samples that gave the gauges */
  double m_running, m_waiting; /* last sample; -1 before the first */
  int64_t foreign_since;       /* all ours producing, yet running > C: since */
  double run_sum;
  unsigned run_n;
  /* client active integral over the window */
  int64_t act_ns, act_last;
  /* the server's view (tb_sampler): its series over the window, the
   * thread's CPU time at the window's ends, the drained checks */
  struct tb_sampler smp;
  int64_t cpu_w0, cpu_w1, cpu_wall1; /* thread CPU ns; cpu_wall1: when read */
  int drained_before;                /* 1 / 0 / -1 unknown */
  double before_running, before_waiting;
  /* scout */
  int64_t scout_ttft_ns, scout_prompt_tokens, scout_cached_tokens;
  /* the server's own timing of each finished request, where it gives one
   * (llama.cpp's `timings`): the cell's server_timings */
  struct tb_srvtime srv;
  /* reads stamped by the kernel, by our clock */
  uint64_t rx_kernel, rx_user;
  /* direct transport: a connection per slot (ds.c NULL: libcurl streams) */
  struct tb_direct_set ds;
};

/* A cell of conc streams at context ctx on the request body (borrowed for
 * the cell's life), or a scout (one request, not windowed). */
void tb_cell_init(struct tb_cell *c, struct tb_run *r, int64_t ctx, unsigned conc, bool scout,
                  const char *body, size_t body_len);

/* Runs the cell to its end: ready, the window, every stream cut; or
 * failed, cancelled, over capacity at a scheduler cap (c->sched_cap). */
void tb_cell_loop(struct tb_cell *c);

/* The decode figures of a cell that ran into cell (its key), returned: an
 * error, a scheduler cap, or the window's figures (tb_result_decode) and
 * the server's own timings; a shard's samples go to its caller. */
json_t *tb_cell_result(struct tb_cell *c, json_t *cell);

/* What a valid decode cell shows of its own soundness (tb_sampler): the
 * server's series over the window, the self-checks (drained_after: after
 * the cell, 1 / 0 / -1 unknown), its cost and energy. */
void tb_cell_proofs(struct tb_run *r, struct tb_cell *c, json_t *cell, int drained_after);

void tb_cell_free(struct tb_cell *c);

#endif
