/*
 * api_signkeys: the api's signing key (issue 35, item 4).  The key file
 * (TOKBENCH_SIGNING_KEY_FILE, lib/base/tb_sign) is loaded at start and its
 * public half recorded (lib/db/tb_signkeys); from then on the document of
 * every finished job the api serves (tb_api_result_doc: /result, /report,
 * /v1/compare's two sides), imports aside, is signed as it is served, so
 * the signature covers exactly what the reader got: the stored result, the
 * regressions judged with it, job_id and state, the launch command
 * redacted.  A key revoked meanwhile (`tokbench signing-keys revoke`) is
 * seen at the next document: it then goes unsigned, with a warning logged.
 * GET /v1/signing-keys (no key needed: they are public) is the JWK set.
 */
#ifndef TB_API_SIGNKEYS_H
#define TB_API_SIGNKEYS_H

#include <jansson.h>
#include <stdbool.h>

#include "api.h"

/* Loads TOKBENCH_SIGNING_KEY_FILE into api->sign_key (unset: none, logged
 * as a warning).  false with *err (new string) when the file is unusable. */
bool tb_api_signkeys_load(struct tb_api *api, char **err) TB_MUST_CHECK;

/* Records the loaded key's public half (none loaded: nothing).  false,
 * logged, on a database error; a revoked key is logged and not used. */
bool tb_api_signkeys_record(struct tb_api *api, struct tb_db *db) TB_MUST_CHECK;

/* Signs doc (a finished job's document) in place with the api's key, when
 * it has one that is not revoked; else leaves doc unsigned. */
void tb_api_signkeys_sign(struct tb_api_req *r, json_t *doc);
/* True when a document signed earlier by the api's key may still be served
 * (no key, or the key is not revoked): a cached signed result asks
 * (api_result.c), one query, as signing does. */
bool tb_api_signkeys_usable(struct tb_api_req *r);

/* Frees the key.  NULL-safe. */
void tb_api_signkeys_free(struct tb_api *api);

#endif
