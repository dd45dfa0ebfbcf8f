/*
 * api_error: the registry (see api_error.h).  A designated-initializer table
 * so that a missing row is a NULL title, caught by the unit test.
 */
#include "api_error.h"

#include <microhttpd.h>
#include <stddef.h>

static const struct tb_api_error_def defs[TB_EC_COUNT_] = {
  [TB_EC_BAD_JSON] = { MHD_HTTP_BAD_REQUEST, "bad-json", "Body is not valid JSON" },
  [TB_EC_BAD_REQUEST] = { MHD_HTTP_BAD_REQUEST, "bad-request", "Bad request" },
  [TB_EC_UNAUTHORIZED] = { MHD_HTTP_UNAUTHORIZED, "unauthorized", "Missing or invalid API key" },
  [TB_EC_KEY_EXPIRED] = { MHD_HTTP_UNAUTHORIZED, "key-expired", "API key expired" },
  [TB_EC_KEY_REVOKED] = { MHD_HTTP_UNAUTHORIZED, "key-revoked", "API key revoked" },
  [TB_EC_FORBIDDEN] = { MHD_HTTP_FORBIDDEN, "forbidden", "The API key lacks the scope" },
  [TB_EC_NOT_FOUND] = { MHD_HTTP_NOT_FOUND, "not-found", "Not found" },
  [TB_EC_METHOD_NOT_ALLOWED] = { MHD_HTTP_METHOD_NOT_ALLOWED, "method-not-allowed",
                                 "Method not allowed" },
  [TB_EC_NOT_MODIFIED] = { MHD_HTTP_NOT_MODIFIED, "not-modified", "Not modified" },
  [TB_EC_JOB_FINISHED] = { MHD_HTTP_CONFLICT, "job-finished", "The job has finished" },
  [TB_EC_NAME_TAKEN] = { MHD_HTTP_CONFLICT, "name-taken", "The name is taken" },
  [TB_EC_IDEMPOTENCY_MISMATCH] = { MHD_HTTP_UNPROCESSABLE_CONTENT, "idempotency-key-reused",
                                   "Idempotency-Key reused with another request" },
  [TB_EC_TOO_LARGE] = { MHD_HTTP_CONTENT_TOO_LARGE, "too-large", "Request body too large" },
  [TB_EC_UNSUPPORTED_MEDIA] = { MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type",
                                "Body must be application/json" },
  [TB_EC_INVALID] = { MHD_HTTP_UNPROCESSABLE_CONTENT, "invalid", "Invalid request" },
  [TB_EC_RATE_LIMITED] = { MHD_HTTP_TOO_MANY_REQUESTS, "rate-limited", "Too many requests" },
  [TB_EC_INTERNAL] = { MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "Internal error" },
  [TB_EC_PROBE_FAILED] = { MHD_HTTP_BAD_GATEWAY, "probe-failed", "The endpoint did not answer" },
  [TB_EC_DB_UNAVAILABLE] = { MHD_HTTP_SERVICE_UNAVAILABLE, "db-unavailable",
                             "Database unavailable" },
  [TB_EC_NOT_READY] = { MHD_HTTP_SERVICE_UNAVAILABLE, "not-ready", "Not ready" },
  [TB_EC_NO_MASTER_KEY] = { MHD_HTTP_SERVICE_UNAVAILABLE, "no-master-key",
                            "No master key configured" },
  [TB_EC_SHUTTING_DOWN] = { MHD_HTTP_SERVICE_UNAVAILABLE, "shutting-down",
                            "The service is stopping" },
  [TB_EC_BAD_SIGNATURE] = { MHD_HTTP_UNAUTHORIZED, "bad-signature",
                            "Webhook signature missing, wrong or stale" },
  /* issue 13: egress policy, probe pool */
  [TB_EC_EGRESS_REFUSED] = { MHD_HTTP_UNPROCESSABLE_CONTENT, "egress-refused",
                             "The URL is refused by the egress policy" },
  [TB_EC_PROBE_BUSY] = { MHD_HTTP_TOO_MANY_REQUESTS, "probes-busy", "Too many probes in flight" },
  /* issue 13: per-project limits */
  [TB_EC_LIMIT_REACHED] = { MHD_HTTP_TOO_MANY_REQUESTS, "limit-reached",
                            "A limit of the project is reached" },
  [TB_EC_JOB_TOO_LARGE] = { MHD_HTTP_UNPROCESSABLE_CONTENT, "job-too-large",
                            "The job is over a limit of this service" },
  /* issue 25: uploaded traces */
  [TB_EC_TRACE_IN_USE] = { MHD_HTTP_CONFLICT, "trace-in-use",
                           "A queued or running job names the trace" },
  /* issue 35: share links */
  [TB_EC_SHARE_EXPIRED] = { MHD_HTTP_GONE, "share-expired", "The share link has expired" },
};

const struct tb_api_error_def *
tb_api_error_def(enum tb_api_ec code)
{
  if ((unsigned)code >= TB_EC_COUNT_ || defs[code].title == NULL)
    return &defs[TB_EC_INTERNAL];
  return &defs[code];
}
