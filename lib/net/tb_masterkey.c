/*
 * tb_masterkey: see tb_masterkey.h.
 *
 * The file is read with a cap (TB_MASTERKEY_FILE_MAX) and its buffer wiped
 * after parsing; a file readable by group or others is refused, as ssh does
 * with private keys: a leaked master key opens every stored endpoint key.
 */
#include "net/tb_masterkey.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/tb_egress.h"

static enum tb_masterkey_rc
load_file(const char *path, unsigned char key[TB_CRYPTO_KEY_LEN], char **err)
{
  enum tb_masterkey_rc rc = TB_MASTERKEY_ERROR;
  char buf[TB_MASTERKEY_FILE_MAX + 1];
  size_t len = 0;
  if (!tb_crypto_read_key_file(path, "master key", buf, TB_MASTERKEY_FILE_MAX, &len, err))
    goto out;
  char *nl = strchr(buf, '\n');
  if (nl != NULL)
    *nl = '\0';
  if (!tb_crypto_parse_key(buf, key)) {
    *err = tb_xasprintf("master key file %s does not hold 64 hex characters", path);
    goto out;
  }
  rc = TB_MASTERKEY_OK;
out:
  OPENSSL_cleanse(buf, sizeof buf);
  return rc;
}

enum tb_masterkey_rc
tb_masterkey_load(const char *hex, const char *path, unsigned char key[TB_CRYPTO_KEY_LEN],
                  char **err)
{
  *err = NULL;
  if (hex != NULL && hex[0] != '\0') {
    if (!tb_crypto_parse_key(hex, key)) {
      *err = tb_xstrdup("TOKBENCH_MASTER_KEY must be 64 hex characters");
      return TB_MASTERKEY_ERROR;
    }
    return TB_MASTERKEY_OK;
  }
  if (path != NULL && path[0] != '\0')
    return load_file(path, key, err);
  return TB_MASTERKEY_NONE;
}

bool
tb_masterkey_create_file(const char *path, char **err)
{
  unsigned char key[TB_CRYPTO_KEY_LEN];
  char hex[2 * TB_CRYPTO_KEY_LEN + 2];
  bool ok = false;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST)
      return true;
    *err = tb_xasprintf("cannot create master key file %s: %s", path, strerror(errno));
    return false;
  }
  if (!tb_crypto_random(key, sizeof key)) {
    *err = tb_xstrdup("the random number generator failed");
    goto out;
  }
  tb_hex_encode(key, sizeof key, hex);
  size_t len = strlen(hex);
  hex[len++] = '\n';
  if (write(fd, hex, len) != (ssize_t)len || fsync(fd) != 0) {
    *err = tb_xasprintf("cannot write master key file %s: %s", path, strerror(errno));
    goto out;
  }
  ok = true;
out:
  OPENSSL_cleanse(key, sizeof key);
  OPENSSL_cleanse(hex, sizeof hex);
  close(fd);
  if (!ok)
    unlink(path);
  return ok;
}

char *
tb_masterkey_seal_endpoint_key(const unsigned char key[TB_CRYPTO_KEY_LEN], const char *plaintext,
                               const char *id, const char *base_url, char **origin)
{
  *origin = tb_egress_origin(base_url);
  if (*origin == NULL)
    return NULL;
  char *ad = tb_xasprintf("endpoint %s %s", id, *origin);
  char *sealed = tb_crypto_seal(key, plaintext, ad);
  free(ad);
  return sealed;
}

char *
tb_masterkey_open_endpoint_key(const unsigned char key[TB_CRYPTO_KEY_LEN], const char *sealed,
                               const char *id, const char *origin, const char *base_url,
                               const char **why)
{
  *why = "the stored endpoint key does not open with this master key";
  if (origin == NULL) /* legacy: sealed for the id alone */
    return tb_crypto_open(key, sealed, id);
  char *now = tb_egress_origin(base_url);
  if (now == NULL || strcmp(now, origin) != 0) {
    free(now);
    *why = "the stored endpoint key was set for another origin (scheme, host, port) than "
           "base_url: set api_key again";
    return NULL;
  }
  char *ad = tb_xasprintf("endpoint %s %s", id, origin);
  char *plain = tb_crypto_open(key, sealed, ad);
  free(ad);
  free(now);
  return plain;
}
