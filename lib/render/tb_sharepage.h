/*
 * tb_sharepage: what a share link's page adds to a report rendered by the
 * report's own renderer (tb_report, tb_cmpreport, tb_seriesview), never a
 * second renderer of it (issue 35, item 2; docs/reports.md, "Share links"):
 *
 *   html  in the head, after TB_RENDER_HEAD_MARK: <meta name="robots"
 *         content="noindex">, a no-referrer policy (the link's token is in
 *         its URL) and the Open Graph tags a link preview reads: og:type,
 *         og:site_name, og:title, og:description (the headline figure),
 *         og:url when the service has a public URL; after
 *         TB_RENDER_BODY_MARK, when the document was signed, the line
 *         "signed by this service, key <kid>" (and when);
 *   md    the same line under the first heading, when signed;
 *   csv, json  nothing: the bytes are the renderer's.
 *
 * The page stays static: no script, nothing remote.  Every text is escaped
 * for its format.  Thread-safe: no global state.
 */
#ifndef TB_SHAREPAGE_H
#define TB_SHAREPAGE_H

#include <jansson.h>
#include <stddef.h>

#include "render/tb_report.h"
#include "base/tb_util.h"

/* What a share shows: a job's result, a comparison (tb_compare), an
 * endpoint's history (tb_seriesview). */
enum tb_sharepage_kind {
  TB_SHAREPAGE_JOB = 0,
  TB_SHAREPAGE_COMPARE,
  TB_SHAREPAGE_SERIES,
};

/* What the page says of itself (all borrowed; NULL: absent). */
struct tb_sharepage {
  const char *title;       /* og:title */
  const char *description; /* og:description */
  const char *url;         /* og:url */
  const char *kid;         /* the signing key's id: the document was signed */
  const char *signed_at;
};

/* The title and the headline of a document of kind (new strings, caller
 * frees both), e.g. "Step-3.7-Flash-FP8 on H200 NVL ×2: tokbench report" and
 * "Peak decode 1,310.0 tok/s (8K × 32) · peak prefill 24.6K tok/s (8K) ·
 * vllm · 0.26.1 · complete".  doc is borrowed, read with every type
 * checked. */
void tb_sharepage_describe(const json_t *doc, enum tb_sharepage_kind kind, char **title,
                           char **description);

/* body (len bytes, borrowed) in format f with the page's additions (see
 * the file comment): a new string (caller frees) and its length in
 * *out_len. */
char *tb_sharepage_wrap(enum tb_report_format f, const char *body, size_t len,
                        const struct tb_sharepage *p, size_t *out_len) TB_MUST_CHECK;

#endif
