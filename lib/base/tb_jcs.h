/*
 * tb_jcs: the canonical form of a JSON value, RFC 8785 (the JSON
 * Canonicalization Scheme), which a signed result is signed over
 * (tb_sign; docs/verify.md says the same for a reader).
 *
 *   - no white space;
 *   - object members sorted by their names as arrays of UTF-16 code units
 *     (not by UTF-8 bytes: U+1F600, the surrogates D83D DE00, sorts before
 *     U+FB33), recursively; arrays keep their order;
 *   - strings as ECMAScript's JSON.stringify writes them: \" \\ \b \f \n
 *     \r \t, other code points below U+0020 as \u00xx (lower-case hex),
 *     everything else (U+007F, U+2028, non-ASCII) as its UTF-8 bytes;
 *   - literals null, true, false;
 *   - numbers as ECMAScript's Number.prototype.toString writes a double
 *     (ES 2019 7.1.12.1): the fewest significant digits that read back as
 *     the same double (of two such, the nearer), in fixed notation from
 *     1e-6 up to below 1e21 ("0.000001", "123.5", "100"), else exponential
 *     with a sign ("1e+21", "1e-7", "1.5e+300"); -0 is "0".  An integer of
 *     jansson's (json_integer) is that double too: up to 2^53 in magnitude it
 *     is written as the integer itself; beyond, as the double nearest to it
 *     (2^68 is "295147905179352830000"), as JCS (I-JSON) requires.
 * NaN and the infinities are not JSON; jansson never holds them.
 */
#ifndef TB_JCS_H
#define TB_JCS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

/* The longest text tb_jcs_number writes, with its NUL
 * ("-1.7976931348623157e+308" is 24 characters). */
#define TB_JCS_NUMBER_MAX 32

/*
 * The canonical text of v (borrowed) as a new NUL-terminated string, its
 * length in *len (may be NULL).  NULL only when v is NULL or holds a value
 * that has no canonical form (a non-finite real).  Caller frees.
 */
char *tb_jcs_dumps(const json_t *v, size_t *len) TB_MUST_CHECK;

/* d as ECMAScript's Number.prototype.toString writes it, into out
 * (TB_JCS_NUMBER_MAX bytes).  false for NaN and the infinities. */
bool tb_jcs_number(double d, char out[TB_JCS_NUMBER_MAX]) TB_MUST_CHECK;

/* The order of two member names (UTF-8, lengths given) by their UTF-16
 * code units: <0, 0 or >0 as for qsort. */
int tb_jcs_key_cmp(const char *a, size_t alen, const char *b, size_t blen);

#endif
