/* Unit tests: every parser over every conformance fixture in
 * tests/fixtures/servers/<engine>-<version>/ (tb_discover's models, server
 * info, props, info, version and metrics parsers, the load gauges, and the
 * stream transcripts through tb_sse and both tb_oai readers).  Discovery is
 * replayed in tb_discover_run's order, and what it makes of each directory
 * (engine, version, KV budget, max running requests, max length, the
 * surface each came from, or why it is unknown) is held to the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tb_discover.h"
#include "net/tb_oai.h"
#include "net/tb_prom.h"
#include "net/tb_sse.h"

#define DIR "tests/fixtures/servers/"

/* The whole file, NUL-terminated, or NULL when it does not exist. */
static char *
slurp(const char *dir, const char *name, size_t *len)
{
  char path[256];
  snprintf(path, sizeof path, DIR "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n - 1 == 0) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* What discovery must make of one directory. */
struct expect {
  const char *dir;
  enum tb_engine_kind kind;
  const char *model, *version, *version_source;
  int64_t kv;
  const char *kv_source; /* or, when kv < 0, the reason */
  int64_t running;
  const char *running_source; /* or the reason */
  int64_t max_len;
  const char *max_len_source;
  bool metrics; /* the engine's load gauges are there */
  double load_running, load_waiting;
};

#define CCI "vllm:cache_config_info "
#define NOSEQS "vLLM does not publish --max-num-seqs"
#define V1M "/v1/models max_model_len"
#define SGSI "sglang /get_server_info "

static const struct expect expects[] = {
  { "vllm-0.7", TB_KIND_VLLM, "meta-llama/Llama-3.1-8B-Instruct", "0.7.3", "vllm /version",
    81767 * 16, CCI "num_gpu_blocks x block_size", -1, NOSEQS, 131072, V1M, true, 3, 1 },
  { "vllm-0.8", TB_KIND_VLLM, "Qwen/Qwen3-32B", "0.8.5.post1", "vllm /version", -1,
    CCI "num_gpu_blocks=\"None\"", -1, NOSEQS, 40960, V1M, true, 2, 0 },
  { "vllm-0.10", TB_KIND_VLLM, "Qwen/Qwen3-32B", "0.10.1.1", "vllm /version", 57344 * 16,
    CCI "num_gpu_blocks x block_size", -1, NOSEQS, 40960, V1M, true, 4, 2 },
  /* two engines (data parallel): two KV caches */
  { "vllm-0.11", TB_KIND_VLLM, "Qwen/Qwen3-32B", "0.11.0", "vllm /version", 2 * 32768 * 16,
    CCI "num_gpu_blocks x block_size", -1, NOSEQS, 40960, V1M, true, 3, 1 },
  /* kv_cache_size_tokens, not 7168 x 16 = 114,688 */
  { "vllm-2026", TB_KIND_VLLM, "stepfun-ai/Step-3.7-Flash-FP8", "0.26.1rc1.dev638", "vllm /version",
    917504, CCI "kv_cache_size_tokens", -1, NOSEQS, 262144, V1M, true, 0, 0 },
  { "sglang-0.3", TB_KIND_SGLANG, "google/gemma-2-9b-it", NULL, "none", 161721,
    "sglang:max_total_num_tokens (/metrics)", 4097, "sglang:max_running_requests (/metrics)", 8192,
    "sglang:context_len (/metrics)", true, 5, 2 },
  { "sglang-0.4", TB_KIND_SGLANG, "meta-llama/Llama-3.1-8B-Instruct", "0.4.6.post5", SGSI "version",
    428176, SGSI "max_total_num_tokens", 512, SGSI "max_running_requests", 131072, V1M, true, 6,
    3 },
  /* max_running_requests null: 128 per DP rank x dp_size 2 */
  { "sglang-0.5", TB_KIND_SGLANG, "qwen/qwen2.5-0.5b-instruct", "0.5.4.post1", SGSI "version",
    20480, SGSI "max_total_num_tokens", 256,
    SGSI "internal_states effective_max_running_requests_per_dp x dp_size", 32768, V1M, true, 7,
    1 },
  { "llamacpp", TB_KIND_LLAMACPP, "Qwen3-8B-Q4_K_M.gguf", "b6915-2a2bd1f0",
    "llama.cpp /props build_info", -1,
    "llama.cpp publishes no KV budget (each of total_slots slots holds n_ctx tokens)", 4,
    "llama.cpp /props total_slots", 16384, "llama.cpp /props default_generation_settings.n_ctx",
    true, 3, 2 },
  /* captured from the live server of make real-engine: 16384 over 4 slots */
  { "llamacpp-b11669", TB_KIND_LLAMACPP, "/srv/tokbench/tiny.gguf", "b11669-Debian",
    "llama.cpp /props build_info", -1,
    "llama.cpp publishes no KV budget (each of total_slots slots holds n_ctx tokens)", 4,
    "llama.cpp /props total_slots", 4096, "llama.cpp /props default_generation_settings.n_ctx",
    true, 4, 2 },
  { "tgi-2.2", TB_KIND_TGI, "meta-llama/Meta-Llama-3-8B-Instruct", "2.2.0", "tgi /info version",
    262144, "tgi /info max_batch_total_tokens", -1,
    "tgi /info max_batch_size null (max_concurrent_requests limits admission, not running "
    "requests)",
    4096, "tgi /info max_total_tokens", true, 6, 2 },
  { "tgi-3.3", TB_KIND_TGI, "meta-llama/Meta-Llama-3-8B-Instruct", "3.3.6", "tgi /info version", -1,
    "tgi /info has no max_batch_total_tokens (TGI >= 2.3)", -1,
    "tgi /info max_batch_size null (max_concurrent_requests limits admission, not running "
    "requests)",
    8192, "tgi /info max_total_tokens", true, 6, 2 },
  { "gateway", TB_KIND_OPENAI, "gpt-4o-mini", NULL, "none", -1,
    "no capacity interface (generic OpenAI-compatible server)", -1,
    "no capacity interface (generic OpenAI-compatible server)", -1, "none", false, 0, 0 },
};

/* Replays tb_discover_run over a directory's files. */
static void
discover_dir(const char *dir, struct tb_discover *d)
{
  tb_discover_init(d, "http://fixture");
  size_t len;
  char *err = NULL;
  char *body = slurp(dir, "models.json", &len);
  assert_non_null(body);
  assert_true(tb_discover_parse_models(d, body, len, NULL, &err));
  free(body);
  static const struct {
    const char *file;
    bool (*parse)(struct tb_discover *, const char *, size_t);
  } probes[] = {
    { "server_info.json", tb_discover_parse_server_info },
    { "props.json", tb_discover_parse_props },
    { "info.json", tb_discover_parse_info },
    { "version.json", tb_discover_parse_version },
  };
  for (size_t i = 0; i < sizeof probes / sizeof probes[0] && d->kind == TB_KIND_OPENAI; i++) {
    body = slurp(dir, probes[i].file, &len);
    if (body != NULL)
      assert_true(probes[i].parse(d, body, len));
    free(body);
  }
  body = slurp(dir, "metrics.txt", &len);
  assert_non_null(body);
  tb_discover_parse_metrics(d, body, len);
  free(body);
  tb_discover_finish(d);
}

static void
test_discovery(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof expects / sizeof expects[0]; i++) {
    const struct expect *e = &expects[i];
    struct tb_discover d;
    print_message("%s\n", e->dir);
    discover_dir(e->dir, &d);
    assert_int_equal(d.kind, e->kind);
    assert_string_equal(d.model, e->model);
    if (e->version == NULL)
      assert_null(d.version);
    else
      assert_string_equal(d.version, e->version);
    assert_string_equal(d.version_source, e->version_source);
    assert_int_equal(d.kv_budget, e->kv);
    assert_string_equal(e->kv > 0 ? d.kv_source : d.kv_unknown, e->kv_source);
    if (e->kv < 0)
      assert_string_equal(d.kv_source, "none");
    assert_int_equal(d.max_running, e->running);
    assert_string_equal(e->running > 0 ? d.max_running_source : d.max_running_unknown,
                        e->running_source);
    assert_int_equal(d.max_model_len, e->max_len);
    assert_string_equal(d.max_model_len_source, e->max_len_source);
    assert_int_equal(d.has_metrics, e->metrics);
    /* the probe document and the result's provenance say the same */
    json_t *j = tb_discover_to_json(&d);
    assert_string_equal(json_string_value(json_object_get(j, "kv_budget_source")), d.kv_source);
    const json_t *unk = json_object_get(j, "unknown");
    assert_int_equal(json_object_get(unk, "kv_budget_tokens") != NULL, e->kv < 0);
    assert_int_equal(json_object_get(unk, "max_running_requests") != NULL, e->running < 0);
    assert_int_equal(json_object_get(unk, "max_model_len") != NULL, e->max_len < 0);
    json_decref(j);
    /* the load gauges the engine samples during a cell */
    size_t len;
    char *m = slurp(e->dir, "metrics.txt", &len);
    double run = -1, wait = -1;
    bool has = tb_discover_parse_load(d.kind, m, len, &run, &wait);
    assert_int_equal(has, e->metrics);
    if (has) {
      assert_true(run == e->load_running);
      assert_true(wait == e->load_waiting);
    }
    free(m);
    /* SGLang keeps the text tokenizer, vLLM the chat one, others none */
    assert_int_equal(d.has_tokenize, d.kind == TB_KIND_VLLM);
    assert_int_equal(d.tokenize_text_only, d.kind == TB_KIND_SGLANG);
    tb_discover_free(&d);
  }
}

/* llama.cpp's router mode lists several models; meta may be null. */
static void
test_llamacpp_router(void **state)
{
  (void)state;
  size_t len;
  char *body = slurp("llamacpp", "models_router.json", &len);
  assert_non_null(body);
  struct tb_discover d;
  tb_discover_init(&d, "http://fixture");
  char *err = NULL;
  assert_true(tb_discover_parse_models(&d, body, len, NULL, &err));
  assert_string_equal(d.model, "gemma-3-4b");
  assert_true(tb_discover_parse_models(&d, body, len, "Qwen3-8B-Q4_K_M.gguf", &err));
  assert_string_equal(d.model, "Qwen3-8B-Q4_K_M.gguf");
  assert_int_equal(d.max_model_len, -1); /* n_ctx_train is not the server's */
  tb_discover_free(&d);
  free(body);
}

/* A server whose /version looks like vLLM's but whose metrics are another
 * engine's is that engine. */
static void
test_version_is_weak(void **state)
{
  (void)state;
  struct tb_discover d;
  tb_discover_init(&d, "http://h");
  const char *v = "{\"version\":\"0.3.6\"}";
  assert_true(tb_discover_parse_version(&d, v, strlen(v)));
  assert_int_equal(d.kind, TB_KIND_VLLM);
  size_t len;
  char *m = slurp("sglang-0.3", "metrics.txt", &len);
  tb_discover_parse_metrics(&d, m, len);
  tb_discover_finish(&d);
  assert_int_equal(d.kind, TB_KIND_SGLANG);
  assert_string_equal(d.version_source, "/version");
  assert_int_equal(d.kv_budget, 161721);
  assert_false(d.has_tokenize);
  free(m);
  tb_discover_free(&d);
}

/* What a stream transcript must give. */
struct stream_expect {
  const char *dir, *file;
  unsigned chunks;      /* JSON events */
  unsigned text_chunks; /* events carrying output */
  unsigned role_only;
  size_t text_bytes, reasoning_bytes;
  int64_t completion_tokens; /* last cumulative usage, -1: none */
  bool error;
};

static const struct stream_expect streams[] = {
  { "vllm-0.7", "stream.txt", 5, 3, 1, 8, 5, 3, false },
  { "vllm-0.8", "stream.txt", 5, 3, 1, 13, 10, 3, false },
  /* reasoning and reasoning_content carry the same text: counted once */
  { "vllm-0.10", "stream.txt", 4, 2, 1, 5, 3, 2, false },
  { "vllm-0.11", "stream.txt", 4, 2, 1, 5, 3, 2, false },
  { "vllm-2026", "stream.txt", 5, 3, 1, 10, 6, 3, false },
  { "sglang-0.3", "stream.txt", 4, 2, 1, 11, 0, 2, false },
  { "sglang-0.4", "stream.txt", 4, 2, 1, 3, 0, 2, false },
  { "sglang-0.5", "stream.txt", 4, 2, 1, 5, 2, 2, false },
  { "llamacpp", "stream.txt", 4, 2, 1, 6, 3, 2, false },
  /* the role chunk, 3 tokens, the finish, the usage chunk */
  { "llamacpp-b11669", "stream.txt", 6, 3, 1, 20, 0, 3, false },
  { "tgi-2.2", "stream.txt", 3, 3, 0, 12, 0, 3, false },
  { "tgi-2.2", "stream_error.txt", 2, 1, 0, 2, 0, -1, true },
  { "tgi-3.3", "stream.txt", 3, 2, 0, 6, 0, 2, false },
  { "tgi-3.3", "stream_error.txt", 1, 0, 0, 0, 0, -1, true },
  { "gateway", "stream.txt", 4, 2, 1, 7, 0, -1, false },
};

struct tally {
  unsigned chunks, text_chunks, role_only, done, malformed, comments;
  size_t text_bytes, reasoning_bytes;
  int64_t completion_tokens;
  bool error;
};

static bool
on_event(void *cls, const char *data, size_t len)
{
  struct tally *t = cls;
  struct tb_oai_chunk a, b;
  enum tb_oai_status sa = tb_oai_parse_chunk(data, len, &a);
  enum tb_oai_status sb = tb_oai_parse_chunk_json(data, len, &b);
  assert_int_equal(sa, sb); /* the scanner and the reference agree */
  if (sa == TB_OAI_DONE) {
    t->done++;
    return true;
  }
  if (sa != TB_OAI_OK) {
    t->malformed++;
    return true;
  }
  assert_int_equal(a.text_bytes, b.text_bytes);
  assert_int_equal(a.reasoning_bytes, b.reasoning_bytes);
  assert_int_equal(a.completion_tokens, b.completion_tokens);
  assert_int_equal(a.is_error, b.is_error);
  t->chunks++;
  t->text_chunks += a.text_choices > 0;
  t->role_only += a.role_only;
  t->text_bytes += a.text_bytes;
  t->reasoning_bytes += a.reasoning_bytes;
  if (a.completion_tokens >= 0)
    t->completion_tokens = a.completion_tokens;
  t->error |= a.is_error;
  return true;
}

static void
on_comment(void *cls, const char *text, size_t len)
{
  (void)text;
  (void)len;
  ((struct tally *)cls)->comments++;
}

/* Feeds a transcript in pieces of `step` bytes (events span reads). */
static void
replay(const char *body, size_t len, size_t step, struct tally *t)
{
  memset(t, 0, sizeof *t);
  t->completion_tokens = -1;
  struct tb_sse p;
  tb_sse_init(&p, on_event, on_comment, t);
  for (size_t off = 0; off < len; off += step) {
    size_t n = len - off < step ? len - off : step;
    assert_int_equal(tb_sse_feed(&p, body + off, n), TB_SSE_OK);
  }
  assert_true(tb_sse_idle(&p));
  tb_sse_free(&p);
}

static void
test_streams(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++) {
    const struct stream_expect *e = &streams[i];
    print_message("%s/%s\n", e->dir, e->file);
    size_t len;
    char *body = slurp(e->dir, e->file, &len);
    assert_non_null(body);
    static const size_t steps[] = { 1, 7, 1 << 20 };
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
      struct tally t;
      replay(body, len, steps[s], &t);
      assert_int_equal(t.malformed, 0);
      assert_int_equal(t.chunks, e->chunks);
      assert_int_equal(t.text_chunks, e->text_chunks);
      assert_int_equal(t.role_only, e->role_only);
      assert_int_equal(t.text_bytes, e->text_bytes);
      assert_int_equal(t.reasoning_bytes, e->reasoning_bytes);
      assert_int_equal(t.completion_tokens, e->completion_tokens);
      assert_int_equal(t.error, e->error);
      assert_int_equal(t.done, e->error ? 0 : 1);
      if (strcmp(e->dir, "gateway") == 0)
        assert_int_equal(t.comments, 3); /* ": ping", ":", ": ping - ..." */
    }
    free(body);
  }
}

/* Every fixture through every parser: whatever the file, no parser
 * crashes or reads past it (the fuzz corpora start from these). */
static void
test_every_parser_on_every_file(void **state)
{
  (void)state;
  static const char *const files[] = { "models.json", "models_router.json", "server_info.json",
                                       "props.json",  "info.json",          "version.json",
                                       "metrics.txt", "stream.txt",         "stream_error.txt",
                                       "slots.json",  "completion.json" };
  for (size_t i = 0; i < sizeof expects / sizeof expects[0]; i++) {
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
      size_t len;
      char *body = slurp(expects[i].dir, files[f], &len);
      if (body == NULL)
        continue;
      struct tb_discover d;
      tb_discover_init(&d, "http://x");
      char *err = NULL;
      if (!tb_discover_parse_models(&d, body, len, NULL, &err))
        free(err);
      (void)tb_discover_parse_server_info(&d, body, len);
      (void)tb_discover_parse_props(&d, body, len);
      (void)tb_discover_parse_info(&d, body, len);
      (void)tb_discover_parse_version(&d, body, len);
      tb_discover_parse_metrics(&d, body, len);
      tb_discover_finish(&d);
      json_t *j = tb_discover_to_json(&d);
      json_decref(j);
      tb_discover_free(&d);
      double r, w;
      for (int k = TB_KIND_OPENAI; k <= TB_KIND_TGI; k++)
        if (tb_discover_parse_load((enum tb_engine_kind)k, body, len, &r, &w))
          assert_true(r >= 0);
      struct tb_oai_chunk c;
      if (tb_oai_parse_chunk(body, len, &c) == TB_OAI_OK)
        assert_true(c.n_choices <= 2);
      free(body);
    }
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_discovery),
    cmocka_unit_test(test_llamacpp_router),
    cmocka_unit_test(test_version_is_weak),
    cmocka_unit_test(test_streams),
    cmocka_unit_test(test_every_parser_on_every_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
