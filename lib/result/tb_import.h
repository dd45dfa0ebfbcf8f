/*
 * tb_import: result documents from elsewhere into ours ("tokbench.result/v1").
 *
 * Two sources are understood:
 *
 *  - tokbench's own result document: checked (object; schema
 *    "tokbench.result/v1"; a cells array of at most TB_IMPORT_MAX_CELLS
 *    objects, each with phase "prefill"|"decode", an integer context >= 0,
 *    an integer concurrency >= 1 (1 when absent for prefill), a known status;
 *    typed figures) and returned as a copy.  A malformed document is refused
 *    with a message naming the first fault.
 *
 *  - the JSON file that llm-inference-bench (llm_decode_bench.py, the Python
 *    tool that produced the seed reports) writes with --output
 *    (benchmark_results.json).  Its shape, from the tool's save_results():
 *      metadata  { version, engine, model, server, timestamp, decode_mode
 *                  ("duration"|"request-count"), duration_per_test,
 *                  max_tokens, concurrency_levels [int], context_lengths [int],
 *                  prefill_mode ("integrated_decode_scout"|"standalone_cold"|
 *                  "skipped"), max_total_tokens, ... }
 *      prefill   { "<context>": { ttft_seconds, tok_per_sec, prompt_tokens,
 *                  samples, method, skipped? } }
 *      results   [ { concurrency, context_tokens, aggregate_tps (< 0: not
 *                  run), per_request_avg_tps, ttft_p50/_p90/_p99 (seconds),
 *                  inter_token_latency_p50/_p90/_p99 (seconds),
 *                  avg_running_reqs, effective_concurrency,
 *                  completed_request_count | num_completed, total_tokens,
 *                  measurement_seconds | wall_time, num_errors,
 *                  capacity_limited, aggregate_source } ]
 *      summary_table { "<context>": { "<concurrency>": tok/s } }
 *    Members newer versions of the tool may add and that we read when present
 *    (assumed names; absent ones are simply not reported):
 *      metadata.kv_cache_budget | kv_budget (else max_total_tokens) -> KV budget,
 *      metadata.max_running_requests, metadata.max_model_len,
 *      metadata.engine_version, metadata.launch_command | server_command,
 *      metadata.hardware {gpu, gpu_count, vram_gb, ...} | gpu_name + gpu_count,
 *      metadata.model_revision.
 *    Conversion: seconds become milliseconds; prompt tok/s is
 *    prompt_tokens / TTFT; a result with aggregate_tps < 0 or
 *    capacity_limited is Over capacity when capacity_limited, else Skipped
 *    (a capacity-limited result that was measured keeps its tok/s as
 *    total_tps_capacity_limited and its avg_running_reqs as avg_active; the
 *    renderers mark it "Over capacity*", as the tool prints such cells as a
 *    mark, not a figure, unless asked);
 *    a (context, concurrency) of the matrix absent from results is Over
 *    capacity when C x (context + max_tokens) > KV budget (budget known),
 *    else Skipped; zero throughput with errors is Error; a prefill entry
 *    without a TTFT (skipped) is left out; an engine other than vllm or
 *    sglang is "openai"; a budget read from the file has source "override".
 *    The document says
 *    where it came from in imported_from { tool, version, format }.
 *
 * Never crashes on input: every member is type-checked; bad entries of the
 * foreign format are skipped (counted in imported_from.skipped_entries).
 */
#ifndef TB_IMPORT_H
#define TB_IMPORT_H

#include <jansson.h>

#include "base/tb_util.h"

/* Cells (ours) or results + prefill entries (theirs) in one document. */
#define TB_IMPORT_MAX_CELLS 20000u
/* Largest file tb_import_load_file reads. */
#define TB_IMPORT_MAX_BYTES (64u * 1024u * 1024u)

enum tb_import_source {
  TB_IMPORT_UNKNOWN = 0,
  TB_IMPORT_TOKBENCH,
  TB_IMPORT_LLM_INFERENCE_BENCH,
};

/* Which format a parsed document is in (borrowed; never fails). */
enum tb_import_source tb_import_detect(const json_t *in);

/*
 * Converts a parsed document (borrowed) to a new tokbench result document.
 * *src (may be NULL) is set to the source format.  Returns NULL with *err
 * (new string, caller frees) when the document is in neither format or is
 * malformed.
 */
json_t *tb_import(const json_t *in, enum tb_import_source *src, char **err) TB_MUST_CHECK;

/* Reads path ("-" = standard input; at most TB_IMPORT_MAX_BYTES), parses it
 * and imports it.  New document, or NULL with *err. */
json_t *tb_import_load_file(const char *path, enum tb_import_source *src, char **err) TB_MUST_CHECK;

/* Parses and imports a buffer (e.g. a request body).  New document, or NULL
 * with *err. */
json_t *tb_import_load_buffer(const char *buf, size_t len, enum tb_import_source *src,
                              char **err) TB_MUST_CHECK;

#endif
