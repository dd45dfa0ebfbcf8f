/*
 * tb_engine: the speed test matrix of METHOD.md against one OpenAI-compatible
 * endpoint.  Used by tokbench-worker (for the service) and by `tokbench run`.
 *
 * Settings come parsed (struct tb_spec, lib/spec/tb_spec.h: the one table of
 * names, ranges and defaults the api, the worker and `tokbench run` share);
 * the engine reads no JSON settings.  What it measures comes back in JSON,
 * so that the result document returned by the API and the CLI's output are
 * one format (api/result.schema.json describes the result document).
 *
 * A cell (JSON object, built by tb_result) is the unit of progress and of storage:
 *   phase "prefill"|"decode", context (int), context_label ("8K"),
 *   concurrency (int, 1 for prefill), status "valid"|"over_capacity"|"skipped"|"error",
 *   reason (string, for every status but valid), and the figures of METHOD.md.
 * cells are identified by (phase, context, concurrency).
 */
#ifndef TB_ENGINE_H
#define TB_ENGINE_H

#include <jansson.h>
#include <stdbool.h>

#include "base/tb_cfg.h"
#include "spec/tb_spec.h"
#include "base/tb_util.h"

struct tb_engine_hooks {
  void *cls;
  /* Called with each finished cell (borrowed; copy to keep) the moment it is
   * measured.  Return false to stop the run (e.g. the job's lease is lost). */
  bool (*on_cell)(void *cls, const json_t *cell);
  /* Called with progress: the cell about to run (borrowed), its index and
   * the total; may be NULL. */
  void (*on_progress)(void *cls, const json_t *cell_key, unsigned done, unsigned total,
                      double eta_s);
  /* Polled often (at least every 100 ms) while a cell runs; true aborts the run
   * as cancelled.  May be NULL. */
  bool (*cancelled)(void *cls);
  /* Called once after discovery with the result header (borrowed). May be NULL. */
  void (*on_header)(void *cls, const json_t *header);
  /* Debug/bench hook, normally NULL: called on the event loop for each SSE
   * event (comment == NULL, tokens = output tokens it added) and each SSE
   * comment line (comment != NULL, tokens = 0) of a decode stream, with the
   * monotonic arrival time of the read that carried it.  slot is the stream's
   * index within its cell.  Must be cheap: it runs inside the measurement. */
  void (*on_event)(void *cls, unsigned slot, int64_t arrival_ns, const char *comment,
                   size_t comment_len, int64_t tokens);
  /* A decode cell about to be measured (cell: a new object with phase,
   * context and concurrency set): true when the caller measured it instead
   * (cell filled: a sharded cell, worker_shard.h), false to let the engine
   * measure it.  window_ns (two zeros on entry): the shards' common window
   * [t0, t0 + duration_s] on this process's monotonic clock, where the
   * caller knows it (the server series, checks and energy of the cell are
   * read over it).  May be NULL. */
  bool (*shard_cell)(void *cls, int64_t context, int64_t concurrency, json_t *cell,
                     int64_t window_ns[2]);
  /* The same for a rate cell of the spec's rates (open loop at rate, the
   * index-th cell of the run; cell: its key): true when the caller's
   * shards measured it (tb_rate_cell_merged); window_ns[0] as above, the
   * common start on this process's clock.  May be NULL. */
  bool (*shard_rate)(void *cls, double rate, unsigned index, json_t *cell, int64_t window_ns[2]);
  /* True: a stream's HTTP error keeps up to 200 bytes of the endpoint's
   * answer in the cell's error (tokbench run: the user's own endpoint).
   * False (the service): "HTTP <status>" only, since the answer of an
   * endpoint a tenant chose may come from a service the tenant must not
   * read (issue 13). */
  bool error_bodies;
};

enum tb_engine_status {
  TB_ENGINE_OK = 0,        /* all cells done (some may be error cells) */
  TB_ENGINE_CANCELLED = 1, /* cancelled() said so, or on_cell returned false */
  TB_ENGINE_FAILED = 2,    /* the run could not go on: *err says why */
};

struct tb_samples;

/*
 * One shard of a sharded decode cell (issue 24): the engine runs the spec's
 * one decode cell, and once every stream produces (and has for settle_s)
 * it polls start() on the cell's thread every loop turn (<= 50 ms): 0 not
 * yet, 1 *t0_ns holds the window's start on this process's monotonic clock
 * (the common start mapped through the clock offset), -1 give up (the cell
 * fails with "shard start: " and why).  The window is [t0, t0 + duration_s)
 * on the arrival stamps, so every shard counts the same interval; the
 * ready timeout no longer applies once start() was called.  At the cell's
 * end its samples go into *samples (tb_samples: TTFT, time per output
 * token, e2e and every token gap in microseconds, the slices' tokens and
 * the figures that add), and skew_ns is how late the window opened after
 * t0 (0 when t0 was known before it came).
 */
/* A shard's readiness is its own streams producing: the server's gauges
 * count every shard's streams (the cell's readiness_reason). */
#define TB_ENGINE_SHARD_READY                                                       \
  "a shard of a sharded cell: each shard's streams producing (the server's gauges " \
  "count every shard's)"
/* A shard of a rate cell (index > 0: the spec's one rate cell, the
 * index-th of the whole run) walks the cell's whole seeded schedule and
 * sends the arrivals i with i mod n == k (a conversation's every turn with
 * its first), so the shards' union is the schedule one process would have
 * run; start() gives t0, the schedule's origin, the same way (tb_rate.h). */
struct tb_engine_shard {
  int (*start)(void *cls, int64_t now_ns, int64_t *t0_ns, char *why, size_t len);
  void *cls;
  struct tb_samples *samples;
  int64_t skew_ns;
  int k, n;       /* a rate cell's shard: this one's number and the count */
  unsigned index; /* a rate cell's number in the run (0: a decode shard) */
};

/* Where to run: the endpoint and what the report says about it. */
struct tb_trace;

struct tb_engine_target {
  const char *base_url;   /* e.g. "http://127.0.0.1:8000" (no trailing /v1) */
  const char *run_id;     /* unique per run, part of each prompt's tag; NULL or
                           * "": a new one */
  const json_t *endpoint; /* report header, may be NULL: name, hardware,
                           * engine (hint), launch_command (redacted again:
                           * tb_redact) */
  /* The most the endpoint may make one cell buffer, in bytes: the SSE line
   * and event buffers of all its streams together (0: the default).  Over
   * it the cell fails with that reason (issue 13: without it, 4,096 streams
   * of 256 KiB lines and 1 MiB events would be 5 GiB).  The operator's
   * setting (TOKBENCH_CELL_MEMORY_KB, tokbench run --cell-memory-kb), never
   * the job's. */
  size_t cell_memory_max;
  /* The trace the spec's trace object replays (borrowed; tokbench run
   * --trace FILE, or the worker's uploaded trace); NULL: none. */
  const struct tb_trace *trace;
  /* What the caller calls the endpoint's key and the model, for the hint
   * of an HTTP 401/403 or 404 (NULL: "the endpoint's API key", "the
   * model"): `tokbench run --api-key-file`, a service endpoint's api_key. */
  const char *key_hint, *model_hint;
  /* The operator's switches for side-by-side measurements (bench/), never
   * the job's; false (zero) is the normal run.  The binaries read them with
   * tb_engine_target_cfg. */
  bool client_stamps;    /* arrival times from the client's clock, not the
                          * kernel's receive stamps (tb_rxts) */
  bool no_server_series; /* no /metrics series during cells (tb_sampler) */
  bool curl_streams;     /* libcurl streams on plain HTTP too (as over TLS),
                          * not the engine's own transport (tb_direct) */
  /* A shard of a sharded cell (NULL: a whole run); see above. */
  struct tb_engine_shard *shard;
};

/* The keys of those switches, for the key table of each binary that runs
 * the engine (tb_cfg; --help lists them). */
#define TB_ENGINE_CFG_KEYS                                                                       \
  { "TB_ENGINE_CLIENT_STAMPS", "0",                                                              \
    "1: stamp arrivals with the client's clock, not the kernel's receive stamps "                \
    "(side-by-side measurements)",                                                               \
    false },                                                                                     \
    { "TB_ENGINE_SERVER_SERIES", "1",                                                            \
      "0: no /metrics series during cells (side-by-side measurements)", false },                 \
  {                                                                                              \
    "TB_ENGINE_CURL_STREAMS", "0",                                                               \
      "1: libcurl streams on plain HTTP too, as over TLS, not the engine's own transport", false \
  }

/* Sets the switches of t from cfg (declared with TB_ENGINE_CFG_KEYS).
 * false with *err set (caller frees) on a value other than 0 or 1. */
bool tb_engine_target_cfg(struct tb_engine_target *t, const struct tb_cfg *cfg,
                          char **err) TB_MUST_CHECK;

/* 256 MiB: a normal stream holds well under 4 KiB (a line cut by a read
 * and one chunk's event), so 4,096 streams need about 16 MiB. */
#define TB_ENGINE_CELL_MEMORY_DEFAULT (256u * 1024u * 1024u)

/*
 * Runs the matrix of spec (borrowed; from tb_spec_parse) against target
 * (borrowed).  api_key: the endpoint's key (may be NULL), sent as a
 * Bearer header on every call and never logged or copied into the result.
 * done_cells: cells already measured (borrowed JSON array, may be NULL); they
 * are not measured again and appear in the result as given.
 * On return *result is a new reference to the result document (also on
 * failure: it then holds what was measured, status "failed" and the error),
 * and *err a new string on TB_ENGINE_FAILED (caller frees).
 */
enum tb_engine_status tb_engine_run(const struct tb_spec *spec,
                                    const struct tb_engine_target *target, const char *api_key,
                                    const json_t *done_cells, const struct tb_engine_hooks *hooks,
                                    json_t **result, char **err) TB_MUST_CHECK;

/*
 * The file descriptors a run of spec needs open at once: two for each of
 * its most streams at a time (the matrix's largest concurrency; a rate
 * cell's TB_RATE_MAX_INFLIGHT when it has rate cells), and 256 beside them
 * (discovery, /metrics, the loop, logs).  Library code never changes the
 * process's limits: the programs that run the engine (tokbench-worker,
 * tokbench run) raise RLIMIT_NOFILE's soft limit to this, at most to the
 * hard limit (tb_raise_nofile), before tb_engine_run.
 */
uint64_t tb_engine_nofile(const struct tb_spec *spec);

/*
 * Discovery alone (POST /v1/endpoints/{id}/probe): engine, version, model,
 * max_model_len, KV budget, max running requests.  Returns a new object, or
 * NULL with *err set (caller frees).
 */
json_t *tb_engine_probe(const char *base_url, const char *api_key, char **err) TB_MUST_CHECK;

/* Which cells run, in what order, on which contexts (the top decode
 * context, the over-capacity rule of METHOD.md): tb_plan. */

#endif
