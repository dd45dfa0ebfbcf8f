/*
 * tb_prompt: exact-size prompts.  See tb_prompt.h.
 *
 * Search: the token count is monotonic in the word count, and close to
 * linear.  Two measurements give a line; the solution is checked and
 * corrected by secant steps, then by bisection inside the bracket the
 * measurements built, so a handful of /tokenize calls usually suffice even at
 * 256K (a 1 MB body each).
 */
#include "engine/tb_prompt.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tb_http.h"

#define TOKENIZE_TIMEOUT_MS 60000L
#define CALIB_TIMEOUT_MS 120000L
#define MAX_PROBES 40
/* Caps on what a server's counts may say, so that junk cannot overflow the
 * arithmetic or size a giant prompt: a count beyond any context window, or
 * fewer tokens per filler word than this, is refused as an answer. */
#define COUNT_MAX (1LL << 32)
#define SLOPE_MIN (1.0 / 16.0)

/* Common short words: one token each on usual BPE vocabularies. */
/* Common words of at most four bytes: one token each on usual BPE
 * vocabularies (and on tokbench-sim's), so the count is close to linear. */
static const char *const filler[] = {
  "the",  "fox",  "dog",  "and",  "runs", "far",  "into", "sky",  "blue", "old",  "tree",
  "near", "sun",  "day",  "long", "soft", "bird", "sing", "all",  "red",  "over", "lazy",
  "hill", "when", "then", "lake", "wind", "rain", "snow", "moon", "star", "road",
};

struct tb_prompt_ctx {
  const struct tb_discover *d;
  const char *api_key;
  char *run_id;
  bool calibrated;
  double a, b;      /* tokens = a + b * words (generic servers) */
  int64_t overhead; /* chat template tokens (SGLang) */
  bool have_overhead;
  enum {
    MODE_LINEAR = 0,
    MODE_CHAT,
    MODE_TEXT,
    MODE_TEMPLATE,
    MODE_ESTIMATE
  } mode;
  bool no_usage; /* a calibration request was answered without usage */
};

struct tb_prompt_ctx *
tb_prompt_ctx_new(const struct tb_discover *d, const char *api_key, const char *run_id)
{
  struct tb_prompt_ctx *c = tb_xcalloc(1, sizeof *c);
  c->d = d;
  c->api_key = api_key;
  c->run_id = tb_xstrdup(run_id);
  return c;
}

void
tb_prompt_ctx_free(struct tb_prompt_ctx *c)
{
  if (c == NULL)
    return;
  free(c->run_id);
  free(c);
}

static char *
prompt_text_pad(const char *tag, int64_t nwords, int64_t pad)
{
  size_t taglen = strlen(tag);
  size_t cap =
    taglen + 1 + (size_t)(nwords > 0 ? nwords : 0) * 8 + (size_t)(pad > 0 ? pad : 0) * 2 + 1;
  char *s = tb_xmalloc(cap);
  size_t o = 0;
  memcpy(s, tag, taglen);
  o = taglen;
  uint32_t x = 2463534242u;
  for (int64_t i = 0; i < nwords; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const char *w = filler[x % TB_ARRAY_LEN(filler)];
    size_t wl = strlen(w);
    s[o++] = ' ';
    memcpy(s + o, w, wl);
    o += wl;
  }
  /* Padding: " a", one token on the usual vocabularies, to land exactly. */
  for (int64_t i = 0; i < pad; i++) {
    s[o++] = ' ';
    s[o++] = 'a';
  }
  s[o] = '\0';
  return s;
}

char *
tb_prompt_text(const char *tag, int64_t nwords)
{
  return prompt_text_pad(tag, nwords, 0);
}

static int
post_json(struct tb_prompt_ctx *c, const char *path, json_t *body, long timeout_ms, json_t **out,
          char **err)
{
  char *text = json_dumps(body, JSON_COMPACT);
  char *url = tb_xasprintf("%s%s", c->d->base_url, path);
  struct tb_http_resp r;
  int rc = -1;
  *out = NULL;
  if (tb_http_call("POST", url, c->api_key, text, strlen(text), timeout_ms, 1024u * 1024u * 64u,
                   &r) != 0) {
    *err = tb_xasprintf("POST %s: %s", path, r.err);
    goto out;
  }
  if (r.status != 200) {
    *err = tb_xasprintf("POST %s: HTTP %ld: %.200s", path, r.status, r.body);
    goto out;
  }
  *out = json_loadb(r.body, r.len, 0, NULL);
  if (!json_is_object(*out)) {
    json_decref(*out);
    *out = NULL;
    *err = tb_xasprintf("POST %s: answer is not a JSON object", path);
    goto out;
  }
  rc = 0;
out:
  tb_http_resp_free(&r);
  free(url);
  free(text);
  return rc;
}

static json_t *
chat_messages(const char *text)
{
  return json_pack("[{s:s, s:s}]", "role", "user", "content", text);
}

/* Tokens of a text (chat or plain per the server); -1 on error. */
static int64_t
tokenize(struct tb_prompt_ctx *c, const char *text, bool chat, char **err)
{
  json_t *body = chat
                   ? json_pack("{s:s, s:o}", "model", c->d->model, "messages", chat_messages(text))
                   : json_pack("{s:s, s:s}", "model", c->d->model, "prompt", text);
  json_t *ans = NULL;
  int64_t n = -1;
  if (post_json(c, "/tokenize", body, TOKENIZE_TIMEOUT_MS, &ans, err) != 0)
    goto out;
  const json_t *cnt = json_object_get(ans, "count");
  const json_t *toks = json_object_get(ans, "tokens");
  if (json_is_integer(cnt))
    n = json_integer_value(cnt);
  else if (json_is_array(toks))
    n = (int64_t)json_array_size(toks);
  else
    *err = tb_xasprintf("POST /tokenize: no count in the answer");
  if (n < -1 || n > COUNT_MAX) {
    *err = tb_xasprintf("POST /tokenize: implausible count %lld", (long long)n);
    n = -1;
  }
out:
  json_decref(ans);
  json_decref(body);
  return n;
}

/* llama.cpp: the tokens of the prompt its chat template makes of text
 * (POST /apply-template, then POST /tokenize of that prompt with its
 * special tokens parsed, as the server itself does); -1 on error. */
static int64_t
template_tokens(struct tb_prompt_ctx *c, const char *text, char **err)
{
  json_t *body = json_pack("{s:o}", "messages", chat_messages(text));
  json_t *ans = NULL, *tok = NULL;
  int64_t n = -1;
  if (post_json(c, "/apply-template", body, TOKENIZE_TIMEOUT_MS, &ans, err) != 0)
    goto out;
  const char *prompt = json_string_value(json_object_get(ans, "prompt"));
  if (prompt == NULL) {
    *err = tb_xasprintf("POST /apply-template: no prompt in the answer");
    goto out;
  }
  json_decref(body);
  body = json_pack("{s:s, s:b, s:b}", "content", prompt, "add_special", 1, "parse_special", 1);
  if (post_json(c, "/tokenize", body, TOKENIZE_TIMEOUT_MS, &tok, err) != 0)
    goto out;
  const json_t *toks = json_object_get(tok, "tokens");
  if (!json_is_array(toks) || json_array_size(toks) == 0 ||
      json_array_size(toks) > (size_t)COUNT_MAX) {
    *err = tb_xasprintf("POST /tokenize: no tokens in the answer");
    goto out;
  }
  n = (int64_t)json_array_size(toks);
out:
  json_decref(tok);
  json_decref(ans);
  json_decref(body);
  return n;
}

/* prompt_tokens of a one-token chat request with this text; -1 on error. */
static int64_t
chat_prompt_tokens(struct tb_prompt_ctx *c, const char *text, char **err)
{
  json_t *body = json_pack("{s:s, s:o, s:i, s:b}", "model", c->d->model, "messages",
                           chat_messages(text), "max_tokens", 1, "stream", 0);
  json_t *ans = NULL;
  int64_t n = -1;
  if (post_json(c, "/v1/chat/completions", body, CALIB_TIMEOUT_MS, &ans, err) != 0)
    goto out;
  const json_t *pt = json_object_get(json_object_get(ans, "usage"), "prompt_tokens");
  if (json_is_integer(pt) && json_integer_value(pt) > 0 && json_integer_value(pt) <= COUNT_MAX)
    n = json_integer_value(pt);
  else {
    /* absent (not merely implausible): a server that gives no usage */
    c->no_usage = !json_is_integer(pt);
    *err = tb_xasprintf("calibration request: no usage.prompt_tokens");
  }
out:
  json_decref(ans);
  json_decref(body);
  return n;
}

static int64_t
count_words_pad(struct tb_prompt_ctx *c, const char *tag, int64_t words, int64_t pad, char **err)
{
  char *text = prompt_text_pad(tag, words, pad);
  int64_t n;
  if (c->mode == MODE_CHAT) {
    n = tokenize(c, text, true, err);
  } else if (c->mode == MODE_TEXT) {
    n = tokenize(c, text, false, err);
    if (n >= 0)
      n += c->overhead;
  } else if (c->mode == MODE_TEMPLATE) {
    n = template_tokens(c, text, err);
  } else {
    n = (int64_t)(c->a + c->b * (double)words + 0.5);
  }
  free(text);
  return n;
}

static int64_t
count_words(struct tb_prompt_ctx *c, const char *tag, int64_t words, char **err)
{
  return count_words_pad(c, tag, words, 0, err);
}

/* Generic servers: a line tokens = a + b * words from two short requests
 * whose tag has the same length as the context's (CAL for CTX), so the
 * intercept carries over; the CAL tag keeps the measured prompt cold. */
static int
calibrate_linear(struct tb_prompt_ctx *c, int64_t ctx, char **err)
{
  char *tag = tb_xasprintf("[BENCH_%s_CAL_%lld]", c->run_id, (long long)ctx);
  char *t1 = tb_prompt_text(tag, 200);
  char *t2 = tb_prompt_text(tag, 1200);
  int64_t n1 = chat_prompt_tokens(c, t1, err);
  int64_t n2 = n1 >= 0 ? chat_prompt_tokens(c, t2, err) : -1;
  free(t1);
  free(t2);
  free(tag);
  if (n1 < 0 || n2 <= n1) {
    if (*err == NULL)
      *err = tb_xasprintf("calibration: prompt tokens do not grow with text");
    return -1;
  }
  c->b = (double)(n2 - n1) / 1000.0;
  c->a = (double)n1 - c->b * 200.0;
  if (c->b < SLOPE_MIN) {
    *err = tb_xasprintf("calibration: implausible %.4f tokens per word", c->b);
    return -1;
  }
  return 0;
}

static int
calibrate(struct tb_prompt_ctx *c, char **err)
{
  if (c->calibrated)
    return 0;
  char *tag = tb_xasprintf("[BENCH_%s_CALIBRATE]", c->run_id);
  int rc = -1;
  if (c->d->tokenize_text_only) {
    char *text = tb_prompt_text(tag, 64);
    int64_t chat = chat_prompt_tokens(c, text, err);
    int64_t plain = chat >= 0 ? tokenize(c, text, false, err) : -1;
    free(text);
    if (chat < 0 || plain < 0) {
      /* No usable tokenize: fall back to the generic calibration. */
      free(*err);
      *err = NULL;
    } else {
      c->overhead = chat - plain;
      c->have_overhead = true;
      c->mode = MODE_TEXT;
      c->calibrated = true;
      rc = 0;
      goto out;
    }
  }
  if (c->d->apply_template) {
    /* llama.cpp: the template's prompt, tokenized; a server without those
     * routes (an older build, a proxy) falls back to the calibration. */
    int64_t n = template_tokens(c, tag, err);
    free(*err);
    *err = NULL;
    if (n > 0) {
      c->mode = MODE_TEMPLATE;
      c->calibrated = true;
      rc = 0;
      goto out;
    }
  }
  if (c->d->has_tokenize) {
    c->mode = MODE_CHAT;
    c->calibrated = true;
    rc = 0;
    goto out;
  }
  c->mode = MODE_LINEAR;
  c->calibrated = true;
  rc = 0;
out:
  free(tag);
  return rc;
}

/* Lands exactly on target from `words` words counting *n: pads with
 * one-token words, a few tries at most; *pad the padding that fits.
 * Returns 0, or -1 with *err when a count failed. */
static int
pad_to_target(struct tb_prompt_ctx *c, const char *tag, int64_t words, int64_t target, int64_t *n,
              int64_t *pad, char **err)
{
  for (int tries = 0; tries < 4 && *n < target; tries++) {
    int64_t p = *pad + (target - *n);
    int64_t got = count_words_pad(c, tag, words, p, err);
    if (got < 0)
      return -1;
    if (got > target)
      break;
    *pad = p;
    *n = got;
  }
  return 0;
}

/* The mode a prompt is sized in: where calibration fails and the server
 * gives no usage either, nothing it says can size a prompt, so a stated
 * estimate (TB_PROMPT_ESTIMATE), flagged.  0, or -1 with *err. */
static int
prompt_mode(struct tb_prompt_ctx *c, int64_t ctx, const char *tag, char **err)
{
  if (c->mode == MODE_LINEAR && calibrate_linear(c, ctx, err) != 0) {
    if (!c->no_usage)
      return -1;
    /* Neither /tokenize nor usage: nothing the server says can size a
     * prompt.  A stated estimate (TB_PROMPT_ESTIMATE), flagged. */
    free(*err);
    *err = NULL;
    c->mode = MODE_ESTIMATE;
  }
  if (c->mode == MODE_ESTIMATE) {
    c->b = 1.0;
    c->a = (double)((strlen(tag) + 2) / 3 + TB_PROMPT_ESTIMATE_TEMPLATE);
  }
  return 0;
}

/* Two points for a line: the count n1 of w1 words and the tokens a word
 * adds (*slope).  0, or -1 with *err. */
static int
line_slope(struct tb_prompt_ctx *c, const char *tag, int64_t w1, int64_t *n1, double *slope,
           char **err)
{
  int64_t w2 = 4096;
  *n1 = count_words(c, tag, w1, err);
  if (*n1 < 0)
    return -1;
  int64_t n2 = count_words(c, tag, w2, err);
  if (n2 <= *n1) {
    if (*err == NULL)
      *err = tb_xasprintf("tokenizer counts do not grow with the text");
    return -1;
  }
  *slope = (double)(n2 - *n1) / (double)(w2 - w1);
  if (*slope < SLOPE_MIN) {
    *err = tb_xasprintf("tokenizer counts an implausible %.4f tokens per word", *slope);
    return -1;
  }
  return 0;
}

/* The most words whose prompt counts at most target tokens, from the guess
 * w: secant steps kept inside the bracket [*lo, hi), MAX_PROBES counts at
 * most; *lo words counting *lo_n tokens (-1: none found).  0, or -1 with
 * *err when a count failed. */
static int
search_words(struct tb_prompt_ctx *c, const char *tag, int64_t target, int64_t w, double slope,
             int64_t *lo_out, int64_t *lo_n_out, char **err)
{
  int64_t lo = 0, lo_n = -1; /* known: count(lo) <= target */
  int64_t hi = -1;           /* known: count(hi) > target */
  for (int probe = 0; probe < MAX_PROBES; probe++) {
    int64_t n = count_words(c, tag, w, err);
    if (n < 0)
      return -1;
    if (n <= target) {
      if (w >= lo) {
        lo = w;
        lo_n = n;
      }
      if (n == target)
        break;
    } else if (hi < 0 || w < hi) {
      hi = w;
    }
    if (hi >= 0 && hi - lo <= 1)
      break;
    /* Next guess: secant from this point, kept inside the bracket. */
    int64_t next = w + (int64_t)((double)(target - n) / slope);
    if (next == w)
      next = n < target ? w + 1 : w - 1;
    if (next <= lo || (hi >= 0 && next >= hi))
      next = hi >= 0 ? lo + (hi - lo) / 2 : lo + 1 + (int64_t)((double)(target - lo_n) / slope);
    if (next < 0)
      next = 0;
    w = next;
  }
  *lo_out = lo;
  *lo_n_out = lo_n;
  return 0;
}

int
tb_prompt_build(struct tb_prompt_ctx *c, int64_t ctx, int64_t target, struct tb_prompt *out,
                char **err)
{
  memset(out, 0, sizeof *out);
  out->tokens = -1;
  *err = NULL;
  if (calibrate(c, err) != 0) {
    if (*err == NULL)
      *err = tb_xasprintf("prompt calibration failed");
    return -1;
  }
  char *tag = tb_xasprintf("[BENCH_%s_CTX_%lld]", c->run_id, (long long)ctx);
  if (prompt_mode(c, ctx, tag, err) != 0) {
    free(tag);
    return -1;
  }
  bool exact = c->mode == MODE_CHAT || c->mode == MODE_TEXT || c->mode == MODE_TEMPLATE;
  out->source = exact ? "tokenizer" : c->mode == MODE_LINEAR ? "calibration" : "estimate";
  int rc = -1;
  if (target <= 0) {
    /* Context 0 (llm-inference-bench's first decode row): no prompt
     * context, the run's tag alone; its size is what the template makes. */
    int64_t n0 = count_words(c, tag, 0, err);
    if (n0 < 0)
      goto out;
    out->text = tb_prompt_text(tag, 0);
    out->tokens = n0;
    rc = 0;
    goto out;
  }
  int64_t w1 = 256, n1, lo, lo_n;
  double slope;
  if (line_slope(c, tag, w1, &n1, &slope, err) != 0)
    goto out;
  int64_t w = w1 + (int64_t)((double)(target - n1) / slope);
  if (w < 0)
    w = 0;
  if (!exact) { /* the line alone: the most words it puts at or under target */
    lo = w;
    while (lo > 0 && (int64_t)(c->a + c->b * (double)lo + 0.5) > target)
      lo--;
    out->text = tb_prompt_text(tag, lo);
    out->tokens = (int64_t)(c->a + c->b * (double)lo + 0.5);
    rc = 0;
    goto out;
  }
  if (search_words(c, tag, target, w, slope, &lo, &lo_n, err) != 0)
    goto out;
  if (lo_n < 0) {
    *err = tb_xasprintf("cannot size a prompt of %lld tokens", (long long)target);
    goto out;
  }
  int64_t pad = 0;
  if (pad_to_target(c, tag, lo, target, &lo_n, &pad, err) != 0)
    goto out;
  rc = 0;
  out->text = prompt_text_pad(tag, lo, pad);
  out->tokens = lo_n;
out:
  if (rc == 0)
    out->exact = exact;
  if (rc != 0 && *err == NULL)
    *err = tb_xasprintf("cannot size a prompt of %lld tokens", (long long)target);
  free(tag);
  return rc;
}

void
tb_prompt_free(struct tb_prompt *p)
{
  free(p->text);
  p->text = NULL;
}
