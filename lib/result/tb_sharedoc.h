/*
 * tb_sharedoc: a document (a job's result, a comparison, an endpoint's
 * history) cut down to what a share link may show (issue 35, item 2;
 * docs/reports.md, "Share links").  A shared page shows nothing but what
 * it shares, so the document is stripped before any renderer sees it, and
 * every format (html, md, csv and json alike) is written from the stripped
 * copy:
 *
 *   - the endpoint's address and secrets: in every "endpoint" object the
 *     members url, base_url, telemetry_url; anywhere the members api_key,
 *     api_key_sealed, api_key_set, base_url, telemetry_url, secret, token,
 *     token_hash;
 *   - the project and its keys: project_id, key_id, key_name, created_by,
 *     endpoint_id, anywhere;
 *   - other jobs: every "job_id" that is not one of the shared jobs' (the
 *     ids of an endpoint history's points), "project_frontier" (the
 *     project's other jobs), and a verdict's "base_job_id" (told as "not
 *     shared": the verdict still reads that it compared with a last good
 *     job);
 *   - private labels: their keys in every "labels" object;
 *   - and, whatever member holds it (an error message, a note, a launch
 *     command, an imported document's own fields), every occurrence of a
 *     hidden string: the endpoint's URL, its origin and host, its API key,
 *     the values of private labels.  A hidden string of
 *     TB_SHAREDOC_SUBSTR_MIN bytes or more is replaced wherever it occurs
 *     inside a string (by TB_SHAREDOC_REDACTED); a shorter one only where it
 *     is the whole string.  An object member whose name holds one is
 *     dropped.
 *
 * A top-level "signature" ({alg, kid, signed_at, value}) covers the
 * document as it was signed, not the stripped copy, so it is moved to
 * "shared"."original_signature": the copy does not pass itself off as
 * signed, and the page can still say who signed the original
 * (tb_sharedoc_signature).  "shared" also says what the copy is.
 *
 * Pure: JSON in, JSON out, no I/O.  Thread-safe: no global state.
 */
#ifndef TB_SHAREDOC_H
#define TB_SHAREDOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

/* Hidden strings of at least this many bytes are replaced inside strings;
 * shorter ones only where they are the whole string. */
#define TB_SHAREDOC_SUBSTR_MIN 3
/* What a hidden string becomes. */
#define TB_SHAREDOC_REDACTED "<redacted>"
/* Hidden strings held, at most (the rest are ignored: more than two
 * endpoints' worth and sixteen private labels' values never occur). */
#define TB_SHAREDOC_HIDE_MAX 48
/* Nesting the walk follows; a deeper object or array is emptied. */
#define TB_SHAREDOC_DEPTH_MAX 64

/* What to hide: fill with the tb_sharedoc_hide_* calls on a zeroed struct,
 * free with tb_sharedoc_hide_clear. */
struct tb_sharedoc_hide {
  char *hidden[TB_SHAREDOC_HIDE_MAX]; /* owned, wiped on clear */
  size_t nhidden;
  char *jobs[2]; /* the shared jobs' ids (owned): the job_id members kept */
  size_t njobs;
  json_t *private_keys; /* array of label keys (owned), or NULL */
};

/* Hides s (copied; NULL or "" does nothing).  Hidden strings are replaced
 * in the order they were added. */
void tb_sharedoc_hide_str(struct tb_sharedoc_hide *h, const char *s);
/* Hides a URL: the whole of it without a trailing '/', its authority
 * (host:port) and its host, longest first (the order they are replaced
 * in).  NULL does nothing. */
void tb_sharedoc_hide_url(struct tb_sharedoc_hide *h, const char *url);
/* Keeps the job_id members equal to id (at most two ids). */
void tb_sharedoc_keep_job(struct tb_sharedoc_hide *h, const char *id);
/* The private label keys: keys (borrowed, a JSON array of strings; copied)
 * and, for each of them that labels (borrowed, an object, may be NULL)
 * holds, its value hidden. */
void tb_sharedoc_hide_labels(struct tb_sharedoc_hide *h, const json_t *keys, const json_t *labels);
void tb_sharedoc_hide_clear(struct tb_sharedoc_hide *h);

/* Strips doc (edited in place) as the file comment says.  doc may be any
 * JSON value; a top-level object also gets "shared". */
void tb_sharedoc_strip(json_t *doc, const struct tb_sharedoc_hide *h);

/* s with every hidden string replaced (new string, caller frees). */
char *tb_sharedoc_scrub(const struct tb_sharedoc_hide *h, const char *s) TB_MUST_CHECK;

/* The signature of doc: its top-level "signature" object, or, once
 * stripped, "shared"."original_signature".  True when it has string
 * members kid and value; *kid and *signed_at (NULL when absent) are
 * borrowed from doc. */
bool tb_sharedoc_signature(const json_t *doc, const char **kid, const char **signed_at);

#endif
