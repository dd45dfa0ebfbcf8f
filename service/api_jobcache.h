/*
 * api_jobcache: the documents of GET /v1/jobs/{id}, cached in the api
 * process so that polling clients (the web page, CI, `tokbench submit
 * --wait`) do not cost a database round trip each.
 *
 * Freshness: every change of a job is followed by NOTIFY tb_job_changed
 * (workers, the api's cancel); the listener (api_notify.c) drops the job's
 * entry BEFORE it resumes the long-polls waiting on it, so a woken waiter
 * reads the database.  A reader that queried the database while a NOTIFY
 * for the job was being handled would store a stale copy: it takes a ticket
 * (tb_api_jobcache_ticket) before its query, and its copy is refused when
 * an invalidation of that slot, or a flush, came in between.  When the
 * listener loses its connection (NOTIFYs may be lost) everything is
 * flushed.  An entry also expires after ttl_ms (TOKBENCH_JOB_CACHE_MS), a
 * bound on staleness for writes that send no NOTIFY (regression results);
 * 0 turns the cache off.
 *
 * Isolation: an entry records its project; a lookup with another project
 * misses (and the database answers 404 as before).
 *
 * Entries are reference counted: a lookup hands out the document without
 * copying it under the lock; the caller releases it.  One mutex guards the
 * table (a lookup is a hash, a compare and a counter increment).
 */
#ifndef TB_API_JOBCACHE_H
#define TB_API_JOBCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"

#define TB_JOBCACHE_DOC_MAX (256 * 1024) /* larger documents are not cached */

struct tb_api_jobcache;

/* A cached document (read-only for the holder). */
struct tb_api_jobdoc {
  char job_id[TB_API_ID_LEN + 1];
  char project_id[TB_API_ID_LEN + 1];
  char state[16];
  int64_t cells_done;
  char etag[96];
  size_t len;
  int refs;   /* under the cache lock */
  char doc[]; /* len bytes + NUL */
};

/* A new cache; ttl_ms 0: off (lookups miss, stores are dropped). */
struct tb_api_jobcache *tb_api_jobcache_new(int64_t ttl_ms);
void tb_api_jobcache_free(struct tb_api_jobcache *c);

/* The entry of job_id for project_id, or NULL; release it with
 * tb_api_jobcache_release. */
struct tb_api_jobdoc *tb_api_jobcache_get(struct tb_api_jobcache *c, const char *job_id,
                                          const char *project_id);
void tb_api_jobcache_release(struct tb_api_jobcache *c, struct tb_api_jobdoc *d);

/* Taken before the database query whose answer will be stored. */
uint64_t tb_api_jobcache_ticket(struct tb_api_jobcache *c, const char *job_id);
/* Stores a document read after ticket was taken (copied); dropped when the
 * job was invalidated since, or the document is over TB_JOBCACHE_DOC_MAX. */
void tb_api_jobcache_put(struct tb_api_jobcache *c, uint64_t ticket, const char *job_id,
                         const char *project_id, const char *state, int64_t cells_done,
                         const char *etag, const char *doc, size_t len);

/* Drops job_id's entry (NOTIFY tb_job_changed) / every entry. */
void tb_api_jobcache_invalidate(struct tb_api_jobcache *c, const char *job_id);
void tb_api_jobcache_flush(struct tb_api_jobcache *c);

#endif
