/*
 * api_quota: see api_quota.h.
 *
 * An open-addressing table of TB_QUOTA_SLOTS buckets keyed by project id,
 * under one mutex (held for a hash and a few additions).  Projects are
 * made by the operator, so they are few; should a probe window be full, the
 * bucket touched longest ago is taken over: it had refilled (it would start
 * full), so losing it costs nothing but, at worst, one burst.
 */
#include "api_quota.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_QUOTA_SLOTS 1024 /* power of two */
#define TB_QUOTA_PROBE 16

struct bucket {
  bool used;
  char project_id[TB_API_ID_LEN + 1];
  double tokens;
  int64_t at_ns;
};

struct tb_api_quota {
  pthread_mutex_t lock;
  double rate, burst;
  struct bucket slots[TB_QUOTA_SLOTS];
};

struct tb_api_quota *
tb_api_quota_new(double rate_per_s, double burst)
{
  struct tb_api_quota *q = tb_xcalloc(1, sizeof *q);
  pthread_mutex_init(&q->lock, NULL);
  q->rate = rate_per_s;
  q->burst = burst < rate_per_s ? rate_per_s : burst;
  if (q->burst < 1)
    q->burst = 1;
  return q;
}

void
tb_api_quota_free(struct tb_api_quota *q)
{
  if (q == NULL)
    return;
  pthread_mutex_destroy(&q->lock);
  free(q);
}

/* Under the lock: the bucket of id, a new full one when it has none. */
static struct bucket *
bucket_of(struct tb_api_quota *q, const char *id, int64_t now_ns)
{
  size_t h = 5381;
  for (const char *p = id; *p; p++)
    h = h * 33 + (unsigned char)*p;
  struct bucket *free_b = NULL, *oldest = NULL;
  for (size_t i = 0; i < TB_QUOTA_PROBE; i++) {
    struct bucket *b = &q->slots[(h + i) & (TB_QUOTA_SLOTS - 1)];
    if (!b->used) {
      if (free_b == NULL)
        free_b = b;
    } else if (strcmp(b->project_id, id) == 0) {
      return b;
    } else if (oldest == NULL || b->at_ns < oldest->at_ns) {
      oldest = b;
    }
  }
  struct bucket *b = free_b != NULL ? free_b : oldest;
  b->used = true;
  snprintf(b->project_id, sizeof b->project_id, "%s", id);
  b->tokens = q->burst;
  b->at_ns = now_ns;
  return b;
}

bool
tb_api_quota_charge(struct tb_api_quota *q, const char *project_id, int64_t now_ns,
                    int *retry_after_s)
{
  if (q == NULL || q->rate <= 0)
    return true;
  bool ok = true;
  pthread_mutex_lock(&q->lock);
  struct bucket *b = bucket_of(q, project_id, now_ns);
  double dt = (double)(now_ns - b->at_ns) / 1e9;
  b->at_ns = now_ns;
  b->tokens += dt > 0 ? dt * q->rate : 0;
  if (b->tokens > q->burst)
    b->tokens = q->burst;
  if (b->tokens >= 1.0) {
    b->tokens -= 1.0;
  } else {
    ok = false;
    *retry_after_s = (int)ceil((1.0 - b->tokens) / q->rate);
    if (*retry_after_s < 1)
      *retry_after_s = 1;
  }
  pthread_mutex_unlock(&q->lock);
  return ok;
}
