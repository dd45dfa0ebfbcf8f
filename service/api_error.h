/*
 * api_error: the one error registry of the api.  Each code names its HTTP
 * status, its RFC 9457 problem type (https://tokbench.dev/problems/<type>)
 * and its title; tb_api_reply_error (api_reply.c) turns a code into the
 * application/problem+json reply.  Add a code here (enum + table row in
 * api_error.c) rather than writing a status by hand in a handler.
 */
#ifndef TB_API_ERROR_H
#define TB_API_ERROR_H

enum tb_api_ec {
  TB_EC_BAD_JSON = 0,         /* 400 body is not JSON */
  TB_EC_BAD_REQUEST,          /* 400 bad query parameter or header */
  TB_EC_UNAUTHORIZED,         /* 401 no key, bad key */
  TB_EC_KEY_EXPIRED,          /* 401 */
  TB_EC_KEY_REVOKED,          /* 401 */
  TB_EC_FORBIDDEN,            /* 403 scope missing */
  TB_EC_NOT_FOUND,            /* 404 */
  TB_EC_METHOD_NOT_ALLOWED,   /* 405 (+ Allow) */
  TB_EC_NOT_MODIFIED,         /* 304 (no body is sent) */
  TB_EC_JOB_FINISHED,         /* 409 */
  TB_EC_NAME_TAKEN,           /* 409 */
  TB_EC_IDEMPOTENCY_MISMATCH, /* 422 same Idempotency-Key, other request */
  TB_EC_TOO_LARGE,            /* 413 */
  TB_EC_UNSUPPORTED_MEDIA,    /* 415 */
  TB_EC_INVALID,              /* 422 + errors[] */
  TB_EC_RATE_LIMITED,         /* 429 (+ Retry-After) */
  TB_EC_INTERNAL,             /* 500 */
  TB_EC_PROBE_FAILED,         /* 502 the endpoint did not answer discovery */
  TB_EC_DB_UNAVAILABLE,       /* 503 */
  TB_EC_NOT_READY,            /* 503 /readyz */
  TB_EC_NO_MASTER_KEY,        /* 503 no master key configured */
  TB_EC_SHUTTING_DOWN,        /* 503 */
  TB_EC_BAD_SIGNATURE,        /* 401 webhook signature missing, wrong or stale (issue 7) */
  /* issue 13: egress policy, probe pool */
  TB_EC_EGRESS_REFUSED, /* 422 the URL is refused by the egress policy (+ rule) */
  TB_EC_PROBE_BUSY,     /* 429 too many probes in flight (+ Retry-After) */
  /* issue 13: per-project limits (tb_tenancy.h) */
  TB_EC_LIMIT_REACHED, /* 429 a count of the project is at its limit (+ limit) */
  TB_EC_JOB_TOO_LARGE, /* 422 the job is over a size limit (+ limit) */
  /* issue 25: uploaded traces (api_traces.c) */
  TB_EC_TRACE_IN_USE, /* 409 a queued or running job names the trace */
  /* issue 35: share links (api_shares.c) */
  TB_EC_SHARE_EXPIRED, /* 410 the share link has expired */
  TB_EC_COUNT_,
};

struct tb_api_error_def {
  unsigned status;
  const char *type; /* the last part of the problem type URI */
  const char *title;
};

/* The registry entry of code (never NULL for a valid code). */
const struct tb_api_error_def *tb_api_error_def(enum tb_api_ec code);

#define TB_API_PROBLEM_BASE "https://tokbench.dev/problems/"

#endif
