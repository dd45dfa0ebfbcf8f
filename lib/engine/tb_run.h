/*
 * tb_run: what the cells of one engine run share (tb_engine_run): the
 * spec and its plan on this server, what discovery found, the loop and
 * transport (tb_transport), the hooks, and what the run learnt so far (the
 * usage the server sends, a scheduler cap, a failure that stops it); and
 * the few things done on it from every layer above: its settings, the
 * result's header, a finished cell emitted, progress, cancellation, the
 * final status.
 *
 * Below tb_cell and tb_matrix, above tb_transport.
 */
#ifndef TB_RUN_H
#define TB_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tb_cachereset.h"
#include "engine/tb_discover.h"
#include "engine/tb_engine.h"
#include "engine/tb_prompt.h"
#include "engine/tb_transport.h"
#include "spec/tb_plan.h"

struct tb_run {
  const struct tb_engine_target *tgt; /* borrowed for the run */
  /* the endpoint's GPU telemetry (issue 26: its telemetry_url), read for
   * the whole run; NULL: none */
  struct tb_telemetry *tel;
  /* settings: the spec as parsed (borrowed) and its plan on this server
   * (tb_plan: the cells, their order, the effective KV budget) */
  const struct tb_spec *spec;
  struct tb_plan plan;
  char *base_url;
  char *run_id;
  size_t cell_memory_max; /* the budget of each cell's SSE buffers */
  /* endpoint */
  struct tb_discover d;
  const char *api_key;
  struct tb_prompt_ctx *pc; /* the prompts of the pass being run */
  /* the loop, the streams' transport, the stamps */
  struct tb_transport tp;
  bool server_series; /* tb_sampler; off with TB_ENGINE_SERVER_SERIES=0 */
  const struct tb_engine_hooks *hooks;
  bool usage_known, usage_supported;
  bool cancelled;
  struct tb_cache_reset_memo reset_memo; /* cache: reset, asked once if unsupported */
  /* the prompts are sized by an estimate (tb_prompt source "estimate") */
  bool prompt_estimate;
  /* the smallest scheduler cap measured (sched_cap of a cell), the context
   * and concurrency it was measured at; 0: none */
  int64_t cap_requests, cap_ctx, cap_conc;
  unsigned valid_decodes; /* decode cells measured valid so far */
  char *stop;             /* a global failure: the run stops with this line */
  /* progress */
  unsigned total_cells, done_count;
  double avg_cell_s;
  unsigned n_cell_timed;
};

/* The run's settings: the parsed spec (tb_spec: validated, lists sorted),
 * its plan before discovery, and the target; nothing here reads JSON.  0,
 * or -1 with *err (new string). */
int tb_run_settings(struct tb_run *r, const struct tb_spec *s, const struct tb_engine_target *t,
                    char **err) TB_MUST_CHECK;

/* The plan again on what discovery found: the contexts the spec leaves to
 * the engine, the cells the server cannot run, the KV budget.  0, or -1
 * with *err (new string). */
int tb_run_plan(struct tb_run *r, char **err) TB_MUST_CHECK;

/* The result's header (tb_result, new) from the run's settings and
 * discovery. */
json_t *tb_run_header(struct tb_run *r, const json_t *ep, int64_t started_us);

/* Emits a finished cell (stolen): into cells and through the hook.
 * false: the hook asked to stop (the run is cancelled). */
bool tb_run_emit(struct tb_run *r, json_t *cells, json_t *cell);

/* The hook's progress: cell key, done so far, the ETA of what is left. */
void tb_run_progress(struct tb_run *r, const json_t *key, unsigned remaining_cells,
                     unsigned remaining_scouts);

/* Whether the caller cancelled the run (cls: the struct tb_run). */
bool tb_run_cancelled(void *cls);

/* The run's end: its status, the measured scheduler cap in the header;
 * *err takes the line of a run that stopped. */
enum tb_engine_status tb_run_status(struct tb_run *r, json_t *header, char **err);

void tb_run_free(struct tb_run *r);

#endif
