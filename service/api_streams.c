/*
 * api_streams: see api_streams.h.
 *
 * A chained hash table of the keys that hold at least one slot, under one
 * mutex (taken twice per stream, never while waiting).  An entry is freed
 * when its last slot is given back, so the table holds at most one entry per
 * open stream: its size is bounded by the connection limit, not by the keys.
 * Projects have a table of their own, the same way (issue 27: a project
 * makes as many keys as it likes, so a per-key cap alone multiplies).
 */
#include "api_streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_STREAMS_BUCKETS 256 /* power of two */

struct held {
  struct held *next;
  char key_id[TB_API_ID_LEN + 1];
  unsigned n[4]; /* by enum tb_api_stream_kind */
};

enum {
  BY_KEY,
  BY_PROJECT
};

struct tb_api_streams {
  pthread_mutex_t lock;
  unsigned cap[2][4];                    /* [BY_KEY/BY_PROJECT][kind] */
  struct held *b[2][TB_STREAMS_BUCKETS]; /* entries by key id, by project id */
};

struct tb_api_streams *
tb_api_streams_new(unsigned sse_per_key, unsigned wait_per_key, unsigned sse_per_project,
                   unsigned wait_per_project)
{
  struct tb_api_streams *s = tb_xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  s->cap[BY_KEY][TB_API_STREAM_SSE] = sse_per_key;
  s->cap[BY_KEY][TB_API_STREAM_WAIT] = wait_per_key;
  s->cap[BY_PROJECT][TB_API_STREAM_SSE] = sse_per_project;
  s->cap[BY_PROJECT][TB_API_STREAM_WAIT] = wait_per_project;
  return s;
}

void
tb_api_streams_cap_uploads(struct tb_api_streams *s, unsigned per_project)
{
  s->cap[BY_PROJECT][TB_API_STREAM_UPLOAD] = per_project;
}

void
tb_api_streams_free(struct tb_api_streams *s)
{
  if (s == NULL)
    return;
  for (size_t t = 0; t < 2; t++)
    for (size_t i = 0; i < TB_STREAMS_BUCKETS; i++) {
      struct held *h = s->b[t][i];
      while (h != NULL) {
        struct held *next = h->next;
        free(h);
        h = next;
      }
    }
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static size_t
bucket_of(const char *key_id)
{
  size_t h = 5381;
  for (const char *p = key_id; *p; p++)
    h = h * 33 + (unsigned char)*p;
  return h & (TB_STREAMS_BUCKETS - 1);
}

/* Under the lock: the entry of id in table t, or NULL; *link: where it
 * hangs. */
static struct held *
find(struct tb_api_streams *s, int t, const char *key_id, struct held ***link)
{
  struct held **l = &s->b[t][bucket_of(key_id)];
  while (*l != NULL && strcmp((*l)->key_id, key_id) != 0)
    l = &(*l)->next;
  if (link != NULL)
    *link = l;
  return *l;
}

/* Under the lock: true when id is below table t's cap of kind. */
static bool
below_cap(struct tb_api_streams *s, int t, const char *id, enum tb_api_stream_kind kind)
{
  struct held *h = find(s, t, id, NULL);
  return s->cap[t][kind] == 0 || h == NULL || h->n[kind] < s->cap[t][kind];
}

/* Under the lock: one more slot of kind for id in table t. */
static void
hold(struct tb_api_streams *s, int t, const char *id, enum tb_api_stream_kind kind)
{
  struct held **link;
  struct held *h = find(s, t, id, &link);
  if (h == NULL) {
    h = tb_xcalloc(1, sizeof *h);
    snprintf(h->key_id, sizeof h->key_id, "%s", id);
    *link = h;
  }
  h->n[kind]++;
}

/* Under the lock: one slot of kind fewer for id in table t. */
static void
unhold(struct tb_api_streams *s, int t, const char *id, int kind)
{
  struct held **link;
  struct held *h = find(s, t, id, &link);
  if (h == NULL)
    return;
  if (h->n[kind] > 0)
    h->n[kind]--;
  if (h->n[TB_API_STREAM_SSE] == 0 && h->n[TB_API_STREAM_WAIT] == 0 &&
      h->n[TB_API_STREAM_UPLOAD] == 0) {
    *link = h->next;
    free(h);
  }
}

bool
tb_api_streams_take(struct tb_api_req *r, enum tb_api_stream_kind kind, enum MHD_Result *ret)
{
  struct tb_api_streams *s = r->api->streams;
  if (s == NULL || r->stream_held != 0)
    return true;
  pthread_mutex_lock(&s->lock);
  int full = !below_cap(s, BY_KEY, r->key_id, kind)           ? BY_KEY
             : !below_cap(s, BY_PROJECT, r->project_id, kind) ? BY_PROJECT
                                                              : -1;
  if (full < 0) {
    hold(s, BY_KEY, r->key_id, kind);
    hold(s, BY_PROJECT, r->project_id, kind);
    r->stream_held = (int)kind;
  }
  unsigned cap = full >= 0 ? s->cap[full][kind] : 0;
  pthread_mutex_unlock(&s->lock);
  if (full < 0)
    return true;
  static const char *const names[2][4] = {
    [BY_KEY] = { NULL, "TOKBENCH_SSE_PER_KEY", "TOKBENCH_WAIT_PER_KEY", NULL },
    [BY_PROJECT] = { NULL, "TOKBENCH_SSE_PER_PROJECT", "TOKBENCH_WAIT_PER_PROJECT",
                     "TOKBENCH_TRACE_UPLOADS_PER_PROJECT" },
  };
  const char *what = kind == TB_API_STREAM_SSE    ? "event streams"
                     : kind == TB_API_STREAM_WAIT ? "long-polls (?wait=)"
                                                  : "trace uploads being read";
  const char *name = names[full][kind];
  char d[160];
  snprintf(d, sizeof d, "this %s holds %u open %s, the most allowed (%s=%u)",
           full == BY_KEY ? "API key" : "project (all its keys)", cap, what, name, cap);
  r->retry_after_s = kind == TB_API_STREAM_WAIT ? 1 : 5;
  *ret = tb_api_reply_error(r, TB_EC_RATE_LIMITED, d, json_pack("{ss}", "limit", name));
  return false;
}

void
tb_api_streams_release(struct tb_api_req *r)
{
  struct tb_api_streams *s = r->api->streams;
  if (s == NULL || r->stream_held == 0)
    return;
  int kind = r->stream_held;
  r->stream_held = 0;
  pthread_mutex_lock(&s->lock);
  unhold(s, BY_KEY, r->key_id, kind);
  unhold(s, BY_PROJECT, r->project_id, kind);
  pthread_mutex_unlock(&s->lock);
}

unsigned
tb_api_streams_held(struct tb_api_streams *s, const char *key_id, enum tb_api_stream_kind kind)
{
  pthread_mutex_lock(&s->lock);
  struct held *h = find(s, BY_KEY, key_id, NULL);
  unsigned n = h != NULL ? h->n[kind] : 0;
  pthread_mutex_unlock(&s->lock);
  return n;
}
