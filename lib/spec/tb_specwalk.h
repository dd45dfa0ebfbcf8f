/*
 * tb_specwalk: the walker, one for every table of fields (tb_spec.h's
 * struct tb_spec_field): a JSON object checked against a table, so the
 * rules of a field sit on one line (one row of the job table, of the api's
 * endpoint and key bodies: service/api_spec.c).  Values are copied into a
 * new normalized object ("8k" -> 8192, UUIDs lower-cased, scopes a mask);
 * nothing of the input is kept.  Every problem is an error of its own
 * {"field": path, "detail": why}: members no row names ("unknown field"),
 * required rows not given, values not of their row's type or range.  It
 * knows no table: the job spec's rules across fields are tb_spec's.
 */
#ifndef TB_SPECWALK_H
#define TB_SPECWALK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"
#include "spec/tb_spec.h"

/*
 * Checks obj against fields[0..n): each member's normalized value goes
 * into out, each problem into errors (paths under prefix when not NULL).
 * patch: nothing is required and NULLABLE fields may be null.
 */
void tb_specwalk_check(const json_t *obj, const struct tb_spec_field *fields, size_t n, bool patch,
                       const char *prefix, json_t *out, json_t *errors);

/*
 * Parses text (a JSON object) against fields: on TB_SPEC_OK *out is a new
 * normalized object; else *errors is a new array.  Exactly one is set.
 * Duplicate keys are an error.
 */
enum tb_spec_rc tb_specwalk_run(const char *text, size_t len, const struct tb_spec_field *fields,
                                size_t n, bool patch, json_t **out, json_t **errors) TB_MUST_CHECK;

/* Appends {"field": field, "detail": the formatted text (at most 255
 * bytes)} to errors; a field name that is not UTF-8 is written as
 * "(field name not UTF-8)". */
void tb_specwalk_error(json_t *errors, const char *field, const char *fmt, ...) TB_PRINTF(3, 4);

/* True when url is an http:// or https:// URL with a host, no credentials,
 * no whitespace or control characters, at most TB_SPEC_MAX_URL long (the
 * rule of TB_SPEC_URL and TB_SPEC_URLS rows). */
bool tb_specwalk_url_ok(const char *url);

#endif
