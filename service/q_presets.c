/*
 * q_presets: see q_presets.h.
 */
#include "q_presets.h"

#include <stdlib.h>
#include <string.h>

#define PRESET_JSON                                                \
  "json_build_object('id', p.id, 'name', p.name, 'spec', p.spec, " \
  "'created_at', p.created_at, 'updated_at', p.updated_at)"

/* Runs one of the two saves below: the document and whether the row is
 * new. */
static int
save(struct tb_db *db, const struct tb_db_stmt *st, const char *project_id, const char *name,
     const char *spec, char **doc, bool *created, bool *name_taken)
{
  const char *p[] = { project_id, name, spec };
  PGresult *res = NULL;
  *doc = NULL;
  *created = false;
  int rc = tb_db_exec_uv(db, st, 3, p, &res, name_taken);
  if (rc > 0) {
    *doc = tb_db_dup(res, 0, "doc");
    *created = tb_db_bool(res, 0, "created");
  }
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt preset_insert = {
  "ci_preset_insert",
  "INSERT INTO presets AS p (project_id, name, spec) VALUES ($1, $2, $3::jsonb) "
  "RETURNING " PRESET_JSON "::text AS doc, true AS created",
};

int
tb_q_presets_insert(struct tb_db *db, const char *project_id, const char *name, const char *spec,
                    char **doc, bool *name_taken)
{
  bool created;
  return save(db, &preset_insert, project_id, name, spec, doc, &created, name_taken);
}

static const struct tb_db_stmt preset_upsert = {
  "ci_preset_upsert",
  "INSERT INTO presets AS p (project_id, name, spec) VALUES ($1, $2, $3::jsonb) "
  "ON CONFLICT (project_id, name) DO UPDATE SET spec = EXCLUDED.spec, updated_at = now() "
  "RETURNING " PRESET_JSON "::text AS doc, (xmax = 0) AS created",
};

int
tb_q_presets_put(struct tb_db *db, const char *project_id, const char *name, const char *spec,
                 char **doc, bool *created)
{
  return save(db, &preset_upsert, project_id, name, spec, doc, created, NULL);
}

static const struct tb_db_stmt preset_list = {
  "ci_preset_list",
  "SELECT coalesce(json_agg(" PRESET_JSON " ORDER BY p.name), '[]')::text AS doc "
  "FROM presets p WHERE p.project_id = $1",
};

int
tb_q_presets_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &preset_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt preset_get = {
  "ci_preset_get",
  "SELECT " PRESET_JSON "::text AS doc, p.spec::text AS spec FROM presets p "
  "WHERE p.project_id = $1 AND p.name = $2",
};

int
tb_q_presets_get(struct tb_db *db, const char *project_id, const char *name, char **doc,
                 char **spec)
{
  const char *p[] = { project_id, name };
  PGresult *res = NULL;
  if (doc != NULL)
    *doc = NULL;
  if (spec != NULL)
    *spec = NULL;
  int rc = tb_db_exec(db, &preset_get, 2, p, &res);
  if (rc > 0 && doc != NULL)
    *doc = tb_db_dup(res, 0, "doc");
  if (rc > 0 && spec != NULL)
    *spec = tb_db_dup(res, 0, "spec");
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt preset_delete = {
  "ci_preset_delete",
  "WITH used AS (SELECT count(*) AS n FROM hooks h JOIN presets p ON p.id = h.preset_id "
  "  WHERE p.project_id = $1 AND p.name = $2 AND h.deleted_at IS NULL), "
  "del AS (DELETE FROM presets p WHERE p.project_id = $1 AND p.name = $2 "
  "  AND (SELECT n FROM used) = 0 RETURNING 1) "
  "SELECT (SELECT count(*) FROM del) AS deleted, (SELECT n FROM used) AS used, "
  "  (SELECT count(*) FROM presets WHERE project_id = $1 AND name = $2) AS found",
};

int
tb_q_presets_delete(struct tb_db *db, const char *project_id, const char *name, bool *in_use)
{
  const char *p[] = { project_id, name };
  PGresult *res = NULL;
  *in_use = false;
  int rc = tb_db_exec(db, &preset_delete, 2, p, &res);
  if (rc > 0) {
    *in_use = tb_db_i64(res, 0, "found") > 0;
    rc = tb_db_i64(res, 0, "deleted") > 0 ? 1 : 0;
  }
  PQclear(res);
  return rc;
}
