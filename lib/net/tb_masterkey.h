/*
 * tb_masterkey: the master key that seals endpoint API keys at rest
 * (AES-256-GCM through tb_crypto_seal/open).  Shared by tokbench-api, which
 * seals a key when an endpoint is registered, and tokbench-worker, which
 * opens it to run a job.
 *
 * The key is 32 bytes given as 64 hex characters, either directly
 * (TOKBENCH_MASTER_KEY) or in a file (TOKBENCH_MASTER_KEY_FILE, whose first
 * line holds the hex; the file must not be readable by group or others).
 * The direct value wins when both are set.
 */
#ifndef TB_MASTERKEY_H
#define TB_MASTERKEY_H

#include <stdbool.h>

#include "base/tb_crypto.h"
#include "base/tb_util.h"

/* Cap on the size of a key file: it holds one line of 64 hex characters. */
#define TB_MASTERKEY_FILE_MAX 4096

enum tb_masterkey_rc {
  TB_MASTERKEY_OK = 0,    /* key filled */
  TB_MASTERKEY_NONE = 1,  /* neither hex nor file given: no key configured */
  TB_MASTERKEY_ERROR = 2, /* given but unusable: *err says why (caller frees) */
};

/*
 * Loads the master key from hex (may be NULL or empty) or else from the file
 * at path (may be NULL or empty).  On TB_MASTERKEY_OK key holds the key (the
 * caller wipes it with OPENSSL_cleanse when done).  Error messages never
 * contain the key material.
 */
enum tb_masterkey_rc tb_masterkey_load(const char *hex, const char *path,
                                       unsigned char key[TB_CRYPTO_KEY_LEN],
                                       char **err) TB_MUST_CHECK;

/*
 * Creates a key file at path with a fresh random key (mode 0600), unless the
 * file exists already (then it is left alone).  Returns true when the file
 * exists afterwards; false with *err set (caller frees).
 */
bool tb_masterkey_create_file(const char *path, char **err) TB_MUST_CHECK;

/*
 * An endpoint's API key is sealed bound to the endpoint and to the origin
 * (scheme, host, port: tb_egress_origin) of its base_url: the associated
 * data is "endpoint <id> <origin>", and the origin is stored beside the
 * sealed value (endpoints.api_key_origin), so a key never opens for another
 * row or goes to another origin.  Keys sealed before that (origin NULL) had
 * the endpoint id alone as associated data; they still open until the api
 * re-seals them at start.
 */
/* Seals an endpoint key for id and the origin of base_url; *origin gets the
 * origin (new string).  NULL when base_url has no origin or sealing fails.
 * Caller frees both. */
char *tb_masterkey_seal_endpoint_key(const unsigned char key[TB_CRYPTO_KEY_LEN],
                                     const char *plaintext, const char *id, const char *base_url,
                                     char **origin) TB_MUST_CHECK;
/* Opens it: origin is the stored api_key_origin (NULL: a legacy seal).
 * Refuses (NULL, *why a static message) when base_url's origin is not the
 * one the key is bound to, or when it does not authenticate.  The caller
 * wipes and frees the plaintext. */
char *tb_masterkey_open_endpoint_key(const unsigned char key[TB_CRYPTO_KEY_LEN], const char *sealed,
                                     const char *id, const char *origin, const char *base_url,
                                     const char **why) TB_MUST_CHECK;

#endif
