/*
 * worker_job: one claimed job, from its endpoint to its end state.
 *
 *   load the endpoint, open its API key (wiped after the run), load the
 *   cells stored by earlier attempts, parse the spec (tb_spec), run the engine
 *   with hooks, then finish (succeeded | failed | cancelled) or release
 *   (the worker is stopping) -- every write fenced by the lease.
 *
 * Cells: each is stored the moment the engine hands it over.  When the
 * database is away, the cell is kept in memory (pending) and stored before
 * the next one or before the end, once the database is back: nothing
 * measured is lost, and ON CONFLICT DO NOTHING makes storing twice
 * harmless.  If the lease is lost meanwhile, the cells not stored are
 * measured again by the worker that holds the job now.
 *
 * An endpoint this worker's own egress policy refuses (judged before the
 * run, its name resolved) is not the job's fault: the job goes back to the
 * pool without spending an attempt (refuse()), and main.c passes it over
 * for a while.
 *
 * Stop reasons, in the engine's cancelled() hook (polled every 100 ms):
 * SIGTERM (stopping), a cancel request and a lost lease (both from the
 * heartbeat thread).  The engine then returns TB_ENGINE_CANCELLED and the
 * reason decides: release, finish cancelled, or walk away.
 */
#include <openssl/crypto.h>
#include <string.h>
#include <time.h>

#include "engine/tb_engine.h"
#include "base/tb_log.h"
#include "base/tb_crypto.h"
#include "db/tb_regress.h"
#include "net/tb_egress.h"
#include "net/tb_masterkey.h"
#include "spec/tb_trace.h"
#include "worker.h"

/* While stopping (SIGTERM), give up a write the database does not take after
 * this long: the lease expires and another worker resumes the job. */
#define STOP_GRACE_NS (10LL * 1000000000)
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000

struct job_run {
  struct worker_ctx *w;
  const struct tb_queue_job *job;
  const struct tb_queue_lease *lease;
  json_t *pending;                /* cells measured but not stored yet */
  bool lost;                      /* a write found the lease gone */
  bool store_failed;              /* a cell could not be stored (hard error) */
  bool db_away;                   /* the last write met a lost connection */
  struct worker_shard_job shards; /* the engine's sharded cells (issue 24) */
};

static void
sleep_ms(int ms)
{
  struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

static bool
lease_lost(struct job_run *jr)
{
  bool cancel, lost;
  worker_beat_state(jr->w->beat, &cancel, &lost);
  return lost || jr->lost;
}

/* Whether to try a write again after TB_DB_SOFT: sleeps with backoff; false
 * when the lease is gone, or when stopping and the grace is over. */
static bool
keep_trying(struct job_run *jr, int *delay_ms, int64_t t0)
{
  if (lease_lost(jr))
    return false;
  if (*jr->w->stopping && tb_time_mono_ns() - t0 > STOP_GRACE_NS)
    return false;
  sleep_ms(*delay_ms);
  *delay_ms = *delay_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : *delay_ms * 2;
  return true;
}

/* Stores the pending cells, oldest first, one try each; stops at the first
 * that does not go.  Returns 1 (all stored), 0 (lease lost), TB_DB_SOFT
 * (database away: the rest stays pending), TB_DB_HARD. */
static int
flush_pending(struct job_run *jr)
{
  while (json_array_size(jr->pending) > 0) {
    int rc = tb_queue_store_cell(jr->w->db, jr->lease, json_array_get(jr->pending, 0));
    if (rc <= 0) {
      jr->db_away = rc == TB_DB_SOFT;
      if (rc == 0)
        jr->lost = true;
      return rc;
    }
    json_array_remove(jr->pending, 0);
  }
  jr->db_away = false;
  return 1;
}

/* ------------------------------------------------------------------ hooks */

static bool
hook_cell(void *cls, const json_t *cell)
{
  struct job_run *jr = cls;
  json_array_append_new(jr->pending, json_deep_copy(cell));
  int rc = flush_pending(jr);
  if (rc == 1 || rc == TB_DB_SOFT) {
    if (rc == TB_DB_SOFT)
      tb_log(TB_LOG_WARN, "database away: cells kept in memory", "job", TB_LS, jr->lease->job_id,
             "pending", TB_LI, (int64_t)json_array_size(jr->pending), NULL);
    return true;
  }
  if (rc == TB_DB_HARD)
    jr->store_failed = true;
  return false; /* lease lost or a cell the database refuses: stop */
}

static void
hook_progress(void *cls, const json_t *cell_key, unsigned done, unsigned total, double eta_s)
{
  struct job_run *jr = cls;
  (void)done;      /* cells_done counts stored rows, across attempts */
  if (jr->db_away) /* do not stall the run on a reconnect for a progress line */
    return;
  int rc = tb_queue_progress(jr->w->db, jr->lease, cell_key, total, eta_s);
  if (rc == 0)
    jr->lost = true;
  else if (rc == TB_DB_SOFT)
    jr->db_away = true;
}

static bool
hook_cancelled(void *cls)
{
  struct job_run *jr = cls;
  if (*jr->w->stopping || jr->lost)
    return true;
  bool cancel, lost;
  worker_beat_state(jr->w->beat, &cancel, &lost);
  return cancel || lost;
}

/* A decode cell the spec shards: measured by shards of idle workers and
 * merged here (worker_shard.h); false: the engine measures it. */
static bool
hook_shard_cell(void *cls, int64_t ctx, int64_t conc, json_t *cell, int64_t window_ns[2])
{
  struct job_run *jr = cls;
  return worker_shard_cell(&jr->shards, ctx, conc, cell, window_ns);
}

/* A rate cell the spec shards: the same (worker_shard_rate). */
static bool
hook_shard_rate(void *cls, double rate, unsigned index, json_t *cell, int64_t window_ns[2])
{
  struct job_run *jr = cls;
  return worker_shard_rate(&jr->shards, rate, index, cell, window_ns);
}

static void
hook_header(void *cls, const json_t *header)
{
  struct job_run *jr = cls;
  int rc = tb_queue_header(jr->w->db, jr->lease, header);
  if (rc == 0)
    jr->lost = true;
  else if (rc == TB_DB_SOFT)
    jr->db_away = true;
}

/* ------------------------------------------------------------------ ends */

/*
 * The end of a succeeded job and its regression check (lib/db/tb_regress: the
 * comparison with the last good job of the same endpoint and labels) commit
 * together, so whoever reads the job's end (callbacks, CI, tokbench submit)
 * finds its regressions.  A check that fails is logged and the job stands.
 * Returns as tb_queue_finish.
 */
static int
finish_succeeded(struct tb_db *db, const struct tb_queue_lease *l, const json_t *result)
{
  if (tb_db_begin(db) < 0)
    return TB_DB_SOFT;
  int rc = tb_queue_finish(db, l, "succeeded", result, NULL);
  if (rc != 1 || tb_db_exec_sql(db, "SAVEPOINT regress") < 0) {
    tb_db_rollback(db);
    return rc != 1 ? rc : TB_DB_SOFT;
  }
  int rr = tb_regress_check(db, l->job_id);
  if (rr < 0) {
    tb_log(TB_LOG_WARN, "regression check failed; the job stands", "job", TB_LS, l->job_id, NULL);
    if (tb_db_exec_sql(db, "ROLLBACK TO SAVEPOINT regress") < 0) {
      tb_db_rollback(db);
      return TB_DB_SOFT;
    }
  }
  int c = tb_db_commit(db);
  return c < 0 ? c : 1;
}

/* flush_pending with retries (keep_trying's backoff, *delay and t0 shared
 * with the write that follows). */
static int
flush_retry(struct job_run *jr, int *delay, int64_t t0)
{
  int rc;
  while ((rc = flush_pending(jr)) == TB_DB_SOFT && keep_trying(jr, delay, t0))
    ;
  return rc;
}

/* Writes the end state with retries.  Returns the outcome. */
static enum worker_job_outcome
finish(struct job_run *jr, const char *state, json_t *result, const char *error)
{
  worker_beat_ending(jr->w->beat);
  int64_t t0 = tb_time_mono_ns();
  int delay = BACKOFF_MIN_MS;
  int rc = flush_retry(jr, &delay, t0);
  if (rc == 0)
    return WORKER_JOB_LOST;
  if (rc == TB_DB_SOFT)
    return lease_lost(jr) ? WORKER_JOB_LOST : WORKER_JOB_ABANDONED;
  if (rc == TB_DB_HARD) {
    state = "failed";
    error = "a measured cell could not be stored (database error)";
  }
  if (result != NULL) /* every cell stored now: who ran each (issue 35) */
    worker_prov_finish(jr->w, jr->job, result);
  bool succeeded = strcmp(state, "succeeded") == 0;
  while ((rc = succeeded
                 ? finish_succeeded(jr->w->db, jr->lease, result)
                 : tb_queue_finish(jr->w->db, jr->lease, state, result, error)) == TB_DB_SOFT &&
         keep_trying(jr, &delay, t0))
    ;
  if (rc == 1) {
    tb_log(strcmp(state, "failed") == 0 ? TB_LOG_WARN : TB_LOG_INFO, "job finished", "job", TB_LS,
           jr->lease->job_id, "attempt", TB_LI, (int64_t)jr->lease->attempt, "state", TB_LS, state,
           "error", TB_LS, error ? error : "", NULL);
    return WORKER_JOB_DONE;
  }
  if (rc == 0 || lease_lost(jr))
    return WORKER_JOB_LOST;
  tb_log(TB_LOG_ERROR, "cannot write the job's end; its lease will expire", "job", TB_LS,
         jr->lease->job_id, NULL);
  return WORKER_JOB_ABANDONED;
}

static enum worker_job_outcome
release(struct job_run *jr)
{
  worker_beat_ending(jr->w->beat);
  int64_t t0 = tb_time_mono_ns();
  int delay = BACKOFF_MIN_MS;
  /* Cells measured before the stop are kept: store what is pending. */
  int rc = flush_retry(jr, &delay, t0);
  if (rc == 0)
    return WORKER_JOB_LOST;
  while ((rc = tb_queue_release(jr->w->db, jr->lease, "worker stopping")) == TB_DB_SOFT &&
         keep_trying(jr, &delay, t0))
    ;
  if (rc == 1) {
    tb_log(TB_LOG_INFO, "job handed back", "job", TB_LS, jr->lease->job_id, "attempt", TB_LI,
           (int64_t)jr->lease->attempt, NULL);
    return WORKER_JOB_RELEASED;
  }
  return rc == 0 ? WORKER_JOB_LOST : WORKER_JOB_ABANDONED;
}

/* This worker's egress policy refuses the endpoint (issue 27): hand the job
 * back without spending an attempt, for a worker allowed to reach it; or
 * fail it when it has been handed back so for egress_give_up_s
 * (tb_queue_refuse). */
static enum worker_job_outcome
refuse(struct job_run *jr, const char *why)
{
  worker_beat_ending(jr->w->beat);
  int64_t t0 = tb_time_mono_ns();
  int delay = BACKOFF_MIN_MS;
  char *reason = tb_xasprintf("worker %s: %s", jr->w->worker_id, why);
  bool failed = false;
  int rc;
  while ((rc = tb_queue_refuse(jr->w->db, jr->lease, reason, jr->w->egress_give_up_s, &failed)) ==
           TB_DB_SOFT &&
         keep_trying(jr, &delay, t0))
    ;
  if (rc == 1)
    tb_log(TB_LOG_WARN,
           failed ? "job failed: no worker may reach its endpoint"
                  : "job handed back: this worker may not reach its endpoint",
           "job", TB_LS, jr->lease->job_id, "reason", TB_LS, reason, NULL);
  free(reason);
  if (rc == 1)
    return failed ? WORKER_JOB_DONE : WORKER_JOB_REFUSED;
  return rc == 0 || lease_lost(jr) ? WORKER_JOB_LOST : WORKER_JOB_ABANDONED;
}

/* Loads the job's endpoint (into ep when it is not NULL) or else the cells
 * already stored (into *cells), with retries (the database may be
 * restarting). */
static int
load(struct job_run *jr, struct tb_queue_endpoint *ep, json_t **cells)
{
  int64_t t0 = tb_time_mono_ns();
  int delay = BACKOFF_MIN_MS;
  int rc;
  while ((rc = ep != NULL
                 ? tb_queue_load_endpoint(jr->w->db, jr->job->endpoint_id, ep)
                 : tb_queue_load_cells(jr->w->db, jr->lease->job_id, cells)) == TB_DB_SOFT &&
         keep_trying(jr, &delay, t0))
    ;
  return rc;
}

/* A load that returned rc < 0: a hard error fails the job with what could
 * not be loaded; a soft one (the database restarting past the retries)
 * hands it back, unless the lease is already lost. */
static enum worker_job_outcome
load_failed(struct job_run *jr, int rc, const char *what)
{
  if (rc == TB_DB_HARD) {
    char why[96];
    snprintf(why, sizeof why, "cannot load %s", what);
    return finish(jr, "failed", NULL, why);
  }
  return lease_lost(jr) ? WORKER_JOB_LOST : release(jr);
}

/* The job's endpoint into *ep, reachable by this worker's egress policy,
 * and its API key opened (*api_key, NULL when it has none).  false: the
 * job is concluded, its outcome in *out. */
static bool
open_endpoint(struct job_run *jr, struct tb_queue_endpoint *ep, char **api_key,
              enum worker_job_outcome *out)
{
  const struct tb_queue_job *job = jr->job;
  int rc = load(jr, ep, NULL);
  if (rc < 0) {
    *out = load_failed(jr, rc, "the endpoint");
    return false;
  }
  if (rc == 0 || ep->deleted) {
    *out = finish(jr, "failed", NULL, rc == 0 ? "endpoint not found" : "endpoint deleted");
    return false;
  }
  char eg_why[TB_EGRESS_WHY_MAX];
  if (!tb_egress_url_reachable(tb_egress_current(), ep->base_url, eg_why, sizeof eg_why)) {
    *out = refuse(jr, eg_why);
    return false;
  }
  if (ep->api_key_sealed == NULL || ep->api_key_sealed[0] == '\0')
    return true;
  if (!jr->w->have_master_key) {
    *out = finish(jr, "failed", NULL,
                  "the endpoint's API key is sealed and this worker has no master key "
                  "(TOKBENCH_MASTER_KEY or TOKBENCH_MASTER_KEY_FILE)");
    return false;
  }
  const char *why = NULL;
  *api_key = tb_masterkey_open_endpoint_key(jr->w->master_key, ep->api_key_sealed, job->endpoint_id,
                                            ep->api_key_origin, ep->base_url, &why);
  if (*api_key == NULL) {
    *out = finish(jr, "failed", NULL, why);
    return false;
  }
  return true;
}

/* What a job's run reads besides its endpoint. */
struct job_input {
  json_t *done; /* the cells stored by earlier attempts */
  struct tb_spec spec;
  struct tb_trace trace;
  bool has_trace;
  char *err;
};

/* The stored cells, the spec and the job's trace into *in.  false: the job
 * is concluded, its outcome in *out. */
static bool
load_input(struct job_run *jr, struct job_input *in, enum worker_job_outcome *out)
{
  int rc = load(jr, NULL, &in->done);
  if (rc < 0) {
    *out = load_failed(jr, rc, "the stored cells");
    return false;
  }
  /* the api validated the spec against the same table; a spec stored by a
   * version with other rules fails here, naming the field */
  if (!tb_spec_parse(&in->spec, jr->job->spec, &in->err)) {
    *out = finish(jr, "failed", NULL, in->err);
    return false;
  }
  rc = worker_trace_load(jr->w->db, jr->job, &in->spec, &in->trace, &in->err); /* issue 25 */
  if (rc < 0) {
    *out = load_failed(jr, rc, "the job's trace");
    return false;
  }
  if (rc == WORKER_TRACE_BAD) {
    *out = finish(jr, "failed", NULL, in->err);
    return false;
  }
  in->has_trace = rc == 1;
  return true;
}

/* The job's share of sharded cells: what a shard needs, and the tag that
 * makes this run's barrier keys unique. */
static void
shards_open(struct job_run *jr, const struct tb_spec *spec, const char *run_id)
{
  jr->shards = (struct worker_shard_job){ .w = jr->w,
                                          .lease = &jr->job->lease,
                                          .spec = spec,
                                          .job_spec = jr->job->spec,
                                          .endpoint_id = jr->job->endpoint_id,
                                          .run_id = run_id,
                                          .cancelled = hook_cancelled,
                                          .cls = jr,
                                          .passes = json_object() };
  unsigned char tag[8] = { 0 };
  if (!tb_crypto_random(tag, sizeof tag)) /* then the time: unique enough for a key */
    for (int64_t t = tb_time_mono_ns(), i = 0; i < 8; i++, t >>= 8)
      tag[i] = (unsigned char)t;
  tb_hex_encode(tag, sizeof tag, jr->shards.tag);
}

/* The job's end after the engine stopped with st. */
static enum worker_job_outcome
conclude(struct job_run *jr, enum tb_engine_status st, json_t *result, const char *err)
{
  bool cancel, lost;
  worker_beat_state(jr->w->beat, &cancel, &lost);
  if (lost || jr->lost) {
    tb_log(TB_LOG_WARN, "job dropped: lease lost", "job", TB_LS, jr->lease->job_id, NULL);
    return WORKER_JOB_LOST;
  }
  if (jr->store_failed)
    return finish(jr, "failed", result, "a measured cell could not be stored (database error)");
  if (st == TB_ENGINE_OK)
    return finish(jr, "succeeded", result, NULL);
  if (st == TB_ENGINE_FAILED)
    return finish(jr, "failed", result, err ? err : "the run failed");
  if (cancel)
    return finish(jr, "cancelled", result, "cancelled on request");
  if (*jr->w->stopping)
    return release(jr);
  return WORKER_JOB_LOST; /* the engine stopped for a lease we no longer hold */
}

static void
key_free(char **api_key)
{
  if (*api_key != NULL) {
    OPENSSL_cleanse(*api_key, strlen(*api_key));
    free(*api_key);
    *api_key = NULL;
  }
}

/* Runs the engine over the job: its hooks store cells and progress. */
static enum worker_job_outcome
run(struct job_run *jr, const struct tb_queue_endpoint *ep, char **api_key, struct job_input *in)
{
  const struct tb_queue_job *job = jr->job;
  char *run_id = worker_run_id(job->lease.job_id, job->lease.attempt);
  json_t *endpoint = worker_endpoint_header(ep), *result = NULL;
  struct tb_engine_target target = jr->w->engine;
  target.trace = in->has_trace ? &in->trace : NULL;
  target.base_url = ep->base_url;
  target.run_id = run_id;
  target.endpoint = endpoint;
  target.key_hint = "the endpoint's api_key";
  target.model_hint = "the job's model";
  tb_log(TB_LOG_INFO, "job running", "job", TB_LS, job->lease.job_id, "run_id", TB_LS, run_id,
         "cells_stored", TB_LI, (int64_t)json_array_size(in->done), NULL);
  struct tb_engine_hooks hooks = {
    .cls = jr,
    .on_cell = hook_cell,
    .on_progress = hook_progress,
    .cancelled = hook_cancelled,
    .on_header = hook_header,
    .shard_cell = hook_shard_cell,
    .shard_rate = hook_shard_rate,
  };
  shards_open(jr, &in->spec, run_id);
  worker_prov_clock(jr->w, jr->lease); /* the result's provenance (issue 35) */
  tb_raise_nofile(tb_engine_nofile(&in->spec));
  enum tb_engine_status st =
    tb_engine_run(&in->spec, &target, *api_key, in->done, &hooks, &result, &in->err);
  key_free(api_key);
  enum worker_job_outcome out = conclude(jr, st, result, in->err);
  json_decref(result);
  json_decref(endpoint);
  free(run_id);
  return out;
}

enum worker_job_outcome
worker_run_job(struct worker_ctx *w, const struct tb_queue_job *job)
{
  struct job_run jr = { .w = w, .job = job, .lease = &job->lease, .pending = json_array() };
  struct tb_queue_endpoint ep = { 0 };
  struct job_input in = { 0 };
  char *api_key = NULL;
  enum worker_job_outcome out;
  tb_spec_init(&in.spec);
  worker_beat_set(w->beat, &job->lease);
  tb_log(TB_LOG_INFO, "job started", "job", TB_LS, job->lease.job_id, "attempt", TB_LI,
         (int64_t)job->lease.attempt, "max_attempts", TB_LI, (int64_t)job->max_attempts, "endpoint",
         TB_LS, job->endpoint_id, "request_id", TB_LS, job->request_id[0] ? job->request_id : NULL,
         NULL);
  if (open_endpoint(&jr, &ep, &api_key, &out) && load_input(&jr, &in, &out))
    out = run(&jr, &ep, &api_key, &in);
  worker_beat_set(w->beat, NULL);
  key_free(&api_key);
  tb_queue_endpoint_clear(&ep);
  json_decref(jr.pending);
  json_decref(jr.shards.passes);
  json_decref(in.done);
  tb_spec_free(&in.spec);
  tb_trace_free(&in.trace);
  free(in.err);
  return out;
}
