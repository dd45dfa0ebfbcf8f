/*
 * tb_cfg: configuration from environment variables and an optional file.
 *
 * Each binary declares its keys in a static table (name = the environment
 * variable, default, help).  Values come, in increasing precedence, from the
 * default, the file (KEY=VALUE lines, '#' comments, optional quotes), and the
 * environment.  Unknown keys in the file are an error: a typo must not pass
 * silently.  --help prints the table.
 */
#ifndef TB_CFG_H
#define TB_CFG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/tb_util.h"

struct tb_cfg_key {
  const char *name; /* e.g. "TOKBENCH_LISTEN" */
  const char *def;  /* default value, or NULL for none */
  const char *help;
  bool secret; /* never printed (help shows only whether it is set) */
};

struct tb_cfg;

/* Loads the keys from file (may be NULL: none) and the environment.
 * Returns a new config (free with tb_cfg_free) or NULL with *err set (caller
 * frees).  A file that sets a secret key (tb_cfg_key.secret) away from its
 * default is refused when group or others may read it. */
struct tb_cfg *tb_cfg_load(const struct tb_cfg_key *keys, size_t n_keys, const char *file,
                           char **err) TB_MUST_CHECK;
/* Parses the text of a config file into cfg (used by tb_cfg_load; exported
 * for tests and fuzzing).  Returns false with *err set on a bad line. */
bool tb_cfg_parse_text(struct tb_cfg *cfg, const char *text, char **err) TB_MUST_CHECK;
/* A new config holding the defaults only. */
struct tb_cfg *tb_cfg_new(const struct tb_cfg_key *keys, size_t n_keys);
/* The value of a declared key (borrowed) or NULL when unset.  Asking for an
 * undeclared key is a programming error (abort). */
const char *tb_cfg_get(const struct tb_cfg *cfg, const char *name);
/* Integer value in [min, max]; false with *err set when it is not one. */
bool tb_cfg_get_int(const struct tb_cfg *cfg, const char *name, int64_t min, int64_t max,
                    int64_t *out, char **err) TB_MUST_CHECK;
/* A switch: "1" true, "0" false; unset or empty: the key's default (false
 * when it has none).  false with *err set on any other value. */
bool tb_cfg_get_bool(const struct tb_cfg *cfg, const char *name, bool *out,
                     char **err) TB_MUST_CHECK;
/* Sets a value (copied). */
void tb_cfg_set(struct tb_cfg *cfg, const char *name, const char *value);
/* Prints the keys, defaults and help. */
void tb_cfg_help(const struct tb_cfg_key *keys, size_t n_keys, FILE *out);
/* The same lines without the heading (for a command without --config). */
void tb_cfg_help_keys(const struct tb_cfg_key *keys, size_t n_keys, FILE *out);
void tb_cfg_free(struct tb_cfg *cfg);

/*
 * The key a file holds (--api-key-file): its first line, without the line
 * end and trailing blanks.  Refused (NULL with *err, a new string naming the
 * fix) when the file is not a regular file, when group or others may read
 * it, when it is empty or when its first line is longer than max bytes.
 * Returns a new string; the caller wipes (OPENSSL_cleanse) and frees it.
 */
char *tb_cfg_read_key_file(const char *path, size_t max, char **err) TB_MUST_CHECK;

/*
 * The command line of a daemon: [--config FILE] [--help] [--version].
 * --help prints "usage: prog ...", about and the key table to stdout.
 * Returns -1 to go on, with *config set from --config or TOKBENCH_CONFIG
 * (NULL: none); else the exit status to end with (0 after --help or
 * --version, 2 after a bad argument).
 */
int tb_cfg_daemon_args(int argc, char **argv, const char *prog, const char *about,
                       const struct tb_cfg_key *keys, size_t n_keys, const char **config);

#endif
