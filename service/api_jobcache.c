/*
 * api_jobcache: see api_jobcache.h.
 *
 * A direct-mapped table of TB_JOBCACHE_SLOTS entries indexed by a hash of
 * the job id.  Each slot has a generation, bumped by every invalidation of
 * an id hashing to it; a flush bumps the cache's epoch.  A ticket is
 * (epoch << 32 | slot generation): a store whose ticket no longer matches
 * is dropped, so a copy read before an invalidation never lands after it.
 */
#include "api_jobcache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_JOBCACHE_SLOTS 4096 /* power of two */

struct slot {
  struct tb_api_jobdoc *doc;
  int64_t stored_ns;
  uint32_t gen;
};

struct tb_api_jobcache {
  pthread_mutex_t lock;
  int64_t ttl_ns;
  uint32_t epoch;
  struct slot slots[TB_JOBCACHE_SLOTS];
};

struct tb_api_jobcache *
tb_api_jobcache_new(int64_t ttl_ms)
{
  struct tb_api_jobcache *c = tb_xcalloc(1, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
  c->ttl_ns = ttl_ms * 1000000;
  return c;
}

/* Under the lock: drops one reference. */
static void
unref(struct tb_api_jobdoc *d)
{
  if (d != NULL && --d->refs == 0)
    free(d);
}

void
tb_api_jobcache_free(struct tb_api_jobcache *c)
{
  if (c == NULL)
    return;
  for (size_t i = 0; i < TB_JOBCACHE_SLOTS; i++)
    unref(c->slots[i].doc);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* FNV-1a of the id's text (ids are random: any mix will do). */
static size_t
slot_of(const char *job_id)
{
  uint32_t h = 2166136261u;
  for (const char *p = job_id; *p != '\0'; p++)
    h = (h ^ (uint8_t)*p) * 16777619u;
  return h & (TB_JOBCACHE_SLOTS - 1);
}

struct tb_api_jobdoc *
tb_api_jobcache_get(struct tb_api_jobcache *c, const char *job_id, const char *project_id)
{
  if (c == NULL || c->ttl_ns == 0)
    return NULL;
  struct slot *s = &c->slots[slot_of(job_id)];
  struct tb_api_jobdoc *d = NULL;
  int64_t now = tb_time_mono_ns();
  pthread_mutex_lock(&c->lock);
  if (s->doc != NULL && now - s->stored_ns < c->ttl_ns && strcmp(s->doc->job_id, job_id) == 0 &&
      strcmp(s->doc->project_id, project_id) == 0) {
    d = s->doc;
    d->refs++;
  }
  pthread_mutex_unlock(&c->lock);
  return d;
}

void
tb_api_jobcache_release(struct tb_api_jobcache *c, struct tb_api_jobdoc *d)
{
  if (d == NULL)
    return;
  pthread_mutex_lock(&c->lock);
  unref(d);
  pthread_mutex_unlock(&c->lock);
}

uint64_t
tb_api_jobcache_ticket(struct tb_api_jobcache *c, const char *job_id)
{
  if (c == NULL)
    return 0;
  pthread_mutex_lock(&c->lock);
  uint64_t t = (uint64_t)c->epoch << 32 | c->slots[slot_of(job_id)].gen;
  pthread_mutex_unlock(&c->lock);
  return t;
}

void
tb_api_jobcache_put(struct tb_api_jobcache *c, uint64_t ticket, const char *job_id,
                    const char *project_id, const char *state, int64_t cells_done, const char *etag,
                    const char *doc, size_t len)
{
  if (c == NULL || c->ttl_ns == 0 || len > TB_JOBCACHE_DOC_MAX || strlen(job_id) > TB_API_ID_LEN ||
      strlen(project_id) > TB_API_ID_LEN)
    return;
  struct tb_api_jobdoc *d = tb_xmalloc(sizeof *d + len + 1);
  snprintf(d->job_id, sizeof d->job_id, "%s", job_id);
  snprintf(d->project_id, sizeof d->project_id, "%s", project_id);
  snprintf(d->state, sizeof d->state, "%s", state);
  snprintf(d->etag, sizeof d->etag, "%s", etag);
  d->cells_done = cells_done;
  d->len = len;
  d->refs = 1;
  memcpy(d->doc, doc, len);
  d->doc[len] = '\0';
  struct slot *s = &c->slots[slot_of(job_id)];
  int64_t now = tb_time_mono_ns();
  pthread_mutex_lock(&c->lock);
  if (((uint64_t)c->epoch << 32 | s->gen) == ticket) {
    unref(s->doc);
    s->doc = d;
    s->stored_ns = now;
    d = NULL;
  }
  unref(d); /* refused */
  pthread_mutex_unlock(&c->lock);
}

void
tb_api_jobcache_invalidate(struct tb_api_jobcache *c, const char *job_id)
{
  if (c == NULL || job_id == NULL)
    return;
  struct slot *s = &c->slots[slot_of(job_id)];
  pthread_mutex_lock(&c->lock);
  s->gen++;
  unref(s->doc);
  s->doc = NULL;
  pthread_mutex_unlock(&c->lock);
}

void
tb_api_jobcache_flush(struct tb_api_jobcache *c)
{
  if (c == NULL)
    return;
  pthread_mutex_lock(&c->lock);
  c->epoch++;
  for (size_t i = 0; i < TB_JOBCACHE_SLOTS; i++) {
    unref(c->slots[i].doc);
    c->slots[i].doc = NULL;
  }
  pthread_mutex_unlock(&c->lock);
}
