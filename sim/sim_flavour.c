/*
 * sim_flavour: see sim_flavour.h.  The shapes below are written after the
 * conformance fixtures of tests/fixtures/servers/ (each directory's
 * SOURCES.md names the engine's code or documentation they come from);
 * tests/integration/test_flavours.py holds each flavour's answers to the
 * fixture's key structure.
 */
#include "sim_flavour.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sim_out.h"
#include "sim_tok.h"

/* llama.cpp b11669's model type and default sampling parameters (/props,
 * and each busy slot of /slots), as tests/fixtures/servers/llamacpp-b11669/
 * has them; nothing here samples. */
#define LLAMA_FTYPE "Q4_K - Medium"
static const char llama_params[] =
  "{\"seed\":4294967295,\"temperature\":0.8,\"dynatemp_range\":0.0,\"dynatemp_exponent\":1.0,"
  "\"top_k\":40,\"top_p\":0.95,\"min_p\":0.05,\"top_n_sigma\":-1.0,\"xtc_probability\":0.0,"
  "\"xtc_threshold\":0.1,\"typical_p\":1.0,\"repeat_last_n\":64,\"repeat_penalty\":1.0,"
  "\"presence_penalty\":0.0,\"frequency_penalty\":0.0,\"dry_multiplier\":0.0,\"dry_base\":1.75,"
  "\"dry_allowed_length\":2,\"dry_penalty_last_n\":64,\"mirostat\":0,\"mirostat_tau\":5.0,"
  "\"mirostat_eta\":0.1,\"adaptive_target\":-1.0,\"adaptive_decay\":0.9,\"max_tokens\":-1,"
  "\"n_predict\":-1,\"n_keep\":0,\"n_discard\":0,\"ignore_eos\":false,\"stream\":false,"
  "\"n_probs\":0,\"min_keep\":0,\"chat_format\":\"Content-only\",\"reasoning_format\":\"none\","
  "\"reasoning_in_content\":false,\"generation_prompt\":\"\",\"samplers\":[\"penalties\",\"dry\","
  "\"top_n_sigma\",\"top_k\",\"typ_p\",\"top_p\",\"min_p\",\"xtc\",\"temperature\"],"
  "\"speculative.types\":\"none\",\"timings_per_token\":false,\"post_sampling_probs\":false,"
  "\"backend_sampling\":false,\"lora\":[]}";

/* ------------------------------------------------------------------ */
/* the table */

#define VLLM(n, r, v, rsn)                                                           \
  {                                                                                  \
    .name = n, .family = SIM_FLAVOUR_VLLM, .rev = r, .version = v, .reasoning = rsn, \
    .cont_usage = true, .role_chunk = true                                           \
  }
#define SGLANG(n, r, v, cont)                                                \
  {                                                                          \
    .name = n, .family = SIM_FLAVOUR_SGLANG, .rev = r, .version = v,         \
    .reasoning = "reasoning_content", .cont_usage = cont, .role_chunk = true \
  }
#define TGI(n, r, v)                                              \
  {                                                               \
    .name = n, .family = SIM_FLAVOUR_TGI, .rev = r, .version = v, \
    .reasoning = "reasoning_content", .data_nospace = true        \
  }

static const struct sim_dialect dialects[] = {
  VLLM("vllm-0.7", 7, "0.7.3", "reasoning_content"),
  VLLM("vllm-0.8", 8, "0.8.5.post1", "reasoning_content"),
  VLLM("vllm-0.10", 10, "0.10.1.1", "both"),
  VLLM("vllm-0.11", 11, "0.11.0", "both"),
  VLLM("vllm-2026", 2026, "0.26.1rc1.dev638", "reasoning"),
  SGLANG("sglang-0.3", 3, NULL, false),
  SGLANG("sglang-0.4", 4, "0.4.6.post5", true),
  SGLANG("sglang-0.5", 5, "0.5.4.post1", true),
  { .name = "llamacpp-b6915",
    .family = SIM_FLAVOUR_LLAMACPP,
    .rev = 6915,
    .version = "b6915-2a2bd1f0",
    .reasoning = "reasoning_content",
    .role_chunk = true,
    .finish_chunk = true },
  { .name = "llamacpp-b11669",
    .family = SIM_FLAVOUR_LLAMACPP,
    .rev = SIM_LLAMA_B11669,
    .version = "b11669-Debian",
    .reasoning = "reasoning_content",
    .role_chunk = true,
    .finish_chunk = true },
  TGI("tgi-2.2", 22, "2.2.0"),
  TGI("tgi-3.3", 33, "3.3.6"),
  { .name = "gateway",
    .family = SIM_FLAVOUR_GATEWAY,
    .reasoning = "reasoning_content",
    .crlf = true,
    .pings = true,
    .role_chunk = true,
    .finish_chunk = true },
  { .name = "openai",
    .family = SIM_FLAVOUR_OPENAI,
    .reasoning = "reasoning_content",
    .cont_usage = true,
    .role_chunk = true },
};

/* Names kept from before the versioned flavours; vllm and sglang report the
 * profile's version (the seed profiles carry their servers'). */
static const struct {
  const char *alias, *name;
  bool profile_version;
} aliases[] = {
  { "vllm", "vllm-2026", true },
  { "sglang", "sglang-0.4", true },
  { "tgi", "tgi-3.3", false },
  { "llamacpp", "llamacpp-b11669", false },
  { "llama.cpp", "llamacpp-b11669", false },
  { "llama-server", "llamacpp-b11669", false },
};

const struct sim_dialect *
sim_flavour_find(const char *str, bool *profile_version)
{
  *profile_version = false;
  for (size_t i = 0; i < TB_ARRAY_LEN(aliases); i++)
    if (strcmp(str, aliases[i].alias) == 0) {
      str = aliases[i].name;
      *profile_version = aliases[i].profile_version;
      break;
    }
  for (size_t i = 0; i < TB_ARRAY_LEN(dialects); i++)
    if (strcmp(str, dialects[i].name) == 0)
      return &dialects[i];
  return NULL;
}

const char *
sim_flavour_names(void)
{
  return "vllm-0.7, vllm-0.8, vllm-0.10, vllm-0.11, vllm-2026, sglang-0.3, sglang-0.4, "
         "sglang-0.5, llamacpp-b6915, llamacpp-b11669, tgi-2.2, tgi-3.3, gateway, openai; "
         "aliases: vllm (vllm-2026), sglang (sglang-0.4), tgi (tgi-3.3), llamacpp, "
         "llama.cpp and llama-server (llamacpp-b11669)";
}

int
sim_flavour_dp(const struct server *s)
{
  return s->p->max_running % 2 == 0 && s->p->max_running >= 2 ? 2 : 1;
}

/* ------------------------------------------------------------------ */
/* documents */

static int
rev(const struct server *s)
{
  return s->cfg->dialect->rev;
}

/* llama.cpp b11669's additions to its model card: aliases, tags, the
 * modalities, and meta.n_ctx (a slot's context, as /props says) and
 * meta.ftype. */
static void
llama_card(const struct server *s, json_t *m)
{
  json_t *meta = json_object_get(m, "meta");
  json_object_set_new(meta, "n_ctx", json_integer(s->p->max_model_len));
  json_object_set_new(meta, "ftype", json_string(LLAMA_FTYPE));
  json_object_set_new(m, "aliases", json_pack("[s]", s->p->model));
  json_object_set_new(m, "tags", json_array());
  json_object_set_new(
    m, "architecture",
    json_pack("{s:[s], s:[s]}", "input_modalities", "text", "output_modalities", "text"));
}

json_t *
sim_flavour_models(const struct server *s)
{
  json_t *doc = json_pack("{s:s, s:[o]}", "object", "list", "data", sim_flavour_model_card(s));
  if (!llama_new(s))
    return doc;
  /* b11669 lists its model a second time, as ollama's /api/tags does */
  json_object_set_new(doc, "models",
                      json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[s], s:[s], s:s, "
                                "s:{s:s, s:s, s:s, s:[s], s:s, s:s}}]",
                                "name", s->p->model, "model", s->p->model, "modified_at", "",
                                "size", "", "digest", "", "type", "model", "description", "",
                                "tags", "", "capabilities", "completion", "parameters", "",
                                "details", "parent_model", "", "format", "gguf", "family", "",
                                "families", "", "parameter_size", "", "quantization_level", ""));
  return doc;
}

json_t *
sim_flavour_model_card(const struct server *s)
{
  const struct sim_dialect *d = s->cfg->dialect;
  json_int_t now = (json_int_t)(tb_time_real_us() / 1000000);
  const char *owner = d->family == SIM_FLAVOUR_VLLM       ? "vllm"
                      : d->family == SIM_FLAVOUR_SGLANG   ? "sglang"
                      : d->family == SIM_FLAVOUR_LLAMACPP ? "llamacpp"
                      : d->family == SIM_FLAVOUR_TGI      ? s->p->model
                                                          : "system";
  json_t *m = json_pack("{s:s, s:s, s:I, s:s}", "id", s->p->model, "object", "model", "created",
                        now, "owned_by", owner);
  switch (d->family) {
  case SIM_FLAVOUR_VLLM:
    json_object_set_new(m, "root", json_string(s->p->model_root));
    json_object_set_new(m, "parent", json_null());
    json_object_set_new(m, "max_model_len", json_integer(s->p->max_model_len));
    json_object_set_new(
      m, "permission",
      d->rev == 7 ? json_pack("[{s:s, s:s, s:I, s:b, s:b, s:b, s:b, s:b, s:b, "
                              "s:s, s:n, s:b}]",
                              "id", "modelperm-sim", "object", "model_permission", "created", now,
                              "allow_create_engine", 0, "allow_sampling", 1, "allow_logprobs", 1,
                              "allow_search_indices", 0, "allow_view", 1, "allow_fine_tuning", 0,
                              "organization", "*", "group", "is_blocking", 0)
                  : json_array());
    break;
  case SIM_FLAVOUR_SGLANG:
    json_object_set_new(m, "root", json_string(s->p->model_root));
    if (d->rev >= 4) /* 0.3's card had no max_model_len: sglang:context_len has it */
      json_object_set_new(m, "max_model_len", json_integer(s->p->max_model_len));
    break;
  case SIM_FLAVOUR_LLAMACPP:
    /* b6915: the training context only; a slot's context is /props' n_ctx */
    json_object_set_new(m, "meta",
                        json_pack("{s:i, s:i, s:I, s:i, s:I, s:I}", "vocab_type", 2, "n_vocab",
                                  101000, "n_ctx_train", (json_int_t)s->p->max_model_len * 4,
                                  "n_embd", 4096, "n_params", (json_int_t)8190735360LL, "size",
                                  (json_int_t)5027783488LL));
    if (d->rev >= SIM_LLAMA_B11669)
      llama_card(s, m);
    break;
  default: break;
  }
  return m;
}

/* ---- /metrics ---- */

static void
family(struct sim_out *o, const char *name, const char *type, const char *help)
{
  if (help)
    sim_out_printf(o, "# HELP %s %s\n", name, help);
  sim_out_printf(o, "# TYPE %s %s\n", name, type);
}

static double
kv_usage(const struct server *s)
{
  int64_t t = 0;
  for (int i = 0; i < s->batch_n; i++)
    t += s->batch[i]->prompt + s->batch[i]->out;
  return (double)t / (double)s->p->kv_budget;
}

static double
gen_throughput(const struct server *s)
{
  if (s->batch_n == 0)
    return 0;
  double mean = (double)s->batch_prompt_sum / s->batch_n;
  return s->batch_n * 1000.0 * s->cfg->time_scale / sim_profile_step_ms(s->p, s->batch_n, mean);
}

/* Share i of x over n ranks (the ranks sum to x). */
static int64_t
share(int64_t x, int i, int n)
{
  return x / n + (i < x % n ? 1 : 0);
}

/* vLLM 0.10 prints some counters with three exponent digits
 * ("1.372014592e+010", issue 12). */
static void
num_e3(char *buf, size_t cap, double v)
{
  char t[64];
  snprintf(t, sizeof(t), "%.9e", v);
  char *e = strchr(t, 'e');
  if (e && (e[1] == '+' || e[1] == '-') && strlen(e + 2) == 2)
    snprintf(buf, cap, "%.*s%c0%s", (int)(e - t + 1), t, e[1], e + 2);
  else
    snprintf(buf, cap, "%s", t);
}

static void
vllm_cache_config(const struct server *s, struct sim_out *o)
{
  int64_t bs = s->p->block_size, blocks = s->p->kv_budget / bs;
  family(o, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
  switch (rev(s)) {
  case 7: /* V0: no engine or model_name label */
    sim_out_printf(o,
                   "vllm:cache_config_info{block_size=\"%" PRId64 "\",cache_dtype=\"auto\","
                   "calculate_kv_scales=\"False\",cpu_offload_gb=\"0\","
                   "enable_prefix_caching=\"False\",gpu_memory_utilization=\"0.9\","
                   "is_attention_free=\"False\",num_cpu_blocks=\"2048\",num_gpu_blocks=\"%" PRId64
                   "\",num_gpu_blocks_override=\"None\",sliding_window=\"None\","
                   "swap_space_bytes=\"4294967296\"} 1.0\n",
                   bs, blocks);
    break;
  case 8: /* written before the blocks are known: "None" */
  case 10: {
    char nb[32];
    if (rev(s) == 8)
      snprintf(nb, sizeof(nb), "None");
    else
      snprintf(nb, sizeof(nb), "%" PRId64, blocks);
    sim_out_printf(o,
                   "vllm:cache_config_info{block_size=\"%" PRId64 "\",cache_dtype=\"auto\","
                   "calculate_kv_scales=\"False\",cpu_offload_gb=\"0\","
                   "enable_prefix_caching=\"True\",%sgpu_memory_utilization=\"0.9\","
                   "is_attention_free=\"False\",num_cpu_blocks=\"None\","
                   "num_gpu_blocks=\"%s\",num_gpu_blocks_override=\"None\","
                   "prefix_caching_hash_algo=\"builtin\",sliding_window=\"None\","
                   "swap_space=\"4\",swap_space_bytes=\"4294967296\"} 1.0\n",
                   bs, rev(s) == 10 ? "engine=\"0\"," : "", nb);
    break;
  }
  case 11:
    sim_out_printf(o,
                   "vllm:cache_config_info{block_size=\"%" PRId64 "\",cache_dtype=\"auto\","
                   "calculate_kv_scales=\"False\",cpu_kvcache_space_bytes=\"None\","
                   "cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",engine=\"0\","
                   "gpu_memory_utilization=\"0.9\",is_attention_free=\"False\","
                   "kv_sharing_fast_prefill=\"False\",mamba_cache_dtype=\"auto\","
                   "mamba_page_size_padded=\"None\",mamba_ssm_cache_dtype=\"auto\","
                   "num_cpu_blocks=\"None\",num_gpu_blocks=\"%" PRId64 "\","
                   "num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"sha256\","
                   "sliding_window=\"None\",swap_space=\"4\","
                   "swap_space_bytes=\"4294967296\"} 1.0\n",
                   bs, blocks);
    break;
  default: /* 2026: block_size is the smallest over the KV-cache groups (here
            * 8 of them), so blocks x block_size is 8 times below the tokens */
    sim_out_printf(o,
                   "vllm:cache_config_info{block_size=\"%" PRId64 "\",cache_dtype=\"auto\","
                   "enable_prefix_caching=\"True\",engine=\"0\","
                   "gpu_memory_utilization=\"0.9\",kv_cache_max_concurrency=\"%.1f\","
                   "kv_cache_memory_bytes=\"None\",kv_cache_size_tokens=\"%" PRId64 "\","
                   "num_cpu_blocks=\"None\",num_gpu_blocks=\"%" PRId64 "\","
                   "num_gpu_blocks_override=\"None\",sliding_window=\"None\"} 1.0\n",
                   bs, (double)s->p->kv_budget / (double)s->p->max_model_len, s->p->kv_budget,
                   blocks / 8);
    break;
  }
}

/* vLLM's running and waiting gauges are its scheduler's queues as each
 * engine step left them: add_request() puts a request in `waiting`, the
 * next schedule() moves it to `running`, and update_from_output() removes
 * the requests that stopped in the step before make_stats() counts
 * len(self.running) and len(self.waiting) (vllm/v1/core/sched/scheduler.py,
 * read at 00024d3).  So while a batch decodes, a scrape sees the last
 * step's end: the requests that finished in it gone, their clients' next
 * ones not yet there, and with outputs of a few tokens running is short of
 * the clients' concurrency at almost every scrape.  Idle, no step runs and
 * the queues are as they are. */
static void
vllm_gauges(const struct server *s, int *running, int *waiting)
{
  bool stepping = s->batch_n > 0 && s->st.steps > 0;
  *running = stepping ? s->step_running : s->running;
  *waiting = stepping ? s->step_waiting : s->q_n;
}

static void
vllm_metrics(const struct server *s, struct sim_out *o)
{
  char lab[700];
  int r = rev(s);
  if (r == 7)
    snprintf(lab, sizeof(lab), "model_name=%s", s->model_json);
  else
    snprintf(lab, sizeof(lab), "engine=\"0\",model_name=%s", s->model_json);
  double usage = kv_usage(s);
  int running, waiting;
  vllm_gauges(s, &running, &waiting);
  if (r == 7)
    vllm_cache_config(s, o);
  family(o, "vllm:num_requests_running", "gauge",
         r == 7 ? "Number of requests currently running on GPU."
                : "Number of requests in model execution batches.");
  sim_out_printf(o, "vllm:num_requests_running{%s} %d.0\n", lab, running);
  if (r == 7) {
    family(o, "vllm:num_requests_swapped", "gauge", "Number of requests swapped to CPU.");
    sim_out_printf(o, "vllm:num_requests_swapped{%s} 0.0\n", lab);
  }
  family(o, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  sim_out_printf(o, "vllm:num_requests_waiting{%s} %d.0\n", lab, waiting);
  if (r <= 10) {
    family(o, "vllm:gpu_cache_usage_perc", "gauge",
           r == 10 ? "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
                     "vllm:kv_cache_usage_perc instead."
                   : "GPU KV-cache usage. 1 means 100 percent usage.");
    sim_out_printf(o, "vllm:gpu_cache_usage_perc{%s} %.6f\n", lab, usage);
  }
  if (r >= 10) {
    family(o, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
    sim_out_printf(o, "vllm:kv_cache_usage_perc{%s} %.6f\n", lab, usage);
  }
  if (r == 7) { /* a histogram printing _sum before its buckets */
    family(o, "vllm:time_to_first_token_seconds", "histogram",
           "Histogram of time to first token in seconds.");
    sim_out_printf(o,
                   "vllm:time_to_first_token_seconds_sum{%s} 0.0\n"
                   "vllm:time_to_first_token_seconds_bucket{le=\"0.001\",%s} 0.0\n"
                   "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",%s} %" PRIu64 ".0\n"
                   "vllm:time_to_first_token_seconds_count{%s} %" PRIu64 ".0\n",
                   lab, lab, lab, s->st.completed, lab, s->st.completed);
  }
  static const struct {
    const char *name, *help;
  } counters[] = {
    { "prompt_tokens", "Number of prefill tokens processed." },
    { "generation_tokens", "Number of generation tokens processed." },
    { "prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens." },
    { "prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens." },
  };
  uint64_t vals[] = { s->st.prompt_tokens, s->st.tokens_generated, s->st.prefix_hit_tokens,
                      s->st.prefix_query_tokens };
  for (size_t i = 0; i < TB_ARRAY_LEN(counters); i++) {
    if (i >= 2 && r < 10) /* V1's prefix-cache counters, in tokens */
      break;
    char n[64], v[64];
    snprintf(n, sizeof(n), "vllm:%s_total", counters[i].name);
    family(o, n, "counter", counters[i].help);
    if (r == 10)
      num_e3(v, sizeof(v), (double)vals[i]);
    else
      snprintf(v, sizeof(v), "%" PRIu64 ".0", vals[i]);
    sim_out_printf(o, "%s{%s} %s\n", n, lab, v);
    if (r == 10) { /* prometheus_client's companion: the counter's creation time */
      snprintf(n, sizeof(n), "vllm:%s_created", counters[i].name);
      family(o, n, "gauge", counters[i].help);
      sim_out_printf(o, "%s{%s} %.13e\n", n, lab, s->started_real_s);
    }
  }
  if (r == 7) { /* V0: a hit-rate gauge instead of the token counters */
    family(o, "vllm:gpu_prefix_cache_hit_rate", "gauge", "GPU prefix cache block hit rate.");
    sim_out_printf(o, "vllm:gpu_prefix_cache_hit_rate{%s} %.6f\n", lab,
                   s->st.prefix_query_tokens
                     ? (double)s->st.prefix_hit_tokens / (double)s->st.prefix_query_tokens
                     : 0.0);
  }
  /* admission reserves a request's whole KV need: nothing is ever preempted */
  family(o, "vllm:num_preemptions_total", "counter",
         "Cumulative number of preemption from the engine.");
  sim_out_printf(o, "vllm:num_preemptions_total{%s} 0.0\n", lab);
  if (r != 7)
    vllm_cache_config(s, o);
}

static void
sglang_metrics(const struct server *s, struct sim_out *o)
{
  char lab[700];
  int r = rev(s);
  if (r == 3) {
    /* capacity as gauges, label name= */
    snprintf(lab, sizeof(lab), "name=%s", s->model_json);
    const struct {
      const char *name, *help;
      double v;
    } g[] = {
      { "max_total_num_tokens", "Maximum total number of tokens", (double)s->p->kv_budget },
      { "max_prefill_tokens", "Maximum prefill tokens", 16384 },
      { "max_running_requests", "Maximum running requests", (double)s->p->max_running },
      { "context_len", "Context length", (double)s->p->max_model_len },
      { "num_requests_running", "Number of requests currently running on GPU", s->running },
      { "num_requests_waiting", "Number of requests waiting to be processed.", s->q_n },
      { "gen_throughput", "Gen token throughput (token/s)", gen_throughput(s) },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(g); i++) {
      char n[64];
      snprintf(n, sizeof(n), "sglang:%s", g[i].name);
      family(o, n, "gauge", g[i].help);
      sim_out_printf(o, "%s{%s} %.1f\n", n, lab, g[i].v);
    }
    return;
  }
  int dp = r == 5 ? sim_flavour_dp(s) : 1;
  const struct {
    const char *name, *type, *help;
  } f[] = {
    { "num_running_reqs", "gauge", "The number of running requests." },
    { "num_queue_reqs", "gauge", "The number of requests in the waiting queue." },
    { "gen_throughput", "gauge", "The generation throughput (token/s)." },
    { "token_usage", "gauge", "The token usage." },
    { "num_used_tokens", "gauge", "The number of used tokens." },
    { "prompt_tokens_total", "counter", "Number of prefill tokens processed." },
    { "generation_tokens_total", "counter", "Number of generation tokens processed." },
    { "cache_hit_rate", "gauge", "The cache hit rate" },
    { "num_retracted_requests_total", "counter", "Retracted requests." }, /* never: 0 */
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(f); i++) {
    char n[64];
    snprintf(n, sizeof(n), "sglang:%s", f[i].name);
    family(o, n, f[i].type, f[i].help);
    for (int k = 0; k < dp; k++) {
      if (r == 5)
        snprintf(lab, sizeof(lab),
                 "dp_rank=\"%d\",engine_type=\"unified\",model_name=%s,pp_rank=\"0\","
                 "tp_rank=\"0\"",
                 k, s->model_json);
      else
        snprintf(lab, sizeof(lab), "model_name=%s", s->model_json);
      double v;
      switch (i) {
      case 0: v = (double)share(s->running, k, dp); break;
      case 1: v = (double)share(s->q_n, k, dp); break;
      case 2: v = gen_throughput(s) / dp; break;
      case 3: v = kv_usage(s); break;
      case 4: v = kv_usage(s) * (double)s->p->kv_budget / dp; break;
      case 5: v = (double)share((int64_t)s->st.prompt_tokens, k, dp); break;
      case 6: v = (double)share((int64_t)s->st.tokens_generated, k, dp); break;
      case 8: v = 0; break;
      default: /* cached / queried prompt tokens since start */
        v = s->st.prefix_query_tokens
              ? (double)s->st.prefix_hit_tokens / (double)s->st.prefix_query_tokens
              : 0.0;
        break;
      }
      if (i == 2 || i == 3 || i == 7)
        sim_out_printf(o, "%s{%s} %.6g\n", n, lab, v);
      else
        sim_out_printf(o, "%s{%s} %.1f\n", n, lab, v);
    }
  }
}

static void
llamacpp_metrics(const struct server *s, struct sim_out *o)
{
  /* plain integers; requests_processing / _deferred are the load */
  double tps = gen_throughput(s);
  family(o, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.");
  sim_out_printf(o, "llamacpp:prompt_tokens_total %" PRIu64 "\n", s->st.prompt_tokens);
  family(o, "llamacpp:prompt_seconds_total", "counter", "Prompt process time");
  sim_out_printf(o, "llamacpp:prompt_seconds_total %.3f\n", (double)s->st.prompt_tokens / 20000.0);
  family(o, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.");
  sim_out_printf(o, "llamacpp:tokens_predicted_total %" PRIu64 "\n", s->st.tokens_generated);
  family(o, "llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls");
  sim_out_printf(o, "llamacpp:n_decode_total %" PRIu64 "\n", s->st.steps);
  family(o, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.");
  sim_out_printf(o, "llamacpp:prompt_tokens_seconds 20000\n");
  family(o, "llamacpp:predicted_tokens_seconds", "gauge",
         "Average generation throughput in tokens/s.");
  sim_out_printf(o, "llamacpp:predicted_tokens_seconds %.1f\n", tps);
  family(o, "llamacpp:requests_processing", "gauge", "Number of requests processing.");
  sim_out_printf(o, "llamacpp:requests_processing %d\n", s->running);
  family(o, "llamacpp:requests_deferred", "gauge", "Number of requests deferred.");
  sim_out_printf(o, "llamacpp:requests_deferred %d\n", s->q_n);
}

/* b11669: counters as that server adds to them (struct llama_stats):
 * prompts when evaluated, predicted tokens when a request completes; the
 * throughput gauges over the bucket since the last read
 * (sim_flavour_metrics_read empties it). */
static void
llamacpp_b11669_metrics(const struct server *s, struct sim_out *o)
{
  const struct llama_stats *l = &s->st.llama;
  const struct llama_bucket *b = &l->b;
  int64_t ntok = l->n_tokens_max;
  for (int i = 0; i < s->batch_n; i++)
    if (s->batch[i]->prompt + s->batch[i]->out > ntok)
      ntok = s->batch[i]->prompt + s->batch[i]->out;
  const struct {
    const char *name, *type, *help;
    double v;
  } f[] = {
    { "prompt_tokens_total", "counter",
      "Number of prompt tokens processed, excluding cached tokens", (double)l->prompt_n },
    { "prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache",
      (double)l->cached_n },
    { "prompt_seconds_total", "counter", "Total time spent processing prompts",
      l->prompt_ms / 1e3 },
    { "tokens_predicted_total", "counter", "Number of generation tokens processed",
      (double)l->predicted_n },
    { "tokens_predicted_seconds_total", "counter", "Total time spent generating tokens",
      l->predicted_ms / 1e3 },
    { "n_decode_total", "counter",
      "Total number of llama_decode() calls, excluding speculative decoding and multimodal "
      "decoding",
      (double)l->decodes },
    { "n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)",
      (double)ntok },
    { "spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated",
      0 },
    { "spec_decode_num_accepted_tokens_total", "counter",
      "Speculative: Total draft tokens accepted by the target model", 0 },
    { "spec_decode_num_drafts_total", "counter",
      "Speculative: Total speculative decoding verification steps", 0 },
    { "prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s",
      b->prompt_ms > 0 ? 1e3 * (double)b->prompt_n / b->prompt_ms : 0 },
    { "predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s",
      b->predicted_ms > 0 ? 1e3 * (double)b->predicted_n / b->predicted_ms : 0 },
    { "requests_processing", "gauge", "Number of requests processing", s->running },
    { "requests_deferred", "gauge", "Number of requests deferred", s->q_n },
    { "n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call",
      l->decodes ? (double)l->busy / (double)l->decodes : 0 }, /* since start */
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(f); i++) {
    char n[64];
    snprintf(n, sizeof(n), "llamacpp:%s", f[i].name);
    family(o, n, f[i].type, f[i].help);
    sim_out_printf(o, "%s %.6g\n", n, f[i].v);
  }
}

void
sim_flavour_metrics_read(struct server *s)
{
  memset(&s->st.llama.b, 0, sizeof(s->st.llama.b));
}

static void
tgi_metrics(const struct server *s, struct sim_out *o)
{
  /* TYPE lines only, as the router's exporter writes them */
  sim_out_printf(o,
                 "# TYPE tgi_request_count counter\ntgi_request_count %" PRIu64 "\n"
                 "# TYPE tgi_queue_size gauge\ntgi_queue_size %d\n"
                 "# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size %d\n"
                 "# TYPE tgi_batch_current_max_tokens gauge\n"
                 "tgi_batch_current_max_tokens %" PRId64 "\n",
                 s->st.requests, s->q_n, s->running, s->kv_used);
}

static void
gateway_metrics(const struct server *s, struct sim_out *o)
{
  /* the gateway's own families: nothing of the engine behind it */
  family(o, "http_requests_total", "counter", "Total HTTP requests.");
  sim_out_printf(o,
                 "http_requests_total{code=\"200\",method=\"post\","
                 "route=\"/v1/chat/completions\"} %" PRIu64 "\n",
                 s->st.requests);
  family(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  sim_out_printf(o, "process_resident_memory_bytes 8.1e+07\n");
  family(o, "upstream_inflight_requests", "gauge", "Requests in flight to upstreams.");
  sim_out_printf(o, "upstream_inflight_requests %d\n", s->running + s->q_n);
  family(o, "gateway_upstream_up", "gauge", "Whether the upstream answers.");
  sim_out_printf(o, "gateway_upstream_up 1\n");
}

bool
sim_flavour_metrics(const struct server *s, struct sim_out *o)
{
  if (s->cfg->metrics == SIM_METRICS_FOREIGN) {
    gateway_metrics(s, o); /* --metrics foreign: in every flavour */
    return true;
  }
  switch (s->cfg->flavour) {
  case SIM_FLAVOUR_VLLM: vllm_metrics(s, o); return true;
  case SIM_FLAVOUR_SGLANG: sglang_metrics(s, o); return true;
  case SIM_FLAVOUR_LLAMACPP:
    if (rev(s) >= SIM_LLAMA_B11669)
      llamacpp_b11669_metrics(s, o);
    else
      llamacpp_metrics(s, o);
    return true;
  case SIM_FLAVOUR_TGI: tgi_metrics(s, o); return true;
  default: return false;
  }
}

/* ---- server info, props, info ---- */

json_t *
sim_flavour_server_info(const struct server *s)
{
  int dp = rev(s) == 5 ? sim_flavour_dp(s) : 1;
  json_int_t tp = (json_int_t)json_integer_value(json_object_get(s->p->engine, "gpu_count"));
  json_t *doc =
    json_pack("{s:s, s:s, s:n, s:I, s:i}", "model_path", s->p->model_root, "tokenizer_path",
              s->p->model_root, "context_length", "tp_size", tp > 0 ? tp : 1, "dp_size", dp);
  json_t *states = json_array();
  if (rev(s) == 5) {
    /* the top-level argument is null (not given); the effective limit is per
     * data-parallel rank in internal_states */
    json_object_set_new(doc, "pp_size", json_integer(1));
    json_object_set_new(doc, "max_running_requests", json_null());
    json_object_set_new(doc, "max_queued_requests", json_null());
    json_object_set_new(doc, "max_total_tokens", json_null());
    json_object_set_new(doc, "enable_dp_attention", json_false());
    for (int k = 0; k < dp; k++)
      json_array_append_new(
        states,
        json_pack("{s:s, s:n, s:s, s:i, s:f, s:{s:f, s:f, s:I, s:i}, s:I}", "model_path",
                  s->p->model_root, "context_length", "attention_backend", "fa3",
                  "chunked_prefill_size", 8192, "last_gen_throughput", gen_throughput(s) / dp,
                  "memory_usage", "weight", 0.98, "kvcache", 0.23, "token_capacity",
                  (json_int_t)s->p->kv_budget, "graph", 0, "effective_max_running_requests_per_dp",
                  (json_int_t)(s->p->max_running / dp)));
  } else {
    json_object_set_new(doc, "dtype", json_string("auto"));
    json_object_set_new(doc, "max_running_requests", json_integer(s->p->max_running));
    json_object_set_new(doc, "max_total_num_tokens_override", json_null());
    json_object_set_new(doc, "schedule_policy", json_string("fcfs"));
    json_array_append_new(states, json_pack("{s:s, s:i, s:f}", "attention_backend", "flashinfer",
                                            "chunked_prefill_size", 8192, "last_gen_throughput",
                                            gen_throughput(s)));
  }
  json_object_set_new(doc, "chunked_prefill_size", json_integer(8192));
  json_object_set_new(doc, "enable_metrics", json_true());
  json_object_set_new(doc, "status", json_string("ready"));
  json_object_set_new(doc, "max_total_num_tokens", json_integer(s->p->kv_budget));
  json_object_set_new(doc, "max_req_input_len", json_integer(s->p->max_model_len - 6));
  json_object_set_new(doc, "internal_states", states);
  json_object_set_new(doc, "version", json_string(s->version ? s->version : "unknown"));
  return doc;
}

/* b11669's /props: the generation settings hold only params and n_ctx;
 * the endpoints it serves, the template's capabilities, the model type. */
static json_t *
llama_props(const struct server *s)
{
  json_t *caps =
    json_pack("{s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b}", "supports_object_arguments", 0,
              "supports_parallel_tool_calls", 0, "supports_preserve_reasoning", 0,
              "supports_reasoning_effort", 0, "supports_string_content", 1, "supports_system_role",
              1, "supports_tool_calls", 0, "supports_tools", 0, "supports_typed_content", 0);
  return json_pack(
    "{s:{s:o, s:I}, s:I, s:s, s:s, s:s, s:{s:b, s:b, s:b}, s:s, s:b, s:b, s:b, s:b, s:{}, "
    "s:s, s:o, s:s, s:s, s:s, s:b, s:b}",
    "default_generation_settings", "params", json_loads(llama_params, 0, NULL), "n_ctx",
    (json_int_t)s->p->max_model_len, "total_slots", (json_int_t)s->p->max_running, "model_alias",
    s->p->model, "model_ftype", LLAMA_FTYPE, "model_path", s->p->model_root, "modalities", "vision",
    0, "video", 0, "audio", 0, "media_marker", "<__media__>", "endpoint_slots", 1, "endpoint_props",
    0, "endpoint_metrics", s->cfg->metrics != SIM_METRICS_NONE, "ui", 1, "ui_settings",
    "chat_template",
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "chat_template_caps", caps, "bos_token", SIM_TOK_BOS_TEXT, "eos_token", "<|im_end|>",
    "build_info", s->version ? s->version : "unknown", "is_sleeping", 0, "cors_proxy_enabled", 0);
}

json_t *
sim_flavour_slots(const struct server *s)
{
  json_t *arr = json_array();
  int id = 0;
  /* the admitted requests take the first slots, in connection order */
  for (const struct conn *c = s->conns; c && id < s->p->max_running; c = c->next) {
    const struct gen *g = c->o.gen;
    if (g == NULL || c->o.dead || (g->st != G_PREFILL && g->st != G_DECODE && g->st != G_STALL))
      continue;
    json_t *params = json_loads(llama_params, 0, NULL);
    json_object_set_new(params, "max_tokens", json_integer(g->max_tokens));
    json_object_set_new(params, "n_predict", json_integer(g->max_tokens));
    json_object_set_new(params, "stream", json_boolean(g->stream));
    json_array_append_new(
      arr, json_pack("{s:i, s:I, s:b, s:b, s:I, s:I, s:I, s:I, s:o, s:[{s:b, s:b, s:I, s:I}]}",
                     "id", id++, "n_ctx", (json_int_t)s->p->max_model_len, "speculative",
                     s->cfg->spec_k > 1, "is_processing", 1, "id_task", (json_int_t)g->task,
                     "n_prompt_tokens", (json_int_t)(g->prompt + g->out),
                     "n_prompt_tokens_processed", (json_int_t)(g->prompt - g->cached_tokens),
                     "n_prompt_tokens_cache", (json_int_t)g->cached_tokens, "params", params,
                     "next_token", "has_next_token", 1, "has_new_line", 0, "n_remain",
                     (json_int_t)(g->limit - g->out), "n_decoded", (json_int_t)g->out));
  }
  for (; id < s->p->max_running; id++)
    json_array_append_new(arr, json_pack("{s:i, s:I, s:b, s:b}", "id", id, "n_ctx",
                                         (json_int_t)s->p->max_model_len, "speculative",
                                         s->cfg->spec_k > 1, "is_processing", 0));
  return arr;
}

json_t *
sim_flavour_props(const struct server *s)
{
  if (rev(s) >= SIM_LLAMA_B11669)
    return llama_props(s);
  /* n_ctx: the context of one slot; total_slots: requests served at once */
  return json_pack(
    "{s:{s:i, s:i, s:I, s:b, s:b, s:{s:i, s:f, s:i, s:f}}, s:I, s:s, s:s, "
    "s:{s:b, s:b}, s:s, s:s, s:s, s:s, s:b}",
    "default_generation_settings", "id", 0, "id_task", -1, "n_ctx", (json_int_t)s->p->max_model_len,
    "speculative", s->cfg->spec_k > 1, "is_processing", s->running > 0, "params", "n_predict", -1,
    "temperature", 0.8, "top_k", 40, "top_p", 0.95, "total_slots", (json_int_t)s->p->max_running,
    "model_alias", s->p->model, "model_path", s->p->model_root, "modalities", "vision", 0, "audio",
    0, "chat_template", "{{ messages }}", "bos_token", "<s>", "eos_token", "</s>", "build_info",
    s->version ? s->version : "unknown", "is_sleeping", 0);
}

json_t *
sim_flavour_info(const struct server *s)
{
  json_t *in = json_pack(
    "{s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I}", "model_id", s->p->model, "model_sha",
    "e1945c40cd546c78e41f1151f4db032b271faeaa", "model_pipeline_tag", "text-generation",
    "max_concurrent_requests", 128, "max_best_of", 2, "max_stop_sequences", 4, "max_input_tokens",
    (json_int_t)(s->p->max_model_len - 1), "max_total_tokens", (json_int_t)s->p->max_model_len);
  if (rev(s) < 23) {
    /* before 2.3: the KV budget (max_batch_total_tokens) and the dtype */
    json_object_set_new(in, "model_dtype", json_string("torch.float16"));
    json_object_set_new(in, "model_device_type", json_string("cuda"));
    json_object_set_new(in, "waiting_served_ratio", json_real(0.3));
    json_object_set_new(in, "max_batch_total_tokens", json_integer(s->p->kv_budget));
    json_object_set_new(in, "max_waiting_tokens", json_integer(20));
    json_object_set_new(in, "max_batch_size", json_null());
  }
  json_object_set_new(in, "validation_workers", json_integer(2));
  json_object_set_new(in, "max_client_batch_size", json_integer(4));
  json_object_set_new(in, "router", json_string("text-generation-router"));
  json_object_set_new(in, "version", json_string(s->version ? s->version : "unknown"));
  /* a release image names its commit; 3.3.6 here is a native build */
  json_object_set_new(
    in, "sha", rev(s) < 23 ? json_string("db7e043ded45e14ed24188d5a963911c96049618") : json_null());
  json_object_set_new(in, "docker_label", rev(s) < 23 ? json_string("sha-db7e043") : json_null());
  return in;
}
