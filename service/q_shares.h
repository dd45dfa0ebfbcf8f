/*
 * q_shares: the statements of share links (issue 35, item 2): the routes
 * of service/api_shares.c (POST /v1/jobs/{id}/shares, /v1/compare/shares,
 * /v1/endpoints/{id}/shares; GET /v1/shares; DELETE /v1/shares/{id}) and
 * the opening of one by its token (GET /s/{token}); table shares in
 * sql/0017_shares.sql.  One function per statement (the SQL beside it in
 * q_shares.c), columns read by name; each returns the row count or
 * TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_Q_SHARES_H
#define TB_Q_SHARES_H

#include <stdbool.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* A new share (texts; NULL = SQL NULL). */
struct tb_q_shares_new {
  const char *project_id, *kind; /* "job", "compare", "endpoint" */
  const char *job_id;            /* job: the job; compare: the head */
  const char *base_job_id;       /* compare: the base */
  const char *endpoint_id;       /* endpoint: the endpoint */
  const char *params;            /* JSON object text (the history's series) */
  const char *private_labels;    /* JSON array text of label keys */
  const char *token_hash;        /* SHA-256 hex of the token */
  const char *created_by;        /* the key that made it */
  const char *expires_in_s;      /* integer text; NULL: never expires */
};
/* Inserts it when every job and endpoint it names is the project's (a
 * live endpoint): 1 with *doc (new, the share as GET /v1/shares lists it),
 * 0 when one of them is not. */
int tb_q_shares_insert(struct tb_db *db, const struct tb_q_shares_new *s, char **doc) TB_MUST_CHECK;

/* The project's live shares (neither revoked nor expired) into *n; 1. */
int tb_q_shares_live(struct tb_db *db, const char *project_id, int64_t *n) TB_MUST_CHECK;

/* 1 when job id is project_id's, else 0. */
int tb_q_shares_job_owned(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;

/* The project's shares as a JSON array (*doc, new; never a token or its
 * hash); always 1 row. */
int tb_q_shares_list(struct tb_db *db, const char *project_id, char **doc) TB_MUST_CHECK;

/* Revokes share id of project_id: 1, or 0 when there is none not revoked. */
int tb_q_shares_revoke(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;

/* A share as GET /s/{token} opens it (texts as stored, new strings; NULL
 * when NULL). */
struct tb_q_shares_open {
  char id[37], project_id[37];
  char kind[16];
  char *job_id, *base_job_id, *endpoint_id;
  char *params, *private_labels; /* JSON texts */
  bool revoked, expired;
};
/* The share whose token hashes to token_hash: 1, or 0 when there is none.
 * Free with tb_q_shares_open_clear. */
int tb_q_shares_by_token(struct tb_db *db, const char *token_hash,
                         struct tb_q_shares_open *out) TB_MUST_CHECK;
void tb_q_shares_open_clear(struct tb_q_shares_open *s);

/* The endpoints of what a share shows, deleted ones too (their URLs and
 * keys are hidden from the page, tb_sharedoc): the endpoint endpoint_id
 * and those of jobs job_a and job_b (each may be NULL), of project_id.
 * Columns id, base_url, api_key_sealed, api_key_origin, telemetry_url in
 * *res (caller PQclear()s). */
int tb_q_shares_endpoints(struct tb_db *db, const char *project_id, const char *endpoint_id,
                          const char *job_a, const char *job_b, PGresult **res) TB_MUST_CHECK;

#endif
