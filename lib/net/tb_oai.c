/*
 * tb_oai: one streamed chunk.  See tb_oai.h.
 *
 * The reference reader uses jansson (JSON_REJECT_DUPLICATES).  Member types
 * are checked; a member of the wrong type makes the chunk malformed rather
 * than silently ignored, because a figure must never come from data we did
 * not understand.
 *
 * The scanner (the hot path: every chunk of every stream goes through it)
 * validates the whole chunk as jansson would -- grammar, UTF-8 (no overlong
 * forms, no surrogates, nothing above U+10FFFF), escapes (\u with surrogate
 * pairs, no \u0000), duplicate keys in every object, nothing after the root
 * -- and reads the few members the engine needs on the way.  It gives up
 * (and jansson decides) on anything it does not fully handle: a byte it does
 * not expect, an error member, a member of an unexpected type, a key with an
 * escape, more than SCAN_MAX_KEYS keys in an object, nesting deeper than
 * SCAN_MAX_DEPTH, an integer of more than 18 digits, a number with an
 * exponent or a huge integer part.  So its answers are jansson's, and bad
 * input always ends in jansson's verdict.  tests/fuzz/fuzz_oai.c compares
 * the two on arbitrary bytes.
 */
#include "net/tb_oai.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static bool
is_done(const char *d, size_t len)
{
  while (len > 0 && (d[len - 1] == ' ' || d[len - 1] == '\t'))
    len--;
  return len == 6 && memcmp(d, "[DONE]", 6) == 0;
}

/* Adds a text member's length; false when present and not a string/null. */
static bool
text_member(const json_t *obj, const char *key, size_t *bytes)
{
  const json_t *v = json_object_get(obj, key);
  if (v == NULL || json_is_null(v))
    return true;
  if (!json_is_string(v))
    return false;
  *bytes += json_string_length(v);
  return true;
}

static bool
usage_int(const json_t *usage, const char *key, int64_t *out)
{
  const json_t *v = json_object_get(usage, key);
  if (v == NULL || json_is_null(v))
    return true;
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return false;
  *out = json_integer_value(v);
  return true;
}

static void
timings_clear(struct tb_oai_timings *t)
{
  t->cache_n = t->prompt_n = t->prompt_ms = NAN;
  t->predicted_n = t->predicted_ms = t->predicted_per_token_ms = NAN;
}

/* A member of `timings`: a finite non-negative number, else left NAN (an
 * optional detail: a shape we do not know is not a fault). */
static double
timing_num(const json_t *t, const char *key)
{
  const json_t *v = json_object_get(t, key);
  double d = json_is_number(v) ? json_number_value(v) : NAN;
  return isfinite(d) && d >= 0 ? d : NAN;
}

static void
read_timings(const json_t *t, struct tb_oai_chunk *out)
{
  if (!json_is_object(t))
    return;
  struct tb_oai_timings *x = &out->timings;
  x->cache_n = timing_num(t, "cache_n");
  x->prompt_n = timing_num(t, "prompt_n");
  x->prompt_ms = timing_num(t, "prompt_ms");
  x->predicted_n = timing_num(t, "predicted_n");
  x->predicted_ms = timing_num(t, "predicted_ms");
  x->predicted_per_token_ms = timing_num(t, "predicted_per_token_ms");
  out->has_timings = true;
}

static void
chunk_clear(struct tb_oai_chunk *out)
{
  memset(out, 0, sizeof *out);
  out->prompt_tokens = -1;
  out->completion_tokens = -1;
  out->cached_tokens = -1;
  timings_clear(&out->timings);
}

enum tb_oai_status
tb_oai_parse_chunk_json(const char *data, size_t len, struct tb_oai_chunk *out)
{
  chunk_clear(out);
  if (is_done(data, len))
    return TB_OAI_DONE;
  if (len > TB_OAI_CHUNK_MAX)
    return TB_OAI_MALFORMED;
  json_error_t jerr;
  json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
  enum tb_oai_status st = TB_OAI_MALFORMED;
  if (root == NULL || !json_is_object(root))
    goto out;

  const json_t *err = json_object_get(root, "error");
  if (err != NULL && !json_is_null(err)) {
    out->is_error = true;
    const json_t *msg = json_is_object(err) ? json_object_get(err, "message") : err;
    snprintf(out->error, sizeof out->error, "%s",
             json_is_string(msg) ? json_string_value(msg) : "error object");
    st = TB_OAI_OK;
    goto out;
  }

  const json_t *choices = json_object_get(root, "choices");
  if (choices != NULL && !json_is_null(choices)) {
    if (!json_is_array(choices))
      goto out;
    size_t i;
    const json_t *ch;
    json_array_foreach (choices, i, ch) {
      if (!json_is_object(ch))
        goto out;
      out->n_choices++;
      size_t text = 0, reasoning = 0, reasoning_content = 0;
      const json_t *delta = json_object_get(ch, "delta");
      bool role = false;
      if (delta != NULL && !json_is_null(delta)) {
        if (!json_is_object(delta))
          goto out;
        if (!text_member(delta, "content", &text) || !text_member(delta, "reasoning", &reasoning) ||
            !text_member(delta, "reasoning_content", &reasoning_content))
          goto out;
        role = json_object_get(delta, "role") != NULL;
      }
      /* vLLM 0.10-0.16 send the same text in both fields: count it once */
      if (reasoning_content > reasoning)
        reasoning = reasoning_content;
      if (!text_member(ch, "text", &text))
        goto out;
      text += reasoning;
      if (text > 0)
        out->text_choices++;
      else if (role)
        out->role_only = true;
      out->text_bytes += text;
      out->reasoning_bytes += reasoning;
      const json_t *fr = json_object_get(ch, "finish_reason");
      if (fr != NULL && !json_is_null(fr))
        out->finished = true;
    }
  }
  if (out->text_choices > 0)
    out->role_only = false;

  const json_t *usage = json_object_get(root, "usage");
  if (usage != NULL && !json_is_null(usage)) {
    if (!json_is_object(usage))
      goto out;
    if (!usage_int(usage, "prompt_tokens", &out->prompt_tokens) ||
        !usage_int(usage, "completion_tokens", &out->completion_tokens))
      goto out;
    out->has_usage = out->completion_tokens >= 0;
    /* an optional detail: a shape we do not know is not a fault */
    const json_t *ct =
      json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens");
    if (json_is_integer(ct) && json_integer_value(ct) >= 0)
      out->cached_tokens = json_integer_value(ct);
  }
  read_timings(json_object_get(root, "timings"), out);
  st = TB_OAI_OK;
out:
  json_decref(root);
  return st;
}

/* ------------------------------------------------------------- scanner */

#define SCAN_MAX_DEPTH 32
#define SCAN_MAX_KEYS 32
#define SCAN_MAX_INT_DIGITS 18   /* < 2^63: strtoll cannot overflow */
#define SCAN_MAX_REAL_DIGITS 300 /* integer part: strtod cannot overflow */

struct scan {
  const unsigned char *p, *end;
  int depth;
};

/* The keys of one object so far, to refuse duplicates as jansson does. */
struct keyset {
  const unsigned char *k[SCAN_MAX_KEYS];
  size_t len[SCAN_MAX_KEYS];
  unsigned n;
};

static inline void
sc_ws(struct scan *sc)
{
  while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\n' || *sc->p == '\r' || *sc->p == '\t'))
    sc->p++;
}

static inline int
sc_peek(const struct scan *sc)
{
  return sc->p < sc->end ? *sc->p : -1;
}

/* Four hex digits after "\u"; -1 when not. */
static long
sc_u4(struct scan *sc)
{
  if (sc->end - sc->p < 4)
    return -1;
  long v = 0;
  for (int i = 0; i < 4; i++) {
    int h = tb_hex_digit(sc->p[i]);
    if (h < 0)
      return -1;
    v = v * 16 + h;
  }
  sc->p += 4;
  return v;
}

/* One UTF-8 sequence starting at a byte >= 0x80, as jansson's utf8_check_*
 * accept it; advances past it.  False when invalid. */
static bool
sc_utf8(struct scan *sc)
{
  unsigned c = *sc->p;
  size_t n;
  unsigned long v;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    v = c & 0x07;
  } else {
    return false;
  }
  if ((size_t)(sc->end - sc->p) < n)
    return false;
  for (size_t i = 1; i < n; i++) {
    unsigned b = sc->p[i];
    if ((b & 0xC0) != 0x80)
      return false;
    v = (v << 6) | (b & 0x3F);
  }
  if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) || v > 0x10FFFF ||
      (v >= 0xD800 && v <= 0xDFFF))
    return false;
  sc->p += n;
  return true;
}

/* Bytes that stand for themselves in a string: printable ASCII but the
 * quote and the backslash. */
#define R4(x) x, x, x, x
#define R16(x) R4(x), R4(x), R4(x), R4(x)
static const unsigned char plain_byte[256] = {
  R16(0), R16(0),                                /* 0x00-0x1f */
  1,      1,      0,     R4(1), R4(1), R4(1), 1, /* 0x20-0x2f */
  R16(1),                                        /* 0x30-0x3f */
  R16(1),                                        /* 0x40-0x4f */
  R4(1),  R4(1),  R4(1), 0,     1,     1,     1, /* 0x50-0x5f */
  R16(1), R16(1),                                /* 0x60-0x7f */
                                                 /* 0x80-0xff: 0 (UTF-8, checked apart) */
};
#undef R4
#undef R16

/* A string at sc->p ('"'): its raw span (between the quotes), its decoded
 * length in bytes and whether it had escapes. */
static bool
sc_string(struct scan *sc, const unsigned char **raw, size_t *rawlen, size_t *declen, bool *escaped)
{
  sc->p++; /* '"' */
  const unsigned char *start = sc->p;
  size_t shrink = 0; /* raw bytes of escapes */
  size_t extra = 0;  /* bytes they decode to */
  bool esc = false;
  for (;;) {
    /* the common run: printable ASCII */
    while (sc->p < sc->end && plain_byte[*sc->p])
      sc->p++;
    if (sc->p >= sc->end)
      return false;
    unsigned c = *sc->p;
    if (c == '"')
      break;
    if (c < 0x20)
      return false;
    if (c >= 0x80) {
      if (!sc_utf8(sc))
        return false;
      continue;
    }
    /* a backslash */
    esc = true;
    const unsigned char *e0 = sc->p;
    sc->p++;
    if (sc->p >= sc->end)
      return false;
    c = *sc->p++;
    size_t out;
    switch (c) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't': out = 1; break;
    case 'u': {
      long v = sc_u4(sc);
      if (v <= 0) /* bad hex, or \u0000 (jansson refuses NUL) */
        return false;
      if (v >= 0xDC00 && v <= 0xDFFF)
        return false; /* a lone low surrogate */
      if (v >= 0xD800 && v <= 0xDBFF) {
        if (sc->end - sc->p < 2 || sc->p[0] != '\\' || sc->p[1] != 'u')
          return false;
        sc->p += 2;
        long lo = sc_u4(sc);
        if (lo < 0xDC00 || lo > 0xDFFF)
          return false;
        out = 4;
      } else {
        out = v < 0x80 ? 1 : v < 0x800 ? 2 : 3;
      }
      break;
    }
    default: return false;
    }
    shrink += (size_t)(sc->p - e0);
    extra += out;
  }
  *raw = start;
  *rawlen = (size_t)(sc->p - start);
  *declen = *rawlen - shrink + extra;
  *escaped = esc;
  sc->p++; /* closing '"' */
  return true;
}

/* A number: syntax as JSON (and jansson) has it.  *is_int and *val (its
 * magnitude, sign in *neg) for an integer without fraction or exponent. */
static bool
sc_number(struct scan *sc, bool *is_int, int64_t *val, bool *neg)
{
  *neg = false;
  if (sc_peek(sc) == '-') {
    *neg = true;
    sc->p++;
  }
  const unsigned char *d0 = sc->p;
  int c = sc_peek(sc);
  if (c == '0') {
    sc->p++;
  } else if (c >= '1' && c <= '9') {
    while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9')
      sc->p++;
  } else {
    return false;
  }
  size_t ndig = (size_t)(sc->p - d0);
  c = sc_peek(sc);
  if (c >= '0' && c <= '9')
    return false; /* a leading zero */
  if (c == 'e' || c == 'E')
    return false; /* exponents: let jansson judge range */
  if (c == '.') {
    sc->p++;
    if (sc_peek(sc) < '0' || sc_peek(sc) > '9')
      return false;
    while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9')
      sc->p++;
    c = sc_peek(sc);
    if (c == 'e' || c == 'E' || ndig > SCAN_MAX_REAL_DIGITS)
      return false;
    *is_int = false;
    return true;
  }
  if (ndig > SCAN_MAX_INT_DIGITS)
    return false;
  int64_t v = 0;
  for (size_t i = 0; i < ndig; i++)
    v = v * 10 + (d0[i] - '0');
  *is_int = true;
  *val = v;
  return true;
}

static bool sc_skip_value(struct scan *sc);

/* After '{' (consumed) or a member: the next key, with its ':' and the
 * whitespace after it consumed.  1: a key; 0: the object ended ('}'
 * consumed); -1: give up. */
static int
sc_next_key(struct scan *sc, struct keyset *ks, const unsigned char **key, size_t *klen)
{
  sc_ws(sc);
  int c = sc_peek(sc);
  if (ks->n > 0) {
    if (c == '}') {
      sc->p++;
      return 0;
    }
    if (c != ',')
      return -1;
    sc->p++;
    sc_ws(sc);
    c = sc_peek(sc);
  } else if (c == '}') {
    sc->p++;
    return 0;
  }
  if (c != '"' || ks->n == SCAN_MAX_KEYS)
    return -1;
  size_t declen;
  bool esc;
  if (!sc_string(sc, key, klen, &declen, &esc) || esc)
    return -1;
  for (unsigned i = 0; i < ks->n; i++)
    if (ks->len[i] == *klen && memcmp(ks->k[i], *key, *klen) == 0)
      return -1; /* a duplicate: jansson refuses the chunk */
  ks->k[ks->n] = *key;
  ks->len[ks->n] = *klen;
  ks->n++;
  sc_ws(sc);
  if (sc_peek(sc) != ':')
    return -1;
  sc->p++;
  sc_ws(sc);
  return 1;
}

static bool
sc_enter(struct scan *sc)
{
  if (++sc->depth > SCAN_MAX_DEPTH)
    return false;
  sc->p++; /* '{' or '[' */
  return true;
}

/* Walks an object ('{' next): member(sc, key, klen, ctx) reads each
 * member's value (the key unescaped, duplicates refused). */
typedef bool (*sc_member_fn)(struct scan *sc, const unsigned char *key, size_t klen, void *ctx);

static bool
sc_object(struct scan *sc, sc_member_fn member, void *ctx)
{
  if (!sc_enter(sc))
    return false;
  struct keyset ks;
  ks.n = 0;
  const unsigned char *k;
  size_t kl;
  int r;
  while ((r = sc_next_key(sc, &ks, &k, &kl)) == 1)
    if (!member(sc, k, kl, ctx))
      return false;
  sc->depth--;
  return r == 0;
}

static bool
skip_member(struct scan *sc, const unsigned char *key, size_t klen, void *ctx)
{
  (void)key;
  (void)klen;
  (void)ctx;
  return sc_skip_value(sc);
}

static bool
sc_skip_object(struct scan *sc)
{
  return sc_object(sc, skip_member, NULL);
}

/* Walks an array ('[' next): elem(sc, ctx) reads each element. */
static bool
sc_array(struct scan *sc, bool (*elem)(struct scan *, void *), void *ctx)
{
  if (!sc_enter(sc))
    return false;
  sc_ws(sc);
  if (sc_peek(sc) == ']') {
    sc->p++;
    sc->depth--;
    return true;
  }
  for (;;) {
    if (!elem(sc, ctx))
      return false;
    sc_ws(sc);
    int c = sc_peek(sc);
    if (c == ']') {
      sc->p++;
      sc->depth--;
      return true;
    }
    if (c != ',')
      return false;
    sc->p++;
    sc_ws(sc);
  }
}

static bool
skip_elem(struct scan *sc, void *ctx)
{
  (void)ctx;
  return sc_skip_value(sc);
}

static bool
sc_lit(struct scan *sc, const char *word, size_t n)
{
  if ((size_t)(sc->end - sc->p) < n || memcmp(sc->p, word, n) != 0)
    return false;
  sc->p += n;
  return true;
}

/* Any value (whitespace before it already skipped). */
static bool
sc_skip_value(struct scan *sc)
{
  const unsigned char *raw;
  size_t rl, dl;
  bool esc, is_int, neg;
  int64_t v;
  switch (sc_peek(sc)) {
  case '{': return sc_skip_object(sc);
  case '[': return sc_array(sc, skip_elem, NULL);
  case '"': return sc_string(sc, &raw, &rl, &dl, &esc);
  case 't': return sc_lit(sc, "true", 4);
  case 'f': return sc_lit(sc, "false", 5);
  case 'n': return sc_lit(sc, "null", 4);
  default: return sc_number(sc, &is_int, &v, &neg);
  }
}

static bool
key_is(const unsigned char *k, size_t kl, const char *name)
{
  size_t n = strlen(name);
  return kl == n && memcmp(k, name, n) == 0;
}

/* A text member (string or null) adds its decoded length; else give up. */
static bool
sc_text(struct scan *sc, size_t *bytes)
{
  int c = sc_peek(sc);
  if (c == 'n')
    return sc_lit(sc, "null", 4);
  if (c != '"')
    return false;
  const unsigned char *raw;
  size_t rl, dl;
  bool esc;
  if (!sc_string(sc, &raw, &rl, &dl, &esc))
    return false;
  *bytes += dl;
  return true;
}

struct delta {
  size_t *text;
  size_t r1, r2; /* reasoning, reasoning_content: the same text when both
                  * are sent (vLLM 0.10-0.16) */
  bool *role;
};

static bool
delta_member(struct scan *sc, const unsigned char *k, size_t kl, void *ctx)
{
  struct delta *d = ctx;
  if (key_is(k, kl, "content"))
    return sc_text(sc, d->text);
  if (key_is(k, kl, "reasoning"))
    return sc_text(sc, &d->r1);
  if (key_is(k, kl, "reasoning_content"))
    return sc_text(sc, &d->r2);
  if (key_is(k, kl, "role"))
    *d->role = true; /* present, whatever its value */
  return sc_skip_value(sc);
}

static bool
sc_delta(struct scan *sc, size_t *text, size_t *reasoning, bool *role)
{
  struct delta d = { text, 0, 0, role };
  if (!sc_object(sc, delta_member, &d))
    return false;
  *reasoning += d.r1 > d.r2 ? d.r1 : d.r2;
  return true;
}

struct choice {
  struct tb_oai_chunk *out;
  size_t text, reasoning;
  bool role;
};

static bool
choice_member(struct scan *sc, const unsigned char *k, size_t kl, void *ctx)
{
  struct choice *ch = ctx;
  if (key_is(k, kl, "delta")) {
    int c = sc_peek(sc);
    return c == 'n'   ? sc_lit(sc, "null", 4)
           : c == '{' ? sc_delta(sc, &ch->text, &ch->reasoning, &ch->role)
                      : false;
  }
  if (key_is(k, kl, "text"))
    return sc_text(sc, &ch->text);
  if (key_is(k, kl, "finish_reason")) {
    if (sc_peek(sc) == 'n')
      return sc_lit(sc, "null", 4);
    ch->out->finished = true;
  }
  return sc_skip_value(sc);
}

static bool
sc_choice(struct scan *sc, struct tb_oai_chunk *out)
{
  if (sc_peek(sc) != '{')
    return false;
  out->n_choices++;
  struct choice ch = { out, 0, 0, false };
  if (!sc_object(sc, choice_member, &ch))
    return false;
  size_t text = ch.text + ch.reasoning;
  if (text > 0)
    out->text_choices++;
  else if (ch.role)
    out->role_only = true;
  out->text_bytes += text;
  out->reasoning_bytes += ch.reasoning;
  return true;
}

static bool
choice_elem(struct scan *sc, void *out)
{
  return sc_choice(sc, out);
}

/* A usage count: null, or a non-negative integer; else give up. */
static bool
sc_count(struct scan *sc, int64_t *out)
{
  int c = sc_peek(sc);
  if (c == 'n')
    return sc_lit(sc, "null", 4);
  if (c != '-' && (c < '0' || c > '9'))
    return false;
  bool is_int, neg;
  int64_t v = 0;
  if (!sc_number(sc, &is_int, &v, &neg) || !is_int || (neg && v != 0))
    return false;
  *out = v;
  return true;
}

static bool
details_member(struct scan *sc, const unsigned char *k, size_t kl, void *ctx)
{
  struct tb_oai_chunk *out = ctx;
  return key_is(k, kl, "cached_tokens") ? sc_count(sc, &out->cached_tokens) : sc_skip_value(sc);
}

/* usage.prompt_tokens_details: null, or an object whose cached_tokens is
 * null or a count; anything else goes to the reference reader (which
 * ignores it). */
static bool
sc_details(struct scan *sc, struct tb_oai_chunk *out)
{
  int c = sc_peek(sc);
  if (c == 'n')
    return sc_lit(sc, "null", 4);
  return c == '{' && sc_object(sc, details_member, out);
}

static bool
usage_member(struct scan *sc, const unsigned char *k, size_t kl, void *ctx)
{
  struct tb_oai_chunk *out = ctx;
  if (key_is(k, kl, "prompt_tokens"))
    return sc_count(sc, &out->prompt_tokens);
  if (key_is(k, kl, "completion_tokens"))
    return sc_count(sc, &out->completion_tokens);
  if (key_is(k, kl, "prompt_tokens_details"))
    return sc_details(sc, out);
  return sc_skip_value(sc);
}

static bool
sc_usage(struct scan *sc, struct tb_oai_chunk *out)
{
  if (!sc_object(sc, usage_member, out))
    return false;
  out->has_usage = out->completion_tokens >= 0;
  return true;
}

/* A chunk's top-level members. */
static bool
chunk_member(struct scan *sc, const unsigned char *k, size_t kl, void *ctx)
{
  struct tb_oai_chunk *out = ctx;
  int c = sc_peek(sc);
  if (key_is(k, kl, "choices"))
    return c == 'n' ? sc_lit(sc, "null", 4) : c == '[' ? sc_array(sc, choice_elem, out) : false;
  if (key_is(k, kl, "usage"))
    return c == 'n' ? sc_lit(sc, "null", 4) : c == '{' ? sc_usage(sc, out) : false;
  if (key_is(k, kl, "error"))
    return sc_lit(sc, "null", 4); /* an error object: jansson reads it */
  if (key_is(k, kl, "timings"))
    return false; /* the server's timings, once a request: jansson reads them */
  return sc_skip_value(sc);
}

bool
tb_oai_scan_chunk(const char *data, size_t len, struct tb_oai_chunk *out)
{
  chunk_clear(out);
  if (len > TB_OAI_CHUNK_MAX)
    return false;
  struct scan sc = { (const unsigned char *)data, (const unsigned char *)data + len, 0 };
  sc_ws(&sc);
  if (sc_peek(&sc) != '{' || !sc_object(&sc, chunk_member, out))
    return false;
  sc_ws(&sc);
  if (sc.p != sc.end)
    return false;
  if (out->text_choices > 0)
    out->role_only = false;
  return true;
}

enum tb_oai_status
tb_oai_parse_chunk(const char *data, size_t len, struct tb_oai_chunk *out)
{
  if (is_done(data, len)) {
    chunk_clear(out);
    return TB_OAI_DONE;
  }
  if (tb_oai_scan_chunk(data, len, out))
    return TB_OAI_OK;
  return tb_oai_parse_chunk_json(data, len, out);
}

bool
tb_oai_count_event(struct tb_oai_count *st, const char *data, size_t len, int64_t *delta, char *why,
                   size_t why_len)
{
  struct tb_oai_chunk ch;
  *delta = 0;
  enum tb_oai_status rc = tb_oai_parse_chunk(data, len, &ch);
  if (rc == TB_OAI_DONE) {
    st->done = true;
    return true;
  }
  if (rc != TB_OAI_OK) {
    snprintf(why, why_len, "malformed chunk: %.80s", data);
    return false;
  }
  if (ch.is_error) {
    snprintf(why, why_len, "error in stream: %s", ch.error);
    return false;
  }
  if (ch.has_timings) {
    st->timings = ch.timings;
    st->saw_timings = true;
  }
  if (ch.has_usage) {
    if (ch.completion_tokens < st->cum) {
      snprintf(why, why_len,
               "usage.completion_tokens went backwards (%" PRId64 " after %" PRId64 ")",
               ch.completion_tokens, st->cum);
      return false;
    }
    if (!st->chunk_mode)
      *delta = ch.completion_tokens - st->cum;
    st->cum = ch.completion_tokens;
    /* the usage chunk (choices: []), or, on a stream whose chunks carried
     * no usage before, usage on the finish chunk (llama.cpp, TGI before
     * 3.x); with usage on every chunk the usage chunk is still owed */
    if (ch.n_choices == 0 || (ch.finished && !st->saw_usage))
      st->saw_final_usage = true;
    st->saw_usage = true;
    if (ch.prompt_tokens >= 0)
      st->prompt_tokens = ch.prompt_tokens;
    if (ch.cached_tokens >= 0) {
      st->cached_tokens = ch.cached_tokens;
      st->saw_cached = true;
    }
  } else if (ch.text_choices > 0) {
    st->chunk_mode = true;
    *delta = ch.text_choices;
  }
  return true;
}
