/*
 * tb_sign: signed result documents (issue 35, item 4).  Ed25519 (RFC 8032)
 * through OpenSSL's EVP interface, over the RFC 8785 canonical form
 * (tb_jcs) of the document without its "signature" member.  The block it
 * adds, which every reader of a result (tokbench verify, share pages, the
 * web console) reads the same way:
 *
 *   "signature": {"alg": "Ed25519", "kid": "<key id>",
 *                 "signed_at": "<RFC 3339 UTC>", "value": "<base64url>"}
 *
 * value is the 64-byte signature in base64url without padding (RFC 4648
 * section 5).  The key id is the first 16 hex digits of the SHA-256 of the
 * raw 32-byte public key: a new key file is a new kid.  Only the document
 * around the block is signed: kid, alg and signed_at say which key to try
 * and when the service signed; a changed signed_at still verifies (the
 * document's own started_at and finished_at are signed).
 *
 * The private key is a file (the binary's TOKBENCH_SIGNING_KEY_FILE): PEM
 * PKCS#8, as `openssl genpkey -algorithm ed25519` writes it, or as
 * tb_sign_create_file makes it (mode 0600).  A file readable by group or
 * others is refused, as the master key's (tb_masterkey); its bytes are
 * wiped once read, and nothing here logs or returns the private key.
 *
 * Public keys are published as a JWK set (RFC 7517) of OKP keys (RFC 8037:
 * kty "OKP", crv "Ed25519", x the raw key in base64url).
 */
#ifndef TB_SIGN_H
#define TB_SIGN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define TB_SIGN_PUB_LEN 32
#define TB_SIGN_SIG_LEN 64
#define TB_SIGN_KID_LEN 16
#define TB_SIGN_ALG "Ed25519"
/* Cap on the key file: a PEM Ed25519 key is 119 bytes. */
#define TB_SIGN_FILE_MAX 4096

/* A loaded private key, its public half and its id. */
struct tb_sign_key;

/* The key id of a raw public key: TB_SIGN_KID_LEN hex digits + NUL. */
void tb_sign_kid(const unsigned char pub[TB_SIGN_PUB_LEN], char kid[TB_SIGN_KID_LEN + 1]);

/*
 * Loads the private key of the file at path (mode 0600 or tighter, a
 * regular file, PEM PKCS#8 of an Ed25519 key).  A new key, or NULL with
 * *err (new string, never key material: caller frees).
 */
struct tb_sign_key *tb_sign_key_load(const char *path, char **err) TB_MUST_CHECK;
/* Creates a key file at path with a fresh key (mode 0600), unless a file
 * is there already (left alone).  true when the file exists afterwards;
 * false with *err (caller frees). */
bool tb_sign_create_file(const char *path, char **err) TB_MUST_CHECK;
/* Frees the key (its private half wiped by OpenSSL).  NULL is fine. */
void tb_sign_key_free(struct tb_sign_key *k);
/* The key's id (borrowed, lives as long as k) and raw public key. */
const char *tb_sign_key_id(const struct tb_sign_key *k);
const unsigned char *tb_sign_key_pub(const struct tb_sign_key *k);

/*
 * Signs doc in place: any "signature" member is dropped, then the block
 * above is set, signed_at from now_us (wall clock, epoch microseconds).
 * false with *err (new string) when the document has no canonical form or
 * OpenSSL fails; doc is then without a signature.
 */
bool tb_sign_doc(const struct tb_sign_key *k, json_t *doc, int64_t now_us,
                 char **err) TB_MUST_CHECK;

enum tb_sign_check {
  TB_SIGN_GOOD = 0,   /* the signature is the key's over the document */
  TB_SIGN_BAD = 1,    /* it is not (or its value is malformed) */
  TB_SIGN_ABSENT = 2, /* no signature block, or not of this format */
};
/*
 * Checks doc's signature against the raw public key pub (whose kid the
 * caller matched with the block's).  *why gets a static reason for
 * anything but TB_SIGN_GOOD (may be NULL).
 */
enum tb_sign_check tb_sign_verify(const json_t *doc, const unsigned char pub[TB_SIGN_PUB_LEN],
                                  const char **why) TB_MUST_CHECK;

/* base64url without padding (RFC 4648 section 5): a new string. */
char *tb_b64url_encode(const void *data, size_t len);
/* Decodes exactly out_len bytes of base64url without padding into out;
 * false on any other character, padding or length. */
bool tb_b64url_decode(const char *s, void *out, size_t out_len) TB_MUST_CHECK;

/* The JWK of a raw public key (RFC 8037): {kty, crv, x, kid, use, alg}.
 * New object. */
json_t *tb_sign_jwk(const unsigned char pub[TB_SIGN_PUB_LEN]);
/* The raw public key of a JWK of that shape into pub; false when jwk is
 * not an OKP Ed25519 key with a 32-byte x. */
bool tb_sign_jwk_pub(const json_t *jwk, unsigned char pub[TB_SIGN_PUB_LEN]) TB_MUST_CHECK;

#endif
