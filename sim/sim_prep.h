/*
 * sim_prep: a generation request's prompt made ready off the loop.
 *
 * What the simulator does with a prompt before the model sees it (parse the
 * JSON body, count its tokens, hash it, tokenize it into ids and hash its
 * blocks for the prefix cache) costs 20-25 ms of CPU for a 256K-token
 * (1 MB) prompt on the development VM (bench/bench_sim.sh).  Done on the
 * loop, that stalls every other stream's decode steps, which a real server
 * does not do (vLLM tokenizes in its API server process, apart from the
 * engine's loop).  So bodies of at least
 * SIM_PREP_ASYNC_BODY bytes go to one worker thread, and the loop goes on;
 * the worker writes the result, and an eventfd in the loop's epoll set tells
 * the loop, which then serves the request as if it had just parsed it.  The
 * model's clock still starts at the request's first byte (the job keeps
 * it), so the preparation adds nothing to the modelled TTFT.  Smaller
 * bodies are prepared on the loop, by the same function (sim_prep_prompt).
 *
 * Threads: the worker only reads a job's input and writes its output;
 * everything else (the connection, the server) stays the loop's.  Jobs
 * cross in two mutex-guarded FIFO lists.  The worker runs at SCHED_OTHER
 * whatever the loop's policy (--realtime), so the loop preempts it.
 */
#ifndef SIM_PREP_H
#define SIM_PREP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_http.h"

/* Bodies of at least this many bytes are prepared off the loop (~16K
 * tokens: about a millisecond of work). */
#define SIM_PREP_ASYNC_BODY (64 * 1024)

/* A prompt as the scheduler needs it. */
struct sim_prompt {
  int64_t tokens;  /* -1: a bad prompt, err says why */
  const char *err; /* static message, when tokens < 0 */
  uint64_t hash;   /* whole-prompt hash */
  uint64_t *chain; /* block chain (sim_cache_chain), owned; NULL if none */
  size_t nchain;
  int32_t *tail; /* the ids after the last full block, owned; NULL if none */
  size_t ntail;
};

/* The prompt of a generation request's body (borrowed): chat messages or a
 * completions prompt.  ids/len/cap: a scratch buffer of token ids (grown
 * with tb_xrealloc, caller frees); bs: the profile's block size.  Fills
 * *out (chain allocated when the prompt has a full block, tail when ids
 * follow the last one). */
void sim_prep_prompt(const json_t *body, bool chat, int64_t bs, int32_t **ids, size_t *len,
                     size_t *cap, struct sim_prompt *out);

struct conn;

struct sim_prep_job {
  /* in: written by the loop before sim_prep_submit */
  struct conn *c;          /* the loop's only; NULL once the connection is freed */
  struct sim_http_req req; /* the request; req.body points into body */
  char *body;              /* owned copy */
  bool chat;
  int64_t req_start; /* the request's first byte (monotonic ns) */
  int64_t bs;        /* block size */
  /* out: written by the worker */
  json_t *doc;          /* the parsed body (owned), NULL: jerr */
  char jerr[160];       /* jansson's message when doc is NULL */
  struct sim_prompt pr; /* valid when doc is a JSON object */
  struct sim_prep_job *next;
};

struct sim_prep;

/* Starts the worker; *efd: an eventfd readable while finished jobs wait
 * (the loop adds it to its epoll set).  NULL when a thread or the eventfd
 * cannot be made (then everything is prepared on the loop). */
struct sim_prep *sim_prep_start(int *efd);

/* Hands job (owned from now on by sim_prep until sim_prep_take gives it
 * back) to the worker. */
void sim_prep_submit(struct sim_prep *p, struct sim_prep_job *job);

/* The finished jobs, oldest first, as a list through ->next (the caller
 * owns them and frees each with sim_prep_job_free); clears the eventfd. */
struct sim_prep_job *sim_prep_take(struct sim_prep *p);

/* Frees a job and what it holds. */
void sim_prep_job_free(struct sim_prep_job *job);

/* Stops and joins the worker; frees every job not taken.  p may be NULL. */
void sim_prep_stop(struct sim_prep *p);

#endif
