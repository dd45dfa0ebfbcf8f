/*
 * worker_shard: what the worker running a job does with a sharded cell
 * (issue 24): open its barrier, watch it, measure it again whole when an
 * attempt fails, and the merge once its shards are stored (a shard's own
 * run: worker_shrun.c).  Every shard's samples are
 * read back from PostgreSQL (tb_shards_collect), decoded and merged exactly
 * (tb_samples: the union, never an average of percentiles), written as the
 * cell's figures by the one-process writer, with where each shard ran and
 * the shards' start-skew self-check (tb_samples_cell_shards).
 */
#include "worker_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tb_log.h"
#include "result/tb_result.h"
#include "engine/tb_rate.h"
#include "result/tb_samples.h"
#include "spec/tb_plan.h"
#include "worker.h"

#include <time.h>

/* The stored shards of key, decoded and merged into *merged, where each
 * ran into *where (n of them, the rows' strings: free *rows after).
 * 1, 0 (not all done), WORKER_SHARD_BAD (err), or TB_DB_SOFT / HARD. */
static int
merge_rows(struct tb_db *db, const struct tb_shards_key *key, struct tb_samples *merged,
           struct tb_samples_shard **where, struct tb_shard_row **rows, int *nrows, char *err,
           size_t errlen)
{
  int n = *nrows = tb_shards_collect(db, key, rows);
  if (n <= 0)
    return n;
  *where = tb_xcalloc((size_t)n, sizeof **where);
  int rc = 1;
  for (int i = 0; i < n && rc == 1; i++) {
    struct tb_shard_row *r = &(*rows)[i];
    struct tb_samples one;
    char why[200];
    if (!tb_samples_decode(r->samples, r->len, &one, why, sizeof why)) {
      snprintf(err, errlen, "shard %d (worker %s): %s", r->shard, r->worker ? r->worker : "?", why);
      rc = WORKER_SHARD_BAD;
    } else if (!tb_samples_merge(merged, &one, why, sizeof why)) {
      snprintf(err, errlen, "shard %d: %s", r->shard, why);
      rc = WORKER_SHARD_BAD;
    }
    tb_samples_free(&one);
    (*where)[i] = (struct tb_samples_shard){ .worker = r->worker,
                                             .host = r->host,
                                             .skew_us = r->skew_us,
                                             .uncert_us = r->uncert_ns / 1000,
                                             .clock_offset_us = r->wall_offset_us,
                                             .has_clock_offset = r->has_wall };
  }
  return rc;
}

/* Both merges: spec NULL a decode cell's, else a rate cell's. */
static int
merge_cell(struct tb_db *db, const struct tb_shards_key *key, const struct tb_spec *spec,
           double window_s, const char *client_ready, json_t *cell, char *err, size_t errlen)
{
  int64_t t_merge = tb_time_mono_ns();
  struct tb_shard_row *rows = NULL;
  struct tb_samples_shard *where = NULL;
  struct tb_samples merged;
  tb_samples_init(&merged);
  int n = 0;
  int rc = merge_rows(db, key, &merged, &where, &rows, &n, err, errlen);
  if (rc == 1 && spec == NULL && !tb_samples_cell(cell, &merged, client_ready, err, errlen))
    rc = WORKER_SHARD_BAD;
  if (rc == 1 && spec != NULL && !tb_rate_cell_merged(spec, &merged, cell, err, errlen))
    rc = WORKER_SHARD_BAD;
  if (rc == 1) {
    (void)tb_samples_cell_shards(cell, where, (size_t)n, window_s);
    /* read, decode, merge and write: what sharding costs the cell */
    json_object_set_new(json_object_get(cell, "shards"), "merge_ms",
                        json_real((double)(tb_time_mono_ns() - t_merge) / 1e6));
  }
  free(where);
  tb_samples_free(&merged);
  if (n > 0)
    tb_shards_rows_free(rows, n);
  return rc;
}

int
worker_shard_merge(struct tb_db *db, const struct tb_shards_key *key, double window_s,
                   const char *client_ready, json_t *cell, char *err, size_t errlen)
{
  return merge_cell(db, key, NULL, window_s, client_ready, cell, err, errlen);
}

int
worker_shard_merge_rate(struct tb_db *db, const struct tb_shards_key *key,
                        const struct tb_spec *spec, double window_s, json_t *cell, char *err,
                        size_t errlen)
{
  return merge_cell(db, key, spec, window_s, NULL, cell, err, errlen);
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
/* What kind of cell a barrier measures: its window (the skew limit's and
 * the deadline's) and, for a rate cell, the spec its merge writes with. */
struct coord_kind {
  double window_s;
  bool rate;
  int64_t *window_ns; /* a decode cell's: its window here, when merged (or NULL) */
};

/* The merged attempt's window [t0, t0 + window_s] on this process's
 * monotonic clock: t0 (the database's us) through this worker's own offset
 * to the database's clock, read now, as each shard read its own. */
static void
coord_window(struct worker_ctx *w, const struct coord_kind *kind, int64_t t0_us)
{
  struct tb_clock_offset off;
  if (kind->window_ns == NULL || tb_shards_clock(w->db, 8, &off) != 1)
    return;
  kind->window_ns[0] = tb_clock_to_local_ns(&off, t0_us);
  kind->window_ns[1] = kind->window_ns[0] + (int64_t)(kind->window_s * 1e9);
}

static int
coord_attempt(const struct worker_shard_job *j, const struct tb_shards_key *k, int n,
              const json_t *bspec, const struct coord_kind *kind, json_t *cell, char *why,
              size_t len)
{
  struct worker_ctx *w = j->w;
  int rc = tb_shards_open(w->db, j->lease, k, n, bspec, w->shard.barrier_s);
  if (rc != 1) {
    snprintf(why, len, "%s", rc == 0 ? "the job's lease was lost" : "cannot open the barrier");
    return rc == 0 ? -1 : 0;
  }
  const struct tb_spec *sp = j->spec;
  /* a rate cell's last requests end after its arrivals: their timeouts */
  double tail = kind->rate ? sp->first_token_timeout_s + sp->stall_timeout_s +
                               (double)sp->conversation.turns * sp->conversation.think_time_s
                           : sp->settle_s + sp->ready_timeout_s;
  double budget = w->shard.barrier_s + w->shard.lead_s + tail + kind->window_s + 30;
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
        int m = kind->rate
                  ? worker_shard_merge_rate(w->db, k, sp, kind->window_s, cell, err, sizeof err)
                  : worker_shard_merge(w->db, k, kind->window_s, TB_ENGINE_SHARD_READY, cell, err,
                                       sizeof err);
        if (m == 1) {
          coord_close(w, j->lease, k, "merged", NULL);
          coord_window(w, kind, t0);
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

/* The attempts at a sharded cell (key prefix in k, bspec its barrier's
 * spec, n shards): each measured whole, up to TOKBENCH_SHARD_ATTEMPTS;
 * then the cell is an error with the last reason. */
static void
coord_cell(const struct worker_shard_job *j, struct tb_shards_key *k, int n, const json_t *bspec,
           const struct coord_kind *kind, json_t *cell)
{
  char why[200] = "";
  int rc = 0;
  for (int a = 1; a <= j->w->shard.attempts && rc == 0; a++) {
    k->attempt = a;
    rc = coord_attempt(j, k, n, bspec, kind, cell, why, sizeof why);
    if (rc == 0)
      tb_log(TB_LOG_WARN, "sharded cell attempt failed: measured again whole", "job", TB_LS,
             k->job_id, "cell", TB_LS, k->cell_key, "attempt", TB_LI, (int64_t)a, "reason", TB_LS,
             why, NULL);
  }
  if (rc != 1) {
    char reason[300];
    snprintf(reason, sizeof reason, "%s: %s",
             rc < 0 ? "sharded cell stopped" : "sharded cell failed on every attempt", why);
    tb_result_cell_set_status(cell, "error", reason);
  }
}

/* The job's shards: an integer, "auto" (0), or absent (1). */
static int64_t
spec_shards(const json_t *job_spec)
{
  const json_t *sv = json_object_get(job_spec, "shards");
  return json_is_integer(sv) ? json_integer_value(sv) : json_is_string(sv) ? 0 : 1;
}

/* What the spec asked of a merged cell's shards, in its shards object:
 * "asked" (N, or "auto" with the per-shard budget that decided N). */
static void
record_ask(json_t *cell, int64_t want, const char *budget_key, double budget)
{
  json_t *o = json_object_get(cell, "shards");
  if (o == NULL)
    return;
  json_object_set_new(o, "asked", want == 0 ? json_string("auto") : json_integer(want));
  if (want == 0)
    json_object_set_new(o, budget_key, json_real(budget));
}

bool
worker_shard_cell(const struct worker_shard_job *j, int64_t ctx, int64_t conc, json_t *cell,
                  int64_t window_ns[2])
{
  int64_t want = spec_shards(j->job_spec);
  int n = worker_shard_count(&j->w->shard, want, conc);
  if (n <= 1)
    return false;
  json_t *shares = json_array();
  for (int k = 0; k < n; k++)
    json_array_append_new(shares, json_integer(tb_plan_shard_share(conc, n, k)));
  json_t *bspec =
    json_pack("{s:O, s:s, s:s, s:I, s:o}", "job", j->job_spec, "endpoint_id", j->endpoint_id,
              "run_id", j->run_id, "context", (json_int_t)ctx, "shares", shares);
  struct tb_shards_key k = { .attempt = 0 };
  snprintf(k.job_id, sizeof k.job_id, "%s", j->lease->job_id);
  snprintf(k.cell_key, sizeof k.cell_key, "a%d-%s/decode/%lld/%lld", j->lease->attempt, j->tag,
           (long long)ctx, (long long)conc);
  if (j->spec->repeats > 1 && j->passes != NULL) { /* this pass's barrier */
    json_int_t pass = json_integer_value(json_object_get(j->passes, k.cell_key)) + 1;
    json_object_set_new(j->passes, k.cell_key, json_integer(pass));
    size_t at = strlen(k.cell_key);
    snprintf(k.cell_key + at, sizeof k.cell_key - at, "/r%lld", (long long)pass);
  }
  const struct coord_kind kind = { .window_s = j->spec->duration_s, .window_ns = window_ns };
  coord_cell(j, &k, n, bspec, &kind, cell);
  record_ask(cell, want, "max_streams", (double)j->w->shard.max_streams);
  json_decref(bspec);
  return true;
}

bool
worker_shard_rate(const struct worker_shard_job *j, double rate, unsigned index, json_t *cell,
                  int64_t window_ns[2])
{
  const struct tb_spec *sp = j->spec;
  int64_t want = spec_shards(j->job_spec);
  int n = tb_plan_rate_shards(want, rate, (double)j->w->shard.max_rps, sp->rate_requests);
  if (n <= 1)
    return false;
  json_t *bspec =
    json_pack("{s:O, s:s, s:s, s:s, s:f, s:I}", "job", j->job_spec, "endpoint_id", j->endpoint_id,
              "run_id", j->run_id, "phase", "rate", "rate", rate, "index", (json_int_t)index);
  struct tb_shards_key k = { .attempt = 0 };
  snprintf(k.job_id, sizeof k.job_id, "%s", j->lease->job_id);
  snprintf(k.cell_key, sizeof k.cell_key, "a%d-%s/rate/%u", j->lease->attempt, j->tag, index);
  const struct coord_kind kind = { .window_s = tb_plan_rate_window_s(sp, rate),
                                   .rate = true,
                                   .window_ns = window_ns };
  coord_cell(j, &k, n, bspec, &kind, cell);
  record_ask(cell, want, "max_rps", (double)j->w->shard.max_rps);
  json_decref(bspec);
  return true;
}
