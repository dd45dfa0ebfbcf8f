/*
 * tb_result: the result document ("tokbench.result/v1",
 * api/result.schema.json): its header, its cells and its status, as the
 * engine writes it, import checks and converts it, and reports and
 * verdicts read it.  It knows no transport and no database.
 *
 * A document:
 *   schema, tokbench_version, run_id, started_at, finished_at,
 *   endpoint {url, name}, engine {name, version, hint members},
 *   hardware, model {served, max_model_len}, launch_command (redacted),
 *   capacity {kv_budget_tokens, source, max_running_requests, metrics},
 *   settings {contexts, concurrency, prefill_contexts, duration_s,
 *             max_output, settle_s, decode_test, prefill_mode},
 *   cost (tb_cost_header; only when the endpoint has a price, a gpu or
 *   telemetry), status (TB_RESULT_DOC_STATUSES), error, cells [].
 * A cell: phase "prefill"|"decode"|"rate" (tb_rate.h), context, context_label ("8K"),
 *   concurrency (1 for prefill), status (TB_RESULT_CELL_STATUSES), reason
 *   (every status but valid), and the figures of METHOD.md, each valid one
 *   with its uncertainty (total_tps_se, total_tps_ci95, ttft_p50_ci95,
 *   tbt_p50_ci95; prompt_tps_ci95 over several scouts) and the samples it
 *   came from.  Cells are identified by (phase, context, concurrency).
 */
#ifndef TB_RESULT_H
#define TB_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_stats.h"
#include "base/tb_util.h"

/* The most points a cell's `server_series` holds (an hour at one a second;
 * tb_sampler stops there and says `truncated`, the renderers read no more). */
#define TB_RESULT_SERIES_MAX_POINTS 3600u

#define TB_RESULT_SCHEMA "tokbench.result/v1"
/* Largest context or concurrency a cell may name (2^40 tokens is absurd
 * already). */
#define TB_RESULT_AXIS_MAX ((int64_t)1 << 40)

/* Over-capacity rule of METHOD.md: C x (context + max_output) > budget.
 * budget <= 0 means unknown: never over capacity (tb_over_capacity, the
 * one rule the plan applies too). */
bool tb_result_over_capacity(int64_t conc, int64_t context, int64_t max_output, int64_t budget);

/* A document's status: one of complete, partial, failed, cancelled,
 * running, queued.  A cell's: valid, over_capacity, skipped, error. */
bool tb_result_doc_status_known(const char *s);
bool tb_result_cell_status_known(const char *s);

/* A new cell holding its key: phase, context, context_label, concurrency. */
json_t *tb_result_cell_new(const char *phase, int64_t ctx, int64_t conc) TB_MUST_CHECK;
/* Sets cell's status and (when not NULL) its reason; both copied. */
void tb_result_cell_set_status(json_t *cell, const char *status, const char *reason);
/* The documents' cell order: phase (0 prefill before 1 decode), then
 * context, then concurrency, ascending; <0, 0 or >0 as for qsort. */
int tb_result_key_cmp(int phase_a, int64_t ctx_a, int64_t conc_a, int phase_b, int64_t ctx_b,
                      int64_t conc_b);
/* The cell of done (array, borrowed; may be NULL) with this key, or NULL.
 * Borrowed from done. */
const json_t *tb_result_find_cell(const json_t *done, const char *phase, int64_t ctx, int64_t conc);

/* Samples a cell keeps (its "samples" member), each list at most this
 * long: the first ones measured. */
#define TB_RESULT_SAMPLES_MAX 4096u

/* What a measured decode cell says (METHOD.md). */
struct tb_result_decode {
  int64_t conc;
  double measured_s;           /* the window */
  int64_t output_tokens;       /* in the window */
  struct tb_stats *ttft, *tbt; /* ns; sorted in place */
  double avg_active;
  bool avg_active_server; /* from the server's metrics, else the client's */
  unsigned completed, started;
  bool chunk_source;     /* counted chunks, not usage */
  double kernel_stamped; /* share of reads stamped by the kernel */
  const double *slices;  /* tok/s in each slice of the window, in order */
  size_t n_slices;
  double slice_s;            /* width of a slice */
  int64_t resolution_tokens; /* how far the window's count can be off by
                              * where it cuts the streams: one chunk per
                              * stream (conc x the largest chunk seen) */
  const char *client_ready;  /* NULL: the window began when the server's
                              * gauges said running = C, waiting = 0
                              * (readiness "server"); else why readiness was
                              * the client's alone (readiness "client",
                              * readiness_reason) */
};
/*
 * Sets a valid decode cell's status and figures, with their uncertainty
 * (tb_stats.h): total_tps_se (batch means over the slices, plus the count's
 * resolution: a uniform error of at most resolution_tokens, variance
 * (resolution / 2)^2; null under two slices), total_tps_ci95 [lo, hi] (a
 * rate's lower bound clamped at 0), ttft_p50_ci95 and tbt_p50_ci95 (ms;
 * null under 6 requests), and samples {slice_s, total_tps[], ttft_ms[],
 * tbt_ms[]}.
 */
void tb_result_cell_set_decode(json_t *cell, const struct tb_result_decode *d);
/* Sets a valid prefill cell's status and figures: prompt_tokens (source
 * "usage" or "tokenizer"), its time to first token. */
void tb_result_cell_set_prefill(json_t *cell, int64_t prompt_tokens, bool from_usage,
                                double ttft_s);
/* The server's cache held `cached` of the scout's prompt tokens (usage's
 * prompt_tokens_details.cached_tokens): prompt_tokens_cached, and prompt_tps
 * over the tokens it evaluated (prompt_tokens - cached). */
void tb_result_cell_set_prefill_cached(json_t *cell, int64_t cached);

/* Flags a cell (prefill or decode) whose prompt size is an estimate, not
 * the server's count: prompt_tokens_source "estimate" and
 * prompt_tokens_estimate (how, copied). */
void tb_result_cell_set_prompt_estimate(json_t *cell, const char *how);
/* Marks a decode cell over capacity by a cap the server showed rather than
 * published: status over_capacity, reason (copied), scheduler_cap (the
 * requests it ran at once). */
void tb_result_cell_set_sched_cap(json_t *cell, int64_t cap, const char *reason);

/*
 * One cell from the n >= 2 measurements of it (reps, borrowed: cells of one
 * key, each with its "repeat" pass number and "seq", the measurement's place
 * in the run) in a run with repeats.  A valid decode cell: the mean of the
 * repeats' total_tps with total_tps_se = sd / sqrt(n) and a t interval on
 * n - 1 degrees of freedom, or, when that is smaller, what the windows
 * themselves say: sqrt(sum of the repeats' se^2) / n on their batches'
 * degrees of freedom (two repeats can agree by chance); latency percentiles and their intervals from
 * the pooled samples; counts summed.  A prefill cell: the mean prompt_tps
 * and ttft_ms of its scouts, prompt_tps_se, prompt_tps_ci95, prompt_tps_min,
 * prompt_tps_max.  Both get repeats (n) and repeat_runs (each repeat's
 * figure, pass and seq).  When a repeat is not valid the cell is that
 * repeat's, its reason saying which ("repeat 2: ...").  New cell.
 */
json_t *tb_result_combine(json_t *const *reps, size_t n) TB_MUST_CHECK;

/* What the header says; strings and JSON are borrowed. */
struct tb_result_header {
  const char *run_id;
  int64_t started_us;
  const char *url;
  const json_t *endpoint; /* the spec's endpoint object: name, engine
                               * hint, hardware (may be NULL) */
  const char *engine, *engine_version, *model;
  int64_t max_model_len;      /* <= 0: unknown */
  const char *launch_command; /* already redacted; may be NULL */
  int64_t kv_budget;          /* <= 0: unknown */
  const char *kv_source;
  int64_t max_running;      /* <= 0: unknown */
  const json_t *provenance; /* members merged into capacity: where each
                               * figure came from, why one is unknown
                               * (tb_discover_provenance); may be NULL */
  bool metrics;
  const int64_t *contexts, *concurrency, *prefill;
  size_t n_contexts, n_concurrency, n_prefill;
  double duration_s, settle_s;
  int64_t max_output;
  unsigned repeats; /* measurements per cell; 0 is taken as 1 */
  bool telemetry;   /* the endpoint's GPU telemetry is read (issue 26) */
};
/* A new document holding the header. */
json_t *tb_result_header_new(const struct tb_result_header *h) TB_MUST_CHECK;

/* The status a finished run's cells give: "partial" when any is an error,
 * else "complete". */
const char *tb_result_status_of_cells(const json_t *cells);
/*
 * Finishes doc (or, when doc is NULL, a bare document for run_id, which may
 * be NULL, begun at started_us): finished_at now, status, error (may be
 * NULL) and cells (reference stolen).  Returns doc or the new document.
 */
json_t *tb_result_finish(json_t *doc, const char *run_id, int64_t started_us, const char *status,
                         const char *error, json_t *cells);

/* Checks a document of ours: schema, status, the header's objects, every
 * cell's key, status and figure types.  false with *err (new string). */
bool tb_result_check(const json_t *doc, size_t max_cells, char **err);

#endif
