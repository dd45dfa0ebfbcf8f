/*
 * q_deliveries: the statements of /v1/callbacks and /v1/deliveries
 * (service/api_deliveries.c); tables callbacks and webhook_deliveries in
 * sql/0006_hooks_deliveries.sql (what the dispatcher itself runs is
 * service/tb_deliver.c).  One function per statement (the SQL beside it in
 * q_deliveries.c), columns read by name; each returns the row count or
 * TB_DB_SOFT / TB_DB_HARD.  The callback document never holds the secret.
 */
#ifndef TB_Q_DELIVERIES_H
#define TB_Q_DELIVERIES_H

#include "db/tb_db.h"
#include "base/tb_util.h"

/* Inserts callback id of project_id (events: a JSON array of names;
 * sealed: its sealed secret); 1 with its document (*doc, new). */
int tb_q_deliveries_callback_insert(struct tb_db *db, const char *id, const char *project_id,
                                    const char *url, const char *scope, const char *events,
                                    const char *sealed, char **doc) TB_MUST_CHECK;
/* The project's callbacks as a JSON array (*doc, new); always 1 row. */
int tb_q_deliveries_callback_list(struct tb_db *db, const char *project_id,
                                  char **doc) TB_MUST_CHECK;
/* Soft delete; 1, or 0 when there is no such callback. */
int tb_q_deliveries_callback_delete(struct tb_db *db, const char *id,
                                    const char *project_id) TB_MUST_CHECK;
/* The project's deliveries, newest first, as a JSON array (*doc, new):
 * job_id and status filter when not NULL, at most limit; always 1 row. */
int tb_q_deliveries_list(struct tb_db *db, const char *project_id, const char *job_id,
                         const char *status, int limit, char **doc) TB_MUST_CHECK;

#endif
