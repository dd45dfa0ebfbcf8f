/*
 * sim_routes: see sim_routes.h for what it does and sim_state.h for the
 * lifetimes and the hot path it keeps to.
 */
#include "sim_routes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "sim_flavour.h"
#include "sim_http.h"
#include "sim_inspect.h"
#include "sim_out.h"
#include "sim_prep.h"
#include "sim_sched.h"
#include "sim_stream.h"
#include "sim_tok.h"

/* ------------------------------------------------------------------ */
/* routes */

static bool
auth_needed(const struct server *s, const char *path)
{
  if (s->cfg->api_key == NULL || strncmp(path, "/sim/", 5) == 0)
    return false;
  switch (s->cfg->flavour) {
  case SIM_FLAVOUR_VLLM: return strncmp(path, "/v1/", 4) == 0;
  case SIM_FLAVOUR_SGLANG:
    return strcmp(path, "/health") != 0 && strcmp(path, "/health_generate") != 0;
  case SIM_FLAVOUR_LLAMACPP:
  case SIM_FLAVOUR_TGI: return strcmp(path, "/health") != 0;
  default: return true;
  }
}

static bool
auth_ok(const struct server *s, const struct sim_http_req *r)
{
  if (!r->has_auth || strncasecmp(r->auth, "Bearer ", 7) != 0)
    return false;
  const char *k = r->auth + 7;
  while (*k == ' ')
    k++;
  size_t kl = strlen(k), want = strlen(s->cfg->api_key);
  return kl == want && tb_ct_equal(k, s->cfg->api_key, kl);
}

/* doc (owned, NULL: jansson's message jerr) as a request body: the
 * object, or NULL after the 400 reply. */
static json_t *
body_object(struct server *s, struct conn *c, const struct sim_http_req *r, json_t *doc,
            const char *jerr)
{
  if (doc == NULL) {
    char msg[300];
    snprintf(msg, sizeof(msg), "JSON decode error: %s", jerr);
    sim_out_reply_error(s, &c->o, 400, msg, r->keep_alive);
    return NULL;
  }
  if (!json_is_object(doc)) {
    json_decref(doc);
    sim_out_reply_error(s, &c->o, 400, "request body must be a JSON object", r->keep_alive);
    return NULL;
  }
  return doc;
}

static json_t *
parse_body(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_error_t je;
  json_t *doc = json_loadb(r->body, r->body_len, 0, &je);
  return body_object(s, c, r, doc, je.text);
}

static bool
any_model(const struct server *s)
{
  return flav(s, SIM_FLAVOUR_SGLANG) || flav(s, SIM_FLAVOUR_LLAMACPP) || flav(s, SIM_FLAVOUR_TGI);
}

static bool
model_ok(struct server *s, struct conn *c, const struct sim_http_req *r, const json_t *body)
{
  const json_t *m = json_object_get(body, "model");
  if (m == NULL || json_is_null(m)) {
    if (any_model(s))
      return true; /* SGLang, llama.cpp, TGI serve their one model whatever is asked */
    sim_out_reply_error(s, &c->o, 400, "The 'model' field is required.", r->keep_alive);
    return false;
  }
  if (!json_is_string(m)) {
    sim_out_reply_error(s, &c->o, 400, "'model' must be a string", r->keep_alive);
    return false;
  }
  if (any_model(s) || strcmp(json_string_value(m), s->p->model) == 0 ||
      strcmp(json_string_value(m), s->p->model_root) == 0)
    return true;
  char msg[700];
  snprintf(msg, sizeof(msg), "The model `%.500s` does not exist.", json_string_value(m));
  sim_out_reply_error(s, &c->o, 404, msg, r->keep_alive);
  return false;
}

/* llama.cpp b11669's answer to a prompt that fills a slot's context. */
static void
reply_exceed(struct server *s, struct conn *c, const struct sim_http_req *r, int64_t prompt)
{
  char msg[200];
  snprintf(msg, sizeof(msg),
           "request (%" PRId64 " tokens) exceeds the available context size (%" PRId64
           " tokens), try increasing it",
           prompt, s->p->max_model_len);
  s->st.errors++;
  sim_out_reply_json(s, &c->o, 400,
                     json_pack("{s:{s:i, s:s, s:s, s:I, s:I}}", "error", "code", 400, "message",
                               msg, "type", "exceed_context_size_error", "n_prompt_tokens",
                               (json_int_t)prompt, "n_ctx", (json_int_t)s->p->max_model_len),
                     r->keep_alive);
}

/* The output a request may have into *out: max_completion_tokens (which
 * wins) or max_tokens, or what the context leaves.  NULL when it fits,
 * else the message of a 400 (in err when it holds numbers).  llama.cpp
 * b11669 cuts the output to the context instead, once the prompt leaves it
 * a token (*exceed when it does not). */
static const char *
output_budget(const struct server *s, const json_t *body, int64_t prompt, int64_t *out,
              bool *exceed, char *err, size_t cap)
{
  const json_t *mt = json_object_get(body, "max_completion_tokens");
  if (mt == NULL || json_is_null(mt))
    mt = json_object_get(body, "max_tokens");
  int64_t max_tokens;
  if (mt == NULL || json_is_null(mt))
    max_tokens = s->p->max_model_len - prompt;
  else if (!json_is_integer(mt) || json_integer_value(mt) < 1)
    return "max_tokens must be an integer >= 1";
  else
    max_tokens = json_integer_value(mt);
  if (llama_new(s)) {
    *exceed = prompt >= s->p->max_model_len;
    if (max_tokens > s->p->max_model_len - prompt)
      max_tokens = s->p->max_model_len - prompt;
  }
  *out = max_tokens;
  /* (compared without adding: max_tokens comes from the client, and
   * prompt + INT64_MAX would overflow) */
  if (prompt > s->p->max_model_len ||
      (mt != NULL && !json_is_null(mt) && max_tokens > s->p->max_model_len - prompt) ||
      max_tokens < 1) {
    int64_t mtok = max_tokens > 0 ? max_tokens : 0;
    snprintf(err, cap,
             "This model's maximum context length is %" PRId64 " tokens. However, you "
             "requested %" PRId64 " tokens (%" PRId64 " in the messages, %" PRId64
             " in the completion). Please reduce the length of the messages or completion.",
             s->p->max_model_len, mtok > INT64_MAX - prompt ? INT64_MAX : prompt + mtok, prompt,
             mtok);
    return err;
  }
  return NULL;
}

/* A generation request's values, checked before it is counted. */
struct gen_req {
  struct sim_fault f; /* --fault, then the body's sim_fault, then X-Sim-Fault */
  int64_t prompt;     /* its prompt's tokens */
  int64_t max_tokens; /* its output budget (output_budget) */
  bool streaming;     /* "stream": true */
  const json_t *so;   /* its stream_options (borrowed from the body), or NULL */
  const char *msg;    /* the 400's message when the checks fail */
  char err[400];      /* room for msg */
};

/* The outcome of gen_check. */
enum gen_check {
  GEN_GO,       /* the request is valid */
  GEN_ANSWERED, /* answered already (404 model, llama.cpp's exceed) */
  GEN_BAD       /* to answer 400 with q->msg */
};

/* The checks of a generation request (faults, model, prompt, output
 * budget, n, stream options) into *q. */
static enum gen_check
gen_check(struct server *s, struct conn *c, const struct sim_http_req *r, const json_t *body,
          const struct sim_prompt *pr, struct gen_req *q)
{
  q->f = s->cfg->fault;
  const json_t *sf = json_object_get(body, "sim_fault");
  if (json_is_string(sf) &&
      !sim_fault_parse(&q->f, json_string_value(sf), q->err, sizeof(q->err))) {
    q->msg = q->err;
    return GEN_BAD;
  }
  if (r->fault[0] && !sim_fault_parse(&q->f, r->fault, q->err, sizeof(q->err))) {
    q->msg = q->err;
    return GEN_BAD;
  }
  if (!model_ok(s, c, r, body))
    return GEN_ANSWERED;
  q->prompt = pr->tokens;
  if (q->prompt < 0) {
    q->msg = pr->err;
    return GEN_BAD;
  }
  bool exceed = false;
  q->msg = output_budget(s, body, q->prompt, &q->max_tokens, &exceed, q->err, sizeof(q->err));
  if (exceed) {
    reply_exceed(s, c, r, q->prompt);
    return GEN_ANSWERED;
  }
  if (q->msg)
    return GEN_BAD;
  const json_t *nj = json_object_get(body, "n");
  if (nj && !json_is_null(nj) && !(json_is_integer(nj) && json_integer_value(nj) == 1)) {
    q->msg = "tokbench-sim supports n = 1 only";
    return GEN_BAD;
  }
  const json_t *stream = json_object_get(body, "stream");
  q->so = json_object_get(body, "stream_options");
  q->streaming = json_is_true(stream);
  if (q->so && !json_is_null(q->so) && !q->streaming) {
    q->msg = "Stream options can only be defined when `stream=True`.";
    return GEN_BAD;
  }
  if (q->so && !json_is_null(q->so) && !json_is_object(q->so)) {
    q->msg = "stream_options must be an object";
    return GEN_BAD;
  }
  return GEN_GO;
}

/* The request's status and refuse faults; true when one answered it. */
static bool
gen_fault(struct server *s, struct conn *c, const struct sim_http_req *r, struct gen_req *q)
{
  if (q->f.status) {
    snprintf(q->err, sizeof(q->err), "simulated fault: status %d", q->f.status);
    sim_out_reply_error(s, &c->o, q->f.status, q->err, r->keep_alive);
    return true;
  }
  if (q->f.refuse_ms > 0) {
    if (s->lfd >= 0) {
      (void)epoll_ctl(s->ep, EPOLL_CTL_DEL, s->lfd, NULL);
      close(s->lfd);
      s->lfd = -1;
    }
    s->relisten_at = now_ns() + ms_to_ns(s, q->f.refuse_ms);
    struct linger lg = { 1, 0 };
    (void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    sim_out_kill(s, &c->o);
    return true;
  }
  return false;
}

/* g's usage switches and its ends (limit and finish reason) from the body
 * and the server's switches. */
static void
gen_shape(struct server *s, const struct sim_http_req *r, const json_t *body,
          const struct gen_req *q, struct gen *g)
{
  const struct sim_dialect *d = s->cfg->dialect;
  bool streaming = q->streaming;
  /* the usage chunk at the end; llama.cpp and TGI 2.2 put usage on their
   * last chunk instead; --no-usage (a gateway): none at all */
  g->incl_usage = json_is_true(json_object_get(q->so, "include_usage"));
  /* (llama.cpp b11669: a chat stream's usage chunk; its completions and
   * b6915 put usage on the finish chunk) */
  g->usage = streaming && !s->cfg->no_usage && g->incl_usage &&
             !(flav(s, SIM_FLAVOUR_LLAMACPP) && !(llama_new(s) && g->chat)) &&
             !(flav(s, SIM_FLAVOUR_TGI) && d->rev < 23);
  g->cont_usage = streaming && d->cont_usage && !s->cfg->no_usage &&
                  json_is_true(json_object_get(q->so, "continuous_usage_stats"));
  g->stamps = s->cfg->stamps || r->stamps;
  g->prompt = q->prompt;
  g->max_tokens = q->max_tokens;
  g->limit = q->max_tokens;
  g->finish = "length";
  bool ignore_eos = json_is_true(json_object_get(body, "ignore_eos"));
  if (!ignore_eos && s->cfg->eos_after > 0 && s->cfg->eos_after < g->limit) {
    g->limit = s->cfg->eos_after;
    g->finish = "stop";
  }
  if (s->cfg->early_stop > 0 && s->cfg->early_stop < g->limit) {
    /* --early-stop: a server that ignores max_tokens and ignore_eos */
    g->limit = s->cfg->early_stop;
    g->finish = "stop";
  }
}

/* g's KV need, the prompt's chain (taken from pr), its fault, task and id. */
static void
gen_ids(struct server *s, struct sim_prompt *pr, const struct gen_req *q, struct gen *g)
{
  g->need_kv = q->prompt + q->max_tokens;
  if (g->need_kv > s->p->kv_budget)
    g->need_kv = s->p->kv_budget; /* never wait forever: the largest request fits alone */
  g->hash = pr->hash;
  g->chain = pr->chain; /* the gen owns them now */
  g->nchain = pr->nchain;
  pr->chain = NULL;
  g->tail = pr->tail; /* its output continues the chain */
  g->ntail = pr->ntail;
  pr->tail = NULL;
  g->f = q->f;
  g->heap_i = g->batch_i = g->grp_i = -1;
  g->created = tb_time_real_us() / 1000000;
  s->id_counter++;
  g->task = s->id_counter;
  if (flav(s, SIM_FLAVOUR_SGLANG))
    snprintf(g->id, sizeof(g->id), "%016" PRIx64 "%016" PRIx64, (uint64_t)getpid(), s->id_counter);
  else
    snprintf(g->id, sizeof(g->id), "%s-%016" PRIx64 "%08" PRIx64, g->chat ? "chatcmpl" : "cmpl",
             s->id_counter, (uint64_t)getpid());
}

/* Starts g, which arrived at req_start: after its first-byte fault, or
 * queued now (its headers sent when it streams). */
static void
gen_start(struct server *s, struct gen *g, int64_t req_start)
{
  int64_t now = now_ns();
  g->t_arrival = req_start > 0 && req_start < now ? req_start : now;
  if (g->f.first_byte_ms > 0) {
    g->st = G_FIRSTBYTE;
    sim_sched_heap_push(s, g, now + ms_to_ns(s, g->f.first_byte_ms));
  } else {
    if (g->stream)
      sim_stream_headers(s, g);
    sim_sched_queue_push(s, g);
    /* The model's clock for this request starts when its bytes arrived, so
     * that our parsing time (a 1 MB prompt) does not add to its TTFT. */
    sim_sched_try_admit(s, g->t_arrival);
  }
}

/* Serves a generation request whose body (owned) and prompt (its chain
 * owned) are ready; req_start: its first byte. */
static void
generate(struct server *s, struct conn *c, const struct sim_http_req *r, bool chat, json_t *body,
         struct sim_prompt *pr, int64_t req_start)
{
  struct gen_req q = { .msg = NULL };
  enum gen_check ck = gen_check(s, c, r, body, pr, &q);
  if (ck == GEN_BAD)
    sim_out_reply_error(s, &c->o, 400, q.msg ? q.msg : "bad request", r->keep_alive);
  if (ck != GEN_GO)
    goto out;
  s->st.requests++;
  sim_noise_request_body(&s->noise, body); /* the slowdown's count, the run's drift */
  if (gen_fault(s, c, r, &q))
    goto out;

  struct gen *g = tb_xcalloc(1, sizeof(*g));
  g->o = &c->o;
  c->o.gen = g;
  g->chat = chat;
  g->stream = q.streaming;
  g->chunked = r->minor >= 1;
  gen_shape(s, r, body, &q, g);
  gen_ids(s, pr, &q, g);
  if (!r->keep_alive)
    c->o.close_after = true;
  gen_start(s, g, req_start);
out:
  free(pr->chain);
  pr->chain = NULL;
  free(pr->tail);
  pr->tail = NULL;
  json_decref(body);
}

static void
handle_generate(struct server *s, struct conn *c, const struct sim_http_req *r, bool chat)
{
  int64_t bs = s->p->block_size > 0 ? s->p->block_size : 1;
  if (s->prep != NULL && r->body_len >= SIM_PREP_ASYNC_BODY) {
    /* a large prompt: prepared by the worker (sim_prep.h); the connection
     * waits for it, the loop goes on */
    struct sim_prep_job *j = tb_xcalloc(1, sizeof(*j));
    j->c = c;
    j->req = *r;
    j->body = tb_xmalloc(r->body_len + 1);
    memcpy(j->body, r->body, r->body_len);
    j->body[r->body_len] = '\0';
    j->req.body = j->body;
    j->chat = chat;
    j->req_start = c->req_start;
    j->bs = bs;
    c->prep = j;
    sim_prep_submit(s->prep, j);
    return;
  }
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  struct sim_prompt pr;
  sim_prep_prompt(body, chat, bs, &s->ids, &s->ids_len, &s->ids_cap, &pr);
  generate(s, c, r, chat, body, &pr, c->req_start);
}

void
sim_routes_prepared(struct server *s, struct sim_prep_job *j)
{
  struct conn *c = j->c;
  if (c != NULL && !c->o.dead) {
    c->prep = NULL;
    json_t *body = body_object(s, c, &j->req, j->doc, j->jerr);
    j->doc = NULL; /* body_object took it */
    if (body != NULL)
      generate(s, c, &j->req, j->chat, body, &j->pr, j->req_start);
    /* what the client pipelined behind it */
    sim_out_resume(s, &c->o);
  } else if (c != NULL) {
    c->prep = NULL;
  }
  sim_prep_job_free(j);
}

static void
handle_tokenize(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  const char *msg = NULL;
  int64_t count = -1;
  const json_t *messages = json_object_get(body, "messages");
  const json_t *prompt = json_object_get(body, "prompt");
  if (prompt == NULL && flav(s, SIM_FLAVOUR_SGLANG))
    prompt = json_object_get(body, "text");
  if (messages && !flav(s, SIM_FLAVOUR_SGLANG)) {
    const json_t *agp = json_object_get(body, "add_generation_prompt");
    count = sim_tok_chat(messages, agp == NULL || json_is_true(agp), NULL, &ids, &len, &cap, &msg);
  } else if (json_is_string(prompt)) {
    const json_t *ast = json_object_get(body, "add_special_tokens");
    bool special = ast == NULL || json_is_true(ast);
    const char *t = json_string_value(prompt);
    size_t tn = json_string_length(prompt);
    if (special) {
      count = sim_tok_prompt(t, tn, NULL, &ids, &len, &cap);
    } else {
      sim_tok_ids(t, tn, &ids, &len, &cap);
      count = (int64_t)len;
    }
  } else {
    msg = flav(s, SIM_FLAVOUR_SGLANG) ? "prompt (text) is required"
                                      : "either prompt or messages is required";
  }
  if (count < 0) {
    sim_out_reply_error(s, &c->o, 400, msg ? msg : "bad request", r->keep_alive);
    goto out;
  }
  json_t *toks = json_array();
  for (size_t i = 0; i < len; i++)
    json_array_append_new(toks, json_integer(ids[i]));
  json_t *doc = json_pack("{s:I, s:I, s:o, s:n}", "count", (json_int_t)count, "max_model_len",
                          (json_int_t)s->p->max_model_len, "tokens", toks, "token_strs");
  sim_out_reply_json(s, &c->o, 200, doc, r->keep_alive);
out:
  free(ids);
  json_decref(body);
}

/* llama.cpp b11669's POST /tokenize: {"content", "add_special" (false: the
 * BOS), "parse_special" (true)} -> {"tokens": [ids]}, the template's
 * markers parsed (sim_tok_special_ids): with add_special, the tokens of
 * /apply-template's prompt are the chat's; with_pieces is not honoured. */
static void
handle_llama_tokenize(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  const json_t *content = json_object_get(body, "content");
  if (json_is_string(content)) {
    const char *t = json_string_value(content);
    size_t tn = json_string_length(content);
    if (json_is_true(json_object_get(body, "add_special")))
      sim_tok_special_ids(SIM_TOK_BOS_TEXT, 3, &ids, &len, &cap);
    if (json_is_false(json_object_get(body, "parse_special")))
      sim_tok_ids(t, tn, &ids, &len, &cap);
    else
      sim_tok_special_ids(t, tn, &ids, &len, &cap);
  }
  json_t *toks = json_array();
  for (size_t i = 0; i < len; i++)
    json_array_append_new(toks, json_integer(ids[i]));
  sim_out_reply_json(s, &c->o, 200, json_pack("{s:o}", "tokens", toks), r->keep_alive);
  free(ids);
  json_decref(body);
}

/* llama.cpp b11669's POST /apply-template: {"messages"} -> {"prompt"}, the
 * text whose /tokenize count (add_special) is the chat's prompt_tokens. */
static void
handle_apply_template(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  const json_t *messages = json_object_get(body, "messages");
  const json_t *agp = json_object_get(body, "add_generation_prompt");
  const char *msg = "'messages' is required";
  if (messages != NULL && sim_tok_chat(messages, true, NULL, NULL, NULL, NULL, &msg) >= 0) {
    char *text = sim_tok_render_chat(messages, agp == NULL || json_is_true(agp));
    sim_out_reply_json(s, &c->o, 200, json_pack("{s:s}", "prompt", text), r->keep_alive);
    free(text);
  } else {
    sim_out_reply_error(s, &c->o, 400, msg, r->keep_alive);
  }
  json_decref(body);
}

static void
handle_models(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, sim_flavour_models(s), r->keep_alive);
}

bool
sim_metrics_parse(const char *str, enum sim_metrics *out)
{
  if (strcmp(str, "engine") == 0)
    *out = SIM_METRICS_ENGINE;
  else if (strcmp(str, "none") == 0)
    *out = SIM_METRICS_NONE;
  else if (strcmp(str, "foreign") == 0)
    *out = SIM_METRICS_FOREIGN;
  else
    return false;
  return true;
}

static void
handle_metrics(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  struct sim_out tmp = { 0 };
  if (!sim_flavour_metrics(s, &tmp))
    sim_out_reply_raw(s, &c->o, 404, "application/json", "{\"detail\":\"Not Found\"}", 22,
                      r->keep_alive);
  else
    sim_out_reply_raw(s, &c->o, 200, "text/plain; version=0.0.4; charset=utf-8", tmp.buf, tmp.len,
                      r->keep_alive);
  free(tmp.buf);
  sim_flavour_metrics_read(s);
}

static void
handle_server_info(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, sim_flavour_server_info(s), r->keep_alive);
}

static void
handle_props(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, sim_flavour_props(s), r->keep_alive);
}

static void
handle_slots(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, sim_flavour_slots(s), r->keep_alive);
}

/* llama.cpp b11669's answers to what this model or these flags do not
 * serve: 501 with its reason (POST /props before 405 for b6915). */
static void
handle_unsupported(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  static const struct {
    const char *path, *msg;
  } why[] = {
    { "/props", "This server does not support changing global properties. Start it with "
                "`--props`" },
    { "/infill", "Infill is not supported by this model: prefix token is missing. suffix token "
                 "is missing. middle token is missing. " },
    { "/rerank", "This server does not support reranking. Start it with `--reranking`" },
  };
  if (!llama_new(s)) {
    sim_out_reply_raw(s, &c->o, 405, "application/json", "{\"detail\":\"Method Not Allowed\"}", 31,
                      r->keep_alive);
    return;
  }
  const char *msg = "This server does not support embeddings. Start it with `--embeddings`";
  for (size_t i = 0; i < TB_ARRAY_LEN(why); i++) /* (/rerank: also /reranking, /v1/rerank) */
    if (strstr(r->path, why[i].path) != NULL)
      msg = why[i].msg;
  sim_out_reply_error(s, &c->o, 501, msg, r->keep_alive);
}

static void
handle_lora(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, json_array(), r->keep_alive);
}

static void
handle_info(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, sim_flavour_info(s), r->keep_alive);
}

/* vLLM's POST /reset_prefix_cache (vllm/entrypoints/serve/cache/api_router.py;
 * mounted only with VLLM_SERVER_DEV_MODE=1: --dev-mode here, else 404 as the
 * dispatcher answers an unknown path): 200, no body. */
static void
handle_reset_prefix(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  s->st.cache_reset_calls++;
  if (!s->cfg->dev_mode) {
    sim_out_reply_raw(s, &c->o, 404, "application/json", "{\"detail\":\"Not Found\"}", 22,
                      r->keep_alive);
    return;
  }
  (void)sim_sched_cache_reset(s);
  sim_out_reply_raw(s, &c->o, 200, "application/json", "", 0, r->keep_alive);
}

/* SGLang's POST /flush_cache: flushed only when no request is running or
 * waiting (200), else refused (400), with its text either way. */
static void
handle_flush_cache(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  static const char msg[] = "Cache flushed.\nPlease check backend logs for more details. "
                            "(When there are running or waiting requests, the operation will "
                            "not be performed.)\n";
  bool busy = s->running > 0 || s->q_n > 0;
  s->st.cache_reset_calls++;
  if (!busy)
    (void)sim_sched_cache_reset(s);
  sim_out_reply_raw(s, &c->o, busy ? 400 : 200, "text/plain; charset=utf-8", msg, sizeof msg - 1,
                    r->keep_alive);
}

/* llama.cpp's POST /slots/{id}?action=erase (b11669): {"id_slot", "n_erased"};
 * the sim's cache is one for all slots, so any slot's erase empties it.
 * As measured on b11669 (llama.cpp-tools 1:0.7.0+dfsg-2): without
 * --slot-save-path every slot action is 501 "This server does not support
 * slots action. Start it with `--slot-save-path`"; a slot id past the last
 * slot still answers 200 with n_erased 0; an unknown action is 400 "Invalid
 * action".
 *
 * A busy slot's erase is held, not refused: llama.cpp's
 * tools/server/server-context.cpp (process_single_task,
 * SERVER_TASK_TYPE_SLOT_ERASE) defers the task while slot->is_processing()
 * (queue_tasks.defer) and runs it again when a slot is released
 * (queue_tasks.pop_deferred_task), so the HTTP answer, 200 with the
 * n_erased of that moment, comes only once the slot is idle.  The sim's
 * slots share one cache, so it holds an erase until no request runs or
 * waits (running == 0 && q_n == 0; sim_routes_held_release), answering held
 * erases oldest first (the later ones then erase nothing: n_erased 0).  A
 * held erase is a flag on its connection, which reads nothing more until
 * answered (one per connection, so bounded by --max-conns; pipelining past
 * SIM_IN_CAP meanwhile kills the connection).  A client that hangs up
 * while held gets no answer, but its erase is still done once the server
 * is idle, as on b11669 (measured live: after an erase held and hung up
 * on, the next erase of that slot found n_erased 0); as every erase empties
 * the one cache, the ones hung up on are one flag and the place of the
 * first (erase_orphaned, orphan_seq), and their connections are freed at
 * once (held_drop). */
static void
handle_slot_action(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  char action[32];
  int64_t id;
  s->st.cache_reset_calls++;
  if (!s->cfg->slot_save) {
    sim_out_reply_error(s, &c->o, 501,
                        "This server does not support slots action. Start it with "
                        "`--slot-save-path`",
                        r->keep_alive);
    return;
  }
  if (!tb_parse_i64(r->path + strlen("/slots/"), 0, INT32_MAX, &id)) {
    sim_out_reply_error(s, &c->o, 400, "Invalid slot ID", r->keep_alive);
    return;
  }
  if (!sim_http_query(r->query, "action", action, sizeof action) || strcmp(action, "erase") != 0) {
    sim_out_reply_error(s, &c->o, 400, "Invalid action", r->keep_alive);
    return;
  }
  int64_t slots = s->p->max_running > 0 ? s->p->max_running : 1;
  if (id < slots && (s->running > 0 || s->q_n > 0)) {
    c->held = true;
    c->held_keep_alive = r->keep_alive;
    c->held_slot = id;
    c->held_seq = ++s->held_seq;
    c->held_prev = s->held_tail;
    c->held_next = NULL;
    if (s->held_tail != NULL)
      s->held_tail->held_next = c;
    else
      s->held_head = c;
    s->held_tail = c;
    s->held_n++;
    return;
  }
  int64_t n = id < slots ? sim_sched_cache_reset(s) : 0;
  json_t *o = json_pack("{s:I, s:I}", "id_slot", (json_int_t)id, "n_erased", (json_int_t)n);
  sim_out_reply_json(s, &c->o, 200, o, r->keep_alive);
}

/* Takes c's held erase out of the server's FIFO. */
static void
held_unlink(struct server *s, struct conn *c)
{
  if (c->held_prev != NULL)
    c->held_prev->held_next = c->held_next;
  else
    s->held_head = c->held_next;
  if (c->held_next != NULL)
    c->held_next->held_prev = c->held_prev;
  else
    s->held_tail = c->held_prev;
  c->held_next = c->held_prev = NULL;
  c->held = false;
  s->held_n--;
}

/* c's held erase, if any, is not to be answered (its connection is being
 * freed); it is still done when the server is idle. */
static void
held_drop(struct server *s, struct conn *c)
{
  if (!c->held)
    return;
  held_unlink(s, c);
  if (!s->erase_orphaned || c->held_seq < s->orphan_seq)
    s->orphan_seq = c->held_seq;
  s->erase_orphaned = true; /* done when idle all the same */
}

void
sim_routes_closed(struct server *s, struct conn *c)
{
  if (c->o.gen) {
    s->st.aborted++;
    sim_sched_gen_free(s, c->o.gen);
  }
  if (c->prep)
    c->prep->c = NULL; /* the job comes back to nobody (sim_routes_prepared) */
  held_drop(s, c);     /* a held erase's client went away */
}

bool
sim_routes_held_release(struct server *s)
{
  if ((s->held_head == NULL && !s->erase_orphaned) || s->running > 0 || s->q_n > 0)
    return false;
  /* the erases in the order they came: one hung up on before the first
   * held one leaves it nothing to erase; after it, nothing is left */
  if (s->erase_orphaned && (s->held_head == NULL || s->orphan_seq < s->held_head->held_seq))
    (void)sim_sched_cache_reset(s);
  s->erase_orphaned = false;
  if (s->held_head == NULL)
    return false;
  while (s->held_head != NULL) {
    struct conn *c = s->held_head;
    bool keep_alive = c->held_keep_alive;
    int64_t id = c->held_slot;
    held_unlink(s, c);
    int64_t n = sim_sched_cache_reset(s);
    json_t *o = json_pack("{s:I, s:I}", "id_slot", (json_int_t)id, "n_erased", (json_int_t)n);
    sim_out_reply_json(s, &c->o, 200, o, keep_alive);
    /* what it pipelined behind the erase is served next */
    sim_out_resume(s, &c->o);
  }
  return true;
}

static void
handle_abort(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  bool all = json_is_true(json_object_get(body, "abort_all"));
  const char *rid = json_string_value(json_object_get(body, "rid"));
  int n = 0;
  /* Collect first: finishing a request edits the lists we walk. */
  struct gen **victims = NULL;
  int nv = 0, cv = 0;
  for (struct conn *k = s->conns; k; k = k->next) {
    struct gen *g = k->o.gen;
    if (g == NULL || k->o.dead || k == c)
      continue;
    if (all || (rid && strcmp(rid, g->id) == 0)) {
      if (nv == cv) {
        cv = cv ? cv * 2 : 16;
        victims = tb_xrealloc(victims, (size_t)cv * sizeof(*victims));
      }
      victims[nv++] = g;
    }
  }
  for (int i = 0; i < nv; i++, n++)
    sim_sched_gen_abort_api(s, victims[i]);
  free(victims);
  json_decref(body);
  sim_sched_try_admit(s, now_ns());
  sim_out_reply_json(s, &c->o, 200, json_pack("{s:i}", "aborted", n), r->keep_alive);
}

static void
handle_version(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200, json_pack("{s:s}", "version", s->version ? s->version : ""),
                     r->keep_alive);
}

static void
handle_health(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  if (flav(s, SIM_FLAVOUR_LLAMACPP))
    sim_out_reply_raw(s, &c->o, 200, "application/json", "{\"status\":\"ok\"}", 15, r->keep_alive);
  else
    sim_out_reply_raw(s, &c->o, 200, "application/json", "", 0, r->keep_alive);
}

static void
handle_model_info(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  sim_out_reply_json(s, &c->o, 200,
                     json_pack("{s:s, s:s, s:b}", "model_path", s->p->model_root, "tokenizer_path",
                               s->p->model_root, "is_generation", 1),
                     r->keep_alive);
}

static void
handle_chat(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  handle_generate(s, c, r, true);
}

static void
handle_completions(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  handle_generate(s, c, r, false);
}

/* Families (enum sim_flavour) as bits (SGLang 0.3 had no server info: see
 * sim_routes_dispatch). */
enum {
  F_V = 1,
  F_S = 2,
  F_O = 4,
  F_L = 8,
  F_T = 16,
  F_G = 32,
  F_ALL = 63,
};

struct route {
  enum sim_http_method method;
  const char *path;
  int flavours;
  void (*fn)(struct server *, struct conn *, const struct sim_http_req *);
};

static const struct route routes[] = {
  { SIM_HTTP_POST, "/v1/chat/completions", F_ALL, handle_chat },
  { SIM_HTTP_POST, "/v1/completions", F_ALL, handle_completions },
  { SIM_HTTP_GET, "/v1/models", F_ALL, handle_models },
  { SIM_HTTP_GET, "/models", F_L, handle_models }, /* b11669 (llama_only) */
  { SIM_HTTP_GET, "/health", F_ALL, handle_health },
  { SIM_HTTP_GET, "/v1/health", F_L, handle_health }, /* b11669 (llama_only) */
  { SIM_HTTP_GET, "/health_generate", F_S, handle_health },
  { SIM_HTTP_POST, "/tokenize", F_V | F_S, handle_tokenize },
  { SIM_HTTP_GET, "/version", F_V, handle_version },
  { SIM_HTTP_GET, "/metrics", F_V | F_S | F_L | F_T | F_G, handle_metrics },
  { SIM_HTTP_GET, "/get_server_info", F_S, handle_server_info },
  { SIM_HTTP_GET, "/server_info", F_S, handle_server_info },
  { SIM_HTTP_GET, "/get_model_info", F_S, handle_model_info },
  { SIM_HTTP_POST, "/abort_request", F_S, handle_abort },
  { SIM_HTTP_POST, "/flush_cache", F_S, handle_flush_cache },
  { SIM_HTTP_POST, "/reset_prefix_cache", F_V, handle_reset_prefix },
  { SIM_HTTP_GET, "/props", F_L, handle_props },
  /* llama.cpp b11669 (llama_only) */
  { SIM_HTTP_GET, "/slots", F_L, handle_slots }, /* as run with --slots */
  { SIM_HTTP_GET, "/lora-adapters", F_L, handle_lora },
  { SIM_HTTP_POST, "/tokenize", F_L, handle_llama_tokenize },
  { SIM_HTTP_POST, "/apply-template", F_L, handle_apply_template },
  { SIM_HTTP_POST, "/props", F_L, handle_unsupported },
  { SIM_HTTP_POST, "/infill", F_L, handle_unsupported },
  { SIM_HTTP_POST, "/embedding", F_L, handle_unsupported },
  { SIM_HTTP_POST, "/embeddings", F_L, handle_unsupported },
  { SIM_HTTP_POST, "/v1/embeddings", F_L, handle_unsupported },
  { SIM_HTTP_POST, "/rerank", F_L, handle_unsupported },
  { SIM_HTTP_POST, "/reranking", F_L, handle_unsupported },
  { SIM_HTTP_POST, "/v1/rerank", F_L, handle_unsupported },
  { SIM_HTTP_GET, "/info", F_T, handle_info },
  { SIM_HTTP_GET, "/sim/expected", F_ALL, sim_inspect_expected },
  { SIM_HTTP_GET, "/sim/stats", F_ALL, sim_inspect_stats },
  { SIM_HTTP_GET, "/sim/requests", F_ALL, sim_inspect_requests },
  { SIM_HTTP_GET, "/sim/noise", F_ALL, sim_inspect_noise },
  { SIM_HTTP_GET, "/sim/dcgm/metrics", F_ALL, sim_inspect_dcgm },
};

/* The llama.cpp routes of b11669 only (b6915's POST /props stays 405:
 * handle_unsupported). */
static bool
llama_only(const char *path)
{
  static const char *const paths[] = {
    "/slots",          "/models",    "/v1/health", "/lora-adapters", "/tokenize",
    "/apply-template", "/infill",    "/embedding", "/embeddings",    "/v1/embeddings",
    "/rerank",         "/reranking", "/v1/rerank",
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(paths); i++)
    if (strcmp(path, paths[i]) == 0)
      return true;
  return false;
}

void
sim_routes_dispatch(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  static const int bits[] = {
    [SIM_FLAVOUR_VLLM] = F_V,     [SIM_FLAVOUR_SGLANG] = F_S, [SIM_FLAVOUR_OPENAI] = F_O,
    [SIM_FLAVOUR_LLAMACPP] = F_L, [SIM_FLAVOUR_TGI] = F_T,    [SIM_FLAVOUR_GATEWAY] = F_G,
  };
  int fbit = bits[s->cfg->flavour];
  bool path_known = false;
  if (s->cfg->dialect->rev == 3 && flav(s, SIM_FLAVOUR_SGLANG) &&
      (strcmp(r->path, "/get_server_info") == 0 || strcmp(r->path, "/server_info") == 0))
    fbit = 0; /* SGLang 0.3 had no server info: its capacity is in /metrics */
  if (flav(s, SIM_FLAVOUR_LLAMACPP) && !llama_new(s) && llama_only(r->path))
    fbit = 0; /* b6915: as its fixture has it (and /slots as with --no-slots) */
  if ((s->cfg->no_tokenize && strcmp(r->path, "/tokenize") == 0) ||
      (s->cfg->metrics == SIM_METRICS_NONE && strcmp(r->path, "/metrics") == 0)) {
    /* --no-tokenize, --metrics none: as a server without them answers */
    sim_out_reply_raw(s, &c->o, 404, "application/json", "{\"detail\":\"Not Found\"}", 22,
                      r->keep_alive);
    return;
  }
  if (s->cfg->metrics == SIM_METRICS_FOREIGN && strcmp(r->path, "/metrics") == 0 &&
      r->method == SIM_HTTP_GET) {
    handle_metrics(s, c, r); /* every flavour: the gateway's own, unguarded */
    return;
  }
  if (auth_needed(s, r->path) && !auth_ok(s, r)) {
    sim_out_reply_error(s, &c->o, 401, "Unauthorized", r->keep_alive);
    return;
  }
  if (flav(s, SIM_FLAVOUR_LLAMACPP) && llama_new(s) && r->method == SIM_HTTP_POST &&
      strncmp(r->path, "/slots/", 7) == 0) {
    handle_slot_action(s, c, r);
    return;
  }
  for (size_t i = 0; i < TB_ARRAY_LEN(routes); i++) {
    if (!(routes[i].flavours & fbit) || strcmp(routes[i].path, r->path) != 0)
      continue;
    path_known = true;
    if (routes[i].method == r->method) {
      routes[i].fn(s, c, r);
      return;
    }
  }
  if (llama_new(s)) /* its router answers any other method or path so */
    sim_out_reply_error(s, &c->o, 404, "File Not Found", r->keep_alive);
  else if (path_known)
    sim_out_reply_raw(s, &c->o, 405, "application/json", "{\"detail\":\"Method Not Allowed\"}", 31,
                      r->keep_alive);
  else
    sim_out_reply_raw(s, &c->o, 404, "application/json", "{\"detail\":\"Not Found\"}", 22,
                      r->keep_alive);
}
