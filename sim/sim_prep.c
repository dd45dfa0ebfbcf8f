/*
 * sim_prep: prompts prepared off the loop.  Design in sim_prep.h.
 */
#include "sim_prep.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sim_cache.h"
#include "sim_tok.h"
#include "base/tb_util.h"

static const char bad_prompt[] =
  "prompt must be a string, a list of one string or a list of token ids";

/* Counts the prompt of a completions request: a string, an array of one
 * string, or an array of token ids; its ids go to *ids. */
static int64_t
completion_prompt(const json_t *prompt, uint64_t *hash, int32_t **ids, size_t *len, size_t *cap,
                  const char **err)
{
  if (json_is_string(prompt))
    return sim_tok_prompt(json_string_value(prompt), json_string_length(prompt), hash, ids, len,
                          cap);
  if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
      json_is_string(json_array_get(prompt, 0)))
    return completion_prompt(json_array_get(prompt, 0), hash, ids, len, cap, err);
  if (json_is_array(prompt) && json_array_size(prompt) > 0) {
    uint64_t h = 1469598103934665603ull;
    size_t i;
    const json_t *v;
    json_array_foreach (prompt, i, v) {
      if (!json_is_integer(v)) {
        *err = bad_prompt;
        return -1;
      }
      h = (h ^ (uint64_t)json_integer_value(v)) * 1099511628211ull;
      if (*len == *cap) { /* capacity in ids, as sim_tok counts it */
        *cap = *cap ? *cap * 2 : 256;
        *ids = tb_xrealloc(*ids, *cap * sizeof(**ids));
      }
      (*ids)[(*len)++] = (int32_t)json_integer_value(v);
    }
    *hash = h;
    return (int64_t)json_array_size(prompt);
  }
  *err = bad_prompt;
  return -1;
}

void
sim_prep_prompt(const json_t *body, bool chat, int64_t bs, int32_t **ids, size_t *len, size_t *cap,
                struct sim_prompt *out)
{
  memset(out, 0, sizeof(*out));
  *len = 0;
  if (chat) {
    const json_t *agp = json_object_get(body, "add_generation_prompt");
    out->tokens = sim_tok_chat(json_object_get(body, "messages"), agp == NULL || json_is_true(agp),
                               &out->hash, ids, len, cap, &out->err);
  } else {
    const json_t *pj = json_object_get(body, "prompt");
    out->tokens = pj ? completion_prompt(pj, &out->hash, ids, len, cap, &out->err) : -1;
    if (pj == NULL)
      out->err = "prompt is required";
  }
  if (out->tokens < 0)
    return;
  if (bs <= 0)
    bs = 1;
  size_t nb = *len / (size_t)bs;
  if (nb > 0) {
    out->chain = tb_xmalloc(nb * sizeof(*out->chain));
    out->nchain = sim_cache_chain(*ids, *len, bs, out->chain, nb);
  }
  out->ntail = *len - nb * (size_t)bs; /* a request's output continues the chain */
  if (out->ntail > 0) {
    out->tail = tb_xmalloc(out->ntail * sizeof(*out->tail));
    memcpy(out->tail, *ids + nb * (size_t)bs, out->ntail * sizeof(*out->tail));
  }
}

struct sim_prep {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct sim_prep_job *in_head, *in_tail, *out_head, *out_tail;
  bool stop;
  int efd;
};

static void
push(struct sim_prep_job **head, struct sim_prep_job **tail, struct sim_prep_job *j)
{
  j->next = NULL;
  if (*tail)
    (*tail)->next = j;
  else
    *head = j;
  *tail = j;
}

static void
prepare(struct sim_prep_job *j, int32_t **ids, size_t *len, size_t *cap)
{
  json_error_t je;
  j->doc = json_loadb(j->body, j->req.body_len, 0, &je);
  if (j->doc == NULL) {
    snprintf(j->jerr, sizeof(j->jerr), "%s", je.text);
    return;
  }
  if (json_is_object(j->doc))
    sim_prep_prompt(j->doc, j->chat, j->bs, ids, len, cap, &j->pr);
}

static void *
worker(void *arg)
{
  struct sim_prep *p = arg;
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->in_head == NULL)
      pthread_cond_wait(&p->cv, &p->mu);
    if (p->stop)
      break;
    struct sim_prep_job *j = p->in_head;
    p->in_head = j->next;
    if (p->in_head == NULL)
      p->in_tail = NULL;
    pthread_mutex_unlock(&p->mu);
    prepare(j, &ids, &len, &cap);
    pthread_mutex_lock(&p->mu);
    push(&p->out_head, &p->out_tail, j);
    uint64_t one = 1;
    if (write(p->efd, &one, sizeof(one)) < 0) {
      /* EAGAIN: the counter is already non-zero, the loop will look */
    }
  }
  pthread_mutex_unlock(&p->mu);
  free(ids);
  return NULL;
}

struct sim_prep *
sim_prep_start(int *efd)
{
  struct sim_prep *p = tb_xcalloc(1, sizeof(*p));
  p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->efd < 0) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  /* SCHED_OTHER even under --realtime (SCHED_FIFO): the loop preempts it */
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
  pthread_attr_setschedpolicy(&at, SCHED_OTHER);
  struct sched_param sp = { .sched_priority = 0 };
  pthread_attr_setschedparam(&at, &sp);
  /* the worker takes no signals: the loop's signalfd has them */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(&p->th, &at, worker, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&at);
  if (rc != 0) {
    close(p->efd);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    return NULL;
  }
  *efd = p->efd;
  return p;
}

void
sim_prep_submit(struct sim_prep *p, struct sim_prep_job *job)
{
  pthread_mutex_lock(&p->mu);
  push(&p->in_head, &p->in_tail, job);
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

struct sim_prep_job *
sim_prep_take(struct sim_prep *p)
{
  uint64_t x;
  if (read(p->efd, &x, sizeof(x)) < 0) {
    /* EAGAIN: nothing signalled since the last take */
  }
  pthread_mutex_lock(&p->mu);
  struct sim_prep_job *j = p->out_head;
  p->out_head = p->out_tail = NULL;
  pthread_mutex_unlock(&p->mu);
  return j;
}

void
sim_prep_job_free(struct sim_prep_job *job)
{
  if (job == NULL)
    return;
  json_decref(job->doc);
  free(job->pr.chain);
  free(job->pr.tail);
  free(job->body);
  free(job);
}

static void
free_list(struct sim_prep_job *j)
{
  while (j) {
    struct sim_prep_job *n = j->next;
    sim_prep_job_free(j);
    j = n;
  }
}

void
sim_prep_stop(struct sim_prep *p)
{
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->th, NULL);
  free_list(p->in_head);
  free_list(p->out_head);
  close(p->efd);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p);
}
