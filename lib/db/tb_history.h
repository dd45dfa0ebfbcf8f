/*
 * tb_history: the statements of a job's history (issue 14): the job, its
 * last good predecessor, its threshold, its series points (sql/0010) and
 * the regressions written into its result.  One function per statement;
 * each returns the row count (>= 0) or TB_DB_SOFT / TB_DB_HARD (tb_db.h),
 * and, where it reads, the rows in *res (caller PQclear()s) with the
 * columns named in its contract (read them with tb_db_str & co.).
 * lib/db/tb_regress and service/api_series.c do no SQL of their own.
 */
#ifndef TB_HISTORY_H
#define TB_HISTORY_H

#include "db/tb_db.h"
#include "base/tb_util.h"

/* Earlier jobs whose points tb_history_earlier returns, at most. */
#define TB_HISTORY_JOBS 100
/* Jobs of the matrix series GET /v1/series returns, at most (the newest). */
#define TB_HISTORY_MATRIX_JOBS 200
/* Points GET /v1/series returns, at most (the newest). */
#define TB_HISTORY_SERIES_MAX 400

/* The job (UUID text): columns project_id, endpoint_id, labels (JSON text),
 * result (JSON text or NULL), state, finished_at (now() when NULL). */
int tb_history_job(struct tb_db *db, const char *job_id, PGresult **res) TB_MUST_CHECK;

/* The last good job of endpoint with exactly labels before job_id finished
 * at finished_at (succeeded, a complete result): columns id, result. */
int tb_history_last_good(struct tb_db *db, const char *endpoint_id, const char *labels,
                         const char *job_id, const char *finished_at, PGresult **res) TB_MUST_CHECK;

/* The most specific threshold of project_id for a job carrying labels (may
 * be NULL = {}): column tolerance; 0 rows when none applies. */
int tb_history_threshold(struct tb_db *db, const char *project_id, const char *labels,
                         PGresult **res) TB_MUST_CHECK;

/* Writes regressions (JSON text) into the job's result. */
int tb_history_write_regressions(struct tb_db *db, const char *job_id,
                                 const char *regressions) TB_MUST_CHECK;

/* Records the job's points: points is a JSON array text of objects
 * { phase, context, concurrency, metric, value, se, ci_lo, ci_hi } (the last
 * three may be null); the series key comes from the job row, the time is
 * its finished_at.  A second call replaces the job's points. */
int tb_history_record(struct tb_db *db, const char *job_id, const char *points) TB_MUST_CHECK;

/* The points of the last TB_HISTORY_JOBS jobs of the job's series key
 * (project, endpoint, labels) that finished before it, oldest first:
 * columns job_id, at, phase, context, concurrency, metric, value, se. */
int tb_history_earlier(struct tb_db *db, const char *job_id, PGresult **res) TB_MUST_CHECK;

/* One series of project_id, the newest TB_HISTORY_SERIES_MAX points, oldest
 * first: columns job_id, at (RFC 3339), value, se, ci_lo, ci_hi.  labels
 * is a JSON object text matched exactly. */
int tb_history_series(struct tb_db *db, const char *project_id, const char *endpoint_id,
                      const char *labels, const char *phase, const char *context,
                      const char *concurrency, const char *metric, PGresult **res) TB_MUST_CHECK;

/* The points of one metric of every cell of a series key (project,
 * endpoint, labels, phase), of its newest TB_HISTORY_MATRIX_JOBS jobs,
 * oldest job first: columns job_id, at (RFC 3339), context, concurrency,
 * value.  For the matrix's geometric mean (GET /v1/series without context). */
int tb_history_matrix(struct tb_db *db, const char *project_id, const char *endpoint_id,
                      const char *labels, const char *phase, const char *metric,
                      PGresult **res) TB_MUST_CHECK;

#endif
