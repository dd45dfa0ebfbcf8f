/*
 * api_streams: see api_streams.h.
 *
 * A chained hash table of the keys that hold at least one slot, under one
 * mutex (taken twice per stream, never while waiting).  An entry is freed
 * when its last slot is given back, so the table holds at most one entry per
 * open stream: its size is bounded by the connection limit, not by the keys.
 */
#include "api_streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_STREAMS_BUCKETS 256 /* power of two */

struct held {
  struct held *next;
  char key_id[TB_API_ID_LEN + 1];
  unsigned n[3]; /* by enum tb_api_stream_kind */
};

struct tb_api_streams {
  pthread_mutex_t lock;
  unsigned cap[3];
  struct held *b[TB_STREAMS_BUCKETS];
};

struct tb_api_streams *
tb_api_streams_new(unsigned sse_per_key, unsigned wait_per_key)
{
  struct tb_api_streams *s = tb_xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  s->cap[TB_API_STREAM_SSE] = sse_per_key;
  s->cap[TB_API_STREAM_WAIT] = wait_per_key;
  return s;
}

void
tb_api_streams_free(struct tb_api_streams *s)
{
  if (s == NULL)
    return;
  for (size_t i = 0; i < TB_STREAMS_BUCKETS; i++) {
    struct held *h = s->b[i];
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

/* Under the lock: the entry of key_id, or NULL; *link: where it hangs. */
static struct held *
find(struct tb_api_streams *s, const char *key_id, struct held ***link)
{
  struct held **l = &s->b[bucket_of(key_id)];
  while (*l != NULL && strcmp((*l)->key_id, key_id) != 0)
    l = &(*l)->next;
  if (link != NULL)
    *link = l;
  return *l;
}

bool
tb_api_streams_take(struct tb_api_req *r, enum tb_api_stream_kind kind, enum MHD_Result *ret)
{
  struct tb_api_streams *s = r->api->streams;
  if (s == NULL || r->stream_held != 0)
    return true;
  unsigned cap = s->cap[kind];
  bool ok = true;
  pthread_mutex_lock(&s->lock);
  struct held **link;
  struct held *h = find(s, r->key_id, &link);
  if (cap != 0 && h != NULL && h->n[kind] >= cap) {
    ok = false;
  } else {
    if (h == NULL) {
      h = tb_xcalloc(1, sizeof *h);
      snprintf(h->key_id, sizeof h->key_id, "%s", r->key_id);
      *link = h;
    }
    h->n[kind]++;
    r->stream_held = (int)kind;
  }
  pthread_mutex_unlock(&s->lock);
  if (ok)
    return true;
  const char *what = kind == TB_API_STREAM_SSE ? "event streams" : "long-polls (?wait=)";
  const char *name = kind == TB_API_STREAM_SSE ? "TOKBENCH_SSE_PER_KEY" : "TOKBENCH_WAIT_PER_KEY";
  char d[160];
  snprintf(d, sizeof d, "this API key holds %u open %s, the most allowed (%s=%u)", cap, what,
           name, cap);
  r->retry_after_s = kind == TB_API_STREAM_SSE ? 5 : 1;
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
  struct held **link;
  struct held *h = find(s, r->key_id, &link);
  if (h != NULL) {
    if (h->n[kind] > 0)
      h->n[kind]--;
    if (h->n[TB_API_STREAM_SSE] == 0 && h->n[TB_API_STREAM_WAIT] == 0) {
      *link = h->next;
      free(h);
    }
  }
  pthread_mutex_unlock(&s->lock);
}

unsigned
tb_api_streams_held(struct tb_api_streams *s, const char *key_id, enum tb_api_stream_kind kind)
{
  pthread_mutex_lock(&s->lock);
  struct held *h = find(s, key_id, NULL);
  unsigned n = h != NULL ? h->n[kind] : 0;
  pthread_mutex_unlock(&s->lock);
  return n;
}
