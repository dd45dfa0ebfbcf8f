/*
 * tb_json: lenient reads of members of JSON documents that come from outside
 * (result documents, imports, endpoint answers): a missing member or one of
 * the wrong type reads as absent, never as an error or a crash.
 */
#ifndef TB_JSON_H
#define TB_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* The string member k of o (borrowed), or NULL. */
const char *tb_json_str(const json_t *o, const char *k);
/* The number member k of o, or NAN when absent, not a number or not finite. */
double tb_json_num(const json_t *o, const char *k);
/* The integer member k of o (an integral real counts too); false if none. */
bool tb_json_int(const json_t *o, const char *k, int64_t *out);
/* A cell's percentile p ("p50") of figure k: k's object member p, or k
 * itself when it is a plain number and p is "p50"; NAN when absent. */
double tb_json_pct(const json_t *cell, const char *k, const char *p);

#endif
