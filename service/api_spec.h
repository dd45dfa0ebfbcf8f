/*
 * api_spec: the request bodies of the api, validated in full by pure
 * functions (JSON text in, normalized JSON or a list of errors out), so that
 * they can be unit-tested and fuzzed without a server (tests/fuzz/
 * fuzz_jobspec.c).
 *
 * Errors are a JSON array of {"field": "contexts[2]", "detail": "..."}; every
 * problem is reported, not only the first.  Unknown fields are errors.
 */
#ifndef TB_API_SPEC_H
#define TB_API_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tb_util.h"

/* Caps. */
#define TB_SPEC_MAX_LIST 64        /* contexts, concurrency, prefill_contexts */
#define TB_SPEC_MAX_CONTEXT (4LL * 1024 * 1024)
#define TB_SPEC_MAX_CONCURRENCY 4096
#define TB_SPEC_MAX_LABELS 32
#define TB_SPEC_MAX_LABEL_KEY 64
#define TB_SPEC_MAX_LABEL_VALUE 256
#define TB_SPEC_MAX_CALLBACKS 8
#define TB_SPEC_MAX_URL 2048
#define TB_SPEC_MAX_LAUNCH 16384
#define TB_SPEC_MAX_API_KEY 4096

enum tb_spec_rc {
  TB_SPEC_OK = 0,       /* *out holds the normalized object */
  TB_SPEC_BAD_JSON = 1, /* not a JSON object: *errors holds one entry (400) */
  TB_SPEC_INVALID = 2,  /* *errors lists the problems (422) */
};

/*
 * A job spec (POST /v1/jobs).  On TB_SPEC_OK *out is a new object holding the
 * fields given, contexts as integers ("8k" -> 8192); else *errors is a new
 * array.  Exactly one of *out / *errors is set.
 */
enum tb_spec_rc tb_spec_job(const char *text, size_t len, json_t **out,
                            json_t **errors) TB_MUST_CHECK;

/*
 * An endpoint (POST /v1/endpoints; PATCH when patch is true: nothing is
 * required and api_key, launch_command, exclusive_group, engine_hint may be
 * null to clear them).  On TB_SPEC_OK *out holds the fields given, with
 * launch_command redacted; the api_key (if any) stays in *out under
 * "api_key": the caller seals it and wipes it.
 */
enum tb_spec_rc tb_spec_endpoint(const char *text, size_t len, bool patch, json_t **out,
                                 json_t **errors) TB_MUST_CHECK;

/* A new API key (POST /v1/keys): name, scopes, expires_in ("30d" or
 * seconds).  *out gets "name", "scopes" (a mask as an integer) and
 * "expires_in_s" (0 = never). */
enum tb_spec_rc tb_spec_key(const char *text, size_t len, json_t **out,
                            json_t **errors) TB_MUST_CHECK;

/* True when url is an http:// or https:// URL with a host, no credentials,
 * no whitespace or control characters, at most TB_SPEC_MAX_URL long. */
bool tb_spec_url_ok(const char *url);

#endif
