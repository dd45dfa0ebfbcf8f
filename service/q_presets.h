/*
 * q_presets: the statements of /v1/presets (service/api_presets.c); table
 * presets in sql/0006_hooks_deliveries.sql.  One function per statement
 * (the SQL beside it in q_presets.c), columns read by name; each returns
 * the row count or TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_Q_PRESETS_H
#define TB_Q_PRESETS_H

#include <stdbool.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* Inserts preset name of project_id with spec (normalised JSON text).  1
 * with its document (*doc, new); *name_taken set (TB_DB_HARD) when the
 * project has a preset of that name. */
int tb_q_presets_insert(struct tb_db *db, const char *project_id, const char *name,
                        const char *spec, char **doc, bool *name_taken) TB_MUST_CHECK;
/* Creates or replaces preset name: 1 with its document (*doc, new) and
 * *created (false: replaced). */
int tb_q_presets_put(struct tb_db *db, const char *project_id, const char *name, const char *spec,
                     char **doc, bool *created) TB_MUST_CHECK;
/* The project's presets as a JSON array (*doc, new); always 1 row. */
int tb_q_presets_list(struct tb_db *db, const char *project_id, char **doc) TB_MUST_CHECK;
/* Preset name: 1 with its document (*doc) and its spec (*spec, JSON text),
 * each new and only when the pointer is not NULL; 0: no such preset. */
int tb_q_presets_get(struct tb_db *db, const char *project_id, const char *name, char **doc,
                     char **spec) TB_MUST_CHECK;
/* Deletes preset name unless hooks use it: 1 deleted; 0 not, with *in_use
 * (true: hooks use it; false: no such preset). */
int tb_q_presets_delete(struct tb_db *db, const char *project_id, const char *name,
                        bool *in_use) TB_MUST_CHECK;

#endif
