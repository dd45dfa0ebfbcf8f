/*
 * tokbench-worker: claims benchmark jobs from PostgreSQL and runs them with
 * the engine against their endpoints, one job at a time.
 *
 * Start-up: configuration (environment, optional --config file), logs, the
 * master key, the database (waiting up to TOKBENCH_DB_WAIT_MS), migrations
 * (under the migration lock: harmless beside the api), LISTEN
 * tb_jobs_queued, and the heartbeat thread with its own connection.
 *
 * Loop: a shard of a sharded cell first (worker_shard_try: its cell waits
 * at a barrier), else claim (at most TOKBENCH_LIMIT_RUNNING running jobs per project,
 * fair share across projects: tb_queue.h); when there is nothing, wait for a
 * tb_jobs_queued or tb_shards_open notification or the polling floor (TOKBENCH_POLL_S: expired
 * leases notify nobody), then claim again.  Every TOKBENCH_PRUNE_INTERVAL_S,
 * between jobs, hook deliveries and Idempotency-Keys older than
 * TOKBENCH_REPLAY_RETENTION_S are deleted (tb_tenancy_prune; several
 * workers doing it is harmless).  SIGTERM/SIGINT: stop claiming, abort the current cell, hand
 * the job back to the queue, exit 0.
 */
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tb_cfg.h"
#include "net/tb_egress.h"
#include "net/tb_http.h"
#include "base/tb_log.h"
#include "net/tb_masterkey.h"
#include "db/tb_migrate.h"
#include "db/tb_tenancy.h"
#include "db/tb_tracestore.h"
#include "db/tb_workers.h"
#include "worker.h"

static const struct tb_cfg_key worker_keys[] = {
  { "TOKBENCH_DATABASE_URL", NULL, "PostgreSQL URL (libpq)", true },
  { "TOKBENCH_MASTER_KEY", NULL, "master key opening endpoint API keys (64 hex)", true },
  { "TOKBENCH_MASTER_KEY_FILE", NULL,
    "file holding the master key, if TOKBENCH_MASTER_KEY is unset", false },
  { "TOKBENCH_WORKER_ID", NULL, "this worker's name in job leases (default: hostname-pid)", false },
  { "TOKBENCH_LEASE_S", "15",
    "job lease in seconds: a silent worker's job is claimed again after it", false },
  { "TOKBENCH_HEARTBEAT_S", "2", "lease renewal interval in seconds (< TOKBENCH_LEASE_S)", false },
  { "TOKBENCH_POLL_S", "5", "polling floor in seconds, besides LISTEN tb_jobs_queued", false },
  { "TOKBENCH_DB_WAIT_MS", "10000", "how long to wait for the database at start", false },
  { "TOKBENCH_LOG_LEVEL", "info", "debug, info, warn or error", false },
  { "TOKBENCH_CELL_MEMORY_KB", "262144",
    "KiB the endpoint may make one cell buffer (SSE lines and events of all its streams); "
    "over it the cell fails",
    false },
  TB_EGRESS_CFG_KEYS,
  TB_HTTP_CFG_KEYS,
  TB_ENGINE_CFG_KEYS,
  /* issue 13: TOKBENCH_LIMIT_RUNNING for the claim, the replay retention
   * for the prune; the rest so that api and worker read one config file */
  TB_TENANCY_CFG_KEYS,
  /* issue 27: a job whose endpoint this worker's egress policy refuses */
  { "TOKBENCH_EGRESS_GIVE_UP_S", "600",
    "seconds a job refused by workers' egress policies is handed back for another worker "
    "before it fails with the reason",
    false },
  /* issue 24: shards of a cell (worker_shard.h) */
  TB_SHARD_CFG_KEYS,
  /* issue 25: the api's caps on uploaded traces, so that one config file
   * serves both */
  TB_TRACESTORE_CFG_KEYS,
};

/* The slice of an idle wait: bounds how late a signal is noticed. */
#define IDLE_SLICE_MS 500

static volatile sig_atomic_t stopping;

static void
on_signal(int sig)
{
  (void)sig;
  stopping = 1;
}

/* Waits for a tb_jobs_queued notification, the poll floor, or a signal. */
static void
idle_wait(struct tb_db *db, int poll_s)
{
  int64_t deadline = tb_time_mono_ns() + (int64_t)poll_s * 1000000000;
  while (!stopping) {
    int64_t left = (deadline - tb_time_mono_ns()) / 1000000;
    if (left <= 0)
      return;
    if (tb_db_wait_notify(db, left < IDLE_SLICE_MS ? (int)left : IDLE_SLICE_MS, NULL, 0))
      return;
  }
}

/* Jobs this worker handed back because its egress policy refuses their
 * endpoint (WORKER_JOB_REFUSED): its claims pass them over until the
 * give-up time, after which a claim fails them (tb_queue_refuse).  A full
 * table forgets the entry that ends first: at worst a job is handed back
 * once more. */
#define REFUSED_MAX 64
struct refused {
  char id[TB_QUEUE_ID_LEN + 1];
  int64_t until_ns;
};

static void
refused_add(struct refused *t, const char *id, int64_t until_ns)
{
  struct refused *slot = &t[0];
  for (size_t i = 1; i < REFUSED_MAX; i++)
    if (t[i].until_ns < slot->until_ns)
      slot = &t[i];
  snprintf(slot->id, sizeof slot->id, "%s", id);
  slot->until_ns = until_ns;
}

/* The claim's skip list, "{id,...}" into buf, or NULL when it is empty. */
static const char *
refused_skip(const struct refused *t, int64_t now_ns, char *buf, size_t cap)
{
  size_t n = 0;
  buf[n++] = '{';
  for (size_t i = 0; i < REFUSED_MAX; i++)
    if (t[i].until_ns > now_ns && n + TB_QUEUE_ID_LEN + 2 < cap)
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", n > 1 ? "," : "", t[i].id);
  if (n == 1)
    return NULL;
  snprintf(buf + n, cap - n, "}");
  return buf;
}

static char *
default_worker_id(void)
{
  char host[256] = "worker";
  if (gethostname(host, sizeof host - 1) != 0)
    snprintf(host, sizeof host, "worker");
  host[sizeof host - 1] = '\0';
  return tb_xasprintf("%.64s-%ld", host, (long)getpid());
}

/* The worker's settings, connections and heartbeat; worker_free releases
 * them. */
struct worker_main {
  struct tb_cfg *cfg;
  struct worker_ctx w;
  struct worker_beat beat;
  bool beat_running;
  struct tb_db *db;
  struct tb_tenancy ten;
  char *worker_id;
  const char *url; /* TOKBENCH_DATABASE_URL */
  int64_t lease_s, beat_s, poll_s, wait_ms, give_up_s;
  int applied; /* migrations applied at start */
};

/* The numeric settings into m and m->w; false with a message on stderr. */
static bool
read_numbers(struct worker_main *m)
{
  char *err = NULL;
  int64_t cell_kb, sh_streams, sh_rps, sh_barrier, sh_lead, sh_lease, sh_attempts;
  struct tb_cfg *cfg = m->cfg;
  if (!tb_cfg_get_int(cfg, "TOKBENCH_LEASE_S", 2, 3600, &m->lease_s, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_EGRESS_GIVE_UP_S", 0, 7 * 86400, &m->give_up_s, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_CELL_MEMORY_KB", 1, 64 * 1024 * 1024, &cell_kb, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_HEARTBEAT_S", 1, 3600, &m->beat_s, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_POLL_S", 1, 3600, &m->poll_s, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_DB_WAIT_MS", 0, 3600000, &m->wait_ms, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SHARD_MAX_STREAMS", 1, 1000000, &sh_streams, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SHARD_MAX_RPS", 1, 1000000, &sh_rps, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SHARD_BARRIER_S", 1, 3600, &sh_barrier, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SHARD_LEAD_MS", 0, 60000, &sh_lead, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SHARD_LEASE_S", 2, 3600, &sh_lease, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SHARD_ATTEMPTS", 1, 20, &sh_attempts, &err)) {
    fprintf(stderr, "tokbench-worker: %s\n", err);
    free(err);
    return false;
  }
  m->w.engine.cell_memory_max = (size_t)cell_kb * 1024;
  m->w.egress_give_up_s = (int)m->give_up_s;
  m->w.shard = (struct worker_shard_cfg){ .max_streams = sh_streams,
                                          .max_rps = sh_rps,
                                          .barrier_s = (double)sh_barrier,
                                          .lead_s = (double)sh_lead / 1000.0,
                                          .lease_s = (int)sh_lease,
                                          .attempts = (int)sh_attempts };
  if (m->beat_s >= m->lease_s) {
    fprintf(stderr, "tokbench-worker: TOKBENCH_HEARTBEAT_S must be below TOKBENCH_LEASE_S\n");
    return false;
  }
  return true;
}

/* The database URL, the worker's id, the egress policy, the CAs, the
 * engine's switches, the tenancy limits and the master key into m; false
 * with a message on stderr. */
static bool
read_others(struct worker_main *m)
{
  char *err = NULL;
  m->url = tb_cfg_get(m->cfg, "TOKBENCH_DATABASE_URL");
  if (m->url == NULL) {
    fprintf(stderr, "tokbench-worker: TOKBENCH_DATABASE_URL is not set\n");
    return false;
  }
  const char *id = tb_cfg_get(m->cfg, "TOKBENCH_WORKER_ID");
  m->worker_id = id != NULL && id[0] != '\0' ? tb_xstrdup(id) : default_worker_id();
  if (strlen(m->worker_id) > TB_QUEUE_OWNER_MAX) {
    fprintf(stderr, "tokbench-worker: TOKBENCH_WORKER_ID is longer than %d characters\n",
            TB_QUEUE_OWNER_MAX);
    return false;
  }
  if (!tb_egress_install_cfg(m->cfg, &err) ||
      !tb_http_set_ca_file(tb_cfg_get(m->cfg, "TOKBENCH_CA_FILE"), &err) ||
      !tb_engine_target_cfg(&m->w.engine, m->cfg, &err) ||
      !tb_tenancy_from_cfg(&m->ten, m->cfg, &err)) {
    fprintf(stderr, "tokbench-worker: %s\n", err);
    free(err);
    return false;
  }
  enum tb_masterkey_rc mk =
    tb_masterkey_load(tb_cfg_get(m->cfg, "TOKBENCH_MASTER_KEY"),
                      tb_cfg_get(m->cfg, "TOKBENCH_MASTER_KEY_FILE"), m->w.master_key, &err);
  if (mk == TB_MASTERKEY_ERROR) {
    fprintf(stderr, "tokbench-worker: %s\n", err);
    free(err);
    return false;
  }
  m->w.have_master_key = mk == TB_MASTERKEY_OK;
  if (!m->w.have_master_key)
    tb_log(TB_LOG_WARN, "no master key: endpoints with an API key cannot be run", NULL);
  return true;
}

/* The main connection (migrated, listening for queued jobs and open
 * shards) and the heartbeat on its own; false, logged, on a failure. */
static bool
connect_all(struct worker_main *m)
{
  char *err = NULL;
  m->db = tb_db_connect(m->url, (int)m->wait_ms, &err);
  if (m->db == NULL) {
    tb_log(TB_LOG_ERROR, "cannot connect to the database", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  m->applied = tb_migrate_run(m->db, &err);
  if (m->applied < 0) {
    tb_log(TB_LOG_ERROR, "migrations failed", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  if (!tb_db_listen(m->db, "tb_jobs_queued") || !tb_db_listen(m->db, "tb_shards_open")) {
    tb_log(TB_LOG_ERROR, "cannot LISTEN tb_jobs_queued and tb_shards_open", NULL);
    return false;
  }
  struct tb_db *beat_db = tb_db_connect(m->url, (int)m->wait_ms, &err);
  if (beat_db == NULL) {
    tb_log(TB_LOG_ERROR, "cannot connect to the database", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  if (!worker_beat_start(&m->beat, beat_db, (int)m->lease_s, (int)m->beat_s)) {
    tb_log(TB_LOG_ERROR, "cannot start the heartbeat", NULL);
    return false;
  }
  m->beat_running = true;
  m->w.db = m->db;
  m->w.worker_id = m->worker_id;
  m->w.lease_s = (int)m->lease_s;
  return true;
}

/* Claims and runs jobs (a shard first) until a signal; prunes old rows
 * every TOKBENCH_PRUNE_INTERVAL_S between them. */
static void
claim_loop(struct worker_main *m)
{
  int64_t next_prune_ns = tb_time_mono_ns(), next_seen_ns = 0;
  struct refused *refused = tb_xcalloc(REFUSED_MAX, sizeof *refused);
  while (!stopping) {
    /* seen between jobs: the api counts the live workers for shards */
    if (tb_time_mono_ns() >= next_seen_ns && tb_workers_seen(m->db, m->worker_id) > 0)
      next_seen_ns = tb_time_mono_ns() + TB_WORKERS_SEEN_EVERY_S * 1000000000LL;
    if (tb_time_mono_ns() >= next_prune_ns) {
      int pruned = tb_tenancy_prune(m->db, m->ten.retention_s);
      if (pruned > 0)
        tb_log(TB_LOG_INFO, "pruned old hook deliveries and Idempotency-Keys", "rows", TB_LI,
               (int64_t)pruned, NULL);
      next_prune_ns = tb_time_mono_ns() + m->ten.prune_interval_s * 1000000000LL;
    }
    /* a shard first: its cell waits at a barrier for it */
    if (worker_shard_try(&m->w))
      continue;
    struct tb_queue_job job;
    char closed[TB_QUEUE_ID_LEN + 1] = "", skip[REFUSED_MAX * (TB_QUEUE_ID_LEN + 1) + 4];
    int c = tb_queue_claim_skip(m->db, m->worker_id, (int)m->lease_s, (int)m->ten.running,
                                refused_skip(refused, tb_time_mono_ns(), skip, sizeof skip), &job,
                                closed);
    if (c == TB_QUEUE_CLAIMED) {
      enum worker_job_outcome jo = worker_run_job(&m->w, &job);
      if (jo == WORKER_JOB_REFUSED) /* a claim after this fails it */
        refused_add(refused, job.lease.job_id,
                    tb_time_mono_ns() + (m->give_up_s + 1) * 1000000000LL);
      tb_queue_job_clear(&job);
      if (jo == WORKER_JOB_LOST)
        tb_log(TB_LOG_WARN, "job left to the worker holding it now", NULL);
      continue;
    }
    if (c == TB_QUEUE_CLOSED) {
      tb_log(TB_LOG_INFO, "job closed at claim (cancelled, or no attempts left)", "job", TB_LS,
             closed, NULL);
      continue;
    }
    idle_wait(m->db, (int)m->poll_s);
  }
  free(refused);
}

static void
worker_free(struct worker_main *m)
{
  if (m->beat_running)
    worker_beat_stop(&m->beat);
  tb_db_close(m->db);
  OPENSSL_cleanse(m->w.master_key, sizeof m->w.master_key);
  free(m->worker_id);
  tb_cfg_free(m->cfg);
  tb_tenancy_clear(&m->ten);
  tb_egress_install(NULL);
}

/* Settings, connections, then the claim loop until SIGTERM/SIGINT: the
 * exit status (2 bad settings, 1 no database, 0 stopped). */
static int
worker_run(struct worker_main *m)
{
  if (!read_numbers(m) || !read_others(m))
    return 2;
  if (!connect_all(m))
    return 1;
  struct sigaction sa = { 0 };
  sa.sa_handler = on_signal; /* no SA_RESTART: waits return early */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  tb_log(TB_LOG_INFO, "worker ready", "worker", TB_LS, m->worker_id, "lease_s", TB_LI, m->lease_s,
         "heartbeat_s", TB_LI, m->beat_s, "poll_s", TB_LI, m->poll_s, "migrations_applied", TB_LI,
         (int64_t)m->applied, NULL);
  claim_loop(m);
  tb_log(TB_LOG_INFO, "stopping", "worker", TB_LS, m->worker_id, NULL);
  if (tb_workers_gone(m->db, m->worker_id) < 0)
    tb_log(TB_LOG_WARN, "could not remove this worker's row (it ages out)", NULL);
  return 0;
}

int
main(int argc, char **argv)
{
  const char *config = NULL;
  int arc = tb_cfg_daemon_args(
    argc, argv, "tokbench-worker",
    "Claims tokbench jobs from PostgreSQL and runs them against their endpoints.\n"
    "SIGTERM hands the running job back to the queue and exits 0.",
    worker_keys, TB_ARRAY_LEN(worker_keys), &config);
  if (arc >= 0)
    return arc;
  char *err = NULL;
  struct worker_main m = { 0 };
  m.w = (struct worker_ctx){ .beat = &m.beat, .stopping = &stopping };
  m.cfg = tb_cfg_load(worker_keys, TB_ARRAY_LEN(worker_keys), config, &err);
  if (m.cfg == NULL) {
    fprintf(stderr, "tokbench-worker: %s\n", err);
    free(err);
    return 2;
  }
  int level = tb_log_level_parse(tb_cfg_get(m.cfg, "TOKBENCH_LOG_LEVEL"));
  tb_log_init("worker", level < 0 ? TB_LOG_INFO : (enum tb_log_level)level);
  int rc = worker_run(&m);
  worker_free(&m);
  return rc;
}
