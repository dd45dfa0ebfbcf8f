/*
 * tb_trace: the readers of production traces (tb_trace.h, docs/traces.md).
 *
 * One builder holds what every reader fills: the requests, the block ids
 * (renumbered densely through an open-addressing table keyed by a scope and
 * the file's id), and a second table from a format's own keys (a Bailian
 * chat_id, a Mooncake session_id) to the request that carries them.  JSON
 * lines and CSV rows are cut by one line walker that counts lines for the
 * errors; a line longer than TB_TRACE_MAX_LINE is an error, not a
 * truncation.  gzip is inflated by zlib, stopped at TB_TRACE_MAX_BYTES.
 */
#include "spec/tb_trace.h"

#include "base/tb_arrival.h"
#include "base/tb_crypto.h"
#include "base/tb_jsonscan.h"
#include "base/tb_tz.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- the builder ---- */

struct slot {
  uint64_t scope, key;
  uint64_t val; /* value + 1; 0 = empty */
};

struct table {
  struct slot *s;
  size_t cap, used;
};

struct builder {
  struct tb_trace *t;
  size_t reqcap, blkcap;
  size_t mem;          /* bytes held against max_mem: text and tables */
  size_t max_mem;      /* TB_TRACE_MAX_MEMORY, or less (tb_trace_parse_within) */
  struct table ids;    /* (scope, file id) -> dense block id */
  struct table keys;   /* (kind, key) -> request or session index */
  uint64_t next_scope; /* WEKA: a scope per conversation and subagent */
  char *err;
  size_t errlen;
};

static struct slot *
table_find(struct table *tb, uint64_t scope, uint64_t key)
{
  if (tb->cap == 0) {
    tb->cap = 1024;
    tb->s = tb_xcalloc(tb->cap, sizeof *tb->s);
  }
  size_t i = (size_t)tb_rng_mix64(key ^ tb_rng_mix64(scope)) & (tb->cap - 1);
  while (tb->s[i].val != 0 && (tb->s[i].scope != scope || tb->s[i].key != key))
    i = (i + 1) & (tb->cap - 1);
  return &tb->s[i];
}

static void
table_grow(struct table *tb)
{
  struct table n = { tb_xcalloc(tb->cap * 2, sizeof *tb->s), tb->cap * 2, 0 };
  for (size_t i = 0; i < tb->cap; i++) {
    if (tb->s[i].val == 0)
      continue;
    struct slot *d = table_find(&n, tb->s[i].scope, tb->s[i].key);
    *d = tb->s[i];
    n.used++;
  }
  free(tb->s);
  *tb = n;
}

/* The value stored at (scope, key), or -1. */
static int64_t
table_get(struct table *tb, uint64_t scope, uint64_t key)
{
  struct slot *s = table_find(tb, scope, key);
  return s->val == 0 ? -1 : (int64_t)(s->val - 1);
}

static void
table_put(struct table *tb, uint64_t scope, uint64_t key, uint64_t val)
{
  if ((tb->used + 1) * 2 > tb->cap)
    table_grow(tb);
  struct slot *s = table_find(tb, scope, key);
  if (s->val == 0)
    tb->used++;
  s->scope = scope;
  s->key = key;
  s->val = val + 1;
}

static int fail(struct builder *b, size_t line, const char *fmt, ...) TB_PRINTF(3, 4);

static int
fail(struct builder *b, size_t line, const char *fmt, ...)
{
  char msg[TB_TRACE_ERR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (line > 0)
    snprintf(b->err, b->errlen, "line %zu: %s", line, msg);
  else
    snprintf(b->err, b->errlen, "%s", msg);
  return -1;
}

/* Room in max_mem for a table that grows from old to new bytes
 * (both are held while it moves): 0, with the new size counted; else -1
 * naming the cap. */
static int
charge(struct builder *b, size_t line, size_t old, size_t new)
{
  if (b->mem + new > b->max_mem)
    return fail(b, line,
                "reading it would take more than %zu MiB of memory (the cap of one trace's "
                "reading: its text, its tables and one JSON line or conversation at a time)",
                b->max_mem >> 20);
  b->mem = b->mem - old + new;
  return 0;
}

/* Room to add one to table tb of the builder. */
static int
table_room(struct builder *b, size_t line, struct table *tb)
{
  if (tb->cap == 0)
    return charge(b, line, 0, 1024 * sizeof *tb->s);
  if ((tb->used + 1) * 2 > tb->cap)
    return charge(b, line, tb->cap * sizeof *tb->s, tb->cap * 2 * sizeof *tb->s);
  return 0;
}

/* A new request, zeroed but for its roots' defaults; NULL past the cap. */
static struct tb_trace_req *
add_req(struct builder *b, size_t line)
{
  struct tb_trace *t = b->t;
  if (t->n >= TB_TRACE_MAX_REQUESTS) {
    fail(b, line, "more than %u requests (the cap of one trace)", TB_TRACE_MAX_REQUESTS);
    return NULL;
  }
  if (t->n == b->reqcap) {
    size_t cap = b->reqcap ? b->reqcap * 2 : 256;
    if (charge(b, line, b->reqcap * sizeof *t->req, cap * sizeof *t->req) < 0)
      return NULL;
    b->reqcap = cap;
    t->req = tb_xrealloc(t->req, b->reqcap * sizeof *t->req);
  }
  struct tb_trace_req *r = &t->req[t->n++];
  memset(r, 0, sizeof *r);
  r->blk_off = t->nblocks;
  r->session = -1;
  r->parent = -1;
  r->delay_s = -1;
  return r;
}

static int
add_block(struct builder *b, size_t line, struct tb_trace_req *r, uint64_t scope, uint64_t id)
{
  struct tb_trace *t = b->t;
  if (r->nblk >= TB_TRACE_MAX_REQ_BLOCKS)
    return fail(b, line, "field \"hash_ids\": more than %u ids (the cap of one request)",
                TB_TRACE_MAX_REQ_BLOCKS);
  if (t->nblocks >= TB_TRACE_MAX_BLOCKS)
    return fail(b, line, "more than %u block ids (the cap of one trace)", TB_TRACE_MAX_BLOCKS);
  int64_t d = table_get(&b->ids, scope, id);
  if (d < 0) {
    if (table_room(b, line, &b->ids) < 0)
      return -1;
    d = (int64_t)t->nuniq++;
    table_put(&b->ids, scope, id, (uint64_t)d);
  }
  if (t->nblocks == b->blkcap) {
    size_t cap = b->blkcap ? b->blkcap * 2 : 4096;
    if (charge(b, line, b->blkcap * sizeof *t->blocks, cap * sizeof *t->blocks) < 0)
      return -1;
    b->blkcap = cap;
    t->blocks = tb_xrealloc(t->blocks, b->blkcap * sizeof *t->blocks);
  }
  t->blocks[t->nblocks++] = (uint32_t)d;
  r->nblk++;
  return 0;
}

/* ---- JSON members ---- */

/* The first member of o named in names (NULL-ended); its name in *which. */
static json_t *
member(const json_t *o, const char *const *names, const char **which)
{
  for (size_t i = 0; names[i] != NULL; i++) {
    json_t *v = json_object_get(o, names[i]);
    if (v != NULL && !json_is_null(v)) {
      *which = names[i];
      return v;
    }
  }
  *which = names[0];
  return NULL;
}

/* A token count: an integer (or integral real) in [0, TB_TRACE_MAX_TOKENS].
 * 1 when found, 0 when absent, -1 (err set) when malformed. */
static int
get_tokens(struct builder *b, size_t line, const char *ctx, const json_t *o,
           const char *const *names, int64_t *out)
{
  const char *which;
  json_t *v = member(o, names, &which);
  if (v == NULL)
    return 0;
  double d = json_number_value(v);
  if (!json_is_number(v) || !isfinite(d) || d != floor(d) || d < 0 || d > TB_TRACE_MAX_TOKENS)
    return fail(b, line, "%sfield \"%s\": expected a whole number of tokens in [0, %d]", ctx, which,
                TB_TRACE_MAX_TOKENS);
  *out = (int64_t)d;
  return 1;
}

/* A time or a delay: a finite number >= 0, times scale.  1 found, 0 absent,
 * -1 malformed. */
static int
get_time(struct builder *b, size_t line, const char *ctx, const json_t *o, const char *const *names,
         double scale, double *out)
{
  const char *which;
  json_t *v = member(o, names, &which);
  if (v == NULL)
    return 0;
  double d = json_number_value(v);
  if (!json_is_number(v) || !isfinite(d) || d < 0 || d > 1e12)
    return fail(b, line, "%sfield \"%s\": expected a number >= 0", ctx, which);
  *out = d * scale;
  return 1;
}

static int
get_required_tokens(struct builder *b, size_t line, const char *ctx, const json_t *o,
                    const char *const *names, int64_t *out)
{
  int rc = get_tokens(b, line, ctx, o, names, out);
  if (rc == 0)
    return fail(b, line, "%sfield \"%s\" is missing", ctx, names[0]);
  return rc < 0 ? -1 : 0;
}

/* hash_ids: an array of integers >= 0, each added to r in scope. */
static int
get_hash_ids(struct builder *b, size_t line, const char *ctx, const json_t *o,
             struct tb_trace_req *r, uint64_t scope, bool required)
{
  json_t *a = json_object_get(o, "hash_ids");
  if (a == NULL || json_is_null(a)) {
    if (required)
      return fail(b, line, "%sfield \"hash_ids\" is missing", ctx);
    return 0;
  }
  if (!json_is_array(a))
    return fail(b, line, "%sfield \"hash_ids\": expected an array of integers", ctx);
  size_t i;
  json_t *v;
  json_array_foreach (a, i, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return fail(b, line, "%sfield \"hash_ids[%zu]\": expected an integer >= 0", ctx, i);
    if (add_block(b, line, r, scope, (uint64_t)json_integer_value(v)) < 0)
      return -1;
  }
  return 0;
}

/* An id that may be an integer or a string, as a 64-bit key (a string's
 * FNV-1a hash in the upper half of the key space's scope).  1 found, 0
 * absent, -1 malformed. */
static int
get_key(struct builder *b, size_t line, const json_t *o, const char *name, uint64_t *scope,
        uint64_t *key, int64_t *ival)
{
  json_t *v = json_object_get(o, name);
  if (v == NULL || json_is_null(v))
    return 0;
  if (json_is_integer(v)) {
    *ival = json_integer_value(v);
    *key = (uint64_t)*ival;
    *scope = 0;
    return 1;
  }
  if (json_is_string(v)) {
    uint64_t h = 1469598103934665603ULL;
    const char *s = json_string_value(v);
    for (size_t i = 0, n = json_string_length(v); i < n; i++)
      h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    *key = h;
    *scope = 1;
    *ival = 0;
    return 1;
  }
  return fail(b, line, "field \"%s\": expected an integer or a string", name);
}

/* ---- lines ---- */

struct lines {
  const char *p, *end;
  size_t no;
};

/* The next line (without its \n or \r\n) into *s, *n; false at the end.
 * *too_long when it passes TB_TRACE_MAX_LINE. */
static bool
next_line(struct lines *ls, const char **s, size_t *n, bool *too_long)
{
  if (ls->p >= ls->end)
    return false;
  const char *nl = memchr(ls->p, '\n', (size_t)(ls->end - ls->p));
  const char *e = nl ? nl : ls->end;
  *s = ls->p;
  *n = (size_t)(e - ls->p);
  if (*n > 0 && (*s)[*n - 1] == '\r')
    (*n)--;
  *too_long = *n > TB_TRACE_MAX_LINE;
  ls->p = nl ? nl + 1 : ls->end;
  ls->no++;
  return true;
}

static bool
blank(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t')
      return false;
  return true;
}

/* The JSON value of s[0 .. n) (a line, a conversation, the document), if
 * the tree it would build fits TB_TRACE_MAX_TREE and what
 * the builder's max_mem leaves; NULL
 * with the reason (line 0: no line). */
static json_t *
load(struct builder *b, size_t line, const char *s, size_t n)
{
  size_t cost = tb_jsonscan_cost(s, n);
  if (cost > TB_TRACE_MAX_TREE) {
    fail(b, line,
         "its JSON would take about %zu MiB of memory to read, more than the %u MiB of one "
         "JSON line or conversation",
         (cost + (1u << 20) - 1) >> 20, TB_TRACE_MAX_TREE >> 20);
    return NULL;
  }
  if (b->mem + cost > b->max_mem) {
    fail(b, line,
         "its JSON would take about %zu MiB of memory to read, more than the %zu MiB one trace "
         "may take (its text, its tables and one JSON line or conversation at a time)",
         (cost + (1u << 20) - 1) >> 20, b->max_mem >> 20);
    return NULL;
  }
  json_error_t je;
  json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
  if (o == NULL)
    fail(b, line, "not JSON: %s (column %d)", je.text, je.column);
  return o;
}

/* Each non-blank line as a JSON object, handed to fn. */
static int
each_json_line(struct builder *b, const char *data, size_t len,
               int (*fn)(struct builder *, size_t, const json_t *))
{
  struct lines ls = { data, data + len, 0 };
  const char *s;
  size_t n;
  bool too_long;
  while (next_line(&ls, &s, &n, &too_long)) {
    if (too_long)
      return fail(b, ls.no, "longer than %u bytes", TB_TRACE_MAX_LINE);
    if (blank(s, n))
      continue;
    json_t *o = load(b, ls.no, s, n);
    if (o == NULL)
      return -1;
    int rc = json_is_object(o) ? fn(b, ls.no, o) : fail(b, ls.no, "expected a JSON object");
    json_decref(o);
    if (rc < 0)
      return -1;
  }
  return 0;
}

/* ---- Mooncake ----
 * Fields: Mooncake's own trace (kvcache-ai/Mooncake, FAST25-release/traces;
 * described in ai-dynamo/dynamo benchmarks/data_generator/README.md:
 * timestamp in ms since the first request, hash_ids of 512-token blocks)
 * and AIPerf's MooncakeTrace reader (ai-dynamo/aiperf,
 * docs/benchmark_modes/trace_replay.md), whose session_id and delay make
 * turns of a session. */
static const char *const MC_IN[] = { "input_length", "input_tokens", NULL };
static const char *const MC_OUT[] = { "output_length", "output_tokens", NULL };
static const char *const MC_T[] = { "timestamp", "created_time", NULL };
static const char *const MC_DELAY[] = { "delay", "delay_ms", NULL };
#define KEY_SESSION 1
#define KEY_CHAT 2

static int
mooncake_line(struct builder *b, size_t line, const json_t *o)
{
  struct tb_trace_req *r = add_req(b, line);
  if (r == NULL)
    return -1;
  if (get_required_tokens(b, line, "", o, MC_IN, &r->in_tokens) < 0)
    return -1;
  r->out_tokens = 1;
  if (get_tokens(b, line, "", o, MC_OUT, &r->out_tokens) < 0)
    return -1;
  int has_t = get_time(b, line, "", o, MC_T, 1e-3, &r->t_s);
  int has_d = get_time(b, line, "", o, MC_DELAY, 1e-3, &r->delay_s);
  if (has_t < 0 || has_d < 0)
    return -1;
  uint64_t scope, key;
  int64_t iv;
  int has_s = get_key(b, line, o, "session_id", &scope, &key, &iv);
  if (has_s < 0)
    return -1;
  size_t self = b->t->n - 1;
  if (has_s) {
    int64_t last = table_get(&b->keys, KEY_SESSION * 2 + scope, key);
    if (last >= 0) {
      r->parent = last;
      r->session = b->t->req[last].session;
      if (!has_t)
        r->t_s = b->t->req[last].t_s;
    } else {
      r->session = (int64_t)b->t->nsessions++;
    }
    if (table_room(b, line, &b->keys) < 0)
      return -1;
    table_put(&b->keys, KEY_SESSION * 2 + scope, key, self);
  }
  if (!has_t && r->parent < 0)
    return fail(b, line, "field \"timestamp\" is missing (a session's first turn needs one)");
  if (r->parent < 0)
    r->delay_s = -1;
  return get_hash_ids(b, line, "", o, r, 0, false);
}

/* ---- Bailian ----
 * Fields as the issue states them for Alibaba's Qwen Bailian usage traces
 * (alibaba-edu/qwen-bailian-usagetraces-anon, replayed by
 * blitz-serving/trace-replayer): chat_id, parent_chat_id (-1 for a root),
 * timestamp (s), input_length, output_length, type, turn, hash_ids of
 * 16-token blocks.  type and turn are not needed to replay and not read. */
static const char *const BL_IN[] = { "input_length", NULL };
static const char *const BL_OUT[] = { "output_length", NULL };
static const char *const BL_T[] = { "timestamp", NULL };

static int
bailian_line(struct builder *b, size_t line, const json_t *o)
{
  struct tb_trace_req *r = add_req(b, line);
  if (r == NULL)
    return -1;
  if (get_required_tokens(b, line, "", o, BL_IN, &r->in_tokens) < 0 ||
      get_required_tokens(b, line, "", o, BL_OUT, &r->out_tokens) < 0)
    return -1;
  int has_t = get_time(b, line, "", o, BL_T, 1.0, &r->t_s);
  if (has_t <= 0)
    return has_t < 0 ? -1 : fail(b, line, "field \"timestamp\" is missing");
  uint64_t scope, key, pscope, pkey;
  int64_t iv, piv;
  int has_c = get_key(b, line, o, "chat_id", &scope, &key, &iv);
  if (has_c <= 0)
    return has_c < 0 ? -1 : fail(b, line, "field \"chat_id\" is missing");
  int has_p = get_key(b, line, o, "parent_chat_id", &pscope, &pkey, &piv);
  if (has_p < 0)
    return -1;
  size_t self = b->t->n - 1;
  if (has_p && !(pscope == 0 && piv < 0)) {
    int64_t p = table_get(&b->keys, KEY_CHAT * 2 + pscope, pkey);
    if (p < 0)
      return fail(b, line, "field \"parent_chat_id\": no earlier line has that chat_id");
    r->parent = p;
    r->session = b->t->req[p].session;
  } else {
    r->session = (int64_t)b->t->nsessions++;
  }
  if (table_get(&b->keys, KEY_CHAT * 2 + scope, key) >= 0)
    return fail(b, line, "field \"chat_id\": repeats an earlier line's");
  if (table_room(b, line, &b->keys) < 0)
    return -1;
  table_put(&b->keys, KEY_CHAT * 2 + scope, key, self);
  return get_hash_ids(b, line, "", o, r, 0, false);
}

/* ---- WEKA AgentX ----
 * The trace format of callanjfox/agentic-coding-analysis
 * (docs/TRACE_FORMAT.md), read by AIPerf's Weka loader (ai-dynamo/aiperf
 * #1165) and GuideLLM (vllm-project/guidellm #972): an object per
 * conversation with block_size and requests[] of t (s from the
 * conversation's start), type ("s", "n", "subagent"), in, out, hash_ids,
 * think_time (s since the previous response ended).  hash_ids are numbered
 * per conversation and a subagent runs in a cache of its own, so each gets
 * a scope of its own here.  A conversation starts at 0. */
static const char *const WK_IN[] = { "in", NULL };
static const char *const WK_OUT[] = { "out", NULL };
static const char *const WK_T[] = { "t", NULL };
static const char *const WK_THINK[] = { "think_time", NULL };

static int
weka_request(struct builder *b, size_t line, const char *ctx, const json_t *o, double t0,
             uint64_t scope, int64_t session, int64_t *prev)
{
  struct tb_trace_req *r = add_req(b, line);
  if (r == NULL)
    return -1;
  if (get_required_tokens(b, line, ctx, o, WK_IN, &r->in_tokens) < 0 ||
      get_required_tokens(b, line, ctx, o, WK_OUT, &r->out_tokens) < 0)
    return -1;
  int has_t = get_time(b, line, ctx, o, WK_T, 1.0, &r->t_s);
  if (has_t <= 0)
    return has_t < 0 ? -1 : fail(b, line, "%sfield \"t\" is missing", ctx);
  r->t_s += t0;
  r->session = session;
  r->parent = *prev;
  if (*prev >= 0 && get_time(b, line, ctx, o, WK_THINK, 1.0, &r->delay_s) < 0)
    return -1;
  *prev = (int64_t)(b->t->n - 1);
  return get_hash_ids(b, line, ctx, o, r, scope, false);
}

static int
weka_requests(struct builder *b, size_t line, const char *ctx, const json_t *reqs, double t0,
              int depth)
{
  if (!json_is_array(reqs))
    return fail(b, line, "%sfield \"requests\": expected an array", ctx);
  int64_t session = (int64_t)b->t->nsessions++, prev = -1;
  uint64_t scope = ++b->next_scope;
  size_t i;
  json_t *o;
  json_array_foreach (reqs, i, o) {
    char c[96];
    snprintf(c, sizeof c, "%srequests[%zu]: ", ctx, i);
    if (!json_is_object(o))
      return fail(b, line, "%sexpected an object", c);
    const char *type = json_string_value(json_object_get(o, "type"));
    if (type == NULL || strcmp(type, "subagent") != 0) {
      if (weka_request(b, line, c, o, t0, scope, session, &prev) < 0)
        return -1;
      continue;
    }
    if (depth >= TB_TRACE_MAX_DEPTH)
      return fail(b, line, "%ssubagents nest deeper than %d", c, TB_TRACE_MAX_DEPTH);
    double ts = 0;
    int has_t = get_time(b, line, c, o, WK_T, 1.0, &ts);
    if (has_t <= 0)
      return has_t < 0 ? -1 : fail(b, line, "%sfield \"t\" is missing", c);
    if (weka_requests(b, line, c, json_object_get(o, "requests"), t0 + ts, depth + 1) < 0)
      return -1;
  }
  return 0;
}

static int
weka_conversation(struct builder *b, size_t line, const json_t *o)
{
  json_int_t bs = json_integer_value(json_object_get(o, "block_size"));
  if (json_object_get(o, "block_size") != NULL) {
    if (!json_is_integer(json_object_get(o, "block_size")) || bs < 1 || bs > 1 << 20)
      return fail(b, line, "field \"block_size\": expected an integer in [1, 1048576]");
    if (b->t->n > 0 && b->t->block_tokens != bs)
      return fail(b, line, "field \"block_size\": %lld differs from an earlier conversation's %lld",
                  (long long)bs, (long long)b->t->block_tokens);
    b->t->block_tokens = bs;
  }
  return weka_requests(b, line, "", json_object_get(o, "requests"), 0, 0);
}

static size_t
skip_space(const char *s, size_t n, size_t i)
{
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
    i++;
  return i;
}

/* A top-level array of conversations, parsed one element at a time. */
static int
weka_array(struct builder *b, const char *data, size_t len, size_t i)
{
  i = skip_space(data, len, i + 1);
  if (i < len && data[i] == ']')
    return skip_space(data, len, i + 1) == len ? 0 : fail(b, 0, "text after the array");
  for (size_t k = 0;; k++) {
    if (i >= len || data[i] != '{')
      return fail(b, 0, "conversation %zu: expected an object", k);
    size_t end = i + tb_jsonscan_value_end(data + i, len - i);
    json_t *o = load(b, 0, data + i, end - i);
    int rc = o != NULL ? weka_conversation(b, 0, o) : -1;
    json_decref(o);
    if (rc < 0) {
      char why[TB_TRACE_ERR_MAX];
      snprintf(why, sizeof why, "%s", b->err);
      return fail(b, 0, "conversation %zu: %s", k, why);
    }
    i = skip_space(data, len, end);
    if (i < len && data[i] == ']')
      return skip_space(data, len, i + 1) == len ? 0 : fail(b, 0, "text after the array");
    if (i >= len || data[i] != ',')
      return fail(b, 0, "conversation %zu: expected ',' or ']' after it", k);
    i = skip_space(data, len, i + 1);
  }
}

/* One conversation object, an array of them (each parsed alone), or JSON
 * lines of them: the tree of one at a time is all that is built. */
static int
weka_read(struct builder *b, const char *data, size_t len)
{
  size_t i = skip_space(data, len, 0);
  if (i < len && data[i] == '[')
    return weka_array(b, data, len, i);
  if (i < len && data[i] == '{') {
    size_t end = i + tb_jsonscan_value_end(data + i, len - i);
    if (skip_space(data, len, end) == len) { /* one document */
      json_t *doc = load(b, 0, data + i, end - i);
      if (doc == NULL)
        return -1;
      int rc = weka_conversation(b, 0, doc);
      json_decref(doc);
      return rc;
    }
  }
  return each_json_line(b, data, len, weka_conversation);
}

/* ---- CSV ---- */

#define CSV_MAX_COLS 64

struct csv_row {
  char *f[CSV_MAX_COLS];
  size_t n;
};

/* Splits a row (RFC 4180 quotes; no line breaks inside quotes) into buf,
 * each field NUL-ended.  false on a bad quote or too many columns. */
static bool
csv_split(const char *s, size_t n, char *buf, struct csv_row *row)
{
  size_t i = 0, o = 0;
  row->n = 0;
  for (;;) {
    if (row->n == CSV_MAX_COLS)
      return false;
    row->f[row->n++] = buf + o;
    if (i < n && s[i] == '"') {
      i++;
      for (;;) {
        if (i >= n)
          return false;
        if (s[i] == '"') {
          if (i + 1 < n && s[i + 1] == '"') {
            buf[o++] = '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        buf[o++] = s[i++];
      }
      if (i < n && s[i] != ',')
        return false;
    } else {
      while (i < n && s[i] != ',')
        buf[o++] = s[i++];
    }
    buf[o++] = '\0';
    if (i >= n)
      return true;
    i++; /* the comma */
  }
}

static char *
trim(char *s)
{
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
  return s;
}

static bool
digits(const char *s, int n, int64_t *out)
{
  int64_t v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

/* "2023-11-16 18:15:46.6805900" (a 'T' too; an offset "+00:00" or "Z" is
 * taken as UTC, which the Azure traces are) or plain seconds. */
static bool
parse_when(const char *s, double *out)
{
  int64_t y, mo, d, h, mi, se;
  if (strlen(s) >= 19 && s[4] == '-' && s[7] == '-' && (s[10] == ' ' || s[10] == 'T') &&
      s[13] == ':' && s[16] == ':' && digits(s, 4, &y) && digits(s + 5, 2, &mo) &&
      digits(s + 8, 2, &d) && digits(s + 11, 2, &h) && digits(s + 14, 2, &mi) &&
      digits(s + 17, 2, &se) && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 &&
      se < 61) {
    double frac = 0, scale = 0.1;
    const char *p = s + 19;
    if (*p == '.')
      for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
        frac += (*p - '0') * scale;
    if (*p != '\0' && *p != 'Z' && *p != '+' && *p != '-')
      return false;
    *out = (double)(tb_tz_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 +
                    mi * 60 + se) +
           frac;
    return true;
  }
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || v < 0 || v > 1e12)
    return false;
  *out = v;
  return true;
}

static bool
parse_count(const char *s, int64_t *out)
{
  /* "512" or "512.0" (pandas writes integral columns as reals) */
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !isfinite(v) || v != floor(v) || v < 0 || v > TB_TRACE_MAX_TOKENS)
    return false;
  *out = (int64_t)v;
  return true;
}

/* Azure LLM inference traces 2023 and 2024 (Azure/AzurePublicDataset,
 * AzureLLMInferenceDataset2023.md and 2024.md): TIMESTAMP, ContextTokens,
 * GeneratedTokens.  BurstGPT (HPMLL/BurstGPT, release v1.1; its columns as
 * ai-dynamo/dynamo's burstgpt converter README lists them): Timestamp (s),
 * Model, Request tokens, Response tokens, Total tokens, Log Type. */
struct csv_cols {
  const char *t, *in, *out;
};

static const struct csv_cols AZURE_COLS = { "TIMESTAMP", "ContextTokens", "GeneratedTokens" };
static const struct csv_cols BURST_COLS = { "Timestamp", "Request tokens", "Response tokens" };

static int
csv_read(struct builder *b, const char *data, size_t len, const struct csv_cols *cols)
{
  struct lines ls = { data, data + len, 0 };
  const char *s;
  size_t n;
  bool too_long, header = true;
  int ci[3] = { -1, -1, -1 };
  const char *names[3] = { cols->t, cols->in, cols->out };
  char *buf = NULL;
  size_t cap = 0;
  struct csv_row row;
  int rc = 0;
  while (rc == 0 && next_line(&ls, &s, &n, &too_long)) {
    if (too_long) {
      rc = fail(b, ls.no, "longer than %u bytes", TB_TRACE_MAX_LINE);
      break;
    }
    if (blank(s, n))
      continue;
    tb_xgrow(&buf, &cap, n + CSV_MAX_COLS + 1, 256);
    if (!csv_split(s, n, buf, &row)) {
      rc = fail(b, ls.no, "not a CSV row (a stray quote, or more than %d columns)", CSV_MAX_COLS);
      break;
    }
    if (header) {
      header = false;
      for (size_t i = 0; i < row.n; i++)
        for (int k = 0; k < 3; k++)
          if (strcmp(trim(row.f[i]), names[k]) == 0)
            ci[k] = (int)i;
      for (int k = 0; k < 3 && rc == 0; k++)
        if (ci[k] < 0)
          rc = fail(b, ls.no, "the header has no column \"%s\"", names[k]);
      continue;
    }
    struct tb_trace_req *r = add_req(b, ls.no);
    if (r == NULL) {
      rc = -1;
      break;
    }
    for (int k = 0; k < 3 && rc == 0; k++) {
      if ((size_t)ci[k] >= row.n) {
        rc = fail(b, ls.no, "field \"%s\" is missing (the row is short)", names[k]);
        break;
      }
      char *f = trim(row.f[ci[k]]);
      bool ok =
        k == 0 ? parse_when(f, &r->t_s) : parse_count(f, k == 1 ? &r->in_tokens : &r->out_tokens);
      if (!ok)
        rc = fail(b, ls.no, "field \"%s\": \"%.40s\" is not %s", names[k], f,
                  k == 0 ? "a date-time or a number of seconds >= 0"
                         : "a whole number of tokens >= 0");
    }
  }
  if (rc == 0 && header)
    rc = fail(b, 0, "no header row (an empty trace)");
  free(buf);
  return rc;
}

/* ---- gzip ---- */

/* Inflates a gzip member of len bytes into *out (caller frees), at most
 * max bytes (TB_TRACE_MAX_BYTES, or the memory cap when it is less). */
static int
gunzip(struct builder *b, const unsigned char *data, size_t len, size_t max, char **out,
       size_t *outlen)
{
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    return fail(b, 0, "gzip: cannot start zlib");
  size_t cap = len * 4 + 4096, used = 0;
  if (cap > max + 1)
    cap = max + 1;
  char *buf = tb_xmalloc(cap);
  z.next_in = (unsigned char *)(uintptr_t)data;
  int rc = Z_OK;
  size_t left = len;
  while (rc != Z_STREAM_END) {
    if (used == cap) {
      if (cap > max) {
        inflateEnd(&z);
        free(buf);
        return fail(b, 0, "gzip: inflates to more than %zu bytes (the cap of one trace)", max);
      }
      cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
      buf = tb_xrealloc(buf, cap);
    }
    uInt chunk_in = left > (1u << 30) ? (1u << 30) : (uInt)left;
    z.avail_in = chunk_in;
    z.next_out = (unsigned char *)buf + used;
    size_t room = cap - used;
    z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
    uInt before_out = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    left -= chunk_in - z.avail_in;
    used += before_out - z.avail_out;
    if (rc == Z_STREAM_END)
      break;
    if (rc != Z_OK && !(rc == Z_BUF_ERROR && z.avail_out == 0)) {
      inflateEnd(&z);
      free(buf);
      return fail(b, 0, "gzip: %s",
                  rc == Z_BUF_ERROR ? "the stream ends early" : (z.msg ? z.msg : "corrupt data"));
    }
  }
  inflateEnd(&z);
  if (used > max) {
    free(buf);
    return fail(b, 0, "gzip: inflates to more than %zu bytes (the cap of one trace)", max);
  }
  *out = buf;
  *outlen = used;
  return 0;
}

/* ---- the public face ---- */

static const char *const FORMAT_NAMES[] = { "mooncake", "azure", "burstgpt", "bailian", "weka" };
static const int64_t FORMAT_BLOCKS[] = { 512, 0, 0, 16, 64 };

bool
tb_trace_format_parse(const char *name, enum tb_trace_format *out)
{
  for (size_t i = 0; name != NULL && i < TB_ARRAY_LEN(FORMAT_NAMES); i++)
    if (strcmp(name, FORMAT_NAMES[i]) == 0) {
      *out = (enum tb_trace_format)i;
      return true;
    }
  return false;
}

const char *
tb_trace_format_name(enum tb_trace_format f)
{
  return (size_t)f < TB_ARRAY_LEN(FORMAT_NAMES) ? FORMAT_NAMES[f] : "?";
}

int64_t
tb_trace_format_block_tokens(enum tb_trace_format f)
{
  return (size_t)f < TB_ARRAY_LEN(FORMAT_BLOCKS) ? FORMAT_BLOCKS[f] : 0;
}

void
tb_trace_free(struct tb_trace *t)
{
  free(t->req);
  free(t->blocks);
  memset(t, 0, sizeof *t);
}

/* Times from the first arrival; a trace of no requests is an error. */
static int
finish(struct builder *b)
{
  struct tb_trace *t = b->t;
  if (t->n == 0)
    return fail(b, 0, "no requests");
  double t0 = t->req[0].t_s;
  for (size_t i = 1; i < t->n; i++)
    if (t->req[i].t_s < t0)
      t0 = t->req[i].t_s;
  for (size_t i = 0; i < t->n; i++)
    t->req[i].t_s -= t0;
  if (t->nblocks == 0)
    t->block_tokens = 0;
  return 0;
}

int
tb_trace_parse(const void *data, size_t len, enum tb_trace_format f, struct tb_trace *out,
               char *err, size_t errlen)
{
  return tb_trace_parse_within(data, len, f, TB_TRACE_MAX_MEMORY, out, err, errlen);
}

int
tb_trace_parse_within(const void *data, size_t len, enum tb_trace_format f, size_t max_memory,
                      struct tb_trace *out, char *err, size_t errlen)
{
  memset(out, 0, sizeof *out);
  out->format = f;
  out->block_tokens = tb_trace_format_block_tokens(f);
  if (max_memory > TB_TRACE_MAX_MEMORY)
    max_memory = TB_TRACE_MAX_MEMORY;
  struct builder b = { .t = out, .max_mem = max_memory, .err = err, .errlen = errlen };
  char *inflated = NULL;
  const char *text = data;
  size_t tlen = len;
  int rc;
  if (len >= 2 && ((const unsigned char *)data)[0] == 0x1f &&
      ((const unsigned char *)data)[1] == 0x8b) {
    size_t max = TB_TRACE_MAX_BYTES < max_memory ? TB_TRACE_MAX_BYTES : max_memory;
    if (gunzip(&b, data, len, max, &inflated, &tlen) < 0)
      goto out_err;
    text = inflated;
    out->gzipped = true;
    b.mem = tlen;
  } else if (len > TB_TRACE_MAX_BYTES) {
    fail(&b, 0, "larger than %u bytes (the cap of one trace)", TB_TRACE_MAX_BYTES);
    goto out_err;
  }
  switch (f) {
  case TB_TRACE_MOONCAKE: rc = each_json_line(&b, text, tlen, mooncake_line); break;
  case TB_TRACE_BAILIAN: rc = each_json_line(&b, text, tlen, bailian_line); break;
  case TB_TRACE_WEKA: rc = weka_read(&b, text, tlen); break;
  case TB_TRACE_AZURE: rc = csv_read(&b, text, tlen, &AZURE_COLS); break;
  case TB_TRACE_BURSTGPT: rc = csv_read(&b, text, tlen, &BURST_COLS); break;
  default: rc = fail(&b, 0, "unknown trace format");
  }
  if (rc < 0 || finish(&b) < 0)
    goto out_err;
  tb_crypto_sha256_hex(data, len, out->sha256);
  free(inflated);
  free(b.ids.s);
  free(b.keys.s);
  return 0;
out_err:
  free(inflated);
  free(b.ids.s);
  free(b.keys.s);
  bool gz = out->gzipped;
  tb_trace_free(out);
  out->gzipped = gz;
  return -1;
}
