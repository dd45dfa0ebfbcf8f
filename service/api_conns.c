/*
 * api_conns: see api_conns.h.
 */
#include "api_conns.h"

#include <stdlib.h>
#include <sys/socket.h>

#include "base/tb_util.h"
#include "tb_metrics.h"

struct tb_api_conn {
  struct tb_api_conn *prev, *next;
  int fd;
  bool headed;  /* a request's head is in and the request not over */
  bool evicted; /* shut down: never chosen again */
};

/* tokbench_api_connections_evicted_total */
static struct tb_metric *
evicted_metric(void)
{
  return tb_metrics_family(tb_metrics_global(), TB_METRIC_COUNTER,
                           "tokbench_api_connections_evicted_total",
                           "Connections without a request head shut down to let new clients in "
                           "(TOKBENCH_CONNECTIONS_RESERVE).",
                           NULL, NULL, 0);
}

void
tb_api_conns_init(struct tb_api_conns *cs, unsigned evict_at)
{
  *cs = (struct tb_api_conns){ .evict_at = evict_at, .ready = true };
  pthread_mutex_init(&cs->lock, NULL);
  (void)evicted_metric(); /* exported from the start, at 0 */
}

void
tb_api_conns_free(struct tb_api_conns *cs)
{
  if (!cs->ready)
    return;
  struct tb_api_conn *c = cs->head;
  while (c != NULL) {
    struct tb_api_conn *n = c->next;
    free(c);
    c = n;
  }
  cs->head = cs->tail = NULL;
  pthread_mutex_destroy(&cs->lock);
  cs->ready = false;
}

/* The oldest connection without a head shut down, under the lock. */
static void
evict_oldest(struct tb_api_conns *cs)
{
  for (struct tb_api_conn *c = cs->head; c != NULL; c = c->next) {
    if (c->headed || c->evicted)
      continue;
    c->evicted = true;
    (void)shutdown(c->fd, SHUT_RDWR);
    cs->evicted++;
    tb_metric_add(evicted_metric(), NULL, 1);
    return;
  }
}

struct tb_api_conn *
tb_api_conns_open(struct tb_api_conns *cs, int fd)
{
  struct tb_api_conn *c = tb_xcalloc(1, sizeof *c);
  c->fd = fd;
  pthread_mutex_lock(&cs->lock);
  if (cs->evict_at > 0 && cs->open + 1 >= cs->evict_at)
    evict_oldest(cs);
  c->prev = cs->tail;
  if (cs->tail != NULL)
    cs->tail->next = c;
  else
    cs->head = c;
  cs->tail = c;
  cs->open++;
  pthread_mutex_unlock(&cs->lock);
  return c;
}

void
tb_api_conns_close(struct tb_api_conns *cs, struct tb_api_conn *c)
{
  if (c == NULL)
    return;
  pthread_mutex_lock(&cs->lock);
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    cs->head = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  else
    cs->tail = c->prev;
  cs->open--;
  pthread_mutex_unlock(&cs->lock);
  free(c);
}

void
tb_api_conns_headed(struct tb_api_conns *cs, struct tb_api_conn *c, bool headed)
{
  if (c == NULL)
    return;
  pthread_mutex_lock(&cs->lock);
  c->headed = headed;
  pthread_mutex_unlock(&cs->lock);
}

uint64_t
tb_api_conns_evicted(struct tb_api_conns *cs)
{
  pthread_mutex_lock(&cs->lock);
  uint64_t n = cs->evicted;
  pthread_mutex_unlock(&cs->lock);
  return n;
}
