/*
 * worker_beat: the heartbeat thread.
 *
 * Why a thread: the engine runs its measurement loop on the main thread and
 * must not stall on the database; the lease must be renewed and a cancel
 * noticed while a cell runs.  The thread owns its own connection, which
 * LISTENs on tb_job_changed: the API notifies it when it sets
 * cancel_requested, so a cancel reaches the job within one round trip
 * (plus the engine's 100 ms polling), not one heartbeat interval.
 *
 * The main thread and this one share only struct worker_beat's fields under
 * mu.  A generation number tells a late answer about an old lease from one
 * about the current lease, so a heartbeat that raced a finish never flags
 * the next job as lost.
 */
#include <string.h>

#include "base/tb_log.h"
#include "worker.h"

/* How long one wait for a notification may last: bounds how late the
 * thread notices quit or a new lease. */
#define BEAT_SLICE_MS 200
/* After a failed renewal, try again this soon. */
#define BEAT_RETRY_MS 500

static int64_t
ms_until(int64_t deadline_ns, int64_t now_ns)
{
  int64_t ms = (deadline_ns - now_ns) / 1000000;
  return ms < 0 ? 0 : ms;
}

static void *
beat_main(void *arg)
{
  struct worker_beat *b = arg;
  uint64_t seen_gen = 0;
  int64_t next_beat = 0;
  for (;;) {
    pthread_mutex_lock(&b->mu);
    bool quit = b->quit, has_job = b->has_job;
    uint64_t gen = b->gen;
    struct tb_queue_lease lease = b->lease;
    pthread_mutex_unlock(&b->mu);
    if (quit)
      break;
    int64_t now = tb_time_mono_ns();
    if (gen != seen_gen) { /* a new lease: the claim just set its expiry */
      seen_gen = gen;
      next_beat = now + (int64_t)b->interval_s * 1000000000;
    }
    int wait_ms = BEAT_SLICE_MS;
    if (has_job && ms_until(next_beat, now) < wait_ms)
      wait_ms = (int)ms_until(next_beat, now);
    char payload[64] = "";
    bool notified = tb_db_wait_notify(b->db, wait_ms, payload, sizeof payload);
    if (!has_job)
      continue;
    now = tb_time_mono_ns();
    bool cancel = false;
    int rc;
    if (now >= next_beat) {
      rc = tb_queue_heartbeat(b->db, &lease, b->lease_s, &cancel);
      next_beat =
        now + (rc >= 0 ? (int64_t)b->interval_s * 1000000000 : (int64_t)BEAT_RETRY_MS * 1000000);
    } else if (notified) {
      /* Some job changed (the payload names the first of maybe several):
       * a read is cheap, so look whether it was a cancel of ours. */
      rc = tb_queue_check(b->db, &lease, &cancel);
    } else {
      continue;
    }
    if (rc < 0)
      continue; /* unknown: the database is away; the lease may still hold */
    bool current, ending;
    pthread_mutex_lock(&b->mu);
    current = b->gen == gen && b->has_job;
    ending = b->ending;
    if (current) {
      if (rc == 0)
        b->lease_lost = true;
      else if (cancel)
        b->cancel_requested = true;
    }
    pthread_mutex_unlock(&b->mu);
    /* While the job's end is written, a refused renewal is most often that
     * write's own doing (the job is no longer running): the write's answer
     * says whether the lease held, and the main thread logs it. */
    if (rc == 0 && current && !ending)
      tb_log(TB_LOG_WARN, "lease lost", "job", TB_LS, lease.job_id, "attempt", TB_LI,
             (int64_t)lease.attempt, NULL);
  }
  return NULL;
}

bool
worker_beat_start(struct worker_beat *b, struct tb_db *db, int lease_s, int interval_s)
{
  memset(b, 0, sizeof *b);
  b->db = db;
  b->lease_s = lease_s;
  b->interval_s = interval_s;
  pthread_mutex_init(&b->mu, NULL);
  if (!tb_db_listen(db, "tb_job_changed")) {
    tb_db_close(db);
    pthread_mutex_destroy(&b->mu);
    return false;
  }
  /* Signals are for the main thread: block them in this one. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(&b->thread, NULL, beat_main, b);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    tb_db_close(db);
    pthread_mutex_destroy(&b->mu);
    return false;
  }
  return true;
}

void
worker_beat_set(struct worker_beat *b, const struct tb_queue_lease *lease)
{
  pthread_mutex_lock(&b->mu);
  b->gen++;
  b->has_job = lease != NULL;
  if (lease != NULL)
    b->lease = *lease;
  else
    memset(&b->lease, 0, sizeof b->lease);
  b->cancel_requested = false;
  b->lease_lost = false;
  b->ending = false;
  pthread_mutex_unlock(&b->mu);
}

void
worker_beat_ending(struct worker_beat *b)
{
  pthread_mutex_lock(&b->mu);
  b->ending = true;
  pthread_mutex_unlock(&b->mu);
}

void
worker_beat_state(struct worker_beat *b, bool *cancel_requested, bool *lease_lost)
{
  pthread_mutex_lock(&b->mu);
  *cancel_requested = b->cancel_requested;
  *lease_lost = b->lease_lost;
  pthread_mutex_unlock(&b->mu);
}

void
worker_beat_stop(struct worker_beat *b)
{
  pthread_mutex_lock(&b->mu);
  b->quit = true;
  pthread_mutex_unlock(&b->mu);
  pthread_join(b->thread, NULL);
  tb_db_close(b->db);
  b->db = NULL;
  pthread_mutex_destroy(&b->mu);
}
