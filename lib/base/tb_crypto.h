/*
 * tb_crypto: the few primitives tokbench needs, all from OpenSSL.
 *
 * - random bytes and API-key tokens (RAND_bytes, the CSPRNG);
 * - SHA-256 and HMAC-SHA256 (key hashes, webhook signatures);
 * - AES-256-GCM sealing of secrets at rest (endpoint API keys);
 * - base64 and hex.
 *
 * Sealed format (binary, then base64 for storage):
 *   version (1 byte, 0x01) | nonce (12) | ciphertext (n) | tag (16)
 * with the associated data given by the caller (e.g. the endpoint id), so a
 * sealed value copied to another row does not open there.
 */
#ifndef TB_CRYPTO_H
#define TB_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define TB_CRYPTO_KEY_LEN 32
#define TB_SHA256_LEN 32

/* Fills buf with n random bytes; false when the RNG fails. */
bool tb_crypto_random(void *buf, size_t n) TB_MUST_CHECK;
/* A new random token: prefix followed by nchars characters of [A-Za-z0-9]
 * (rejection-sampled, no bias).  NULL if the RNG fails.  Caller frees. */
char *tb_crypto_token(const char *prefix, size_t nchars) TB_MUST_CHECK;

void tb_crypto_sha256(const void *data, size_t len, unsigned char out[TB_SHA256_LEN]);
/* SHA-256 as 64 lower-case hex characters plus NUL into out[65]. */
void tb_crypto_sha256_hex(const void *data, size_t len, char out[65]);
void tb_crypto_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                           unsigned char out[TB_SHA256_LEN]);

/* Hex: out must hold 2*len+1.  Decode returns false on junk or wrong length. */
void tb_hex_encode(const void *data, size_t len, char *out);
bool tb_hex_decode(const char *hex, void *out, size_t out_len) TB_MUST_CHECK;
/* Base64 (standard alphabet, padded).  Encode: new string.  Decode: new
 * buffer with *out_len set, or NULL on junk.  Caller frees. */
char *tb_base64_encode(const void *data, size_t len);
unsigned char *tb_base64_decode(const char *b64, size_t *out_len) TB_MUST_CHECK;

/* Seals plaintext under key with associated data ad.  Returns a new base64
 * string, or NULL on failure.  Caller frees. */
char *tb_crypto_seal(const unsigned char key[TB_CRYPTO_KEY_LEN], const char *plaintext,
                     const char *ad) TB_MUST_CHECK;
/* Opens what tb_crypto_seal made.  Returns the new plaintext (caller wipes
 * with OPENSSL_cleanse and frees), or NULL when it does not authenticate. */
char *tb_crypto_open(const unsigned char key[TB_CRYPTO_KEY_LEN], const char *sealed,
                     const char *ad) TB_MUST_CHECK;

/* Parses a master key given as 64 hex characters (surrounding whitespace is
 * ignored).  False on anything else. */
bool tb_crypto_parse_key(const char *text, unsigned char key[TB_CRYPTO_KEY_LEN]) TB_MUST_CHECK;

/* The bytes of a private key file (the master key, the signing key) into
 * buf (cap + 1 bytes, NUL-terminated; the caller wipes it), their count in
 * *len.  The file must be regular, of mode 0600 or tighter (as ssh asks of
 * private keys), and hold at most cap bytes; else false with *err naming
 * what (e.g. "master key") and the path. */
bool tb_crypto_read_key_file(const char *path, const char *what, char *buf, size_t cap, size_t *len,
                             char **err) TB_MUST_CHECK;

#endif
