/*
 * tb_srvtime: a cell's figures by the server's own clock (issue 23).
 *
 * Where a server times each request itself (llama.cpp's `timings` on its
 * final chunk: prompt tokens and milliseconds, output tokens, time per
 * output token), the engine hands each finished request's timings here,
 * with what tokbench measured of the same request (its TTFT, its output
 * tokens).  The cell then carries `server_timings`: the p50 and p90 of the
 * server's prompt ms, prompt tokens/s, time per output token and tokens
 * predicted, and the two comparisons that hold tokbench to the server:
 * TTFT minus the server's prompt time (p50, p90) and how many requests'
 * output tokens tokbench counted exactly as the server did.
 *
 * Time per output token, like for like (issue 34, item 7).  llama.cpp's
 * predicted_ms runs from its first output token to its last (the slot's
 * t_start_generation, set when n_decoded reaches 1, to the last token:
 * tools/server/server.cpp); what it divides that by has changed: earlier
 * server.cpp divides by n_decoded (`get_formated_timings`; n − 1 intervals
 * over n tokens: 5% short at 20 tokens), Debian's b11669 by n − 1
 * (predicted_ms / predicted_per_token_ms is 19.000 for 20 tokens, 63.000
 * for 64, read off its answers here).  tokbench's TPOT is (last − first
 * token) / (tokens − 1).  So beside the server's figure as it says it
 * (tpot_ms) the cell carries the server's own span per interval,
 * predicted_ms / (predicted_n − 1), the same definition whatever the
 * version (tpot_span_ms), and per request tokbench's TPOT against it
 * (tpot_vs_server_pct: p50, p90 of 100 × (ours / theirs − 1)).
 *
 * Pure: numbers in, JSON out.
 */
#ifndef TB_SRVTIME_H
#define TB_SRVTIME_H

#include <jansson.h>
#include <stdint.h>

#include "base/tb_stats.h"
#include "base/tb_util.h"

/* The one source of per-request server timings today. */
#define TB_SRVTIME_LLAMACPP "llama.cpp timings"

/* One finished request: the server's timings (NAN where it gave none) and
 * tokbench's own figures of it. */
struct tb_srvtime_req {
  double cache_n, prompt_n, prompt_ms;
  double predicted_n, predicted_ms, predicted_per_token_ms;
  double ttft_ms; /* tokbench's TTFT of the request (NAN: none) */
  double tpot_ms; /* tokbench's TPOT of the request (NAN: none) */
  int64_t tokens; /* output tokens tokbench counted */
};

struct tb_srvtime {
  const char *source; /* static: whose timings ("llama.cpp timings") */
  unsigned requests, tokens_equal;
  double cache_n, prompt_n; /* sums */
  /* in microseconds (ms figures), milli-tokens/s, tokens */
  struct tb_stats prompt_us, prompt_mtps, tpot_us, predicted, gap_us;
  /* the server's span per interval (us), ours against it (ppm, signed) */
  struct tb_stats span_us, diff_ppm;
};

/* Adds one request (it counts only with prompt_ms or predicted_n). */
void tb_srvtime_add(struct tb_srvtime *t, const struct tb_srvtime_req *r);

/*
 * The cell's `server_timings` (new reference), or NULL without requests:
 *   {source, requests, prompt_ms, prompt_tps, tpot_ms, tpot_span_ms,
 *    tpot_vs_server_pct, predicted_n, ttft_minus_prompt_ms: {p50, p90, min},
 *    tokens_equal, cache_n, prompt_n}
 * A figure no request gave is left out.
 */
json_t *tb_srvtime_json(struct tb_srvtime *t) TB_MUST_CHECK;

/* Adds every request of from into into (a sharded cell's shards: the
 * union's percentiles, the counts and sums added; issue 34, item 5). */
void tb_srvtime_merge(struct tb_srvtime *into, const struct tb_srvtime *from);

void tb_srvtime_free(struct tb_srvtime *t);

#endif
