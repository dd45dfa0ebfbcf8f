/*
 * tb_cfg: see tb_cfg.h.  Values are copied strings, one per declared key.
 */
#include "base/tb_cfg.h"

#include <errno.h>
#include <getopt.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TB_CFG_MAX_FILE (1024 * 1024) /* a config file is small */
#define TB_CFG_MAX_LINE 4096

struct tb_cfg {
  const struct tb_cfg_key *keys;
  size_t n_keys;
  char **values;
};

static ssize_t
find_key(const struct tb_cfg *cfg, const char *name, size_t len)
{
  for (size_t i = 0; i < cfg->n_keys; i++)
    if (strlen(cfg->keys[i].name) == len && strncmp(cfg->keys[i].name, name, len) == 0)
      return (ssize_t)i;
  return -1;
}

static void
set_value(struct tb_cfg *cfg, size_t i, const char *v, size_t len)
{
  if (cfg->values[i] != NULL) {
    OPENSSL_cleanse(cfg->values[i], strlen(cfg->values[i]));
    free(cfg->values[i]);
  }
  cfg->values[i] = v ? tb_xstrndup(v, len) : NULL;
}

struct tb_cfg *
tb_cfg_new(const struct tb_cfg_key *keys, size_t n_keys)
{
  struct tb_cfg *cfg = tb_xcalloc(1, sizeof *cfg);
  cfg->keys = keys;
  cfg->n_keys = n_keys;
  cfg->values = tb_xcalloc(n_keys, sizeof(char *));
  for (size_t i = 0; i < n_keys; i++)
    if (keys[i].def != NULL)
      cfg->values[i] = tb_xstrdup(keys[i].def);
  return cfg;
}

bool
tb_cfg_parse_text(struct tb_cfg *cfg, const char *text, char **err)
{
  const char *p = text;
  unsigned lineno = 0;
  while (*p != '\0') {
    lineno++;
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    const char *next = eol ? eol + 1 : p + len;
    if (len > TB_CFG_MAX_LINE) {
      *err = tb_xasprintf("line %u: longer than %d bytes", lineno, TB_CFG_MAX_LINE);
      return false;
    }
    /* trim */
    while (len > 0 && (*p == ' ' || *p == '\t')) {
      p++;
      len--;
    }
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\r'))
      len--;
    if (len == 0 || *p == '#') {
      p = next;
      continue;
    }
    const char *eq = memchr(p, '=', len);
    if (eq == NULL) {
      *err = tb_xasprintf("line %u: expected KEY=VALUE", lineno);
      return false;
    }
    size_t klen = (size_t)(eq - p);
    while (klen > 0 && (p[klen - 1] == ' ' || p[klen - 1] == '\t'))
      klen--;
    const char *v = eq + 1;
    size_t vlen = len - (size_t)(v - p);
    while (vlen > 0 && (*v == ' ' || *v == '\t')) {
      v++;
      vlen--;
    }
    if (vlen >= 2 && (v[0] == '"' || v[0] == '\'') && v[vlen - 1] == v[0]) {
      v++;
      vlen -= 2;
    }
    ssize_t i = find_key(cfg, p, klen);
    if (i < 0) {
      *err = tb_xasprintf("line %u: unknown key %.*s", lineno, (int)(klen > 64 ? 64 : klen), p);
      return false;
    }
    if (memchr(v, '\0', vlen) != NULL) {
      *err = tb_xasprintf("line %u: NUL byte in value", lineno);
      return false;
    }
    set_value(cfg, (size_t)i, v, vlen);
    p = next;
  }
  return true;
}

/* *exposed: the file may be read by group or others (or is not a regular
 * file we can stat). */
static char *
read_file(const char *path, bool *exposed, char **err)
{
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    *err = tb_xasprintf("%s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  *exposed = fstat(fileno(f), &st) != 0 || (S_ISREG(st.st_mode) && (st.st_mode & 077) != 0);
  char *buf = tb_xmalloc(TB_CFG_MAX_FILE + 1);
  size_t n = fread(buf, 1, TB_CFG_MAX_FILE + 1, f);
  int bad = ferror(f);
  fclose(f);
  if (bad || n > TB_CFG_MAX_FILE) {
    *err = tb_xasprintf("%s: %s", path, bad ? "read error" : "file too large");
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  if (strlen(buf) != n) {
    *err = tb_xasprintf("%s: NUL byte in file", path);
    free(buf);
    return NULL;
  }
  return buf;
}

struct tb_cfg *
tb_cfg_load(const struct tb_cfg_key *keys, size_t n_keys, const char *file, char **err)
{
  struct tb_cfg *cfg = tb_cfg_new(keys, n_keys);
  if (file != NULL && *file != '\0') {
    bool exposed = false;
    char *text = read_file(file, &exposed, err);
    if (text == NULL) {
      tb_cfg_free(cfg);
      return NULL;
    }
    char *perr = NULL;
    bool ok = tb_cfg_parse_text(cfg, text, &perr);
    OPENSSL_cleanse(text, strlen(text));
    free(text);
    if (!ok) {
      *err = tb_xasprintf("%s: %s", file, perr);
      free(perr);
      tb_cfg_free(cfg);
      return NULL;
    }
    /* a file that holds a secret must be its owner's alone (issue 13) */
    for (size_t i = 0; exposed && i < n_keys; i++) {
      const char *v = cfg->values[i];
      if (keys[i].secret && v != NULL && (keys[i].def == NULL || strcmp(v, keys[i].def) != 0)) {
        *err = tb_xasprintf("%s sets %s, a secret, and is readable by group or others: "
                            "chmod 600 %s",
                            file, keys[i].name, file);
        tb_cfg_free(cfg);
        return NULL;
      }
    }
  }
  for (size_t i = 0; i < n_keys; i++) {
    const char *v = getenv(keys[i].name);
    if (v != NULL)
      set_value(cfg, i, v, strlen(v));
  }
  return cfg;
}

const char *
tb_cfg_get(const struct tb_cfg *cfg, const char *name)
{
  ssize_t i = find_key(cfg, name, strlen(name));
  if (i < 0) {
    fprintf(stderr, "tb_cfg_get: undeclared key %s\n", name);
    abort();
  }
  return cfg->values[i];
}

bool
tb_cfg_get_int(const struct tb_cfg *cfg, const char *name, int64_t min, int64_t max, int64_t *out,
               char **err)
{
  const char *v = tb_cfg_get(cfg, name);
  if (v == NULL || !tb_parse_i64(v, min, max, out)) {
    *err =
      tb_xasprintf("%s must be an integer in [%lld, %lld]", name, (long long)min, (long long)max);
    return false;
  }
  return true;
}

bool
tb_cfg_get_bool(const struct tb_cfg *cfg, const char *name, bool *out, char **err)
{
  const char *v = tb_cfg_get(cfg, name); /* aborts on an undeclared key */
  ssize_t i = find_key(cfg, name, strlen(name));
  if (v == NULL || v[0] == '\0')
    v = cfg->keys[i].def != NULL ? cfg->keys[i].def : "0";
  if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
    *err = tb_xasprintf("%s must be 0 or 1", name);
    return false;
  }
  *out = v[0] == '1';
  return true;
}

void
tb_cfg_set(struct tb_cfg *cfg, const char *name, const char *value)
{
  ssize_t i = find_key(cfg, name, strlen(name));
  if (i < 0)
    abort();
  set_value(cfg, (size_t)i, value, value ? strlen(value) : 0);
}

void
tb_cfg_help(const struct tb_cfg_key *keys, size_t n_keys, FILE *out)
{
  fprintf(out, "Configuration (environment variables, or KEY=VALUE lines in the file\n"
               "named by --config; the environment wins):\n");
  tb_cfg_help_keys(keys, n_keys, out);
}

void
tb_cfg_help_keys(const struct tb_cfg_key *keys, size_t n_keys, FILE *out)
{
  for (size_t i = 0; i < n_keys; i++) {
    fprintf(out, "  %-28s %s", keys[i].name, keys[i].help);
    if (keys[i].def != NULL && !keys[i].secret)
      fprintf(out, " (default: %s)", keys[i].def);
    fputc('\n', out);
  }
}

void
tb_cfg_free(struct tb_cfg *cfg)
{
  if (cfg == NULL)
    return;
  for (size_t i = 0; i < cfg->n_keys; i++)
    set_value(cfg, i, NULL, 0);
  free(cfg->values);
  free(cfg);
}

static void
daemon_usage(FILE *out, const char *prog, const char *about, const struct tb_cfg_key *keys,
             size_t n_keys)
{
  fprintf(out, "usage: %s [--config FILE] [--help] [--version]\n\n%s\n\n", prog, about);
  tb_cfg_help(keys, n_keys, out);
}

int
tb_cfg_daemon_args(int argc, char **argv, const char *prog, const char *about,
                   const struct tb_cfg_key *keys, size_t n_keys, const char **config)
{
  static const struct option opts[] = {
    { "config", required_argument, NULL, 'c' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
  };
  *config = getenv("TOKBENCH_CONFIG");
  int o;
  while ((o = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
    switch (o) {
    case 'c': *config = optarg; break;
    case 'h': daemon_usage(stdout, prog, about, keys, n_keys); return 0;
    case 'V': printf("%s %s\n", prog, TB_VERSION); return 0;
    default: daemon_usage(stderr, prog, about, keys, n_keys); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[optind]);
    return 2;
  }
  return -1;
}

char *
tb_cfg_read_key_file(const char *path, size_t max, char **err)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    *err = tb_xasprintf("%s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    *err = tb_xasprintf("%s is not a regular file", path);
    return NULL;
  }
  if ((st.st_mode & 077) != 0) {
    fclose(f);
    *err =
      tb_xasprintf("%s holds a key and is readable by group or others: chmod 600 %s", path, path);
    return NULL;
  }
  char *buf = tb_xcalloc(1, max + 2);
  size_t n = fread(buf, 1, max + 1, f);
  fclose(f);
  buf[strcspn(buf, "\r\n")] = '\0';
  size_t len = strlen(buf);
  while (len > 0 && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
    buf[--len] = '\0';
  char *key = NULL;
  if (n > max && len == n)
    *err = tb_xasprintf("%s: the key is longer than %zu bytes", path, max);
  else if (len == 0)
    *err = tb_xasprintf("%s: empty", path);
  else
    key = tb_xstrdup(buf);
  OPENSSL_cleanse(buf, max + 2);
  free(buf);
  return key;
}
