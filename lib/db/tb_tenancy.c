/*
 * tb_tenancy: see tb_tenancy.h.  The limits are read once at start; the
 * prune, shared by the workers, sits here beside the C that binds it (the
 * queued count is the job insert's: service/q_jobs.c).
 */
#include "db/tb_tenancy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TOKBENCH_SHARED_GROUPS into a normalised "a,b" (spaces dropped), or NULL
 * with *err when a name is not a group name or there are too many. */
static char *
parse_groups(const char *v, char **err)
{
  size_t n = v != NULL ? strlen(v) : 0;
  char *out = tb_xmalloc(n + 1);
  size_t o = 0, names = 0;
  const char *p = v, *s;
  size_t len;
  while (tb_list_next(&p, &s, &len)) {
    bool ok = len <= TB_TENANCY_GROUP_MAX;
    for (const char *c = s; ok && c < s + len; c++)
      ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
           *c == '.' || *c == '_' || *c == '-';
    if (!ok || (len > 0 && ++names > TB_TENANCY_SHARED_MAX)) {
      *err = tb_xasprintf("TOKBENCH_SHARED_GROUPS: at most %d group names of 1 to %d of "
                          "[A-Za-z0-9._-], comma-separated",
                          TB_TENANCY_SHARED_MAX, TB_TENANCY_GROUP_MAX);
      free(out);
      return NULL;
    }
    if (len > 0) {
      if (o > 0)
        out[o++] = ',';
      memcpy(out + o, s, len);
      o += len;
    }
  }
  out[o] = '\0';
  return out;
}

bool
tb_tenancy_from_cfg(struct tb_tenancy *t, const struct tb_cfg *cfg, char **err)
{
  memset(t, 0, sizeof *t);
  if (!tb_cfg_get_int(cfg, "TOKBENCH_LIMIT_QUEUED", 0, 10000000, &t->queued, err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_LIMIT_RUNNING", 0, 100000, &t->running, err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_LIMIT_JOB_SECONDS", 0, INT32_MAX, &t->job_seconds, err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_LIMIT_MAX_ATTEMPTS", 1, 20, &t->max_attempts, err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_REPLAY_RETENTION_S", 60, 10LL * 366 * 86400, &t->retention_s,
                      err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_PRUNE_INTERVAL_S", 1, 86400, &t->prune_interval_s, err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_WORKER_LIVE_S", 1, 86400, &t->worker_live_s, err))
    return false;
  t->shared_groups = parse_groups(tb_cfg_get(cfg, "TOKBENCH_SHARED_GROUPS"), err);
  return t->shared_groups != NULL;
}

void
tb_tenancy_clear(struct tb_tenancy *t)
{
  if (t == NULL)
    return;
  free(t->shared_groups);
  memset(t, 0, sizeof *t);
}

static void
refuse(struct tb_tenancy_refusal *why, const char *limit, const char *setting, int64_t max,
       double value, bool too_large, const char *what)
{
  why->limit = limit;
  why->setting = setting;
  why->max = max;
  why->value = value;
  why->too_large = too_large;
  snprintf(why->detail, sizeof why->detail, "%s %.0f; this service's limit is %lld (%s)", what,
           value, (long long)max, limit);
}

/* The one count-and-refuse: true when value stays within max (<= 0: no
 * limit); else false with *why filled (refuse's arguments). */
static bool
within(struct tb_tenancy_refusal *why, const char *limit, const char *setting, int64_t max,
       double value, bool too_large, const char *what)
{
  if (max <= 0 || value <= (double)max)
    return true;
  refuse(why, limit, setting, max, value, too_large, what);
  return false;
}

bool
tb_tenancy_check_shards(const struct tb_tenancy *t, int64_t shards, int64_t live,
                        struct tb_tenancy_refusal *why)
{
  if (shards <= 1 || live >= shards + 1)
    return true;
  refuse(why, "live_workers", "TOKBENCH_WORKER_LIVE_S", live > 0 ? live - 1 : 0, (double)shards,
         true, "shards is");
  snprintf(why->detail, sizeof why->detail,
           "shards %lld needs %lld live workers (one holds the job, one drives each shard); "
           "%lld seen in the last %lld s",
           (long long)shards, (long long)shards + 1, (long long)live, (long long)t->worker_live_s);
  return false;
}

bool
tb_tenancy_check_job(const struct tb_tenancy *t, double job_seconds, int64_t max_attempts,
                     struct tb_tenancy_refusal *why)
{
  return (max_attempts <= 0 ||
          within(why, "max_attempts", "TOKBENCH_LIMIT_MAX_ATTEMPTS", t->max_attempts,
                 (double)max_attempts, true, "max_attempts is")) &&
         (t->job_seconds <= 0 || job_seconds < 0 ||
          within(why, "job_seconds", "TOKBENCH_LIMIT_JOB_SECONDS", t->job_seconds, job_seconds,
                 true, "the job would take cells x repeats x (duration_s + settle_s) ="));
}

void
tb_tenancy_refuse_queued(const struct tb_tenancy *t, int64_t queued, struct tb_tenancy_refusal *why)
{
  refuse(why, "queued_jobs", "TOKBENCH_LIMIT_QUEUED", t->queued, (double)queued, false,
         "the project has queued jobs:");
}

static const struct tb_db_stmt prune = {
  "tenancy_prune",
  "WITH h AS (DELETE FROM hook_deliveries_in"
  "  WHERE received_at < now() - make_interval(secs => $1::bigint) RETURNING 1),"
  " i AS (DELETE FROM idempotency_keys"
  "  WHERE created_at < now() - make_interval(secs => $1::bigint) RETURNING 1)"
  "SELECT (SELECT count(*) FROM h) + (SELECT count(*) FROM i) AS pruned",
};

int
tb_tenancy_prune(struct tb_db *db, int64_t retention_s)
{
  char s[24];
  snprintf(s, sizeof s, "%lld", (long long)retention_s);
  const char *p[] = { s };
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &prune, 1, p, &r);
  if (rc < 0)
    return rc;
  int64_t n = rc == 1 ? tb_db_i64(r, 0, "pruned") : 0;
  PQclear(r);
  return n > INT32_MAX ? INT32_MAX : (int)n;
}
