/*
 * tb_deliver: outbound webhooks, the dispatcher and its payload.
 *
 * Deliveries are rows of webhook_deliveries (sql/0006_hooks_deliveries.sql),
 * queued by a trigger in the same transaction that ends a job, so no worker
 * code knows about them and a failing receiver can never block a worker.
 *
 * The dispatcher is one thread (started by tokbench-api; any number of api
 * replicas may run one each) with its own database connection:
 *   1. claim up to `batch` due rows with one UPDATE ... FOR UPDATE SKIP
 *      LOCKED (status 'sending', a lease of lease_s, attempts + 1); rows whose
 *      lease expired (a dispatcher died mid-POST) are due again;
 *   2. for each: build the payload on the first attempt and store it (every
 *      retry sends the same bytes), open the callback's secret with the
 *      master key, sign per Standard Webhooks (webhook-id = the delivery id),
 *      POST with libcurl (total timeout, no redirects, http/https only, the
 *      answer's body discarded past a small cap, never stored; the address
 *      checked by the egress policy, tb_egress);
 *   3. record the outcome, conditional on the claim still being ours:
 *      2xx -> 'succeeded'; otherwise 'pending' again with next_attempt_at =
 *      now + tb_webhook_backoff_ms(attempts, backoff_base_ms), or 'failed'
 *      when the schedule is over (about a day with the 30 s base).
 * It sleeps on LISTEN tb_deliveries with a polling floor of poll_ms.
 *
 * Secrets: opened for the one POST, wiped right after; never logged.  Logs
 * name the delivery, job and outcome, never the URL's query or the secret.
 */
#ifndef TB_DELIVER_H
#define TB_DELIVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_crypto.h"
#include "db/tb_db.h"
#include "base/tb_util.h"

#define TB_DELIVER_PAYLOAD_MAX (256u * 1024u) /* payload text cap */
#define TB_DELIVER_REGRESSIONS_MAX 50         /* regressions copied into a payload */
#define TB_DELIVER_ERROR_MAX 300              /* last_error text cap */

struct tb_deliver_opts {
  const char *db_url;
  /* TB_CRYPTO_KEY_LEN bytes (copied), or NULL: deliveries cannot be signed
   * and fail with that reason. */
  const unsigned char *master_key;
  /* Base of the links in payloads, e.g. "https://tokbench.example.com". */
  const char *public_url;
  int64_t backoff_base_ms; /* first retry delay; 30000 in production */
  long timeout_ms;         /* per POST, all included */
  unsigned batch;          /* rows claimed at once */
  int poll_ms;             /* polling floor */
  int lease_s;             /* a claim's lease */
};

/*
 * The payload of a job's end (new string, caller frees), Standard Webhooks
 * style: {"type": event, "timestamp": RFC 3339, "data": {job_id, project_id,
 * endpoint_id, state, error, labels, cells_done, cells_total, created_at,
 * started_at, finished_at, figures, regressions, regressed, links}}.
 * job: an object with those job columns (borrowed); result: the result
 * document or NULL (borrowed).  figures: see tb_deliver_figures.  links:
 * job, result, report (HTML) and report_md under public_url.
 */
char *tb_deliver_payload(const char *event, const json_t *job, const json_t *result,
                         const char *public_url, int64_t now_us);

/*
 * Key figures of a result document (new object): cells_valid,
 * cells_over_capacity, cells_error, best_decode {context, concurrency,
 * total_tps}, best_prefill {context, prompt_tps}, single_stream {context,
 * output_tps (or total_tps)} at concurrency 1 and the smallest context.
 * Members are left out when the result does not have them.
 */
json_t *tb_deliver_figures(const json_t *result);

struct tb_deliver;
/* Starts the dispatcher thread.  NULL with *err (caller frees) when it cannot
 * start (the database is reached lazily: a down database is retried). */
struct tb_deliver *tb_deliver_start(const struct tb_deliver_opts *o, char **err) TB_MUST_CHECK;
/* Stops it (an in-flight POST is aborted) and frees everything. */
void tb_deliver_stop(struct tb_deliver *d);

#endif
