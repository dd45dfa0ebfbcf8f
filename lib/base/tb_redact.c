/*
 * tb_redact: see tb_redact.h.
 *
 * The command is cut into words the way a shell would at its simplest
 * (whitespace outside quotes); each word is either a secret flag (the next
 * word is its value), NAME=value with a secret NAME (flag or environment),
 * or copied.  The output is at most len(cmd) * len(mark) bytes, so one
 * allocation of that size holds any result.
 */
#include "base/tb_redact.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "base/tb_util.h"

/* Words of a flag name that make its value a secret. */
static const char *const secret_words[] = {
  "key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials",
};

/* Substrings of an environment name that make its value a secret. */
static const char *const secret_env[] = { "KEY", "TOKEN", "SECRET", "PASSWORD" };

#define NAME_MAX_LEN 128 /* longer names are not names we know */

bool
tb_redact_secret_flag(const char *s, size_t n)
{
  if (n < 2 || s[0] != '-')
    return false;
  while (n > 0 && *s == '-') {
    s++;
    n--;
  }
  if (n == 0 || n >= NAME_MAX_LEN)
    return false;
  size_t i = 0;
  while (i < n) {
    size_t w = i;
    while (i < n && s[i] != '-' && s[i] != '_') {
      if (!isalnum((unsigned char)s[i]) && s[i] != '.')
        return false;
      i++;
    }
    size_t wl = i - w;
    for (size_t k = 0; k < TB_ARRAY_LEN(secret_words); k++)
      if (strlen(secret_words[k]) == wl && strncasecmp(s + w, secret_words[k], wl) == 0)
        return true;
    i++; /* the separator */
  }
  return false;
}

bool
tb_redact_secret_env(const char *s, size_t n)
{
  char up[NAME_MAX_LEN];
  if (n == 0 || n >= sizeof up || isdigit((unsigned char)s[0]))
    return false;
  for (size_t i = 0; i < n; i++) {
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
      return false;
    up[i] = (char)toupper((unsigned char)s[i]);
  }
  up[n] = '\0';
  for (size_t i = 0; i < TB_ARRAY_LEN(secret_env); i++)
    if (strstr(up, secret_env[i]) != NULL)
      return true;
  return false;
}

static void
put(char *out, size_t *o, const char *s, size_t n)
{
  memcpy(out + *o, s, n);
  *o += n;
}

/* One word [w, w+n) that is not a flag's pending value: NAME=value with a
 * secret NAME is redacted after the '='; --flag=NAME=value looks at NAME. */
static void
word(const char *w, size_t n, char *out, size_t *o)
{
  const char *eq = memchr(w, '=', n);
  while (eq != NULL) {
    size_t nl = (size_t)(eq - w);
    if (tb_redact_secret_flag(w, nl) || tb_redact_secret_env(w, nl)) {
      put(out, o, w, nl + 1);
      put(out, o, TB_REDACT_MARK, sizeof TB_REDACT_MARK - 1);
      return;
    }
    if (nl == 0 || w[0] != '-')
      break; /* only a flag may carry an assignment as its value */
    put(out, o, w, nl + 1);
    n -= nl + 1;
    w = eq + 1;
    eq = memchr(w, '=', n);
  }
  put(out, o, w, n);
}

char *
tb_redact_command(const char *cmd)
{
  if (cmd == NULL)
    return NULL;
  size_t n = strlen(cmd);
  /* worst case: every one-byte word becomes the mark */
  char *out = tb_xmalloc(n * (sizeof TB_REDACT_MARK) + 1);
  size_t o = 0, i = 0;
  bool pending = false; /* the word before was a secret flag */
  while (i < n) {
    if (isspace((unsigned char)cmd[i]) || cmd[i] == '\\') {
      out[o++] = cmd[i++];
      continue;
    }
    size_t s = i;
    char q = 0;
    while (i < n && (q != 0 || !isspace((unsigned char)cmd[i]))) {
      if (q == 0 && (cmd[i] == '"' || cmd[i] == '\''))
        q = cmd[i];
      else if (q != 0 && cmd[i] == q)
        q = 0;
      i++;
    }
    size_t len = i - s;
    if (pending) {
      put(out, &o, TB_REDACT_MARK, sizeof TB_REDACT_MARK - 1);
      pending = false;
    } else if (tb_redact_secret_flag(cmd + s, len)) {
      put(out, &o, cmd + s, len);
      pending = true;
    } else {
      word(cmd + s, len, out, &o);
    }
  }
  out[o] = '\0';
  return out;
}

json_t *
tb_redact_document(const json_t *doc)
{
  if (doc == NULL)
    return NULL;
  const char *lc = json_string_value(json_object_get(doc, "launch_command"));
  if (lc == NULL)
    return json_incref((json_t *)doc);
  char *red = tb_redact_command(lc);
  if (strcmp(red, lc) == 0) {
    free(red);
    return json_incref((json_t *)doc);
  }
  json_t *copy = json_copy((json_t *)doc);
  json_object_set_new(copy, "launch_command", json_string(red));
  free(red);
  return copy;
}
