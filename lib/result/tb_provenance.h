/*
 * tb_provenance: the "provenance" block of a result document (issue 35,
 * item 3): where every figure of the document came from, each fact with
 * its source, and "unknown" (with why) where it is not known, never a
 * guess.
 *
 *   "provenance": {
 *     "tokbench": {version, git_commit, git_dirty, compiler, libraries{},
 *                  binary},                                   (tb_build)
 *     "job_spec_sha256": SHA-256 hex of the job spec's RFC 8785 form,
 *     "discovery": {engine, engine_version, model, max_model_len,
 *                   kv_budget_tokens, max_running_requests:
 *                   each {"value", "source"}},               (tb_discover)
 *     "simulator": {"value": true|false|"unknown", "source"},
 *     "launch_command": {"value": the redacted command, "source"},
 *     "gpu": {"name", "count", "driver", "source"},          (tb_telemetry)
 *     "cells": [{phase, context, concurrency, worker, attempt,
 *                clock_offset_ms, clock_uncertainty_ms, clock_source,
 *                shards?: [{shard, worker, host, start_skew_ms,
 *                           clock_offset_ms, clock_uncertainty_ms}]}]
 *   }
 *
 * The engine writes the block at a run's end from the document's own header
 * (so it says what the header says) and what discovery and telemetry read;
 * the program that ran it (the worker, `tokbench run`) then adds the spec's
 * hash, its own name and who ran each cell.  Pure: no I/O.
 */
#ifndef TB_PROVENANCE_H
#define TB_PROVENANCE_H

#include <jansson.h>
#include <stdbool.h>

#include "base/tb_util.h"

/* The word of every fact not known. */
#define TB_PROVENANCE_UNKNOWN "unknown"

struct tb_provenance_run {
  const json_t *header;    /* the result document (its header members), or NULL */
  const json_t *identity;  /* tb_discover_identity, or NULL: discovery did not answer */
  const json_t *gpus;      /* tb_telemetry_gpus, or NULL: none named */
  const char *gpus_why;    /* why the GPUs are unknown (gpus NULL) */
  const char *streams;     /* how the streams were read: "io_uring", "epoll", "libcurl" */
  const char *streams_why; /* why not io_uring, or NULL */
};

/* A new block: tokbench's build, discovery, simulator, launch command and
 * GPUs from in (all borrowed); job_spec_sha256 and cells "unknown" until
 * the setters below say. */
json_t *tb_provenance_new(const struct tb_provenance_run *in) TB_MUST_CHECK;

/* job_spec_sha256: SHA-256 hex of spec's canonical form (tb_jcs); "unknown"
 * when spec is NULL or has none.  The binary that ran the job
 * (tokbench.binary) when binary is not NULL. */
void tb_provenance_set_spec(json_t *prov, const json_t *spec, const char *binary);

/* cells: who ran each one (an array, stolen; see above). */
void tb_provenance_set_cells(json_t *prov, json_t *cells);

/*
 * The entry of one cell of doc's cells (borrowed) run by worker (borrowed;
 * NULL: "unknown") at attempt (<= 0: unknown) with its clock offset to the
 * database's (ms; have_clock false: "unknown", clock_source says why): the
 * cell's key, and for a sharded cell its shards' workers and start skews
 * (the cell's own "shards" member).  New object.
 */
json_t *tb_provenance_cell(const json_t *cell, const char *worker, int attempt, bool have_clock,
                           double offset_ms, double uncert_ms, const char *clock_source);

#endif
