/*
 * q_deliveries: see q_deliveries.h.
 */
#include "q_deliveries.h"

#include <stdio.h>

#define CALLBACK_JSON                                                                  \
  "json_build_object('id', c.id, 'url', c.url, 'scope', c.scope, 'events', c.events, " \
  "'created_at', c.created_at)"

static const struct tb_db_stmt cb_insert = {
  "ci_cb_insert",
  "INSERT INTO callbacks AS c (id, project_id, url, scope, events, secret_sealed) "
  "VALUES ($1, $2, $3, $4, ARRAY(SELECT json_array_elements_text($5::json)), $6) "
  "RETURNING " CALLBACK_JSON "::text AS doc",
};

int
tb_q_deliveries_callback_insert(struct tb_db *db, const char *id, const char *project_id,
                                const char *url, const char *scope, const char *events,
                                const char *sealed, char **doc)
{
  const char *p[] = { id, project_id, url, scope, events, sealed };
  return tb_db_exec_str(db, &cb_insert, 6, p, "doc", doc, NULL);
}

static const struct tb_db_stmt cb_list = {
  "ci_cb_list",
  "SELECT coalesce(json_agg(" CALLBACK_JSON " ORDER BY c.created_at), '[]')::text AS doc "
  "FROM callbacks c WHERE c.project_id = $1 AND c.deleted_at IS NULL",
};

int
tb_q_deliveries_callback_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &cb_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt cb_delete = {
  "ci_cb_delete",
  "UPDATE callbacks SET deleted_at = now() WHERE id = $1 AND project_id = $2 "
  "AND deleted_at IS NULL",
};

int
tb_q_deliveries_callback_delete(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &cb_delete, 2, p, NULL);
}

static const struct tb_db_stmt dl_list = {
  "ci_dl_list",
  "SELECT coalesce(json_agg(json_build_object('id', d.id, 'job_id', d.job_id, "
  "  'callback_id', d.callback_id, 'url', d.url, 'event', d.event, 'status', d.status, "
  "  'attempts', d.attempts, 'next_attempt_at', CASE WHEN d.status IN ('pending', 'sending') "
  "  THEN d.next_attempt_at END, 'response_code', d.response_code, "
  "  'last_error', d.last_error, 'created_at', d.created_at, 'updated_at', d.updated_at, "
  "  'delivered_at', d.delivered_at) ORDER BY d.created_at DESC, d.id DESC), '[]')::text AS doc "
  "FROM (SELECT * FROM webhook_deliveries WHERE project_id = $1 "
  "  AND ($2::uuid IS NULL OR job_id = $2::uuid) AND ($3::text IS NULL OR status = $3) "
  "  ORDER BY created_at DESC, id DESC LIMIT $4::int) d",
};

int
tb_q_deliveries_list(struct tb_db *db, const char *project_id, const char *job_id,
                     const char *status, int limit, char **doc)
{
  char lim[24];
  snprintf(lim, sizeof lim, "%d", limit);
  const char *p[] = { project_id, job_id, status, lim };
  return tb_db_exec_str(db, &dl_list, 4, p, "doc", doc, NULL);
}
