/*
 * worker_key: the master key that opens endpoint API keys sealed by the api
 * (tb_crypto_seal, associated data = the endpoint id).  Given as 64 hex
 * characters in TOKBENCH_MASTER_KEY or in the file TOKBENCH_MASTER_KEY_FILE.
 * Every copy of the text is wiped.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "worker.h"

/* A key file holds 64 hex characters and maybe a newline and blanks. */
#define KEY_FILE_MAX 256

int
worker_master_key(const char *hex_text, const char *path, unsigned char key[TB_CRYPTO_KEY_LEN],
                  char **err)
{
  if (hex_text != NULL && hex_text[0] != '\0') {
    if (!tb_crypto_parse_key(hex_text, key)) {
      *err = tb_xstrdup("TOKBENCH_MASTER_KEY must be 64 hex characters");
      return -1;
    }
    return 1;
  }
  if (path == NULL || path[0] == '\0')
    return 0;
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    *err = tb_xasprintf("cannot read TOKBENCH_MASTER_KEY_FILE %s: %s", path, strerror(errno));
    return -1;
  }
  char buf[KEY_FILE_MAX + 1];
  size_t n = fread(buf, 1, KEY_FILE_MAX, f);
  bool too_long = n == KEY_FILE_MAX && fgetc(f) != EOF;
  fclose(f);
  buf[n] = '\0';
  int rc = 1;
  if (too_long || !tb_crypto_parse_key(buf, key)) {
    *err = tb_xasprintf("TOKBENCH_MASTER_KEY_FILE %s must hold 64 hex characters", path);
    rc = -1;
  }
  OPENSSL_cleanse(buf, sizeof buf);
  return rc;
}
