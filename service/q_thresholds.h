/*
 * q_thresholds: the statements of /v1/thresholds
 * (service/api_thresholds.c); table thresholds in sql/0005_thresholds.sql
 * (what the regression check reads of it is lib/db/tb_history.c).  One
 * function per statement (the SQL beside it in q_thresholds.c), columns
 * read by name; each returns the row count or TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_Q_THRESHOLDS_H
#define TB_Q_THRESHOLDS_H

#include <stdbool.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* The project's thresholds as a JSON array (*doc, new); always 1 row. */
int tb_q_thresholds_list(struct tb_db *db, const char *project_id, char **doc) TB_MUST_CHECK;
/* Creates or replaces the threshold of labels (JSON object text, keys
 * sorted) with tolerance (a fraction, text): 1 with its document (*doc,
 * new) and *created (false: replaced). */
int tb_q_thresholds_put(struct tb_db *db, const char *project_id, const char *labels,
                        const char *tolerance, char **doc, bool *created) TB_MUST_CHECK;
/* Deletes threshold id; 1, or 0 when there is no such threshold. */
int tb_q_thresholds_delete(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;

#endif
