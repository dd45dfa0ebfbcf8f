/* Unit tests for tb_oai's scanner: on every input it decides, its result is
 * exactly the jansson reader's; tb_oai_parse_chunk always agrees with the
 * jansson reader; and the chunks real servers send take the fast path.
 * Inputs: the shapes vLLM, SGLang and tokbench-sim send, escapes, unicode,
 * nested objects, reordered and duplicate keys, hostile bytes, and many
 * deterministic random mutations of all of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tb_oai.h"

static unsigned long n_scanned, n_checked;

static void
same(const struct tb_oai_chunk *a, const struct tb_oai_chunk *b)
{
  assert_int_equal(a->has_usage, b->has_usage);
  assert_int_equal(a->prompt_tokens, b->prompt_tokens);
  assert_int_equal(a->completion_tokens, b->completion_tokens);
  assert_int_equal(a->cached_tokens, b->cached_tokens);
  assert_int_equal(a->n_choices, b->n_choices);
  assert_int_equal(a->text_choices, b->text_choices);
  assert_int_equal(a->text_bytes, b->text_bytes);
  assert_int_equal(a->reasoning_bytes, b->reasoning_bytes);
  assert_int_equal(a->role_only, b->role_only);
  assert_int_equal(a->finished, b->finished);
  assert_int_equal(a->is_error, b->is_error);
  assert_string_equal(a->error, b->error);
}

/* Differential check of one input; returns whether the scanner decided. */
static bool
check(const char *d, size_t n)
{
  struct tb_oai_chunk a, b, f;
  enum tb_oai_status sa = tb_oai_parse_chunk(d, n, &a);
  enum tb_oai_status sb = tb_oai_parse_chunk_json(d, n, &b);
  if (sa != sb)
    fail_msg("status %d vs jansson %d on [%.*s]", sa, sb, (int)n, d);
  if (sa != TB_OAI_MALFORMED)
    same(&a, &b);
  n_checked++;
  if (!tb_oai_scan_chunk(d, n, &f))
    return false;
  n_scanned++;
  if (sb != TB_OAI_OK)
    fail_msg("scanner accepted what jansson refuses: [%.*s]", (int)n, d);
  same(&f, &b);
  return true;
}

static bool
check_s(const char *s)
{
  return check(s, strlen(s));
}

/* Inputs the scanner must decide (the hot path), with results checked. */
static const char *const fast[] = {
  "{\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
  "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
  "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":"
  "{\"prompt_tokens\":1030,\"total_tokens\":1030,\"completion_tokens\":0}}",
  "{\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
  "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" lorem\"},"
  "\"logprobs\":null,\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":1030,"
  "\"total_tokens\":1031,\"completion_tokens\":1}}",
  "{\"id\":\"x\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
  "\"choices\":[{\"index\":0,\"text\":\" a b\",\"logprobs\":null,\"finish_reason\":"
  "\"length\",\"stop_reason\":null}],\"usage\":null}",
  "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9,"
  "\"prompt_tokens_details\":{\"cached_tokens\":0}}}",
  "{\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}",
  "{\"choices\":[{\"delta\":{\"reasoning\":\"x\",\"content\":null}}]}",
  "{\"usage\":{\"completion_tokens\":3,\"prompt_tokens\":7},\"choices\":[{"
  "\"finish_reason\":null,\"delta\":{\"content\":\"z\",\"role\":\"assistant\"}}]}",
  "  {\"choices\":null,\"usage\":null,\"error\":null}\r\n\t ",
  "{\"choices\":[{\"delta\":{\"content\":\"a\\nb\\\"c\\\\d\\/e\\tf\\u00e9\\u4e2d"
  "\\ud83d\\ude00\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"},"
  "{\"delta\":{\"role\":null}},{\"text\":\"yz\"},{}]}",
  "{\"a\":{\"b\":{\"c\":[1,2.5,-3,-0.25,0,true,false,null,\"s\",{},[]]}},"
  "\"choices\":[{\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"t\"}]}}]}",
  "{\"usage\":{\"completion_tokens\":-0,\"prompt_tokens\":123456789012345678}}",
  "{}",
  "{\"choices\":[{\"delta\":{}}],\"x\":\"\\u0041\"}",
  "{\"choices\":[],\"usage\":{\"prompt_tokens\":2512,\"completion_tokens\":2,"
  "\"prompt_tokens_details\":{\"cached_tokens\":2000,\"audio_tokens\":null}}}",
  "{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":null}}",
  "{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":null}}}",
};

/* Inputs anything may happen to (scanner or fallback); results checked. */
static const char *const other[] = {
  "",
  " ",
  "{",
  "}",
  "[]",
  "[1,2]",
  "null",
  "\"s\"",
  "1",
  "{\"a\":1}x",
  "{\"a\":1,}",
  "{,}",
  "{\"a\" 1}",
  "{\"a\":}",
  "{\"a\":01}",
  "{\"a\":1.}",
  "{\"a\":-}",
  "{\"a\":.5}",
  "{\"a\":1e5}",
  "{\"a\":1E+400}",
  "{\"a\":1e-400}",
  "{\"a\":99999999999999999999999}",
  "{\"a\":-9223372036854775808}",
  "{\"a\":9223372036854775807}",
  "{\"a\":9223372036854775808}",
  "{\"a\":tru}",
  "{\"a\":truex}",
  "{\"a\":nul}",
  "{\"a\":True}",
  "{\"a\":1,\"a\":2}",
  "{\"choices\":[],\"choices\":[]}",
  "{\"usage\":{\"completion_tokens\":1,\"completion_tokens\":2}}",
  "{\"x\":{\"k\":1,\"k\":1}}",
  "{\"\\u0061\":1,\"a\":2}",
  "{\"a\\n\":1}",
  "{\"choices\":3}",
  "{\"choices\":{}}",
  "{\"choices\":[1]}",
  "{\"choices\":[null]}",
  "{\"choices\":[{\"delta\":{\"content\":5}}]}",
  "{\"choices\":[{\"delta\":[]}]}",
  "{\"choices\":[{\"delta\":\"x\"}]}",
  "{\"choices\":[{\"text\":true}]}",
  "{\"choices\":[{\"delta\":{\"reasoning\":{}}}]}",
  "{\"usage\":{\"completion_tokens\":-1}}",
  "{\"usage\":{\"completion_tokens\":\"3\"}}",
  "{\"usage\":{\"completion_tokens\":3.0}}",
  "{\"usage\":{\"completion_tokens\":3e0}}",
  "{\"usage\":{\"prompt_tokens\":true}}",
  "{\"usage\":[]}",
  "{\"usage\":5}",
  "{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":5}}",
  "{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":-3}}}",
  "{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":\"7\"}}}",
  "{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":1,"
  "\"cached_tokens\":2}}}",
  "{\"error\":{\"message\":\"boom\"}}",
  "{\"error\":\"plain\"}",
  "{\"error\":5}",
  "{\"error\":{\"message\":\"\\u00e9 long\"},\"choices\":7}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\u0000\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\ud800\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\udc00\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\ud800\\u0041\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\ud800x\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\u12\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\u12G4\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\x\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\\'\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xc0\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xc1\xbf\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xe0\x80\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xed\xa0\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xf0\x80\x80\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xf4\x90\x80\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xf5\x80\x80\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\x80\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xe4\xb8\"}}]}",
  "{\"choices\":[{\"delta\":{\"content\":\"\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}}]}",
  "\xef\xbb\xbf{}",
  "{\"a\":\"unterminated}",
  "{\"a\":[1,2}",
  "{\"a\":[1 2]}",
  "{\"a\":[,]}",
  "{\"a\":[1,]}",
  "{\"a\":{\"b\":1]}",
  "{\"a\":\x01}",
  "{\"a\":1}\x00",
  "{\"a\x00\":1}",
  "[DONE]",
  "[DONE]  ",
  " [DONE]",
};

static void
test_fast_path(void **state)
{
  for (size_t i = 0; i < sizeof fast / sizeof *fast; i++)
    if (!check_s(fast[i]))
      fail_msg("scanner gave up on [%s]", fast[i]);
  struct tb_oai_chunk c;
  assert_true(tb_oai_scan_chunk(fast[1], strlen(fast[1]), &c));
  assert_int_equal(c.completion_tokens, 1);
  assert_int_equal(c.text_bytes, 6);
  /* escapes and unicode: decoded lengths */
  assert_true(tb_oai_scan_chunk(fast[8], strlen(fast[8]), &c));
  assert_int_equal(c.text_bytes, 11 + 2 + 3 + 4); /* a\nb"c\\d/e\tf é 中 😀 */
  assert_true(tb_oai_scan_chunk(fast[10], strlen(fast[10]), &c));
  assert_int_equal(c.n_choices, 4);
  assert_int_equal(c.text_choices, 2);
  assert_false(c.role_only);
  assert_true(c.finished);
  /* the prefix cache's share of the prompt (vLLM, SGLang, the sim) */
  const char *cached = fast[sizeof fast / sizeof *fast - 3];
  assert_true(tb_oai_scan_chunk(cached, strlen(cached), &c));
  assert_int_equal(c.cached_tokens, 2000);
  assert_int_equal(c.prompt_tokens, 2512);
}

static void
test_other(void **state)
{
  for (size_t i = 0; i < sizeof other / sizeof *other; i++)
    (void)check_s(other[i]);
  /* every byte value inside a text, a key and between tokens */
  for (int b = 0; b < 256; b++) {
    char buf[128];
    int n = snprintf(buf, sizeof buf, "{\"choices\":[{\"delta\":{\"content\":\"a%cb\"}}]}", 1);
    char *x = memchr(buf, 1, (size_t)n);
    *x = (char)b;
    bool plain = (b >= 0x20 && b < 0x80 && b != '"') /* \b: an escape */;
    assert_int_equal(check(buf, (size_t)n), plain);
    n = snprintf(buf, sizeof buf, "{\"k%cy\":1}", 1);
    x = memchr(buf, 1, (size_t)n);
    *x = (char)b;
    (void)check(buf, (size_t)n);
    n = snprintf(buf, sizeof buf, "{\"k\":%c1}", 1);
    x = memchr(buf, 1, (size_t)n);
    *x = (char)b;
    (void)check(buf, (size_t)n);
  }
  /* embedded NUL bytes, given by length */
  (void)check("{\"a\":\"x\0y\"}", 11);
  (void)check("{\"a\":1}\0", 8);
  /* the error object goes to jansson, and still reads right */
  struct tb_oai_chunk c;
  assert_false(tb_oai_scan_chunk("{\"error\":{\"message\":\"boom\"}}", 28, &c));
  assert_int_equal(tb_oai_parse_chunk("{\"error\":{\"message\":\"boom\"}}", 28, &c), TB_OAI_OK);
  assert_true(c.is_error);
  assert_string_equal(c.error, "boom");
}

static void
test_deep_and_wide(void **state)
{
  size_t cap = 200000;
  char *b = malloc(cap);
  assert_non_null(b);
  /* nesting around the scanner's depth cap and far beyond */
  for (int depth = 1; depth < 80; depth += 3) {
    size_t n = 0;
    n += (size_t)snprintf(b + n, cap - n, "{\"choices\":[{\"delta\":{\"content\":\"x\"},\"n\":");
    for (int i = 0; i < depth; i++)
      b[n++] = i % 2 ? '[' : '{', n += i % 2 ? 0 : (size_t)snprintf(b + n, cap - n, "\"k\":");
    b[n++] = '1';
    for (int i = depth - 1; i >= 0; i--)
      b[n++] = i % 2 ? ']' : '}';
    n += (size_t)snprintf(b + n, cap - n, "}]}");
    (void)check(b, n);
  }
  /* many keys in one object, with and without a duplicate at the end */
  for (int keys = 1; keys < 70; keys += 7) {
    for (int dup = 0; dup < 2; dup++) {
      size_t n = (size_t)snprintf(b, cap, "{\"usage\":{\"completion_tokens\":2}");
      for (int i = 0; i < keys; i++)
        n += (size_t)snprintf(b + n, cap - n, ",\"k%d\":%d", i, i);
      if (dup)
        n += (size_t)snprintf(b + n, cap - n, ",\"k0\":0");
      b[n++] = '}';
      (void)check(b, n);
    }
  }
  /* a long text with escapes */
  size_t n = (size_t)snprintf(b, cap, "{\"choices\":[{\"delta\":{\"content\":\"");
  for (int i = 0; i < 5000; i++)
    n += (size_t)snprintf(b + n, cap - n, i % 3 ? "ab\\n" : "\\u00e9\xe4\xb8\xad");
  n += (size_t)snprintf(b + n, cap - n, "\"}}]}");
  assert_true(check(b, n));
  /* over the chunk cap */
  char *big = malloc(TB_OAI_CHUNK_MAX + 16);
  assert_non_null(big);
  memset(big, ' ', TB_OAI_CHUNK_MAX + 16);
  big[0] = '{';
  big[TB_OAI_CHUNK_MAX + 15] = '}';
  struct tb_oai_chunk c;
  assert_false(tb_oai_scan_chunk(big, TB_OAI_CHUNK_MAX + 16, &c));
  assert_int_equal(tb_oai_parse_chunk(big, TB_OAI_CHUNK_MAX + 16, &c), TB_OAI_MALFORMED);
  free(big);
  free(b);
}

/* xorshift: deterministic mutations */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t
rnd(void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void
test_mutations(void **state)
{
  static const char *const alphabet[] = { "\"",
                                          "\\",
                                          "{",
                                          "}",
                                          "[",
                                          "]",
                                          ":",
                                          ",",
                                          " ",
                                          "0",
                                          "-",
                                          ".",
                                          "e",
                                          "n",
                                          "null",
                                          "true",
                                          "\\u",
                                          "\\ud83d",
                                          "\\ude00",
                                          "\xc3",
                                          "\xa9",
                                          "\xed\xa0\x80",
                                          "\xf0\x9f\x98\x80",
                                          "\x00",
                                          "\x1f",
                                          "\"content\"",
                                          "\"usage\"",
                                          "\"choices\"",
                                          "\"delta\"",
                                          "\"role\"",
                                          "\"completion_tokens\"",
                                          "99999999999999999999",
                                          "\"error\"",
                                          "\"text\"",
                                          "\"finish_reason\"",
                                          "\"reasoning\"" };
  char buf[4096];
  size_t nseeds = sizeof fast / sizeof *fast, nother = sizeof other / sizeof *other;
  for (int it = 0; it < 300000; it++) {
    uint64_t pick = rnd() % (nseeds + nother);
    const char *seed = pick < nseeds ? fast[pick] : other[pick - nseeds];
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    int muts = 1 + (int)(rnd() % 4);
    for (int m = 0; m < muts; m++) {
      size_t pos = n ? (size_t)(rnd() % (n + 1)) : 0;
      switch (rnd() % 5) {
      case 0: /* flip a byte */
        if (n)
          buf[pos % n] = (char)rnd();
        break;
      case 1: /* delete a span */
        if (n) {
          size_t k = 1 + rnd() % 4;
          size_t p = pos % n;
          if (k > n - p)
            k = n - p;
          memmove(buf + p, buf + p + k, n - p - k);
          n -= k;
        }
        break;
      default: { /* insert a token */
        const char *t = alphabet[rnd() % (sizeof alphabet / sizeof *alphabet)];
        size_t tl = t[0] ? strlen(t) : 1;
        if (n + tl < sizeof buf) {
          memmove(buf + pos + tl, buf + pos, n - pos);
          memcpy(buf + pos, t, tl);
          n += tl;
        }
        break;
      }
      }
    }
    (void)check(buf, n);
  }
  /* the mutations must exercise both paths */
  assert_true(n_scanned > 1000);
  assert_true(n_checked - n_scanned > 1000);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fast_path),
    cmocka_unit_test(test_other),
    cmocka_unit_test(test_deep_and_wide),
    cmocka_unit_test(test_mutations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
