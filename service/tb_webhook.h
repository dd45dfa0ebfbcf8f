/*
 * tb_webhook: the pure parts of webhooks in and out (no I/O, no database).
 *
 * In (a CI system triggers a job through POST /v1/hooks/{id}):
 * - GitHub: `X-Hub-Signature-256: sha256=<64 hex>`, HMAC-SHA256 over the raw
 *   body with the hook's secret as the key (the secret's bytes as typed into
 *   GitHub's form).  GitHub sends no timestamp: replays are caught by the
 *   `X-GitHub-Delivery` id, stored per hook (hook_deliveries_in).
 * - Generic: `X-Tokbench-Timestamp: <unix seconds>` and
 *   `X-Tokbench-Signature: sha256=<64 hex>`, HMAC-SHA256 with the same key
 *   over "<timestamp>.<delivery id>.<raw body>" when the sender names its
 *   delivery (`X-Tokbench-Delivery`), else over "<timestamp>.<raw body>"
 *   (the first form, still accepted; an X-Tokbench-Delivery beside it is
 *   then not authenticated).  A timestamp more than TB_WEBHOOK_WINDOW_S
 *   away from now (either way) is refused; inside the window a replay is
 *   caught by the delivery id or, whatever the unsigned headers say, by the
 *   signature itself (tb_webhook_signature_digest; issue 13).
 * Signatures are compared as bytes in constant time (tb_ct_equal) after a
 * strict parse of the header; hex digits may be upper or lower case.
 *
 * Out (tokbench tells a receiver that a job ended): the Standard Webhooks
 * scheme (standardwebhooks.com): headers `webhook-id`, `webhook-timestamp`
 * (unix seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of
 * "<id>.<timestamp>.<body>">`, the key being the base64 part of a secret
 * written `whsec_<base64>` (a secret without the prefix is used as bytes).
 *
 * Retries: exponential backoff from a base delay (30 s in production),
 * doubling, capped at 480 x base (4 h), at most TB_WEBHOOK_MAX_ATTEMPTS
 * attempts: with the 30 s base the last attempt comes about 24 h after the
 * first (see tb_webhook_backoff_ms).
 */
#ifndef TB_WEBHOOK_H
#define TB_WEBHOOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define TB_WEBHOOK_WINDOW_S 300    /* generic form: replay window */
#define TB_WEBHOOK_MAX_ATTEMPTS 15 /* outbound: attempts before giving up */
#define TB_WEBHOOK_SIG_MAX 128     /* "v1," + 44 base64 + NUL fits easily */
#define TB_WEBHOOK_SECRET_MAX 256  /* longest secret we accept (bytes) */
#define TB_WEBHOOK_LABEL_MAX 256   /* longest label value taken from a payload */

enum tb_webhook_verdict {
  TB_WEBHOOK_OK = 0,
  TB_WEBHOOK_MISSING,       /* a required header is absent */
  TB_WEBHOOK_MALFORMED,     /* a header does not parse */
  TB_WEBHOOK_BAD_SIGNATURE, /* parses, does not match */
  TB_WEBHOOK_STALE,         /* generic form: timestamp outside the window */
};

/* A short English reason for a verdict (static string). */
const char *tb_webhook_verdict_str(enum tb_webhook_verdict v);

/* GitHub: verifies header (the X-Hub-Signature-256 value, may be NULL) over
 * body with key.  Constant time in the signature. */
enum tb_webhook_verdict tb_webhook_verify_github(const void *key, size_t key_len,
                                                 const char *header, const void *body,
                                                 size_t body_len) TB_MUST_CHECK;

/* Generic form: verifies sig_header (X-Tokbench-Signature) and ts_header
 * (X-Tokbench-Timestamp), both may be NULL, against body at time now_s
 * (unix seconds).  The signature is checked before the window, so an
 * attacker learns nothing about the clock from a forged request. */
enum tb_webhook_verdict tb_webhook_verify_generic(const void *key, size_t key_len,
                                                  const char *sig_header, const char *ts_header,
                                                  const void *body, size_t body_len,
                                                  int64_t now_s) TB_MUST_CHECK;

/* The value of X-Tokbench-Signature for body at timestamp ts, into out
 * (at least 72 bytes: "sha256=" + 64 hex + NUL).  For clients and tests. */
void tb_webhook_sign_generic(const void *key, size_t key_len, int64_t ts, const void *body,
                             size_t body_len, char out[72]);

/* Generic form with a delivery id (delivery: X-Tokbench-Delivery, may be
 * NULL): a signature over "<ts>.<delivery>.<body>" is checked first and,
 * when it matches, *delivery_signed is set true; else the first form
 * "<ts>.<body>" (tb_webhook_verify_generic), *delivery_signed false.  The
 * window is checked as there. */
enum tb_webhook_verdict tb_webhook_verify_generic_id(const void *key, size_t key_len,
                                                     const char *sig_header, const char *ts_header,
                                                     const char *delivery, const void *body,
                                                     size_t body_len, int64_t now_s,
                                                     bool *delivery_signed) TB_MUST_CHECK;

/* X-Tokbench-Signature over "<ts>.<delivery>.<body>" into out (72 bytes). */
void tb_webhook_sign_generic_id(const void *key, size_t key_len, int64_t ts, const char *delivery,
                                const void *body, size_t body_len, char out[72]);

/* The SHA-256 (64 hex + NUL) of the MAC bytes of a "sha256=<64 hex>"
 * signature header, whatever the case of its hex digits: one value per
 * signed request, kept to recognise it again.  False when it does not
 * parse. */
bool tb_webhook_signature_digest(const char *sig_header, char out[65]) TB_MUST_CHECK;

/* The HMAC key of an outbound secret: "whsec_<base64>" decodes the base64,
 * anything else is its own bytes.  Returns false when the secret is empty,
 * over TB_WEBHOOK_SECRET_MAX, or whsec_ with bad base64.  key holds
 * TB_WEBHOOK_SECRET_MAX bytes; the caller wipes it after use. */
bool tb_webhook_secret_key(const char *secret, unsigned char key[TB_WEBHOOK_SECRET_MAX],
                           size_t *key_len) TB_MUST_CHECK;

/* Standard Webhooks: the value of the webhook-signature header,
 * "v1,<base64>", into out.  False when the secret is unusable. */
bool tb_webhook_sign_standard(const char *secret, const char *msg_id, int64_t ts, const void *body,
                              size_t body_len, char out[TB_WEBHOOK_SIG_MAX]) TB_MUST_CHECK;

/* Standard Webhooks: verifies a webhook-signature header (space-separated
 * "v1,<base64>" entries, one match suffices) and the 5-minute window.  For
 * tests and for receivers written in C. */
enum tb_webhook_verdict tb_webhook_verify_standard(const char *secret, const char *msg_id,
                                                   const char *ts_header, const char *sig_header,
                                                   const void *body, size_t body_len,
                                                   int64_t now_s) TB_MUST_CHECK;

/* New secrets (caller wipes and frees), NULL when the RNG fails:
 * inbound hooks: "tbh_" + 40 characters of [A-Za-z0-9];
 * outbound callbacks: "whsec_" + base64 of 32 random bytes. */
char *tb_webhook_secret_new_inbound(void) TB_MUST_CHECK;
char *tb_webhook_secret_new_outbound(void) TB_MUST_CHECK;

/* Delay in milliseconds before attempt number attempts_done + 1, given that
 * attempts_done attempts (>= 1) have failed: base_ms * 2^(attempts_done-1),
 * capped at 480 * base_ms.  Returns -1 when attempts_done has reached
 * TB_WEBHOOK_MAX_ATTEMPTS (give up) or base_ms <= 0. */
int64_t tb_webhook_backoff_ms(unsigned attempts_done, int64_t base_ms);

/* Whether a GitHub event name is to be run for a hook configured with events
 * (a JSON array of names; "*" matches all).  NULL or non-array: false. */
bool tb_webhook_event_accepted(const json_t *events, const char *event);

/* Labels of a job started by a GitHub event: adds "ref", "sha" and
 * "repository" (and "event", "delivery" when given) to labels, from the
 * payload of push, workflow_run, workflow_job, pull_request, release,
 * create and check_suite/check_run events.  Values over
 * TB_WEBHOOK_LABEL_MAX or not strings are left out.  Never fails on a
 * malformed payload: it adds what it finds. */
void tb_webhook_github_labels(const json_t *payload, const char *event, const char *delivery,
                              json_t *labels);

#endif
