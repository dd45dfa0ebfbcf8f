/*
 * q_hooks: the statements of /v1/hooks (service/api_hooks.c); tables hooks
 * and hook_deliveries_in in sql/0006_hooks_deliveries.sql, the digest in
 * sql/0009_tenancy.sql.  One function per statement (the SQL beside it in
 * q_hooks.c), columns read by name; each returns the row count or
 * TB_DB_SOFT / TB_DB_HARD.  The hook document (HOOK_JSON) never holds the
 * secret.
 */
#ifndef TB_Q_HOOKS_H
#define TB_Q_HOOKS_H

#include "db/tb_db.h"
#include "base/tb_util.h"

/* Inserts hook id of project_id for the project's preset named preset
 * (events: a JSON array of names; sealed: its sealed secret).  1 with the
 * hook's document (*doc, new); 0 when the project has no such preset. */
int tb_q_hooks_insert(struct tb_db *db, const char *id, const char *project_id, const char *preset,
                      const char *name, const char *kind, const char *events, const char *sealed,
                      char **doc) TB_MUST_CHECK;
/* The project's hooks as a JSON array (*doc, new); always 1 row. */
int tb_q_hooks_list(struct tb_db *db, const char *project_id, char **doc) TB_MUST_CHECK;
/* One hook's document (*doc, new); 0: no such hook. */
int tb_q_hooks_get(struct tb_db *db, const char *id, const char *project_id,
                   char **doc) TB_MUST_CHECK;
/* Soft delete; 1, or 0 when there is no such hook. */
int tb_q_hooks_delete(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;

/* What a delivery needs, by hook id alone (new strings). */
struct tb_q_hooks_hook {
  char *project_id, *kind, *secret_sealed;
  char *events; /* JSON array text */
  char *spec;   /* the preset's spec, JSON text */
};
/* Loads hook id (not deleted); 1, or 0 when there is none. */
int tb_q_hooks_load(struct tb_db *db, const char *id, struct tb_q_hooks_hook *out) TB_MUST_CHECK;
void tb_q_hooks_hook_clear(struct tb_q_hooks_hook *h);

/* Records a delivery; 1, or 0 when its id or its digest was seen before
 * (nothing written). */
int tb_q_hooks_delivery_claim(struct tb_db *db, const char *hook_id, const char *delivery_id,
                              const char *event, const char *digest) TB_MUST_CHECK;
/* The job a delivery seen before started (*job_id new, NULL when none). */
int tb_q_hooks_delivery_seen(struct tb_db *db, const char *hook_id, const char *delivery_id,
                             const char *digest, char **job_id) TB_MUST_CHECK;
/* Records the job a delivery started. */
int tb_q_hooks_delivery_job(struct tb_db *db, const char *hook_id, const char *delivery_id,
                            const char *job_id) TB_MUST_CHECK;
/* 1 when hook id exists and is not deleted, else 0. */
int tb_q_hooks_exists(struct tb_db *db, const char *id) TB_MUST_CHECK;

#endif
