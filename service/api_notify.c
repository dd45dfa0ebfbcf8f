/*
 * api_notify: see api_notify.h.
 *
 * Waiters sit in one doubly linked list under one mutex.  Lock order: our
 * mutex, then libmicrohttpd's (MHD_suspend/resume_connection take it);
 * libmicrohttpd never calls us while holding its own.
 */
#include "api_notify.h"

#include <poll.h>
#include <string.h>

#include "api_auth.h"
#include "api_jobcache.h"
#include "base/tb_log.h"

#define TB_NOTIFY_TICK_MS 100

struct tb_api_notify {
  struct tb_api *api;
  struct tb_db *db;
  pthread_t thread;
  bool started;
  volatile bool stop;
  pthread_mutex_t lock;
  struct tb_api_waiter *head;
  bool closed; /* no more suspensions */
};

/* Under the lock. */
static void
unlink_waiter(struct tb_api_notify *n, struct tb_api_waiter *w)
{
  if (!w->listed)
    return;
  if (w->prev != NULL)
    w->prev->next = w->next;
  else
    n->head = w->next;
  if (w->next != NULL)
    w->next->prev = w->prev;
  w->prev = w->next = NULL;
  w->listed = false;
}

/* Under the lock: fire w (unlinks it and resumes its connection). */
static void
fire(struct tb_api_notify *n, struct tb_api_waiter *w)
{
  unlink_waiter(n, w);
  w->fired = true;
  if (w->suspended) {
    w->suspended = false;
    MHD_resume_connection(w->conn);
  }
}

/* Fires the waiters of job_id (NULL: all); also those past their deadline. */
static void
fire_matching(struct tb_api_notify *n, const char *job_id)
{
  int64_t now = tb_time_mono_ns();
  pthread_mutex_lock(&n->lock);
  struct tb_api_waiter *w = n->head;
  while (w != NULL) {
    struct tb_api_waiter *next = w->next;
    if (job_id == NULL || now >= w->deadline_ns || strcmp(w->job_id, job_id) == 0)
      fire(n, w);
    w = next;
  }
  pthread_mutex_unlock(&n->lock);
}

static void
fire_deadlines(struct tb_api_notify *n)
{
  int64_t now = tb_time_mono_ns();
  pthread_mutex_lock(&n->lock);
  struct tb_api_waiter *w = n->head;
  while (w != NULL) {
    struct tb_api_waiter *next = w->next;
    if (now >= w->deadline_ns)
      fire(n, w);
    w = next;
  }
  pthread_mutex_unlock(&n->lock);
}

static void
lost_link(struct tb_api_notify *n)
{
  tb_log(TB_LOG_WARN, "notification listener lost its database connection", NULL);
  /* A NOTIFY may be lost meanwhile: everyone re-checks, keys are re-read. */
  tb_api_jobcache_flush(n->api->jobs_cache);
  tb_api_jobcache_flush(n->api->results_cache);
  fire_matching(n, NULL);
  tb_api_keycache_flush(n->api->keys);
  while (!n->stop && !tb_db_ping(n->db))
    fire_deadlines(n);
  if (!n->stop) {
    tb_log(TB_LOG_INFO, "notification listener reconnected", NULL);
    tb_api_jobcache_flush(n->api->jobs_cache);
    tb_api_jobcache_flush(n->api->results_cache);
    fire_matching(n, NULL);
    tb_api_keycache_flush(n->api->keys);
  }
}

static void *
run(void *cls)
{
  struct tb_api_notify *n = cls;
  while (!n->stop) {
    PGconn *conn = tb_db_conn(n->db);
    int fd = PQsocket(conn);
    if (fd < 0 || PQstatus(conn) != CONNECTION_OK) {
      lost_link(n);
      continue;
    }
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    int pr = poll(&pfd, 1, TB_NOTIFY_TICK_MS);
    if (pr > 0) {
      if (PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK) {
        lost_link(n);
        continue;
      }
      PGnotify *nt;
      while ((nt = PQnotifies(conn)) != NULL) {
        if (strcmp(nt->relname, "tb_job_changed") == 0) {
          /* the cached copy goes first: a woken waiter must not find it */
          tb_api_jobcache_invalidate(n->api->jobs_cache, nt->extra);
          tb_api_jobcache_invalidate(n->api->results_cache, nt->extra);
          fire_matching(n, nt->extra);
        } else if (strcmp(nt->relname, "tb_keys_changed") == 0) {
          tb_api_keycache_flush(n->api->keys);
        } else if (strcmp(nt->relname, "tb_signing_keys_changed") == 0) {
          /* a revoked key: no cached result signed by it is served */
          tb_api_jobcache_flush(n->api->results_cache);
        }
        PQfreemem(nt);
      }
    }
    fire_deadlines(n);
  }
  return NULL;
}

struct tb_api_notify *
tb_api_notify_start(struct tb_api *api, const char *url, char **err)
{
  struct tb_api_notify *n = tb_xcalloc(1, sizeof *n);
  n->api = api;
  pthread_mutex_init(&n->lock, NULL);
  n->db = tb_db_connect(url, 0, err);
  if (n->db == NULL)
    goto fail;
  if (!tb_db_listen(n->db, "tb_job_changed") || !tb_db_listen(n->db, "tb_keys_changed") ||
      !tb_db_listen(n->db, "tb_signing_keys_changed")) {
    *err = tb_xstrdup("LISTEN failed");
    goto fail;
  }
  if (pthread_create(&n->thread, NULL, run, n) != 0) {
    *err = tb_xstrdup("cannot start the listener thread");
    goto fail;
  }
  n->started = true;
  return n;
fail:
  tb_db_close(n->db);
  pthread_mutex_destroy(&n->lock);
  free(n);
  return NULL;
}

void
tb_api_notify_stop(struct tb_api_notify *n)
{
  if (n == NULL)
    return;
  n->stop = true;
  if (n->started)
    pthread_join(n->thread, NULL);
  pthread_mutex_lock(&n->lock);
  n->closed = true;
  while (n->head != NULL)
    fire(n, n->head);
  pthread_mutex_unlock(&n->lock);
}

void
tb_api_notify_free(struct tb_api_notify *n)
{
  if (n == NULL)
    return;
  tb_db_close(n->db);
  pthread_mutex_destroy(&n->lock);
  free(n);
}

void
tb_api_notify_arm(struct tb_api_req *r, const char *job_id, int64_t deadline_ns)
{
  struct tb_api_notify *n = r->api->notify;
  struct tb_api_waiter *w = &r->waiter;
  pthread_mutex_lock(&n->lock);
  unlink_waiter(n, w);
  w->conn = r->conn;
  snprintf(w->job_id, sizeof w->job_id, "%s", job_id);
  w->deadline_ns = deadline_ns;
  w->fired = false;
  w->suspended = false;
  if (!n->closed) {
    w->next = n->head;
    w->prev = NULL;
    if (n->head != NULL)
      n->head->prev = w;
    n->head = w;
    w->listed = true;
  } else {
    w->fired = true;
  }
  pthread_mutex_unlock(&n->lock);
}

bool
tb_api_notify_suspend(struct tb_api_req *r)
{
  struct tb_api_notify *n = r->api->notify;
  struct tb_api_waiter *w = &r->waiter;
  bool ok = false;
  pthread_mutex_lock(&n->lock);
  if (!w->fired && w->listed && !n->closed) {
    w->suspended = true;
    MHD_suspend_connection(r->conn);
    ok = true;
  }
  pthread_mutex_unlock(&n->lock);
  return ok;
}

void
tb_api_notify_disarm(struct tb_api_req *r)
{
  struct tb_api_notify *n = r->api->notify;
  if (n == NULL)
    return;
  pthread_mutex_lock(&n->lock);
  unlink_waiter(n, &r->waiter);
  pthread_mutex_unlock(&n->lock);
}
