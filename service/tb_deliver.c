/*
 * tb_deliver: the outbound webhook dispatcher (see tb_deliver.h).
 *
 * The SQL of each step sits beside the C that binds it.  Every write after
 * the claim names (id, attempts) so that a dispatcher whose lease expired
 * (it hung past lease_s) cannot overwrite the outcome of the one that took
 * the row over.
 */
#include "tb_deliver.h"
#include "result/tb_regdoc.h"

#include <curl/curl.h>
#include <math.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/tb_egress.h"
#include "base/tb_log.h"
#include "tb_metrics.h"
#include "tb_webhook.h"

#define RESPONSE_CAP 4096 /* bytes of a receiver's answer we read */

/* ---- payload ---------------------------------------------------------- */

static double
num(const json_t *o, const char *k)
{
  const json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

json_t *
tb_deliver_figures(const json_t *result)
{
  json_t *f = json_object();
  const json_t *cells = json_object_get(result, "cells");
  if (!json_is_array(cells))
    return f;
  int64_t valid = 0, over = 0, error = 0;
  const json_t *best_dec = NULL, *best_pre = NULL, *single = NULL;
  size_t i;
  const json_t *c;
  json_array_foreach (cells, i, c) {
    const char *st = json_string_value(json_object_get(c, "status"));
    const char *phase = json_string_value(json_object_get(c, "phase"));
    if (st == NULL || phase == NULL)
      continue;
    if (strcmp(st, "over_capacity") == 0) {
      over++;
      continue;
    }
    if (strcmp(st, "valid") != 0) {
      error++;
      continue;
    }
    valid++;
    if (strcmp(phase, "decode") == 0) {
      double t = num(c, "total_tps");
      if (!isnan(t) && (best_dec == NULL || t > num(best_dec, "total_tps")))
        best_dec = c;
      if (num(c, "concurrency") == 1 &&
          (single == NULL || num(c, "context") < num(single, "context")))
        single = c;
    } else if (strcmp(phase, "prefill") == 0) {
      double t = num(c, "prompt_tps");
      if (!isnan(t) && (best_pre == NULL || t > num(best_pre, "prompt_tps")))
        best_pre = c;
    }
  }
  json_object_set_new(f, "cells_valid", json_integer(valid));
  json_object_set_new(f, "cells_over_capacity", json_integer(over));
  json_object_set_new(f, "cells_error", json_integer(error));
  if (best_dec != NULL)
    json_object_set_new(f, "best_decode",
                        json_pack("{s:O?,s:O?,s:O?}", "context",
                                  json_object_get(best_dec, "context"), "concurrency",
                                  json_object_get(best_dec, "concurrency"), "total_tps",
                                  json_object_get(best_dec, "total_tps")));
  if (best_pre != NULL)
    json_object_set_new(f, "best_prefill",
                        json_pack("{s:O?,s:O?}", "context", json_object_get(best_pre, "context"),
                                  "prompt_tps", json_object_get(best_pre, "prompt_tps")));
  if (single != NULL) {
    const json_t *tps = json_object_get(single, "output_tps");
    if (!json_is_number(tps))
      tps = json_object_get(single, "total_tps");
    json_object_set_new(
      f, "single_stream",
      json_pack("{s:O?,s:O?}", "context", json_object_get(single, "context"), "tps", tps));
  }
  return f;
}

char *
tb_deliver_payload(const char *event, const json_t *job, const json_t *result,
                   const char *public_url, int64_t now_us)
{
  /* schedule_id, schedule_slot: the schedule whose run the job was (issue
   * 35), null for any other job */
  static const char *const copy[] = { "project_id", "endpoint_id", "state",       "error",
                                      "labels",     "cells_done",  "cells_total", "created_at",
                                      "started_at", "finished_at", "schedule_id", "schedule_slot" };
  char ts[40];
  tb_time_rfc3339(now_us, ts, sizeof ts);
  const char *id = json_string_value(json_object_get(job, "id"));
  json_t *data = json_object();
  json_object_set_new(data, "job_id", id != NULL ? json_string(id) : json_null());
  for (size_t i = 0; i < TB_ARRAY_LEN(copy); i++) {
    json_t *v = json_object_get(job, copy[i]);
    json_object_set(data, copy[i], v != NULL ? v : json_null());
  }
  json_object_set_new(data, "figures", tb_deliver_figures(result));
  /* regressions: set on the result by the regression check (tb_regress) */
  const json_t *regs = NULL;
  bool regressed = tb_regdoc_regressed(json_object_get(result, "regressions"), &regs);
  json_t *rcopy = json_array();
  size_t nregs = json_array_size(regs);
  for (size_t i = 0; i < nregs && i < TB_DELIVER_REGRESSIONS_MAX; i++) {
    json_t *g = json_deep_copy(json_array_get(regs, i));
    char *why = json_is_object(g) ? tb_regdoc_why(g) : NULL;
    if (why != NULL)
      json_object_set_new(g, "why", json_string(why));
    free(why);
    json_array_append_new(rcopy, g);
  }
  json_object_set_new(data, "regressions", rcopy);
  json_object_set_new(data, "regressions_total", json_integer((json_int_t)nregs));
  json_object_set_new(data, "regressed", json_boolean(regressed));
  if (id != NULL) {
    const char *base = public_url != NULL ? public_url : "";
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
      bl--;
    char *job_url = tb_xasprintf("%.*s/v1/jobs/%s", (int)bl, base, id);
    char *res = tb_xasprintf("%s/result", job_url);
    char *rep = tb_xasprintf("%s/report?format=html", job_url);
    char *md = tb_xasprintf("%s/report?format=md", job_url);
    json_object_set_new(data, "links",
                        json_pack("{s:s,s:s,s:s,s:s}", "job", job_url, "result", res, "report", rep,
                                  "report_md", md));
    free(job_url);
    free(res);
    free(rep);
    free(md);
  }
  json_t *doc = json_pack("{s:s,s:s,s:o}", "type", event != NULL ? event : "job.ended", "timestamp",
                          ts, "data", data);
  char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(doc);
  if (text != NULL && strlen(text) > TB_DELIVER_PAYLOAD_MAX) {
    /* a huge label set or error text: drop the bulky members, keep the verdict */
    free(text);
    json_t *small =
      json_pack("{s:s,s:s,s:{s:s?,s:O?,s:b,s:I}}", "type", event != NULL ? event : "job.ended",
                "timestamp", ts, "data", "job_id", id, "state", json_object_get(job, "state"),
                "regressed", regressed, "regressions_total", (json_int_t)nregs);
    text = json_dumps(small, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(small);
  }
  return text;
}

/* ---- dispatcher ------------------------------------------------------- */

struct tb_deliver {
  struct tb_deliver_opts o;
  char *db_url, *public_url;
  unsigned char key[TB_CRYPTO_KEY_LEN];
  bool has_key;
  pthread_t thread;
  atomic_bool stop;
  struct tb_metric *m_total, *m_seconds;
};

static const struct tb_db_stmt claim_stmt = {
  "deliver_claim",
  "UPDATE webhook_deliveries d SET status = 'sending', attempts = d.attempts + 1,"
  " lease_until = now() + make_interval(secs => $2::int), updated_at = now()"
  " WHERE d.id IN (SELECT id FROM webhook_deliveries"
  "   WHERE (status = 'pending' AND next_attempt_at <= now())"
  "      OR (status = 'sending' AND lease_until < now())"
  "   ORDER BY next_attempt_at LIMIT $1::int FOR UPDATE SKIP LOCKED)"
  " RETURNING d.id, d.job_id, d.callback_id, d.url, d.event, d.payload, d.attempts,"
  "   (SELECT c.secret_sealed FROM callbacks c WHERE c.id = d.callback_id) AS secret_sealed",
};

static const struct tb_db_stmt job_stmt = {
  "deliver_job",
  "SELECT jsonb_build_object('id', id, 'project_id', project_id, 'endpoint_id', endpoint_id,"
  " 'state', state, 'error', error, 'labels', labels, 'cells_done', cells_done,"
  " 'cells_total', cells_total, 'created_at', created_at, 'started_at', started_at,"
  " 'finished_at', finished_at, 'schedule_id', schedule_id, 'schedule_slot', schedule_slot)::text"
  " AS job, result::text AS result"
  " FROM jobs WHERE id = $1",
};

static const struct tb_db_stmt store_payload_stmt = {
  "deliver_store_payload",
  "UPDATE webhook_deliveries SET payload = $3 WHERE id = $1 AND attempts = $2::int"
  " AND status = 'sending' AND payload IS NULL",
};

static const struct tb_db_stmt done_stmt = {
  "deliver_done",
  "UPDATE webhook_deliveries SET status = $3, response_code = $4::int, last_error = $5,"
  " lease_until = NULL, updated_at = now(),"
  " next_attempt_at = CASE WHEN $3 = 'pending'"
  "   THEN now() + make_interval(secs => $6::double precision / 1000) ELSE next_attempt_at END,"
  " delivered_at = CASE WHEN $3 = 'succeeded' THEN now() ELSE NULL END"
  " WHERE id = $1 AND attempts = $2::int AND status = 'sending'",
};

static int
progress_cb(void *cls, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
  struct tb_deliver *d = cls;
  (void)dt;
  (void)dn;
  (void)ut;
  (void)un;
  return atomic_load(&d->stop) ? 1 : 0;
}

static size_t
discard_cb(char *p, size_t size, size_t n, void *cls)
{
  size_t *seen = cls;
  (void)p;
  *seen += size * n;
  return *seen > RESPONSE_CAP ? 0 : size * n; /* stop reading a chatty receiver */
}

/* POSTs payload; returns the HTTP status (0: no answer, err filled). */
static long
post(struct tb_deliver *d, const char *url, const char *id, int64_t ts, const char *sig,
     const char *payload, char *err, size_t err_len)
{
  long status = 0;
  size_t seen = 0;
  char ebuf[CURL_ERROR_SIZE] = "";
  struct curl_slist *h = NULL;
  char *hid = tb_xasprintf("webhook-id: %s", id);
  char *hts = tb_xasprintf("webhook-timestamp: %lld", (long long)ts);
  char *hsig = tb_xasprintf("webhook-signature: %s", sig);
  char *ua = tb_xasprintf("User-Agent: tokbench/%s", TB_VERSION);
  h = curl_slist_append(h, "Content-Type: application/json");
  h = curl_slist_append(h, hid);
  h = curl_slist_append(h, hts);
  h = curl_slist_append(h, hsig);
  h = curl_slist_append(h, ua);
  h = curl_slist_append(h, "Expect:");
  struct tb_egress_guard guard;
  CURL *e = curl_easy_init();
  if (e == NULL || h == NULL) {
    snprintf(err, err_len, "cannot set up libcurl");
    goto out;
  }
  if (!tb_egress_guard_easy(&guard, tb_egress_current(), e, url)) {
    snprintf(err, err_len, "%s", guard.why);
    goto out;
  }
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, payload);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard_cb);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &seen);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, d->o.timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, d->o.timeout_ms < 5000 ? d->o.timeout_ms : 5000L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, progress_cb);
  curl_easy_setopt(e, CURLOPT_XFERINFODATA, d);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
  CURLcode rc = curl_easy_perform(e);
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK && guard.refused) {
    snprintf(err, err_len, "%s", guard.why);
    status = 0;
  } else if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && status > 0)) {
    snprintf(err, err_len, "%s", ebuf[0] ? ebuf : curl_easy_strerror(rc));
    status = 0;
  }
out:
  if (e != NULL)
    curl_easy_cleanup(e);
  curl_slist_free_all(h);
  free(hid);
  free(hts);
  OPENSSL_cleanse(hsig, strlen(hsig));
  free(hsig);
  free(ua);
  return status;
}

/* Builds and stores the payload of a claimed row; new string or NULL (err). */
static char *
make_payload(struct tb_deliver *d, struct tb_db *db, const char *id, const char *attempts,
             const char *job_id, const char *event, char *err, size_t err_len)
{
  PGresult *res = NULL;
  char *text = NULL;
  const char *p[] = { job_id };
  int n = tb_db_exec(db, &job_stmt, 1, p, &res);
  if (n <= 0) {
    snprintf(err, err_len, n == 0 ? "the job is gone" : "database error reading the job");
    goto out;
  }
  json_error_t jerr;
  json_t *job = json_loads(tb_db_str(res, 0, "job"), 0, &jerr);
  const char *rtext = tb_db_str(res, 0, "result");
  json_t *result = rtext != NULL ? json_loads(rtext, 0, &jerr) : NULL;
  text = tb_deliver_payload(event, job, result, d->public_url, tb_time_real_us());
  json_decref(job);
  json_decref(result);
  if (text == NULL) {
    snprintf(err, err_len, "cannot encode the payload");
    goto out;
  }
  const char *sp[] = { id, attempts, text };
  if (tb_db_exec(db, &store_payload_stmt, 3, sp, NULL) < 0) {
    snprintf(err, err_len, "database error storing the payload");
    free(text);
    text = NULL;
  }
out:
  PQclear(res);
  return text;
}

static void
record(struct tb_db *db, const char *id, const char *attempts, const char *status, long code,
       const char *error, int64_t delay_ms)
{
  char cbuf[16], dbuf[24];
  snprintf(cbuf, sizeof cbuf, "%ld", code);
  snprintf(dbuf, sizeof dbuf, "%lld", (long long)(delay_ms > 0 ? delay_ms : 0));
  char ebuf[TB_DELIVER_ERROR_MAX + 1];
  if (error != NULL) {
    /* valid text for PostgreSQL: ASCII printable only */
    size_t j = 0;
    for (size_t i = 0; error[i] != '\0' && j < TB_DELIVER_ERROR_MAX; i++)
      ebuf[j++] = (error[i] >= 0x20 && error[i] < 0x7f) ? error[i] : '?';
    ebuf[j] = '\0';
  }
  const char *p[] = { id, attempts, status, code > 0 ? cbuf : NULL, error ? ebuf : NULL, dbuf };
  if (tb_db_exec(db, &done_stmt, 6, p, NULL) < 0)
    tb_log(TB_LOG_WARN, "delivery outcome not recorded (will be retried after its lease)",
           "delivery", TB_LS, id, NULL);
}

/* Works through one claimed row. */
static void
deliver_one(struct tb_deliver *d, struct tb_db *db, PGresult *res, int row)
{
  const char *id = tb_db_str(res, row, "id");
  const char *job_id = tb_db_str(res, row, "job_id");
  const char *url = tb_db_str(res, row, "url");
  const char *event = tb_db_str(res, row, "event");
  const char *attempts = tb_db_str(res, row, "attempts");
  const char *sealed = tb_db_str(res, row, "secret_sealed");
  const char *cb_id = tb_db_str(res, row, "callback_id");
  int64_t n_att = tb_db_i64(res, row, "attempts");
  char err[256] = "";
  char *payload = NULL, *secret = NULL;
  long code = 0;
  int64_t t0 = tb_time_mono_ns();
  if (sealed == NULL || cb_id == NULL) {
    record(db, id, attempts, "failed", 0, "the callback was deleted", 0);
    goto out;
  }
  if (!d->has_key) {
    snprintf(err, sizeof err, "no master key configured: cannot sign");
  } else if ((secret = tb_crypto_open(d->key, sealed, cb_id)) == NULL) {
    record(db, id, attempts, "failed", 0, "the callback's secret does not open", 0);
    goto out;
  }
  if (err[0] == '\0') {
    const char *stored = tb_db_str(res, row, "payload");
    payload = stored != NULL ? tb_xstrdup(stored)
                             : make_payload(d, db, id, attempts, job_id, event, err, sizeof err);
  }
  if (payload != NULL) {
    char sig[TB_WEBHOOK_SIG_MAX];
    int64_t ts = tb_time_real_us() / 1000000;
    if (!tb_webhook_sign_standard(secret, id, ts, payload, strlen(payload), sig))
      snprintf(err, sizeof err, "the callback's secret is not usable");
    else
      code = post(d, url, id, ts, sig, payload, err, sizeof err);
    OPENSSL_cleanse(sig, sizeof sig);
    if (code > 0 && (code < 200 || code > 299))
      snprintf(err, sizeof err, "HTTP %ld", code);
  }
  const char *outcome;
  if (code >= 200 && code <= 299) {
    outcome = "succeeded";
    record(db, id, attempts, "succeeded", code, NULL, 0);
  } else {
    int64_t delay = tb_webhook_backoff_ms((unsigned)n_att, d->o.backoff_base_ms);
    if (delay > 0) /* jitter up to +10%, so retries of a burst spread out */
      delay += (int64_t)((uint64_t)tb_time_mono_ns() % (uint64_t)(delay / 10 + 1));
    outcome = delay < 0 ? "failed" : "retry";
    record(db, id, attempts, delay < 0 ? "failed" : "pending", code, err, delay);
  }
  const char *lv[] = { outcome };
  tb_metric_add(d->m_total, lv, 1);
  tb_metric_observe(d->m_seconds, NULL, (double)(tb_time_mono_ns() - t0) / 1e9);
  tb_log(code >= 200 && code <= 299 ? TB_LOG_INFO : TB_LOG_WARN, "webhook delivery", "delivery",
         TB_LS, id, "job", TB_LS, job_id, "attempt", TB_LI, n_att, "status", TB_LI, (int64_t)code,
         "outcome", TB_LS, outcome, "error", TB_LS, err, NULL);
out:
  if (secret != NULL) {
    OPENSSL_cleanse(secret, strlen(secret));
    free(secret);
  }
  free(payload);
}

/* One pass: claims and delivers a batch.  Returns the rows claimed, or < 0. */
static int
run_once(struct tb_deliver *d, struct tb_db *db)
{
  char batch[16], lease[16];
  snprintf(batch, sizeof batch, "%u", d->o.batch);
  snprintf(lease, sizeof lease, "%d", d->o.lease_s);
  const char *p[] = { batch, lease };
  PGresult *res = NULL;
  int n = tb_db_exec(db, &claim_stmt, 2, p, &res);
  for (int i = 0; i < n && !atomic_load(&d->stop); i++)
    deliver_one(d, db, res, i);
  PQclear(res);
  return n;
}

static void *
dispatcher(void *cls)
{
  struct tb_deliver *d = cls;
  struct tb_db *db = NULL;
  bool listening = false;
  while (!atomic_load(&d->stop)) {
    if (db == NULL) {
      char *err = NULL;
      db = tb_db_connect(d->db_url, 0, &err);
      if (db == NULL) {
        free(err);
        for (int i = 0; i < 10 && !atomic_load(&d->stop); i++)
          nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
        continue;
      }
    }
    if (!listening)
      listening = tb_db_listen(db, "tb_deliveries");
    int n = run_once(d, db);
    if (n == (int)d->o.batch)
      continue; /* more may be due */
    tb_db_wait_notify(db, d->o.poll_ms, NULL, 0);
  }
  tb_db_close(db);
  return NULL;
}

struct tb_deliver *
tb_deliver_start(const struct tb_deliver_opts *o, char **err)
{
  static const double buckets[] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 };
  static const char *const labels[] = { "outcome", NULL };
  if (o->db_url == NULL || o->batch == 0 || o->poll_ms <= 0 || o->timeout_ms <= 0 ||
      o->backoff_base_ms <= 0 || o->lease_s <= 0) {
    *err = tb_xstrdup("tb_deliver: bad options");
    return NULL;
  }
  struct tb_deliver *d = tb_xcalloc(1, sizeof *d);
  d->o = *o;
  d->db_url = tb_xstrdup(o->db_url);
  d->public_url = tb_xstrdup(o->public_url != NULL ? o->public_url : "");
  d->o.db_url = d->db_url;
  d->o.public_url = d->public_url;
  d->o.master_key = NULL;
  if (o->master_key != NULL) {
    memcpy(d->key, o->master_key, TB_CRYPTO_KEY_LEN);
    d->has_key = true;
  }
  atomic_init(&d->stop, false);
  struct tb_metrics *m = tb_metrics_global();
  d->m_total = tb_metrics_family(m, TB_METRIC_COUNTER, "tokbench_webhook_deliveries_total",
                                 "Outbound webhook delivery attempts by outcome "
                                 "(succeeded, retry, failed).",
                                 labels, NULL, 0);
  d->m_seconds = tb_metrics_family(
    m, TB_METRIC_HISTOGRAM, "tokbench_webhook_delivery_duration_seconds",
    "Time of one outbound webhook delivery attempt.", NULL, buckets, TB_ARRAY_LEN(buckets));
  if (pthread_create(&d->thread, NULL, dispatcher, d) != 0) {
    *err = tb_xstrdup("tb_deliver: cannot start the thread");
    OPENSSL_cleanse(d->key, sizeof d->key);
    free(d->db_url);
    free(d->public_url);
    free(d);
    return NULL;
  }
  return d;
}

void
tb_deliver_stop(struct tb_deliver *d)
{
  if (d == NULL)
    return;
  atomic_store(&d->stop, true);
  pthread_join(d->thread, NULL);
  OPENSSL_cleanse(d->key, sizeof d->key);
  free(d->db_url);
  free(d->public_url);
  free(d);
}
