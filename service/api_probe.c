/*
 * api_probe: the probe pool.  See api_probe.h.
 */
#include "api_probe.h"

#include <openssl/crypto.h>
#include <string.h>

#include "engine/tb_engine.h"
#include "net/tb_http.h"
#include "base/tb_log.h"

#define TB_PROBE_THREADS_MAX 64

struct probe_task {
  struct probe_task *prev, *next; /* the pool's list, while queued or running */
  struct MHD_Connection *conn;
  char project_id[TB_API_ID_LEN + 1];
  char *base_url;
  char *key;
  bool running;   /* taken by a pool thread */
  bool suspended; /* the connection is suspended */
  bool done;      /* found or err is set */
  json_t *found;
  char *err;
};

struct tb_api_probes {
  struct tb_api_probe_opts o;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct probe_task *head, *tail; /* FIFO of queued and running tasks */
  unsigned count;
  bool closed;
  pthread_t threads[TB_PROBE_THREADS_MAX];
  unsigned n_threads;
};

static void
key_free(char *key)
{
  if (key != NULL) {
    OPENSSL_cleanse(key, strlen(key));
    free(key);
  }
}

static void
task_free(void *v)
{
  struct probe_task *t = v;
  if (t == NULL)
    return;
  key_free(t->key);
  free(t->base_url);
  json_decref(t->found);
  free(t->err);
  free(t);
}

/* Under the lock. */
static void
unlink_task(struct tb_api_probes *p, struct probe_task *t)
{
  if (t->prev != NULL)
    t->prev->next = t->next;
  else
    p->head = t->next;
  if (t->next != NULL)
    t->next->prev = t->prev;
  else
    p->tail = t->prev;
  t->prev = t->next = NULL;
  p->count--;
}

/* Under the lock: the task is answered; after this the pool forgets it. */
static void
finish(struct tb_api_probes *p, struct probe_task *t)
{
  unlink_task(p, t);
  t->done = true;
  if (t->suspended) {
    t->suspended = false;
    MHD_resume_connection(t->conn);
  }
}

static void *
run(void *arg)
{
  struct tb_api_probes *p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    struct probe_task *t = p->head;
    while (t != NULL && t->running)
      t = t->next;
    if (t == NULL) {
      if (p->closed)
        break;
      pthread_cond_wait(&p->wake, &p->lock);
      continue;
    }
    t->running = true;
    char *base = t->base_url, *key = t->key;
    t->key = NULL;
    pthread_mutex_unlock(&p->lock);

    char *err = NULL;
    tb_http_set_deadline(tb_time_mono_ns() + (int64_t)p->o.deadline_ms * 1000000);
    json_t *found = tb_engine_probe(base, key, &err);
    tb_http_set_deadline(0);
    key_free(key);

    pthread_mutex_lock(&p->lock);
    t->found = found;
    t->err = found == NULL ? (err != NULL ? err : tb_xstrdup("discovery failed")) : NULL;
    if (found != NULL)
      free(err);
    finish(p, t);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

struct tb_api_probes *
tb_api_probes_start(const struct tb_api_probe_opts *o, char **err)
{
  struct tb_api_probes *p = tb_xcalloc(1, sizeof *p);
  p->o = *o;
  if (p->o.threads > TB_PROBE_THREADS_MAX)
    p->o.threads = TB_PROBE_THREADS_MAX;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  for (unsigned i = 0; i < p->o.threads; i++) {
    if (pthread_create(&p->threads[i], NULL, run, p) != 0) {
      *err = tb_xasprintf("cannot start probe thread %u", i);
      tb_api_probes_free(p);
      return NULL;
    }
    p->n_threads++;
  }
  return p;
}

void
tb_api_probes_stop(struct tb_api_probes *p)
{
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  p->closed = true;
  struct probe_task *t = p->head;
  while (t != NULL) {
    struct probe_task *next = t->next;
    if (!t->running) {
      t->err = tb_xstrdup("the service is stopping");
      finish(p, t);
    }
    t = next;
  }
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (unsigned i = 0; i < p->n_threads; i++)
    pthread_join(p->threads[i], NULL);
  p->n_threads = 0;
}

void
tb_api_probes_free(struct tb_api_probes *p)
{
  if (p == NULL)
    return;
  tb_api_probes_stop(p);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

enum MHD_Result
tb_api_probe_start(struct tb_api_req *r, char *base_url, char *key)
{
  struct tb_api_probes *p = r->api->probes;
  struct probe_task *t = tb_xcalloc(1, sizeof *t);
  t->conn = r->conn;
  snprintf(t->project_id, sizeof t->project_id, "%s", r->project_id);
  t->base_url = base_url;
  t->key = key;
  char detail[160] = "";
  pthread_mutex_lock(&p->lock);
  unsigned mine = 0;
  for (struct probe_task *o = p->head; o != NULL; o = o->next)
    mine += strcmp(o->project_id, t->project_id) == 0;
  if (p->closed) {
    snprintf(detail, sizeof detail, "stopping");
  } else if (mine >= p->o.per_project) {
    snprintf(detail, sizeof detail,
             "this project has %u probes in flight, the most allowed "
             "(TOKBENCH_PROBE_PER_PROJECT=%u)",
             mine, p->o.per_project);
  } else if (p->count >= p->o.queue_max) {
    snprintf(detail, sizeof detail,
             "%u probes are in flight, the most allowed (TOKBENCH_PROBE_QUEUE=%u)", p->count,
             p->o.queue_max);
  } else {
    t->prev = p->tail;
    if (p->tail != NULL)
      p->tail->next = t;
    else
      p->head = t;
    p->tail = t;
    p->count++;
    r->state = t;
    r->state_free = task_free;
    t->suspended = true;
    MHD_suspend_connection(r->conn);
    pthread_cond_signal(&p->wake);
  }
  pthread_mutex_unlock(&p->lock);
  if (detail[0] == '\0')
    return MHD_YES;
  task_free(t);
  if (strcmp(detail, "stopping") == 0)
    return tb_api_reply_error(r, TB_EC_SHUTTING_DOWN, NULL, NULL);
  long s = (p->o.deadline_ms + 999) / 1000;
  r->retry_after_s = s > 0 ? (int)s : 1;
  return tb_api_reply_error(r, TB_EC_PROBE_BUSY, detail, NULL);
}

enum MHD_Result
tb_api_probe_reply(struct tb_api_req *r)
{
  struct probe_task *t = r->state;
  if (!t->done) /* not ours to answer yet (cannot happen: resumed when done) */
    return tb_api_reply_error(r, TB_EC_INTERNAL, NULL, NULL);
  if (t->found != NULL) {
    json_t *found = t->found;
    t->found = NULL;
    return tb_api_reply_json(r, MHD_HTTP_OK, found, NULL);
  }
  return tb_api_reply_error(r, TB_EC_PROBE_FAILED, t->err, NULL);
}
