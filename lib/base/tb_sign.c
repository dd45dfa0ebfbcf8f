/*
 * tb_sign: see tb_sign.h.
 *
 * OpenSSL 3's EVP: keys are EVP_PKEY of type ED25519, signing and checking
 * are EVP_DigestSign / EVP_DigestVerify in one shot with no digest (Ed25519
 * hashes inside, RFC 8032's PureEdDSA).  A PEM read never prompts for a
 * pass phrase (an encrypted key file is refused): the services start
 * unattended.
 */
#include "base/tb_sign.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/tb_crypto.h"
#include "base/tb_jcs.h"

struct tb_sign_key {
  EVP_PKEY *pkey;
  unsigned char pub[TB_SIGN_PUB_LEN];
  char kid[TB_SIGN_KID_LEN + 1];
};

void
tb_sign_kid(const unsigned char pub[TB_SIGN_PUB_LEN], char kid[TB_SIGN_KID_LEN + 1])
{
  char hex[65];
  tb_crypto_sha256_hex(pub, TB_SIGN_PUB_LEN, hex);
  memcpy(kid, hex, TB_SIGN_KID_LEN);
  kid[TB_SIGN_KID_LEN] = '\0';
}

/* ------------------------------------------------------------- base64url */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *
tb_b64url_encode(const void *data, size_t len)
{
  const unsigned char *p = data;
  char *out = tb_xmalloc(len / 3 * 4 + 5);
  size_t o = 0, i = 0;
  for (; i + 3 <= len; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    out[o++] = b64url[v >> 18];
    out[o++] = b64url[(v >> 12) & 63];
    out[o++] = b64url[(v >> 6) & 63];
    out[o++] = b64url[v & 63];
  }
  if (len - i == 1) {
    uint32_t v = (uint32_t)p[i] << 16;
    out[o++] = b64url[v >> 18];
    out[o++] = b64url[(v >> 12) & 63];
  } else if (len - i == 2) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
    out[o++] = b64url[v >> 18];
    out[o++] = b64url[(v >> 12) & 63];
    out[o++] = b64url[(v >> 6) & 63];
  }
  out[o] = '\0';
  return out;
}

static int
b64url_value(unsigned char c)
{
  const char *at = c != '\0' ? strchr(b64url, c) : NULL;
  return at != NULL ? (int)(at - b64url) : -1;
}

bool
tb_b64url_decode(const char *s, void *out, size_t out_len)
{
  size_t n = strlen(s);
  /* without padding: 4 characters per 3 bytes, 2 or 3 for a tail of 1 or 2 */
  size_t want = out_len / 3 * 4 + (out_len % 3 == 0 ? 0 : out_len % 3 + 1);
  if (n != want)
    return false;
  unsigned char *o = out;
  uint32_t acc = 0;
  int bits = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64url_value((unsigned char)s[i]);
    if (v < 0)
      return false;
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (k < out_len)
        o[k++] = (unsigned char)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  return k == out_len && acc == 0; /* the tail's spare bits are zero */
}

/* ------------------------------------------------------------- key files */

/* A pass phrase callback that gives none: an encrypted key is refused. */
static int
no_pass(char *buf, int size, int rwflag, void *u)
{
  (void)buf;
  (void)size;
  (void)rwflag;
  (void)u;
  return 0;
}

struct tb_sign_key *
tb_sign_key_load(const char *path, char **err)
{
  char buf[TB_SIGN_FILE_MAX + 1];
  size_t len = 0;
  struct tb_sign_key *k = NULL;
  EVP_PKEY *pkey = NULL;
  *err = NULL;
  if (!tb_crypto_read_key_file(path, "signing key", buf, TB_SIGN_FILE_MAX, &len, err))
    goto out;
  BIO *bio = BIO_new_mem_buf(buf, (int)len);
  pkey = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, no_pass, NULL) : NULL;
  BIO_free(bio);
  size_t plen = TB_SIGN_PUB_LEN;
  unsigned char pub[TB_SIGN_PUB_LEN];
  if (pkey == NULL || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_ED25519 ||
      EVP_PKEY_get_raw_public_key(pkey, pub, &plen) != 1 || plen != TB_SIGN_PUB_LEN) {
    *err = tb_xasprintf("signing key file %s does not hold an unencrypted Ed25519 private key "
                        "(PEM PKCS#8: openssl genpkey -algorithm ed25519)",
                        path);
    EVP_PKEY_free(pkey);
    goto out;
  }
  k = tb_xcalloc(1, sizeof *k);
  k->pkey = pkey;
  memcpy(k->pub, pub, sizeof pub);
  tb_sign_kid(pub, k->kid);
out:
  OPENSSL_cleanse(buf, sizeof buf);
  return k;
}

bool
tb_sign_create_file(const char *path, char **err)
{
  bool ok = false;
  BIO *mem = NULL;
  EVP_PKEY *pkey = NULL;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST)
      return true;
    *err = tb_xasprintf("cannot create signing key file %s: %s", path, strerror(errno));
    return false;
  }
  pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
  mem = BIO_new(BIO_s_mem());
  if (pkey == NULL || mem == NULL ||
      PEM_write_bio_PrivateKey(mem, pkey, NULL, NULL, 0, NULL, NULL) != 1) {
    *err = tb_xstrdup("cannot make an Ed25519 key (OpenSSL)");
    goto out;
  }
  char *data = NULL;
  long n = BIO_get_mem_data(mem, &data);
  if (n <= 0 || write(fd, data, (size_t)n) != (ssize_t)n || fsync(fd) != 0) {
    *err = tb_xasprintf("cannot write signing key file %s: %s", path, strerror(errno));
    goto out;
  }
  ok = true;
out:
  if (mem != NULL) { /* the PEM text held the private key */
    char *pem = NULL;
    long pn = BIO_get_mem_data(mem, &pem);
    if (pn > 0)
      OPENSSL_cleanse(pem, (size_t)pn);
    BIO_free(mem);
  }
  EVP_PKEY_free(pkey);
  close(fd);
  if (!ok)
    unlink(path);
  return ok;
}

void
tb_sign_key_free(struct tb_sign_key *k)
{
  if (k == NULL)
    return;
  EVP_PKEY_free(k->pkey);
  free(k);
}

const char *
tb_sign_key_id(const struct tb_sign_key *k)
{
  return k->kid;
}

const unsigned char *
tb_sign_key_pub(const struct tb_sign_key *k)
{
  return k->pub;
}

/* ------------------------------------------------------------- sign, check */

/* The canonical text of doc without its "signature" member (new). */
static char *
signed_text(const json_t *doc, size_t *len)
{
  json_t *bare = json_copy((json_t *)doc); /* shallow: members shared */
  if (bare == NULL)
    return NULL;
  json_object_del(bare, "signature");
  char *text = tb_jcs_dumps(bare, len);
  json_decref(bare);
  return text;
}

bool
tb_sign_doc(const struct tb_sign_key *k, json_t *doc, int64_t now_us, char **err)
{
  *err = NULL;
  if (!json_is_object(doc)) {
    *err = tb_xstrdup("only an object can be signed");
    return false;
  }
  json_object_del(doc, "signature");
  size_t len = 0;
  char *text = signed_text(doc, &len);
  if (text == NULL) {
    *err = tb_xstrdup("the document has no canonical form (RFC 8785)");
    return false;
  }
  unsigned char sig[TB_SIGN_SIG_LEN];
  size_t slen = sizeof sig;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  bool ok = ctx != NULL && EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
            EVP_DigestSign(ctx, sig, &slen, (const unsigned char *)text, len) == 1 &&
            slen == TB_SIGN_SIG_LEN;
  EVP_MD_CTX_free(ctx);
  free(text);
  if (!ok) {
    *err = tb_xstrdup("Ed25519 signing failed (OpenSSL)");
    return false;
  }
  char at[40], *value = tb_b64url_encode(sig, slen);
  tb_time_rfc3339(now_us, at, sizeof at);
  json_object_set_new(doc, "signature",
                      json_pack("{s:s, s:s, s:s, s:s}", "alg", TB_SIGN_ALG, "kid", k->kid,
                                "signed_at", at, "value", value));
  free(value);
  return true;
}

enum tb_sign_check
tb_sign_verify(const json_t *doc, const unsigned char pub[TB_SIGN_PUB_LEN], const char **why)
{
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  const json_t *sb = json_object_get(doc, "signature");
  const char *alg = json_string_value(json_object_get(sb, "alg"));
  const char *value = json_string_value(json_object_get(sb, "value"));
  if (!json_is_object(sb) || alg == NULL || value == NULL) {
    *why = "no signature block";
    return TB_SIGN_ABSENT;
  }
  if (strcmp(alg, TB_SIGN_ALG) != 0) {
    *why = "not an Ed25519 signature";
    return TB_SIGN_ABSENT;
  }
  unsigned char sig[TB_SIGN_SIG_LEN];
  if (!tb_b64url_decode(value, sig, sizeof sig)) {
    *why = "the signature's value is not 64 bytes of base64url";
    return TB_SIGN_BAD;
  }
  size_t len = 0;
  char *text = signed_text(doc, &len);
  if (text == NULL) {
    *why = "the document has no canonical form (RFC 8785)";
    return TB_SIGN_BAD;
  }
  EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, TB_SIGN_PUB_LEN);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  bool good = pk != NULL && ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pk) == 1 &&
              EVP_DigestVerify(ctx, sig, sizeof sig, (const unsigned char *)text, len) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pk);
  free(text);
  *why = good ? NULL : "the signature does not match the document";
  return good ? TB_SIGN_GOOD : TB_SIGN_BAD;
}

/* ------------------------------------------------------------- JWK */

json_t *
tb_sign_jwk(const unsigned char pub[TB_SIGN_PUB_LEN])
{
  char kid[TB_SIGN_KID_LEN + 1], *x = tb_b64url_encode(pub, TB_SIGN_PUB_LEN);
  tb_sign_kid(pub, kid);
  json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kty", "OKP", "crv", "Ed25519", "x", x,
                        "kid", kid, "use", "sig", "alg", "EdDSA");
  free(x);
  return j;
}

bool
tb_sign_jwk_pub(const json_t *jwk, unsigned char pub[TB_SIGN_PUB_LEN])
{
  const char *kty = json_string_value(json_object_get(jwk, "kty"));
  const char *crv = json_string_value(json_object_get(jwk, "crv"));
  const char *x = json_string_value(json_object_get(jwk, "x"));
  return kty != NULL && crv != NULL && x != NULL && strcmp(kty, "OKP") == 0 &&
         strcmp(crv, "Ed25519") == 0 && tb_b64url_decode(x, pub, TB_SIGN_PUB_LEN);
}
