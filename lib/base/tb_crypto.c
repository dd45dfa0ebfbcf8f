/*
 * tb_crypto: thin, checked wrappers over OpenSSL's EVP interfaces.
 */
#include "base/tb_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define SEAL_VERSION 0x01
#define SEAL_NONCE 12
#define SEAL_TAG 16
#define SEAL_MAX_PLAINTEXT (64 * 1024)

bool
tb_crypto_random(void *buf, size_t n)
{
  return n <= INT32_MAX && RAND_bytes(buf, (int)n) == 1;
}

char *
tb_crypto_token(const char *prefix, size_t nchars)
{
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  size_t plen = strlen(prefix);
  char *out = tb_xmalloc(plen + nchars + 1);
  memcpy(out, prefix, plen);
  size_t have = 0;
  unsigned char rnd[64];
  while (have < nchars) {
    if (!tb_crypto_random(rnd, sizeof rnd)) {
      free(out);
      return NULL;
    }
    for (size_t i = 0; i < sizeof rnd && have < nchars; i++)
      if (rnd[i] < 248) /* 248 = 62 * 4: reject the rest, no modulo bias */
        out[plen + have++] = alphabet[rnd[i] % 62];
  }
  out[plen + nchars] = '\0';
  OPENSSL_cleanse(rnd, sizeof rnd);
  return out;
}

void
tb_crypto_sha256(const void *data, size_t len, unsigned char out[TB_SHA256_LEN])
{
  SHA256(data, len, out);
}

void
tb_crypto_sha256_hex(const void *data, size_t len, char out[65])
{
  unsigned char md[TB_SHA256_LEN];
  SHA256(data, len, md);
  tb_hex_encode(md, sizeof md, out);
}

void
tb_crypto_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                      unsigned char out[TB_SHA256_LEN])
{
  unsigned int olen = TB_SHA256_LEN;
  if (HMAC(EVP_sha256(), key, (int)key_len, data, len, out, &olen) == NULL)
    abort(); /* cannot fail with valid arguments */
}

void
tb_hex_encode(const void *data, size_t len, char *out)
{
  static const char digits[] = "0123456789abcdef";
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  out[2 * len] = '\0';
}

bool
tb_hex_decode(const char *hex, void *out, size_t out_len)
{
  if (strlen(hex) != 2 * out_len)
    return false;
  unsigned char *o = out;
  for (size_t i = 0; i < out_len; i++) {
    int hi = tb_hex_digit((unsigned char)hex[2 * i]),
        lo = tb_hex_digit((unsigned char)hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    o[i] = (unsigned char)(hi << 4 | lo);
  }
  return true;
}

char *
tb_base64_encode(const void *data, size_t len)
{
  size_t olen = 4 * ((len + 2) / 3);
  char *out = tb_xmalloc(olen + 1);
  int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
  out[n] = '\0';
  return out;
}

unsigned char *
tb_base64_decode(const char *b64, size_t *out_len)
{
  size_t len = strlen(b64);
  if (len == 0 || len % 4 != 0 || len > INT32_MAX)
    return NULL;
  for (size_t i = 0; i < len; i++) {
    char c = b64[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || (c == '=' && i >= len - 2);
    if (!ok)
      return NULL;
  }
  unsigned char *out = tb_xmalloc(len / 4 * 3 + 1);
  int n = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)len);
  if (n < 0) {
    free(out);
    return NULL;
  }
  /* EVP_DecodeBlock counts padding as zero bytes. */
  if (b64[len - 1] == '=')
    n--;
  if (b64[len - 2] == '=')
    n--;
  *out_len = (size_t)n;
  return out;
}

char *
tb_crypto_seal(const unsigned char key[TB_CRYPTO_KEY_LEN], const char *plaintext, const char *ad)
{
  size_t plen = strlen(plaintext);
  if (plen > SEAL_MAX_PLAINTEXT)
    return NULL;
  size_t total = 1 + SEAL_NONCE + plen + SEAL_TAG;
  unsigned char *buf = tb_xmalloc(total);
  char *out = NULL;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int len = 0;
  buf[0] = SEAL_VERSION;
  if (c == NULL || !tb_crypto_random(buf + 1, SEAL_NONCE))
    goto out;
  if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE, NULL) != 1 ||
      EVP_EncryptInit_ex(c, NULL, NULL, key, buf + 1) != 1)
    goto out;
  if (ad != NULL &&
      EVP_EncryptUpdate(c, NULL, &len, (const unsigned char *)ad, (int)strlen(ad)) != 1)
    goto out;
  if (EVP_EncryptUpdate(c, buf + 1 + SEAL_NONCE, &len, (const unsigned char *)plaintext,
                        (int)plen) != 1)
    goto out;
  if (EVP_EncryptFinal_ex(c, buf + 1 + SEAL_NONCE + len, &len) != 1)
    goto out;
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG, buf + 1 + SEAL_NONCE + plen) != 1)
    goto out;
  out = tb_base64_encode(buf, total);
out:
  EVP_CIPHER_CTX_free(c);
  OPENSSL_cleanse(buf, total);
  free(buf);
  return out;
}

char *
tb_crypto_open(const unsigned char key[TB_CRYPTO_KEY_LEN], const char *sealed, const char *ad)
{
  size_t total = 0;
  unsigned char *buf = tb_base64_decode(sealed, &total);
  char *plain = NULL;
  EVP_CIPHER_CTX *c = NULL;
  int len = 0;
  if (buf == NULL)
    return NULL;
  if (total < 1 + SEAL_NONCE + SEAL_TAG || buf[0] != SEAL_VERSION)
    goto out;
  size_t plen = total - 1 - SEAL_NONCE - SEAL_TAG;
  plain = tb_xmalloc(plen + 1);
  c = EVP_CIPHER_CTX_new();
  if (c == NULL || EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE, NULL) != 1 ||
      EVP_DecryptInit_ex(c, NULL, NULL, key, buf + 1) != 1)
    goto fail;
  if (ad != NULL &&
      EVP_DecryptUpdate(c, NULL, &len, (const unsigned char *)ad, (int)strlen(ad)) != 1)
    goto fail;
  if (EVP_DecryptUpdate(c, (unsigned char *)plain, &len, buf + 1 + SEAL_NONCE, (int)plen) != 1)
    goto fail;
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG, buf + 1 + SEAL_NONCE + plen) != 1)
    goto fail;
  if (EVP_DecryptFinal_ex(c, (unsigned char *)plain + len, &len) != 1)
    goto fail;
  plain[plen] = '\0';
  if (strlen(plain) != plen) /* an embedded NUL: not something we sealed */
    goto fail;
  goto out;
fail:
  OPENSSL_cleanse(plain, plen + 1);
  free(plain);
  plain = NULL;
out:
  EVP_CIPHER_CTX_free(c);
  OPENSSL_cleanse(buf, total);
  free(buf);
  return plain;
}

bool
tb_crypto_parse_key(const char *text, unsigned char key[TB_CRYPTO_KEY_LEN])
{
  char hex[2 * TB_CRYPTO_KEY_LEN + 1];
  size_t n = 0;
  for (const char *p = text; *p != '\0'; p++) {
    if (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
      continue;
    if (n >= sizeof hex - 1)
      return false;
    hex[n++] = *p;
  }
  hex[n] = '\0';
  bool ok = tb_hex_decode(hex, key, TB_CRYPTO_KEY_LEN);
  OPENSSL_cleanse(hex, sizeof hex);
  return ok;
}

bool
tb_crypto_read_key_file(const char *path, const char *what, char *buf, size_t cap, size_t *len,
                        char **err)
{
  bool ok = false;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = tb_xasprintf("cannot open %s file %s: %s", what, path, strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *err = tb_xasprintf("%s file %s is not a regular file", what, path);
    goto out;
  }
  if ((st.st_mode & 077) != 0) {
    *err = tb_xasprintf("%s file %s is readable by group or others (chmod 600)", what, path);
    goto out;
  }
  for (;;) {
    ssize_t n = read(fd, buf + *len, cap + 1 - *len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      *err = tb_xasprintf("cannot read %s file %s: %s", what, path, strerror(errno));
      goto out;
    }
    if (n == 0)
      break;
    *len += (size_t)n;
    if (*len > cap) {
      *err = tb_xasprintf("%s file %s is too large", what, path);
      goto out;
    }
  }
  buf[*len] = '\0';
  ok = true;
out:
  close(fd);
  return ok;
}
