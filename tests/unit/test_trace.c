/* Unit tests: tb_trace, the readers of production traces.  Each format's
 * small hand-written trace reads into the figures worked out by hand here;
 * every malformed input names its line and field; the caps hold; gzip (made
 * here by zlib) reads as the plain text does; and the generated fixtures of
 * tests/fixtures/traces/ (scripts/gen-traces.py) read into the summary the
 * script computed on its own, in Python, beside each file (*.expect.json). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/tb_crypto.h"
#include "spec/tb_trace.h"
#include "spec/tb_traceplay.h"
#include "spec/tb_tracesum.h"
#include "jsoncount.h"
#include "sim_cache.h"
#include "sim_tok.h"

static int
parse(const char *text, enum tb_trace_format f, struct tb_trace *t, char *err)
{
  return tb_trace_parse(text, strlen(text), f, t, err, TB_TRACE_ERR_MAX);
}

static void
expect_error(const char *text, enum tb_trace_format f, const char *want)
{
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX] = "";
  assert_int_equal(parse(text, f, &t, err), -1);
  if (strstr(err, want) == NULL)
    fail_msg("error \"%s\" does not hold \"%s\"", err, want);
  assert_int_equal(t.n, 0);
  assert_null(t.req);
}

static void
test_formats(void **state)
{
  (void)state;
  const char *names[] = { "mooncake", "azure", "burstgpt", "bailian", "weka" };
  for (size_t i = 0; i < 5; i++) {
    enum tb_trace_format f;
    assert_true(tb_trace_format_parse(names[i], &f));
    assert_string_equal(tb_trace_format_name(f), names[i]);
  }
  enum tb_trace_format f;
  assert_false(tb_trace_format_parse("Mooncake", &f));
  assert_false(tb_trace_format_parse("", &f));
  assert_int_equal(tb_trace_format_block_tokens(TB_TRACE_MOONCAKE), 512);
  assert_int_equal(tb_trace_format_block_tokens(TB_TRACE_BAILIAN), 16);
  assert_int_equal(tb_trace_format_block_tokens(TB_TRACE_WEKA), 64);
  assert_int_equal(tb_trace_format_block_tokens(TB_TRACE_AZURE), 0);
}

/* Mooncake's README lines (ai-dynamo/dynamo benchmarks/data_generator). */
static const char MOONCAKE[] =
  "{\"timestamp\": 0, \"input_length\": 6755, \"output_length\": 500, \"hash_ids\": [0, 1, 2, 3, "
  "4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}\n"
  "{\"timestamp\": 0, \"input_length\": 7319, \"output_length\": 490, \"hash_ids\": [0, 14, 15, "
  "16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27]}\n"
  "\n"
  "{\"timestamp\": 3052, \"input_length\": 7234, \"output_length\": 794, \"hash_ids\": [0, 28, 29, "
  "30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41]}\r\n"
  "{\"timestamp\": 3052, \"input_length\": 2287, \"output_length\": 316, \"hash_ids\": [0, 42, 43, "
  "44, 45]}\n";

static void
test_mooncake(void **state)
{
  (void)state;
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(MOONCAKE, TB_TRACE_MOONCAKE, &t, err), 0);
  assert_int_equal(t.n, 4);
  assert_int_equal(t.block_tokens, 512);
  assert_int_equal(t.nblocks, 14 + 15 + 15 + 5);
  assert_int_equal(t.nuniq, 46);
  assert_false(t.gzipped);
  assert_true(fabs(t.req[2].t_s - 3.052) < 1e-9);
  assert_int_equal(t.req[1].in_tokens, 7319);
  assert_int_equal(t.req[3].out_tokens, 316);
  assert_int_equal(t.req[1].nblk, 15);
  /* block 0 is dense id 0 everywhere; block 14 is the 15th distinct */
  assert_int_equal(t.blocks[t.req[1].blk_off], 0);
  assert_int_equal(t.blocks[t.req[1].blk_off + 1], 14);
  assert_int_equal(t.req[0].parent, -1);
  assert_int_equal(t.req[0].session, -1);
  struct tb_tracesum s;
  tb_tracesum_of(&t, &s);
  assert_int_equal(s.requests, 4);
  assert_true(fabs(s.span_s - 3.052) < 1e-9);
  assert_true(fabs(s.rate - 4 / 3.052) < 1e-9);
  /* requests 2, 3 and 4 each find block 0: 3 x 512 of 23,595 tokens */
  assert_true(fabs(s.implied_hit_rate - 1536.0 / 23595.0) < 1e-12);
  assert_true(fabs(s.in.max - 7319) < 1e-9);
  assert_true(fabs(s.in.p50 - 6755) < 1e-9); /* nearest rank of 4: the 2nd */
  assert_true(fabs(s.out.mean - 525) < 1e-9);
  tb_trace_free(&t);
}

/* AIPerf's session_id and delay, and the aliases. */
static void
test_mooncake_sessions(void **state)
{
  (void)state;
  const char *text =
    "{\"session_id\": \"a\", \"created_time\": 1000, \"input_tokens\": 100, \"output_tokens\": 10, "
    "\"hash_ids\": [1]}\n"
    "{\"session_id\": 7, \"timestamp\": 1500, \"input_length\": 50}\n"
    "{\"session_id\": \"a\", \"delay_ms\": 2500, \"input_length\": 700, \"hash_ids\": [1, 2]}\n"
    "{\"session_id\": \"a\", \"delay\": 100, \"input_length\": 900}\n";
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(text, TB_TRACE_MOONCAKE, &t, err), 0);
  assert_int_equal(t.n, 4);
  assert_int_equal(t.nsessions, 2);
  assert_int_equal(t.req[0].session, t.req[2].session);
  assert_int_not_equal(t.req[0].session, t.req[1].session);
  assert_int_equal(t.req[2].parent, 0);
  assert_int_equal(t.req[3].parent, 2);
  assert_true(fabs(t.req[2].delay_s - 2.5) < 1e-12);
  assert_true(fabs(t.req[3].delay_s - 0.1) < 1e-12);
  assert_true(t.req[0].delay_s < 0);
  assert_true(fabs(t.req[1].t_s - 0.5) < 1e-12); /* from the first, 1000 ms */
  assert_true(fabs(t.req[2].t_s - 0.0) < 1e-12); /* no time: its parent's */
  assert_int_equal(t.req[1].out_tokens, 1);      /* output_length optional */
  assert_int_equal(t.req[0].out_tokens, 10);
  tb_trace_free(&t);
  expect_error("{\"session_id\": 1, \"delay\": 5, \"input_length\": 3}\n", TB_TRACE_MOONCAKE,
               "line 1: field \"timestamp\" is missing");
}

static void
test_mooncake_errors(void **state)
{
  (void)state;
  expect_error("{\"timestamp\": 0, \"input_length\": 1}\n{\"timestamp\": 1}\n", TB_TRACE_MOONCAKE,
               "line 2: field \"input_length\" is missing");
  expect_error("{\"timestamp\": 0, \"input_length\": 1, \"hash_ids\": [1, -2]}\n",
               TB_TRACE_MOONCAKE, "line 1: field \"hash_ids[1]\": expected an integer >= 0");
  expect_error("{\"timestamp\": 0, \"input_length\": 1, \"hash_ids\": 3}\n", TB_TRACE_MOONCAKE,
               "field \"hash_ids\": expected an array");
  expect_error("\n\n{\"timestamp\": 0, \"input_length\": 1.5}\n", TB_TRACE_MOONCAKE,
               "line 3: field \"input_length\": expected a whole number");
  expect_error("{\"timestamp\": -4, \"input_length\": 1}\n", TB_TRACE_MOONCAKE,
               "line 1: field \"timestamp\": expected a number >= 0");
  expect_error("{\"timestamp\": 0, \"input_length\": 1}\n{nope\n", TB_TRACE_MOONCAKE,
               "line 2: not JSON");
  expect_error("[1]\n", TB_TRACE_MOONCAKE, "line 1: expected a JSON object");
  expect_error("{\"timestamp\": 0, \"input_length\": 20000000}\n", TB_TRACE_MOONCAKE,
               "field \"input_length\": expected a whole number of tokens in [0, 10000000]");
  expect_error("", TB_TRACE_MOONCAKE, "no requests");
  expect_error("\n \n", TB_TRACE_MOONCAKE, "no requests");
}

static void
test_azure(void **state)
{
  (void)state;
  const char *text = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\r\n"
                     "2023-11-17 00:00:00,879,15\n";
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(text, TB_TRACE_AZURE, &t, err), 0);
  assert_int_equal(t.n, 3);
  assert_int_equal(t.block_tokens, 0);
  assert_int_equal(t.nblocks, 0);
  assert_true(fabs(t.req[1].t_s - (50.9951690 - 46.6805900)) < 1e-6);
  /* across midnight: 5 h 44 min 13.3194100 s */
  assert_true(fabs(t.req[2].t_s - (5 * 3600 + 44 * 60 + 13.31941)) < 1e-6);
  assert_int_equal(t.req[0].in_tokens, 374);
  assert_int_equal(t.req[2].out_tokens, 15);
  tb_trace_free(&t);
  /* the 2024 trace's columns in another order, seconds as the time */
  assert_int_equal(
    parse("GeneratedTokens,TIMESTAMP,ContextTokens\n7,12.5,8.0\n", TB_TRACE_AZURE, &t, err), 0);
  assert_int_equal(t.req[0].in_tokens, 8);
  tb_trace_free(&t);
  expect_error("TIMESTAMP,ContextTokens\n1,2\n", TB_TRACE_AZURE,
               "line 1: the header has no column \"GeneratedTokens\"");
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,x,3\n", TB_TRACE_AZURE,
               "line 3: field \"ContextTokens\": \"x\" is not a whole number");
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-01 00:00:00,1,1\n", TB_TRACE_AZURE,
               "line 2: field \"TIMESTAMP\"");
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2\n", TB_TRACE_AZURE,
               "line 2: field \"GeneratedTokens\" is missing");
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n", TB_TRACE_AZURE, "no requests");
}

static void
test_burstgpt(void **state)
{
  (void)state;
  const char *text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                     "5,ChatGPT,472,18,490,Conversation log\n"
                     "45,\"GPT-4\",1087,0,1087,\"API log, \"\"retried\"\"\"\n"
                     "118,ChatGPT,417,276,693,Conversation log\n";
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(text, TB_TRACE_BURSTGPT, &t, err), 0);
  assert_int_equal(t.n, 3);
  assert_true(fabs(t.req[1].t_s - 40) < 1e-12);
  assert_true(fabs(t.req[2].t_s - 113) < 1e-12);
  assert_int_equal(t.req[1].in_tokens, 1087);
  assert_int_equal(t.req[1].out_tokens, 0);
  tb_trace_free(&t);
  expect_error("Timestamp,Model,Request tokens,Response tokens\n1,\"m,2,3\n", TB_TRACE_BURSTGPT,
               "line 2: not a CSV row");
}

static void
test_bailian(void **state)
{
  (void)state;
  const char *text =
    "{\"chat_id\": 10, \"parent_chat_id\": -1, \"timestamp\": 100.0, \"input_length\": 40, "
    "\"output_length\": 8, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [5, 6]}\n"
    "{\"chat_id\": 11, \"parent_chat_id\": -1, \"timestamp\": 100.5, \"input_length\": 20, "
    "\"output_length\": 4, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [7]}\n"
    "{\"chat_id\": 12, \"parent_chat_id\": 10, \"timestamp\": 103.0, \"input_length\": 70, "
    "\"output_length\": 9, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [5, 6, 8, 9]}\n";
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(text, TB_TRACE_BAILIAN, &t, err), 0);
  assert_int_equal(t.n, 3);
  assert_int_equal(t.block_tokens, 16);
  assert_int_equal(t.nsessions, 2);
  assert_int_equal(t.req[2].parent, 0);
  assert_int_equal(t.req[2].session, t.req[0].session);
  assert_true(t.req[2].delay_s < 0);
  assert_true(fabs(t.req[2].t_s - 3.0) < 1e-12);
  struct tb_tracesum s;
  tb_tracesum_of(&t, &s);
  /* the third request's first two blocks were seen: 32 of 130 tokens */
  assert_true(fabs(s.implied_hit_rate - 32.0 / 130.0) < 1e-12);
  assert_int_equal(s.sessions, 2);
  tb_trace_free(&t);
  expect_error("{\"chat_id\": 1, \"parent_chat_id\": 9, \"timestamp\": 1, \"input_length\": 1, "
               "\"output_length\": 1}\n",
               TB_TRACE_BAILIAN, "line 1: field \"parent_chat_id\": no earlier line");
  expect_error("{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 1, \"input_length\": 1, "
               "\"output_length\": 1}\n"
               "{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 1, \"input_length\": 1, "
               "\"output_length\": 1}\n",
               TB_TRACE_BAILIAN, "line 2: field \"chat_id\": repeats");
  expect_error(
    "{\"parent_chat_id\": -1, \"timestamp\": 1, \"input_length\": 1, \"output_length\": 1}\n",
    TB_TRACE_BAILIAN, "line 1: field \"chat_id\" is missing");
  expect_error("{\"chat_id\": [1], \"timestamp\": 1, \"input_length\": 1, \"output_length\": 1}\n",
               TB_TRACE_BAILIAN, "field \"chat_id\": expected an integer or a string");
}

/* TRACE_FORMAT.md's shapes (callanjfox/agentic-coding-analysis). */
static const char WEKA[] =
  "{\"id\": \"8712b46f-04e\", \"models\": [\"m\"], \"block_size\": 64, \"tool_tokens\": 100,\n"
  " \"system_tokens\": 20, \"requests\": [\n"
  "  {\"t\": 0.0, \"type\": \"s\", \"in\": 200, \"out\": 30, \"hash_ids\": [1, 2, 3]},\n"
  "  {\"t\": 10.0, \"type\": \"subagent\", \"agent_id\": \"9662\", \"requests\": [\n"
  "     {\"t\": 0.0, \"type\": \"s\", \"in\": 130, \"out\": 5, \"hash_ids\": [1, 2]},\n"
  "     {\"t\": 3.1, \"type\": \"n\", \"in\": 140, \"out\": 5, \"hash_ids\": [1, 2]}]},\n"
  "  {\"t\": 12.5, \"type\": \"s\", \"in\": 260, \"out\": 40, \"hash_ids\": [1, 2, 3, 4],\n"
  "   \"think_time\": 2.0}]}\n";

static void
test_weka(void **state)
{
  (void)state;
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(WEKA, TB_TRACE_WEKA, &t, err), 0);
  assert_int_equal(t.n, 4);
  assert_int_equal(t.block_tokens, 64);
  assert_int_equal(t.nsessions, 2);
  /* file order: main 0, subagent 1 and 2, main 3 */
  assert_true(fabs(t.req[1].t_s - 10.0) < 1e-12);
  assert_true(fabs(t.req[2].t_s - 13.1) < 1e-12);
  assert_int_equal(t.req[2].parent, 1);
  assert_int_equal(t.req[1].parent, -1);
  assert_int_equal(t.req[3].parent, 0);
  assert_true(fabs(t.req[3].delay_s - 2.0) < 1e-12);
  /* the subagent's ids 1 and 2 are not the conversation's: 4 + 2 distinct */
  assert_int_equal(t.nuniq, 6);
  struct tb_tracesum s;
  tb_tracesum_of(&t, &s);
  /* hits: subagent's 2nd request 2 blocks (128), main's 2nd 3 blocks (192) */
  assert_true(fabs(s.implied_hit_rate - 320.0 / 730.0) < 1e-12);
  tb_trace_free(&t);
  /* two conversations as JSON lines: ids are per conversation */
  const char *lines =
    "{\"block_size\": 64, \"requests\": [{\"t\": 0, \"in\": 64, \"out\": 1, \"hash_ids\": [1]}]}\n"
    "{\"block_size\": 64, \"requests\": [{\"t\": 1, \"in\": 64, \"out\": 1, \"hash_ids\": [1]}]}\n";
  assert_int_equal(parse(lines, TB_TRACE_WEKA, &t, err), 0);
  assert_int_equal(t.n, 2);
  assert_int_equal(t.nuniq, 2);
  tb_tracesum_of(&t, &s);
  assert_true(s.implied_hit_rate == 0);
  tb_trace_free(&t);
  expect_error("{\"requests\": [{\"t\": 0, \"out\": 1}]}", TB_TRACE_WEKA,
               "requests[0]: field \"in\" is missing");
  expect_error("{\"requests\": [{\"t\": 0, \"in\": 1, \"out\": 1}, {\"t\": 1, \"type\": "
               "\"subagent\", \"requests\": [{\"t\": 0, \"in\": \"x\", \"out\": 1}]}]}",
               TB_TRACE_WEKA, "requests[1]: requests[0]: field \"in\"");
  expect_error("{\"block_size\": 64, \"requests\": [{\"t\": 0, \"in\": 1, \"out\": "
               "1}]}\n{\"block_size\": 16, \"requests\": [{\"t\": 0, \"in\": 1, \"out\": 1}]}\n",
               TB_TRACE_WEKA, "line 2: field \"block_size\"");
  expect_error("{\"requests\": 3}", TB_TRACE_WEKA, "field \"requests\": expected an array");
  expect_error("7", TB_TRACE_WEKA, "line 1: not JSON");
  expect_error("[{\"requests\": []}, 3]", TB_TRACE_WEKA, "conversation 1: expected an object");
}

static unsigned char *
gzip_of(const char *text, size_t len, size_t *outlen)
{
  z_stream z;
  memset(&z, 0, sizeof z);
  assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  size_t cap = deflateBound(&z, len);
  unsigned char *out = malloc(cap);
  z.next_in = (unsigned char *)(uintptr_t)text;
  z.avail_in = (uInt)len;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
  *outlen = cap - z.avail_out;
  deflateEnd(&z);
  return out;
}

static void
test_gzip(void **state)
{
  (void)state;
  size_t n;
  unsigned char *gz = gzip_of(MOONCAKE, strlen(MOONCAKE), &n);
  struct tb_trace t, plain;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(tb_trace_parse(gz, n, TB_TRACE_MOONCAKE, &t, err, sizeof err), 0);
  assert_true(t.gzipped);
  assert_int_equal(parse(MOONCAKE, TB_TRACE_MOONCAKE, &plain, err), 0);
  assert_int_equal(t.n, plain.n);
  assert_int_equal(t.nblocks, plain.nblocks);
  assert_memory_equal(t.blocks, plain.blocks, t.nblocks * sizeof *t.blocks);
  for (size_t i = 0; i < t.n; i++)
    assert_int_equal(t.req[i].in_tokens, plain.req[i].in_tokens);
  tb_trace_free(&t);
  tb_trace_free(&plain);
  /* cut short */
  assert_int_equal(tb_trace_parse(gz, n / 2, TB_TRACE_MOONCAKE, &t, err, sizeof err), -1);
  assert_non_null(strstr(err, "gzip: the stream ends early"));
  /* corrupt */
  gz[n / 2] ^= 0xff;
  gz[n / 2 + 1] ^= 0xff;
  assert_int_equal(tb_trace_parse(gz, n, TB_TRACE_MOONCAKE, &t, err, sizeof err), -1);
  assert_non_null(strstr(err, "gzip: "));
  free(gz);
}

/* A gzip bomb: 300 MiB of blanks in a small member stops at the cap. */
static void
test_gzip_cap(void **state)
{
  (void)state;
  size_t len = (size_t)TB_TRACE_MAX_BYTES + (1u << 20);
  char *big = malloc(len);
  memset(big, '\n', len);
  size_t n;
  unsigned char *gz = gzip_of(big, len, &n);
  free(big);
  assert_true(n < (4u << 20));
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(tb_trace_parse(gz, n, TB_TRACE_MOONCAKE, &t, err, sizeof err), -1);
  assert_non_null(strstr(err, "inflates to more than"));
  free(gz);
}

static void
test_caps(void **state)
{
  (void)state;
  /* one request of TB_TRACE_MAX_REQ_BLOCKS + 1 ids */
  size_t cap = 64 + (size_t)(TB_TRACE_MAX_REQ_BLOCKS + 1) * 8;
  char *s = malloc(cap);
  size_t o = (size_t)snprintf(s, cap, "{\"timestamp\": 0, \"input_length\": 1, \"hash_ids\": [");
  for (uint32_t i = 0; i <= TB_TRACE_MAX_REQ_BLOCKS; i++)
    o += (size_t)snprintf(s + o, cap - o, i ? ",%u" : "%u", i);
  snprintf(s + o, cap - o, "]}\n");
  expect_error(s, TB_TRACE_MOONCAKE, "line 1: field \"hash_ids\": more than 65536 ids");
  free(s);
  /* a line past TB_TRACE_MAX_LINE */
  size_t len = TB_TRACE_MAX_LINE + 10;
  s = malloc(len + 1);
  memset(s, ' ', len);
  s[len] = '\0';
  s[0] = '{';
  expect_error(s, TB_TRACE_MOONCAKE, "line 1: longer than");
  free(s);
}

/* The error text wants holds, and jansson never held 1 MiB meanwhile. */
static void
expect_cheap_error(const char *text, enum tb_trace_format f, const char *want)
{
  jsoncount_start();
  expect_error(text, f, want);
  size_t peak = jsoncount_stop();
  if (peak >= (1u << 20))
    fail_msg("\"%s\": jansson held %zu bytes before the refusal", want, peak);
}

/* Issue 34, item 1: 12 MiB of "{}," was a gigabyte of tree.  Each shape
 * is refused before its tree is built, naming the cap. */
static void
test_tree_caps(void **state)
{
  (void)state;
  size_t reps = (12u << 20) / 3;
  char *s = jsoncount_repeat("{\"block_size\": 64, \"requests\": [", "{}", reps, "]}");
  expect_cheap_error(s, TB_TRACE_WEKA, "more than the 128 MiB of one JSON line or conversation");
  free(s);
  /* an array of conversations is read one at a time: the first says */
  s = jsoncount_repeat("[", "{}", reps, "]");
  expect_cheap_error(s, TB_TRACE_WEKA, "conversation 0: field \"requests\"");
  free(s);
  s = jsoncount_repeat("[", "{\"requests\": [{\"t\": 0, \"in\": 1, \"out\": 1}]}", 3, "] x");
  expect_error(s, TB_TRACE_WEKA, "text after the array");
  free(s);
  expect_error("[{\"requests\": [{\"t\": 0, \"in\": 1, \"out\": 1}]} {}]", TB_TRACE_WEKA,
               "conversation 0: expected ',' or ']' after it");
  /* a JSON line under TB_TRACE_MAX_LINE whose tree is not */
  s = jsoncount_repeat("{\"timestamp\": 0, \"input_length\": 1, \"x\": [", "{}",
                       (TB_TRACE_MAX_LINE - 64) / 3, "]}\n");
  expect_cheap_error(s, TB_TRACE_MOONCAKE, "line 1: its JSON would take about");
  free(s);
  /* a whole trace in the array form still reads */
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  s = jsoncount_repeat(
    " [ ", "{\"requests\": [{\"t\": 0, \"in\": 5, \"out\": 1, \"hash_ids\": [1]}]}", 4, " ]\n");
  assert_int_equal(parse(s, TB_TRACE_WEKA, &t, err), 0);
  assert_int_equal(t.n, 4);
  assert_int_equal(t.nuniq, 4); /* ids are scoped to their conversation */
  tb_trace_free(&t);
  free(s);
  assert_int_equal(parse("[]", TB_TRACE_WEKA, &t, err), -1);
  assert_non_null(strstr(err, "no requests"));
}

/* The tables a trace's reading builds, its inflated text and its JSON are
 * held to the memory cap (TB_TRACE_MAX_MEMORY, or the api's lower
 * TOKBENCH_TRACE_MAX_MEMORY), here 4 MiB: 200k distinct block ids grow the
 * id table past it; so does the inflated text of a gzip, and a JSON line
 * whose tree would not fit beside what is held. */
static void
test_memory_cap(void **state)
{
  (void)state;
  size_t lines = 4, per = 50000, cap = lines * (per * 8 + 80), o = 0, id = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  for (size_t l = 0; l < lines; l++) {
    o += (size_t)snprintf(s + o, cap - o,
                          "{\"timestamp\": %zu, \"input_length\": 9, \"hash_ids\": [", l);
    for (size_t k = 0; k < per; k++)
      o += (size_t)snprintf(s + o, cap - o, k ? ",%zu" : "%zu", id++);
    o += (size_t)snprintf(s + o, cap - o, "]}\n");
  }
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(tb_trace_parse_within(s, o, TB_TRACE_MOONCAKE, 4u << 20, &t, err, sizeof err),
                   -1);
  assert_non_null(strstr(err, "more than 4 MiB of memory (the cap of one trace's reading"));
  assert_null(t.req);
  assert_int_equal(tb_trace_parse_within(s, o, TB_TRACE_MOONCAKE, 64u << 20, &t, err, sizeof err),
                   0);
  assert_int_equal(t.nuniq, lines * per);
  tb_trace_free(&t);
  free(s);
  /* a gzip inflates to at most the cap; the inflated text counts in it, so
   * a line whose tree does not fit beside it is refused */
  size_t len = 5u << 20, n;
  char *text = malloc(len);
  memset(text, '\n', len);
  unsigned char *gz = gzip_of(text, len, &n);
  assert_int_equal(tb_trace_parse_within(gz, n, TB_TRACE_MOONCAKE, 4u << 20, &t, err, sizeof err),
                   -1);
  assert_non_null(strstr(err, "gzip: inflates to more than 4194304 bytes"));
  free(gz);
  len = (4u << 20) - 100000;
  char *line =
    jsoncount_repeat("{\"timestamp\": 0, \"input_length\": 1, \"x\": [", "1", 20000, "]}\n");
  memcpy(text + len - strlen(line), line, strlen(line));
  free(line);
  gz = gzip_of(text, len, &n);
  free(text);
  assert_int_equal(tb_trace_parse_within(gz, n, TB_TRACE_MOONCAKE, 4u << 20, &t, err, sizeof err),
                   -1);
  assert_non_null(strstr(err, "more than the 4 MiB one trace may take"));
  assert_int_equal(tb_trace_parse_within(gz, n, TB_TRACE_MOONCAKE, 8u << 20, &t, err, sizeof err),
                   0);
  assert_int_equal(t.n, 1);
  tb_trace_free(&t);
  free(gz);
}

/* The generated fixtures against the generator's own figures. */
static void
check_fixture(const char *file, enum tb_trace_format f)
{
  char path[256], epath[256];
  snprintf(path, sizeof path, "tests/fixtures/traces/%s", file);
  snprintf(epath, sizeof epath, "tests/fixtures/traces/%s.expect.json", file);
  FILE *fp = fopen(path, "rb");
  if (fp == NULL)
    fail_msg("cannot open %s", path);
  static char buf[4 << 20];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  json_error_t je;
  json_t *e = json_load_file(epath, 0, &je);
  if (e == NULL)
    fail_msg("%s: %s", epath, je.text);
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  if (tb_trace_parse(buf, n, f, &t, err, sizeof err) != 0)
    fail_msg("%s: %s", path, err);
  struct tb_tracesum s;
  tb_tracesum_of(&t, &s);
  assert_int_equal(s.requests, json_integer_value(json_object_get(e, "requests")));
  assert_int_equal(s.sessions, json_integer_value(json_object_get(e, "sessions")));
  assert_int_equal(s.unique_blocks, json_integer_value(json_object_get(e, "unique_blocks")));
  assert_int_equal(s.block_tokens, json_integer_value(json_object_get(e, "block_tokens")));
  double want_span = json_number_value(json_object_get(e, "span_s"));
  double want_hit = json_number_value(json_object_get(e, "implied_hit_rate"));
  double want_in = json_number_value(json_object_get(e, "input_tokens_mean"));
  if (fabs(s.span_s - want_span) > 1e-3 || fabs(s.implied_hit_rate - want_hit) > 1e-9 ||
      fabs(s.in.mean - want_in) > 1e-6)
    fail_msg("%s: span %.6f hit %.9f in %.6f; the generator says %.6f %.9f %.6f", file, s.span_s,
             s.implied_hit_rate, s.in.mean, want_span, want_hit, want_in);
  json_decref(e);
  tb_trace_free(&t);
}

static void
test_fixtures(void **state)
{
  (void)state;
  check_fixture("mooncake.jsonl", TB_TRACE_MOONCAKE);
  check_fixture("mooncake-sessions.jsonl", TB_TRACE_MOONCAKE);
  check_fixture("mooncake.jsonl.gz", TB_TRACE_MOONCAKE);
  check_fixture("azure2023.csv", TB_TRACE_AZURE);
  check_fixture("azure2024.csv", TB_TRACE_AZURE);
  check_fixture("burstgpt.csv", TB_TRACE_BURSTGPT);
  check_fixture("bailian.jsonl", TB_TRACE_BAILIAN);
  check_fixture("weka.json", TB_TRACE_WEKA);
}

/* A window, played 2x faster and its rate scaled 2x again, lengths capped;
 * a session's turns follow their root in and out. */
static void
test_replay(void **state)
{
  (void)state;
  const char *text =
    "{\"session_id\": 1, \"timestamp\": 0, \"input_length\": 2000, \"output_length\": 50, "
    "\"hash_ids\": [1, 2, 3, 4]}\n"
    "{\"session_id\": 2, \"timestamp\": 10000, \"input_length\": 100, \"output_length\": 500, "
    "\"hash_ids\": [5]}\n"
    "{\"session_id\": 2, \"timestamp\": 14000, \"delay\": 3000, \"input_length\": 700, "
    "\"output_length\": 5, \"hash_ids\": [5, 6]}\n"
    "{\"session_id\": 3, \"timestamp\": 30000, \"input_length\": 10, \"output_length\": 5}\n"
    "{\"session_id\": 1, \"timestamp\": 31000, \"input_length\": 3000, \"output_length\": 5}\n";
  struct tb_trace t, r;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(text, TB_TRACE_MOONCAKE, &t, err), 0);
  struct tb_traceplay_opts o = { .start_s = 5,
                                 .duration_s = 20,
                                 .speedup = 2,
                                 .rate_scale = 2,
                                 .max_output = 100,
                                 .max_input = 600 };
  assert_int_equal(tb_traceplay_window(&t, &o, &r), 2); /* session 2 only */
  assert_true(fabs(r.req[0].t_s - (10 - 5) / 4.0) < 1e-12);
  assert_int_equal(r.req[0].parent, -1);
  assert_int_equal(r.req[1].parent, 0);
  assert_true(fabs(r.req[1].t_s - (r.req[0].t_s + 4 / 2.0)) < 1e-12); /* offset / speedup */
  assert_true(fabs(r.req[1].delay_s - 1.5) < 1e-12);
  assert_int_equal(r.req[0].out_tokens, 100);
  assert_int_equal(r.req[1].in_tokens, 600);
  assert_int_equal(r.req[1].nblk, 2); /* 600 tokens: still 2 blocks of 512 */
  assert_int_equal(r.blocks[r.req[1].blk_off], t.blocks[t.req[2].blk_off]);
  tb_trace_free(&r);
  /* the whole trace: a turn whose root is out stays out; the request cap */
  struct tb_traceplay_opts all = { .max_requests = 3 };
  assert_int_equal(tb_traceplay_window(&t, &all, &r), 3);
  assert_int_equal(r.req[2].parent, 1);
  tb_trace_free(&r);
  struct tb_traceplay_opts late = { .start_s = 20 };
  assert_int_equal(tb_traceplay_window(&t, &late, &r), 1); /* session 3; session 1's turn is out */
  assert_true(fabs(r.req[0].t_s - 10) < 1e-12);
  tb_trace_free(&r);
  tb_trace_free(&t);
  /* a trace without blocks (Azure) */
  assert_int_equal(
    parse("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,4,5\n", TB_TRACE_AZURE, &t, err), 0);
  assert_int_equal(tb_traceplay_window(&t, &all, &r), 2);
  assert_int_equal(r.nblocks, 0);
  tb_trace_free(&r);
  struct tb_traceplay_opts none = { .start_s = 1000 };
  assert_int_equal(tb_traceplay_window(&t, &none, &r), 0);
  tb_trace_free(&r);
  tb_trace_free(&t);
}

static char *
read_fixture(const char *file, size_t *n)
{
  char path[256];
  snprintf(path, sizeof path, "tests/fixtures/traces/%s", file);
  FILE *fp = fopen(path, "rb");
  if (fp == NULL)
    fail_msg("cannot open %s", path);
  char *buf = malloc(4 << 20);
  *n = fread(buf, 1, 4 << 20, fp);
  fclose(fp);
  return buf;
}

/* Equal block ids are equal words, unequal differ, another seed shares
 * nothing; the count is the input's. */
static void
test_text(void **state)
{
  (void)state;
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  assert_int_equal(parse(MOONCAKE, TB_TRACE_MOONCAKE, &t, err), 0);
  int64_t w0, w1, w2;
  char *a = tb_traceplay_text(&t, 0, 7, 1 << 20, &w0);
  char *b = tb_traceplay_text(&t, 1, 7, 1 << 20, &w1);
  char *c = tb_traceplay_text(&t, 0, 8, 1 << 20, &w2);
  assert_int_equal(w0, 6755);
  assert_int_equal(w1, 7319);
  assert_int_equal(sim_tok_count(a, strlen(a)), 6755); /* a word a token on the sim */
  assert_int_equal(sim_tok_count(b, strlen(b)), 7319);
  /* block 0 is shared: the first 512 words agree, the 513th differs */
  const char *pa = a, *pb = b;
  for (int k = 0; k < 512; k++) {
    const char *ea = strchr(pa, ' '), *eb = strchr(pb, ' ');
    assert_int_equal(ea - pa, eb - pb);
    assert_memory_equal(pa, pb, (size_t)(ea - pa));
    pa = ea + 1;
    pb = eb + 1;
  }
  assert_true(strncmp(pa, pb, 40) != 0);
  assert_true(strncmp(a, c, 40) != 0); /* another run's seed */
  char *cut = tb_traceplay_text(&t, 1, 7, 100, &w1);
  assert_int_equal(w1, 100);
  assert_memory_equal(cut, b, strlen(cut));
  free(a);
  free(b);
  free(c);
  free(cut);
  tb_trace_free(&t);
}

/* The simulator's block cache (16-token blocks, vLLM's) fed the chat
 * requests of a fixture's texts, in the trace's order, hits what the trace
 * implies, within 2 points. */
static void
sim_hit(const char *file, enum tb_trace_format f)
{
  size_t n;
  char *buf = read_fixture(file, &n);
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  if (tb_trace_parse(buf, n, f, &t, err, sizeof err) != 0)
    fail_msg("%s: %s", file, err);
  free(buf);
  struct sim_cache *c = sim_cache_new(1 << 20);
  const int64_t bs = 16;
  double hit = 0, all = 0;
  int32_t *ids = NULL;
  uint64_t *chain = NULL;
  size_t cap = 0, chcap = 0;
  for (size_t i = 0; i < t.n; i++) {
    int64_t w;
    char *text = tb_traceplay_text(&t, i, 25, 1 << 22, &w);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", text);
    size_t len = 0;
    const char *e = NULL;
    assert_true(sim_tok_chat(msgs, true, NULL, &ids, &len, &cap, &e) > 0);
    if (len / (size_t)bs + 1 > chcap) {
      chcap = len / (size_t)bs + 1;
      chain = realloc(chain, chcap * sizeof *chain);
    }
    size_t nb = sim_cache_chain(ids, len, bs, chain, chcap);
    hit += (double)sim_cache_match(c, chain, nb) * (double)bs;
    all += (double)len;
    sim_cache_insert(c, chain, nb);
    json_decref(msgs);
    free(text);
  }
  struct tb_tracesum s;
  tb_tracesum_of(&t, &s);
  print_message("%-24s implied %.4f, the sim's cache %.4f\n", file, s.implied_hit_rate, hit / all);
  if (fabs(hit / all - s.implied_hit_rate) > 0.02)
    fail_msg("%s: the sim's cache hits %.4f, the trace implies %.4f", file, hit / all,
             s.implied_hit_rate);
  free(ids);
  free(chain);
  sim_cache_free(c);
  tb_trace_free(&t);
}

static void
test_text_hits_on_sim(void **state)
{
  (void)state;
  sim_hit("mooncake.jsonl", TB_TRACE_MOONCAKE);
  sim_hit("mooncake-sessions.jsonl", TB_TRACE_MOONCAKE);
  sim_hit("bailian.jsonl", TB_TRACE_BAILIAN);
  sim_hit("weka.json", TB_TRACE_WEKA);
  sim_hit("azure2023.csv", TB_TRACE_AZURE);
}

/* What the service stores and shows of a trace (issue 25, part 4): the
 * SHA-256 of the bytes as given (so a gzip and its plain text differ), kept
 * by a replay with the id its loader set, and the summary as JSON, member
 * for member the struct's. */
static void
test_sha256_and_summary_json(void **state)
{
  (void)state;
  struct tb_trace t, r;
  char err[TB_TRACE_ERR_MAX], want[65];
  assert_int_equal(parse(MOONCAKE, TB_TRACE_MOONCAKE, &t, err), 0);
  tb_crypto_sha256_hex(MOONCAKE, strlen(MOONCAKE), want);
  assert_string_equal(t.sha256, want);
  assert_string_equal(t.id, "");
  snprintf(t.id, sizeof t.id, "%s", "0b6c1d7e-1111-4222-8333-944455556666");
  struct tb_traceplay_opts o = { .max_requests = 2 };
  assert_int_equal(tb_traceplay_window(&t, &o, &r), 2);
  assert_string_equal(r.sha256, want);
  assert_string_equal(r.id, t.id);
  tb_trace_free(&r);
  struct tb_tracesum s;
  tb_tracesum_of(&t, &s);
  json_t *j = tb_tracesum_json(&s);
  assert_int_equal(json_integer_value(json_object_get(j, "requests")), 4);
  assert_int_equal(json_integer_value(json_object_get(j, "sessions")), 0);
  assert_int_equal(json_integer_value(json_object_get(j, "blocks")), 49);
  assert_int_equal(json_integer_value(json_object_get(j, "unique_blocks")), 46);
  assert_int_equal(json_integer_value(json_object_get(j, "block_tokens")), 512);
  assert_true(fabs(json_real_value(json_object_get(j, "span_s")) - 3.052) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(j, "rate_rps")) - 4 / 3.052) < 1e-9);
  assert_true(
    fabs(json_real_value(json_object_get(j, "implied_hit_pct")) - 100.0 * 1536.0 / 23595.0) < 1e-9);
  json_t *in = json_object_get(j, "input_tokens"), *out = json_object_get(j, "output_tokens");
  assert_true(fabs(json_real_value(json_object_get(in, "max")) - 7319) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(in, "p50")) - 6755) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(out, "mean")) - 525) < 1e-9);
  assert_int_equal(json_object_size(in), 5);
  json_decref(j);
  tb_trace_free(&t);
  /* a failed read leaves no digest */
  assert_int_equal(parse("{\"timestamp\": 0}\n", TB_TRACE_MOONCAKE, &t, err), -1);
  assert_string_equal(t.sha256, "");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_formats),
    cmocka_unit_test(test_mooncake),
    cmocka_unit_test(test_mooncake_sessions),
    cmocka_unit_test(test_mooncake_errors),
    cmocka_unit_test(test_azure),
    cmocka_unit_test(test_burstgpt),
    cmocka_unit_test(test_bailian),
    cmocka_unit_test(test_weka),
    cmocka_unit_test(test_gzip),
    cmocka_unit_test(test_gzip_cap),
    cmocka_unit_test(test_caps),
    cmocka_unit_test(test_tree_caps),
    cmocka_unit_test(test_memory_cap),
    cmocka_unit_test(test_fixtures),
    cmocka_unit_test(test_text),
    cmocka_unit_test(test_text_hits_on_sim),
    cmocka_unit_test(test_replay),
    cmocka_unit_test(test_sha256_and_summary_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
