/*
 * tb_tracesum: the figures of a trace (docs/traces.md, "Summary"): requests,
 * sessions, span, rate, input and output tokens, blocks and the implied
 * prefix-cache hit rate, and their JSON as the service stores and shows it.
 */
#ifndef TB_TRACESUM_H
#define TB_TRACESUM_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "spec/tb_trace.h"

/* Token distribution of a trace's requests. */
struct tb_tracesum_dist {
  double mean, p50, p90, p99, max;
};

struct tb_tracesum {
  size_t requests, sessions, blocks, unique_blocks;
  int64_t block_tokens;
  double span_s; /* last arrival - first */
  double rate;   /* requests / span_s (0 for a span of 0) */
  struct tb_tracesum_dist in, out;
  /* Input tokens an unbounded prefix cache would hold, over all input
   * tokens: in the trace's order, each request's leading blocks already
   * seen count block_tokens each (capped at its input). */
  double implied_hit_rate;
};

/* The figures of a trace (requests, span, rate, tokens, block reuse). */
void tb_tracesum_of(const struct tb_trace *t, struct tb_tracesum *s);
/* The summary as the service stores and shows it (GET /v1/traces/{id}):
 * requests, sessions, span_s, rate_rps, block_tokens, blocks,
 * unique_blocks, implied_hit_pct, and input_tokens / output_tokens each
 * {mean, p50, p90, p99, max}.  A new reference. */
json_t *tb_tracesum_json(const struct tb_tracesum *s);

#endif
