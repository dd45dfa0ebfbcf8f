/*
 * api_spec: the request bodies of the api other than a job spec (which is
 * lib/spec/tb_spec's tb_spec_job), validated in full by pure functions (JSON
 * text in, normalized JSON or a list of errors out), so that they can be
 * unit-tested and fuzzed without a server (tests/fuzz/fuzz_jobspec.c).
 *
 * Errors are a JSON array of {"field": "hardware.count", "detail": "..."};
 * every problem is reported, not only the first.  Unknown fields are errors.
 */
#ifndef TB_API_SPEC_H
#define TB_API_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "spec/tb_spec.h"
#include "base/tb_util.h"

#define TB_API_SPEC_MAX_LAUNCH 16384
#define TB_API_SPEC_MAX_API_KEY 4096

/*
 * An endpoint (POST /v1/endpoints; PATCH when patch is true: nothing is
 * required and api_key, launch_command, exclusive_group, engine_hint may be
 * null to clear them).  On TB_SPEC_OK *out holds the fields given, with
 * launch_command redacted (tb_redact); the api_key (if any) stays in *out
 * under "api_key": the caller seals it and wipes it.
 */
enum tb_spec_rc tb_api_spec_endpoint(const char *text, size_t len, bool patch, json_t **out,
                                     json_t **errors) TB_MUST_CHECK;

/* A new API key (POST /v1/keys): name, scopes, expires_in ("30d" or
 * seconds).  *out gets "name", "scopes" (a mask as an integer) and
 * "expires_in_s" (0 = never). */
enum tb_spec_rc tb_api_spec_key(const char *text, size_t len, json_t **out,
                                json_t **errors) TB_MUST_CHECK;

#endif
