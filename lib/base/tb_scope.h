/*
 * tb_scope: what an API key may do and for how long.  Scopes are read,
 * write and admin (admin implies write implies read), written as a comma
 * list; an expiry is a duration of at most ten years.  Pure: the key store
 * (db/tb_auth), the walker of spec tables (spec/tb_specwalk: a key body) and
 * `tokbench keys` parse them the same way.
 */
#ifndef TB_SCOPE_H
#define TB_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

/* Longest accepted expiry: ten years. */
#define TB_SCOPE_MAX_EXPIRY_S (10LL * 366 * 86400)

enum tb_scope {
  TB_SCOPE_NONE = 0,
  TB_SCOPE_READ = 1,
  TB_SCOPE_WRITE = 2,
  TB_SCOPE_ADMIN = 4,
};

/* Parses a comma list of scope names ("read,write").  False on an unknown
 * name or an empty list. */
bool tb_scope_parse(const char *csv, unsigned *mask) TB_MUST_CHECK;
/* The scopes a mask grants once implications are applied. */
unsigned tb_scope_effective(unsigned mask);
/* The mask as a comma list ("read,write,admin") into buf (>= 32 bytes). */
void tb_scope_csv(unsigned mask, char *buf, size_t len);

/* Parses a duration: "3600", "45s", "15m", "12h", "30d", "2w" into seconds
 * in [1, TB_SCOPE_MAX_EXPIRY_S].  False on junk. */
bool tb_scope_parse_duration(const char *s, int64_t *seconds) TB_MUST_CHECK;

#endif
