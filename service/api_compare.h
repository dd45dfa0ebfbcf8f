/*
 * api_compare: the comparison of two jobs' documents (api_compare.c), made
 * for GET /v1/compare and for a share link of a comparison (api_shares.c).
 */
#ifndef TB_API_COMPARE_H
#define TB_API_COMPARE_H

#include <math.h>

#include "api.h"

/* One side of a comparison (all borrowed). */
struct tb_api_compare_side {
  const char *job_id;
  const json_t *doc;  /* the job's document (tb_api_result_doc) */
  const char *labels; /* the job's labels as JSON text (the head's choose the
                       * project's threshold), or NULL */
};

/* The comparison of head against base (tb_compare) with tolerance tol (a
 * fraction; NAN: the project's threshold for the head's labels), the job
 * ids set in its base and head: true with *cmp (new), else false with a
 * reply queued into *ret. */
bool tb_api_compare_make(struct tb_api_req *r, const struct tb_api_compare_side *base,
                         const struct tb_api_compare_side *head, double tol, json_t **cmp,
                         enum MHD_Result *ret) TB_MUST_CHECK;

/* A tolerance given as a percentage in [0, 100) ("2.5"): true with *tol
 * the fraction. */
bool tb_api_compare_tolerance(const char *text, double *tol) TB_MUST_CHECK;

#endif
