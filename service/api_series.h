/*
 * api_series: the history document of GET /v1/series (api_series.c), also
 * what a share link of an endpoint's history renders (api_shares.c).
 */
#ifndef TB_API_SERIES_H
#define TB_API_SERIES_H

#include "api.h"
#include "result/tb_compare.h"

/* The metrics a series may follow, for a 400/422 detail. */
#define TB_API_SERIES_METRICS                                      \
  "metric is one of the phase's: prompt_tps, ttft_ms (prefill); "  \
  "total_tps, ttft_p50_ms, tbt_p50_ms, cost_per_m_output_tokens, " \
  "cost_per_m_tokens, j_per_output_token (decode)"

/* The metric name of phase ("decode" | "prefill"), or its default (the
 * first higher-is-better one) when name is NULL: the static row, or NULL
 * when the phase has no such metric. */
const struct tb_compare_metric *tb_api_series_metric(const char *phase, const char *name);

/* One series (all borrowed). */
struct tb_api_series_query {
  const char *endpoint_id;
  const json_t *labels; /* an object, matched exactly */
  const char *phase;
  bool cell; /* one cell (context, concurrency); else the matrix */
  int64_t context, concurrency;
  const struct tb_compare_metric *metric;
};

/* The series of q in r->project_id's history (see api_series.c's file
 * comment for its members): 1 with *doc (new), 0 when the endpoint is not
 * the project's, TB_DB_SOFT / TB_DB_HARD. */
int tb_api_series_doc(struct tb_api_req *r, const struct tb_api_series_query *q,
                      json_t **doc) TB_MUST_CHECK;

#endif
