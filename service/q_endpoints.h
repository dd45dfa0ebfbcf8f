/*
 * q_endpoints: the statements of /v1/endpoints (service/api_endpoints.c);
 * table endpoints in sql/0002_endpoints_jobs.sql, the key's origin in
 * sql/0008_endpoint_key_origin.sql.  One function per statement (the SQL
 * beside it in q_endpoints.c), columns read by name; each returns the row
 * count or TB_DB_SOFT / TB_DB_HARD.  Every statement but the re-seal at
 * start names the project: another project's endpoint is no row.  The
 * endpoint document (EP_DOC) never holds the sealed key, only
 * "api_key_set".
 */
#ifndef TB_Q_ENDPOINTS_H
#define TB_Q_ENDPOINTS_H

#include <stdbool.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* A new endpoint (strings borrowed; NULL = SQL NULL; hardware and engine
 * JSON texts, NULL: {}; gpu a JSON text; price_per_hour a number's text;
 * issue 26's columns in sql/0012_endpoint_cost.sql). */
struct tb_q_endpoints_new {
  const char *id, *project_id, *name, *base_url, *api_key_sealed, *engine_hint;
  const char *hardware, *engine, *launch_command, *exclusive_group, *api_key_origin;
  const char *gpu, *price_per_hour, *currency, *telemetry_url;
};
/* Inserts it; 1 with its document in *doc (new).  *name_taken set (and
 * TB_DB_HARD) when the project has an endpoint of that name. */
int tb_q_endpoints_insert(struct tb_db *db, const struct tb_q_endpoints_new *e, char **doc,
                          bool *name_taken) TB_MUST_CHECK;
/* The project's endpoints as a JSON array (*doc, new); always 1 row. */
int tb_q_endpoints_list(struct tb_db *db, const char *project_id, char **doc) TB_MUST_CHECK;
/* One endpoint's document (*doc, new); 0: no such endpoint. */
int tb_q_endpoints_get(struct tb_db *db, const char *id, const char *project_id,
                       char **doc) TB_MUST_CHECK;
/* 1 when endpoint id is the project's (deleted or not: its history stays
 * the project's), 0 when it is not or does not exist. */
int tb_q_endpoints_owned(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;
/* Applies patch (a JSON object of the members to set; "api_key" present
 * means sealed/key_origin replace the key) to the endpoint; new_origin is
 * the origin of a new base_url (NULL: none), and a base_url of another
 * origin drops the key unless the patch sets one.  1 with the document
 * (*doc, new); 0 no such endpoint; *name_taken as for insert. */
int tb_q_endpoints_patch(struct tb_db *db, const char *id, const char *project_id,
                         const char *patch, const char *sealed, const char *new_origin,
                         const char *key_origin, char **doc, bool *name_taken) TB_MUST_CHECK;
/* Soft delete; 1, or 0 when there is no such endpoint. */
int tb_q_endpoints_delete(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;

/* Where an endpoint is and its sealed key (new strings; key and origin
 * NULL when none). */
struct tb_q_endpoints_secret {
  char *base_url, *api_key_sealed, *api_key_origin;
};
int tb_q_endpoints_secret(struct tb_db *db, const char *id, const char *project_id,
                          struct tb_q_endpoints_secret *out) TB_MUST_CHECK;
void tb_q_endpoints_secret_clear(struct tb_q_endpoints_secret *s);

/* Every endpoint whose key was sealed before keys were bound to an origin,
 * each given to fn (strings borrowed for the call).  Returns the count. */
typedef void (*tb_q_endpoints_legacy_fn)(void *cls, const char *id, const char *base_url,
                                         const char *api_key_sealed);
int tb_q_endpoints_legacy(struct tb_db *db, tb_q_endpoints_legacy_fn fn, void *cls) TB_MUST_CHECK;
/* Replaces the legacy seal old of endpoint id by sealed, bound to origin;
 * 1, or 0 when the row changed meanwhile. */
int tb_q_endpoints_reseal(struct tb_db *db, const char *id, const char *sealed, const char *origin,
                          const char *old) TB_MUST_CHECK;

#endif
