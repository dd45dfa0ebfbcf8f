/*
 * worker_shard: what the worker running a job does with a sharded cell once
 * its shards are stored (issue 24): the merge.  Every shard's samples are
 * read back from PostgreSQL (tb_shards_collect), decoded and merged exactly
 * (tb_samples: the union, never an average of percentiles), written as the
 * cell's figures by the one-process writer, with where each shard ran and
 * the shards' start-skew self-check (tb_samples_cell_shards).
 */
#include "worker_shard.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tb_log.h"
#include "net/tb_masterkey.h"
#include "result/tb_result.h"
#include "spec/tb_plan.h"
#include "result/tb_samples.h"
#include "worker.h"

#include <time.h>

int
worker_shard_merge(struct tb_db *db, const struct tb_shards_key *key, double window_s,
                   const char *client_ready, json_t *cell, char *err, size_t errlen)
{
  struct tb_shard_row *rows = NULL;
  int64_t t_merge = tb_time_mono_ns();
  int n = tb_shards_collect(db, key, &rows);
  if (n <= 0)
    return n;
  struct tb_samples merged;
  tb_samples_init(&merged);
  struct tb_samples_shard *where = tb_xcalloc((size_t)n, sizeof *where);
  int rc = 1;
  for (int i = 0; i < n && rc == 1; i++) {
    struct tb_samples one;
    char why[200];
    if (!tb_samples_decode(rows[i].samples, rows[i].len, &one, why, sizeof why)) {
      snprintf(err, errlen, "shard %d (worker %s): %s", rows[i].shard,
               rows[i].worker ? rows[i].worker : "?", why);
      rc = WORKER_SHARD_BAD;
    } else if (!tb_samples_merge(&merged, &one, why, sizeof why)) {
      snprintf(err, errlen, "shard %d: %s", rows[i].shard, why);
      rc = WORKER_SHARD_BAD;
    }
    tb_samples_free(&one);
    where[i] = (struct tb_samples_shard){ .worker = rows[i].worker,
                                          .host = rows[i].host,
                                          .skew_us = rows[i].skew_us,
                                          .uncert_us = rows[i].uncert_ns / 1000 };
  }
  if (rc == 1 && !tb_samples_cell(cell, &merged, client_ready, err, errlen))
    rc = WORKER_SHARD_BAD;
  if (rc == 1) {
    (void)tb_samples_cell_shards(cell, where, (size_t)n, window_s);
    /* read, decode, merge and write: what sharding costs the cell */
    json_object_set_new(json_object_get(cell, "shards"), "merge_ms",
                        json_real((double)(tb_time_mono_ns() - t_merge) / 1e6));
  }
  free(where);
  tb_samples_free(&merged);
  tb_shards_rows_free(rows, n);
  return rc;
}

/* ----------------------------------------------------------- a shard's run */

/* how often a waiting shard reads its barrier, and renews its lease */
#define SHARD_POLL_NS (20LL * 1000000)
#define SHARD_BEAT_NS (1000LL * 1000000)

struct shard_run {
  struct worker_ctx *w;
  struct tb_shard *s;
  struct tb_clock_offset off;
  bool ready_sent;
  int64_t next_poll_ns, next_beat_ns;
  bool lost; /* the barrier failed, or this shard's lease is gone */
};

/* The engine's start hook: the first call says ready (with this process's
 * clock offset), later ones read the barrier until t0 is set. */
static int
shard_start(void *cls, int64_t now_ns, int64_t *t0_ns, char *why, size_t len)
{
  struct shard_run *sr = cls;
  struct worker_ctx *w = sr->w;
  if (!sr->ready_sent) {
    int rc = tb_shards_clock(w->db, 8, &sr->off);
    if (rc == 1)
      rc = tb_shards_ready(w->db, sr->s, &sr->off, w->shard.lead_s);
    if (rc != 1) {
      snprintf(why, len, "%s",
               rc == 0 ? "the barrier failed before this shard was ready"
                       : "database error at ready");
      return -1;
    }
    sr->ready_sent = true;
  }
  if (now_ns < sr->next_poll_ns)
    return 0;
  sr->next_poll_ns = now_ns + SHARD_POLL_NS;
  char st[16] = "", reason[160] = "";
  int64_t t0_us = 0;
  int rc = tb_shards_barrier(w->db, &sr->s->key, st, &t0_us, reason, sizeof reason);
  if (rc < 0)
    return 0; /* the next turn tries again */
  if (rc == 0 || strcmp(st, "failed") == 0 || strcmp(st, "merged") == 0) {
    snprintf(why, len, "barrier %s%s%s", rc == 0 ? "gone" : st, reason[0] ? ": " : "", reason);
    return -1;
  }
  if (strcmp(st, "started") != 0)
    return 0;
  *t0_ns = tb_clock_to_local_ns(&sr->off, t0_us);
  return 1;
}

/* The engine's cancel poll (every 100 ms): the shard's lease, renewed once
 * a second; a lost lease or a failed barrier stops the shard. */
static bool
shard_cancelled(void *cls)
{
  struct shard_run *sr = cls;
  if (*sr->w->stopping)
    return true;
  int64_t now = tb_time_mono_ns();
  if (now < sr->next_beat_ns)
    return sr->lost;
  sr->next_beat_ns = now + SHARD_BEAT_NS;
  if (tb_shards_beat(sr->w->db, sr->s, sr->w->shard.lease_s) == 0)
    sr->lost = true;
  return sr->lost;
}

static bool
shard_on_cell(void *cls, const json_t *cell)
{
  (void)cls;
  (void)cell;
  return true;
}

/* The job's spec cut to this shard's one decode cell. */
static bool
shard_spec(const struct tb_shard *s, struct tb_spec *spec, int64_t *ctx, char **err)
{
  const json_t *job = json_object_get(s->spec, "job");
  const json_t *shares = json_object_get(s->spec, "shares");
  if (!tb_spec_parse(spec, job, err))
    return false;
  *ctx = json_integer_value(json_object_get(s->spec, "context"));
  int64_t conc = json_integer_value(json_array_get(shares, (size_t)s->shard));
  if (conc < 1 || *ctx < 0) {
    *err = tb_xstrdup("the barrier's spec has no share for this shard");
    return false;
  }
  spec->contexts = (struct tb_spec_list){ .v = { *ctx }, .n = 1, .given = true };
  spec->concurrency = (struct tb_spec_list){ .v = { conc }, .n = 1, .given = true };
  spec->prefill_contexts = (struct tb_spec_list){ .n = 0, .given = true };
  spec->repeats = 1;
  spec->rates.n = 0;              /* no rate cells ... */
  spec->sweep.attainment_pct = 0; /* ... and no sweep: the one decode cell */
  return true;
}

/* Runs claimed shard s: its endpoint, its cell with the common start, its
 * samples stored.  Every failure is the barrier's: the job's worker sees
 * the lease lapse or the barrier fail and measures the cell again. */
static void
shard_run(struct worker_ctx *w, struct tb_shard *s)
{
  struct tb_queue_endpoint ep;
  memset(&ep, 0, sizeof ep);
  struct tb_spec spec;
  tb_spec_init(&spec);
  char *api_key = NULL, *err = NULL;
  json_t *result = NULL;
  struct tb_samples samples;
  tb_samples_init(&samples);
  const char *endpoint_id = json_string_value(json_object_get(s->spec, "endpoint_id"));
  const char *run_id = json_string_value(json_object_get(s->spec, "run_id"));
  int64_t ctx = 0;
  if (endpoint_id == NULL || tb_queue_load_endpoint(w->db, endpoint_id, &ep) != 1 || ep.deleted) {
    err = tb_xstrdup("cannot load the endpoint");
    goto out;
  }
  const char *why = NULL;
  if (ep.api_key_sealed != NULL && ep.api_key_sealed[0] != '\0' &&
      (!w->have_master_key ||
       (api_key = tb_masterkey_open_endpoint_key(w->master_key, ep.api_key_sealed, endpoint_id,
                                                 ep.api_key_origin, ep.base_url, &why)) == NULL)) {
    err = tb_xstrdup(why ? why : "no master key");
    goto out;
  }
  if (!shard_spec(s, &spec, &ctx, &err))
    goto out;
  struct shard_run sr = { .w = w, .s = s };
  struct tb_engine_shard sh = { .start = shard_start, .cls = &sr, .samples = &samples };
  struct tb_engine_target target = w->engine;
  target.base_url = ep.base_url;
  target.run_id = run_id; /* the job's: the shards share its prompts */
  target.shard = &sh;
  struct tb_engine_hooks hooks = { .cls = &sr,
                                   .on_cell = shard_on_cell,
                                   .cancelled = shard_cancelled };
  enum tb_engine_status st = tb_engine_run(&spec, &target, api_key, NULL, &hooks, &result, &err);
  const json_t *cells = json_object_get(result, "cells");
  const json_t *cell = json_array_get(cells, json_array_size(cells) - 1);
  const char *status = json_string_value(json_object_get(cell, "status"));
  if (st != TB_ENGINE_OK || status == NULL || strcmp(status, "valid") != 0) {
    if (err == NULL)
      err = tb_xstrdup(json_string_value(json_object_get(cell, "reason"))
                         ? json_string_value(json_object_get(cell, "reason"))
                         : "the shard's cell did not measure");
    goto out;
  }
  unsigned char *blob;
  size_t len;
  tb_samples_encode(&samples, &blob, &len);
  int rc = tb_shards_store(w->db, s, blob, len, sh.skew_ns / 1000);
  free(blob);
  tb_log(rc == 1 ? TB_LOG_INFO : TB_LOG_WARN, rc == 1 ? "shard stored" : "shard not stored", "job",
         TB_LS, s->key.job_id, "cell", TB_LS, s->key.cell_key, "shard", TB_LI, (int64_t)s->shard,
         "attempt", TB_LI, (int64_t)s->key.attempt, "bytes", TB_LI, (int64_t)len, "skew_us", TB_LI,
         sh.skew_ns / 1000, NULL);
out:
  if (err != NULL)
    tb_log(TB_LOG_WARN, "shard failed", "job", TB_LS, s->key.job_id, "cell", TB_LS, s->key.cell_key,
           "shard", TB_LI, (int64_t)s->shard, "error", TB_LS, err, NULL);
  if (api_key != NULL) {
    OPENSSL_cleanse(api_key, strlen(api_key));
    free(api_key);
  }
  tb_queue_endpoint_clear(&ep);
  tb_spec_free(&spec);
  tb_samples_free(&samples);
  json_decref(result);
  free(err);
}

bool
worker_shard_try(struct worker_ctx *w)
{
  char host[TB_SHARDS_HOST_MAX + 1] = "";
  if (gethostname(host, sizeof host - 1) != 0)
    host[0] = '\0';
  struct tb_shard s;
  if (tb_shards_claim(w->db, w->worker_id, host, w->shard.lease_s, &s) != 1)
    return false;
  tb_log(TB_LOG_INFO, "shard claimed", "job", TB_LS, s.key.job_id, "cell", TB_LS, s.key.cell_key,
         "shard", TB_LI, (int64_t)s.shard, "of", TB_LI, (int64_t)s.nshards, "attempt", TB_LI,
         (int64_t)s.key.attempt, NULL);
  shard_run(w, &s);
  tb_shard_clear(&s);
  return true;
}

/* ------------------------------------------------------- the job's worker */

/* how often the job's worker looks at a barrier */
#define COORD_POLL_MS 200

static void
coord_sleep(void)
{
  struct timespec ts = { 0, COORD_POLL_MS * 1000000L };
  nanosleep(&ts, NULL);
}

int
worker_shard_count(const struct worker_shard_cfg *cfg, int64_t spec_shards, int64_t conc)
{
  return tb_plan_shards(spec_shards, conc, cfg->max_streams);
}

/* Ends a barrier; a close the database does not take is left to
 * tb_shards_expire (its shards' leases lapse) and logged. */
static void
coord_close(struct worker_ctx *w, const struct tb_queue_lease *l, const struct tb_shards_key *k,
            const char *state, const char *reason)
{
  if (tb_shards_close(w->db, l, k, state, reason) != 1)
    tb_log(TB_LOG_WARN, "sharded cell: barrier not closed", "job", TB_LS, k->job_id, "cell", TB_LS,
           k->cell_key, "state", TB_LS, state, NULL);
}

/* One attempt: its barrier opened, watched until merged or failed.
 * Returns 1 merged (cell filled), 0 failed (why), -1 cancelled. */
static int
coord_attempt(const struct worker_shard_job *j, const struct tb_shards_key *k, int n,
              const json_t *bspec, json_t *cell, char *why, size_t len)
{
  struct worker_ctx *w = j->w;
  int rc = tb_shards_open(w->db, j->lease, k, n, bspec, w->shard.barrier_s);
  if (rc != 1) {
    snprintf(why, len, "%s", rc == 0 ? "the job's lease was lost" : "cannot open the barrier");
    return rc == 0 ? -1 : 0;
  }
  const struct tb_spec *sp = j->spec;
  double budget =
    w->shard.barrier_s + w->shard.lead_s + sp->settle_s + sp->ready_timeout_s + sp->duration_s + 30;
  int64_t deadline = tb_time_mono_ns() + (int64_t)(budget * 1e9);
  for (;;) {
    if (j->cancelled(j->cls)) {
      coord_close(w, j->lease, k, "failed", "cancelled");
      return -1;
    }
    if (tb_shards_expire(w->db, j->lease->job_id) < 0)
      tb_log(TB_LOG_DEBUG, "sharded cell: expiry check failed (tried again)", NULL);
    char st[16] = "", reason[160] = "";
    int64_t t0;
    if (tb_shards_barrier(w->db, k, st, &t0, reason, sizeof reason) == 1) {
      if (strcmp(st, "failed") == 0) {
        snprintf(why, len, "%s", reason);
        return 0;
      }
      if (strcmp(st, "started") == 0) {
        char err[200];
        int m = worker_shard_merge(w->db, k, sp->duration_s, TB_ENGINE_SHARD_READY, cell, err,
                                   sizeof err);
        if (m == 1) {
          coord_close(w, j->lease, k, "merged", NULL);
          return 1;
        }
        if (m == WORKER_SHARD_BAD) {
          coord_close(w, j->lease, k, "failed", err);
          snprintf(why, len, "%s", err);
          return 0;
        }
      }
    }
    if (tb_time_mono_ns() > deadline) {
      snprintf(why, len, "shards not done %.0f s after the barrier opened", budget);
      coord_close(w, j->lease, k, "failed", why);
      return 0;
    }
    coord_sleep();
  }
}

bool
worker_shard_cell(const struct worker_shard_job *j, int64_t ctx, int64_t conc, json_t *cell)
{
  struct worker_ctx *w = j->w;
  /* the job's shards: an integer, "auto" (0), or absent (1) */
  const json_t *sv = json_object_get(j->job_spec, "shards");
  int64_t want = json_is_integer(sv) ? json_integer_value(sv) : json_is_string(sv) ? 0 : 1;
  int n = worker_shard_count(&w->shard, want, conc);
  if (n <= 1 || j->spec->repeats > 1)
    return false;
  json_t *shares = json_array();
  for (int k = 0; k < n; k++)
    json_array_append_new(shares, json_integer(tb_plan_shard_share(conc, n, k)));
  json_t *bspec =
    json_pack("{s:O, s:s, s:s, s:I, s:o}", "job", j->job_spec, "endpoint_id", j->endpoint_id,
              "run_id", j->run_id, "context", (json_int_t)ctx, "shares", shares);
  struct tb_shards_key k = { .attempt = 0 };
  snprintf(k.job_id, sizeof k.job_id, "%s", j->lease->job_id);
  snprintf(k.cell_key, sizeof k.cell_key, "a%d/decode/%lld/%lld", j->lease->attempt, (long long)ctx,
           (long long)conc);
  char why[200] = "";
  int rc = 0;
  for (int a = 1; a <= w->shard.attempts && rc == 0; a++) {
    k.attempt = a;
    rc = coord_attempt(j, &k, n, bspec, cell, why, sizeof why);
    if (rc == 0)
      tb_log(TB_LOG_WARN, "sharded cell attempt failed: measured again whole", "job", TB_LS,
             k.job_id, "cell", TB_LS, k.cell_key, "attempt", TB_LI, (int64_t)a, "reason", TB_LS,
             why, NULL);
  }
  json_decref(bspec);
  if (rc != 1) {
    char reason[300];
    snprintf(reason, sizeof reason, "%s: %s",
             rc < 0 ? "sharded cell stopped" : "sharded cell failed on every attempt", why);
    tb_result_cell_set_status(cell, "error", reason);
  }
  return true;
}
