/*
 * tb_spec: see tb_spec.h.
 *
 * The job spec's table (job_fields[] and the rows of its objects), the
 * rules no one row says alone (check_job_across), and what the table says
 * to the engine: tb_spec_parse runs the walker (tb_specwalk) over a spec,
 * then stores the engine's settings in struct tb_spec at each row's
 * offset, by the row's type.  There is no second list of names, ranges or
 * defaults anywhere: the walker checks any table, tb_speccli reads the
 * command line and dumps the table through this one.
 */
#include "spec/tb_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_arrival.h"
#include "spec/tb_specwalk.h"
#include "spec/tb_trace.h"

#define M(x) offsetof(struct tb_spec, x)
#define NO TB_SPEC_NO_MEMBER
#define ERR_MAX 1024 /* tb_spec_parse's message */

static const char *
check_input(const char *t)
{
  return tb_length_parse(t, 1, TB_SPEC_MAX_CONTEXT, NULL);
}

static const char *
check_output(const char *t)
{
  return tb_length_parse(t, 1, TB_SPEC_MAX_OUTPUT, NULL);
}

/* The "slo" object: a rate cell's request meets them all (0 or absent: not
 * an objective). */
static const struct tb_spec_field slo_fields[] = {
  { .name = "ttft_ms",
    .type = TB_SPEC_NUMBER,
    .min = 0.001,
    .max = 3.6e6,
    .member = M(slo.ttft_ms),
    .help = "time to first token, ms" },
  { .name = "tpot_ms",
    .type = TB_SPEC_NUMBER,
    .min = 0.001,
    .max = 3.6e6,
    .member = M(slo.tpot_ms),
    .help = "time per output token after the first, ms" },
  { .name = "tbt_ms",
    .type = TB_SPEC_NUMBER,
    .min = 0.001,
    .max = 3.6e6,
    .member = M(slo.tbt_ms),
    .help = "largest time between two tokens of the request, ms" },
  { .name = "e2e_ms",
    .type = TB_SPEC_NUMBER,
    .min = 0.001,
    .max = 3.6e6,
    .member = M(slo.e2e_ms),
    .help = "end-to-end latency, ms" },
};

static const char *
check_over(const char *t)
{
  return strcmp(t, "rate") == 0 || strcmp(t, "concurrency") == 0
           ? NULL
           : "must be \"rate\" or \"concurrency\"";
}

static const char *
check_think(const char *t)
{
  return strcmp(t, "exponential") == 0 || strcmp(t, "constant") == 0
           ? NULL
           : "must be \"exponential\" or \"constant\"";
}

/* The "sweep" object: the highest rate (or concurrency) at which
 * attainment_pct of the requests meet the SLOs, found by probes (cells). */
static const struct tb_spec_field sweep_fields[] = {
  { .name = "attainment_pct",
    .type = TB_SPEC_NUMBER,
    .min = 1,
    .max = 100,
    .member = M(sweep.attainment_pct),
    .help = "share of requests that must meet every SLO, %; setting it runs the sweep" },
  { .name = "over",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_INLINE,
    .min = 1,
    .max = 16,
    .def = "\"rate\"",
    .member = M(sweep.over),
    .check = check_over,
    .help = "what the sweep varies: rate (open-loop arrivals) or concurrency (closed-loop users)" },
  { .name = "min_rps",
    .type = TB_SPEC_NUMBER,
    .min = 0.01,
    .max = TB_SPEC_MAX_RATE,
    .def = "1",
    .member = M(sweep.min_rps),
    .help = "lowest rate probed, requests/s" },
  { .name = "max_rps",
    .type = TB_SPEC_NUMBER,
    .min = 0.01,
    .max = TB_SPEC_MAX_RATE,
    .def = "100",
    .member = M(sweep.max_rps),
    .help = "highest rate probed, requests/s" },
  { .name = "step_rps",
    .type = TB_SPEC_NUMBER,
    .min = 0.001,
    .max = TB_SPEC_MAX_RATE,
    .def = "1",
    .member = M(sweep.step_rps),
    .help = "resolution of the answer, requests/s" },
  { .name = "min_concurrency",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_USERS,
    .def = "1",
    .member = M(sweep.min_concurrency),
    .help = "lowest concurrency probed (over concurrency), users" },
  { .name = "max_concurrency",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_USERS,
    .def = "256",
    .member = M(sweep.max_concurrency),
    .help = "highest concurrency probed (over concurrency), users" },
  { .name = "step_concurrency",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_USERS,
    .def = "1",
    .member = M(sweep.step_concurrency),
    .help = "resolution of the answer (over concurrency), users" },
  { .name = "max_probes",
    .type = TB_SPEC_INT,
    .min = 2,
    .max = 64,
    .def = "16",
    .member = M(sweep.max_probes),
    .help = "most probes (cells) the sweep runs" },
};

/* The "conversation" object: each arrival is a conversation of turns. */
static const struct tb_spec_field convo_fields[] = {
  { .name = "turns",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_TURNS,
    .member = M(conversation.turns),
    .help = "requests per conversation; setting it makes each arrival a conversation" },
  { .name = "think_time_s",
    .type = TB_SPEC_NUMBER,
    .min = 0,
    .max = 3600,
    .def = "1",
    .member = M(conversation.think_time_s),
    .help = "the user's think time between a turn's end and the next turn, s (mean)" },
  { .name = "think",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_INLINE,
    .min = 1,
    .max = 16,
    .def = "\"exponential\"",
    .member = M(conversation.think),
    .check = check_think,
    .help = "think times: exponential (seeded, mean think_time_s) or constant" },
};

static const char *
check_trace_format(const char *t)
{
  enum tb_trace_format f;
  return tb_trace_format_parse(t, &f) ? NULL
                                      : "must be one of mooncake, azure, burstgpt, bailian, weka";
}

static const char *
check_cache(const char *t)
{
  return strcmp(t, "reset") == 0 || strcmp(t, "keep") == 0 ? NULL : "must be \"reset\" or \"keep\"";
}

/* The "trace" object: a production trace replayed as a rate cell. */
static const struct tb_spec_field trace_fields[] = {
  { .name = "format",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_INLINE,
    .min = 1,
    .max = 16,
    .member = M(trace.format),
    .check = check_trace_format,
    .help = "the trace's format: mooncake, azure, burstgpt, bailian or weka; required with a "
            "trace file, optional beside id (the stored trace's; if given, it must be that)" },
  { .name = "id",
    .type = TB_SPEC_UUID,
    .member = NO,
    .help = "an uploaded trace (POST /v1/traces) of the project; its format is the one it was "
            "uploaded in" },
  { .name = "start_s",
    .type = TB_SPEC_NUMBER,
    .min = 0,
    .max = 1e9,
    .def = "0",
    .member = M(trace.start_s),
    .help = "roots arriving before this are left out, s" },
  { .name = "duration_s",
    .type = TB_SPEC_NUMBER,
    .min = 0,
    .max = 1e9,
    .def = "0",
    .member = M(trace.duration_s),
    .help = "roots arriving this long after start_s or later are left out, s (0: to the end)" },
  { .name = "speedup",
    .type = TB_SPEC_NUMBER,
    .min = 0.001,
    .max = 1000,
    .def = "1",
    .member = M(trace.speedup),
    .help = "every time and delay divided by it" },
  { .name = "rate_scale",
    .type = TB_SPEC_NUMBER,
    .min = 0.001,
    .max = 1000,
    .def = "1",
    .member = M(trace.rate_scale),
    .help = "the roots' arrival rate multiplied by it (a session's delays are not)" },
  { .name = "max_output",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_OUTPUT,
    .member = M(trace.max_output),
    .help = "output tokens capped at this (default: as recorded)" },
  { .name = "max_requests",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_RATE_REQUESTS,
    .member = M(trace.max_requests),
    .help = "requests replayed at most (default: all)" },
};

/* The "prefix" object: a system prompt shared by every request of a rate
 * cell, and how many distinct user messages follow it. */
static const struct tb_spec_field prefix_fields[] = {
  { .name = "tokens",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_CONTEXT,
    .member = M(prefix.tokens),
    .help = "the shared system prompt's tokens; setting it shares it" },
  { .name = "suffixes",
    .type = TB_SPEC_INT,
    .min = 0,
    .max = 1000000,
    .def = "0",
    .member = M(prefix.suffixes),
    .help = "distinct user messages after it, request k taking k mod suffixes (0: each its own)" },
};

/* The job spec: the body of POST /v1/jobs.  Keep api/openapi.yaml's JobSpec
 * in step (tests/integration/test_api_contract.py compares them). */
static const struct tb_spec_field job_fields[] = {
  { .name = "endpoint_id",
    .type = TB_SPEC_UUID,
    .flags = TB_SPEC_REQUIRED,
    .member = NO,
    .help = "the endpoint to measure (one of the project's)" },
  { .name = "model",
    .type = TB_SPEC_STRING,
    .min = 1,
    .max = 256,
    .member = M(model),
    .cli = "model",
    .help = "served model (default: the first of /v1/models)" },
  { .name = "contexts",
    .type = TB_SPEC_TOKENS,
    .min = 0,
    .max = (double)TB_SPEC_MAX_CONTEXT,
    .max_items = TB_SPEC_MAX_LIST,
    .member = M(contexts),
    .cli = "contexts",
    .help = "decode contexts, e.g. 0,8k,16k,251k (0: no prompt context; default 8K..128K "
            "and the top one)" },
  { .name = "concurrency",
    .type = TB_SPEC_INTS,
    .min = 1,
    .max = TB_SPEC_MAX_CONCURRENCY,
    .max_items = TB_SPEC_MAX_LIST,
    .def = "[1,2,4,8,16,32,64,128]",
    .member = M(concurrency),
    .cli = "concurrency",
    .help = "requests at once" },
  { .name = "prefill_contexts",
    .type = TB_SPEC_TOKENS,
    .flags = TB_SPEC_EMPTY_OK,
    .min = 1,
    .max = (double)TB_SPEC_MAX_CONTEXT,
    .max_items = TB_SPEC_MAX_LIST,
    .member = M(prefill_contexts),
    .cli = "prefill-contexts",
    .help = "prefill scouts (default: the contexts + max length); none: no prefill rows" },
  { .name = "duration_s",
    .type = TB_SPEC_NUMBER,
    .min = 0.1,
    .max = 3600,
    .def = "30",
    .member = M(duration_s),
    .cli = "duration",
    .help = "measurement window per cell, s" },
  { .name = "max_output",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_OUTPUT,
    .def = "4096",
    .member = M(max_output),
    .cli = "max-output",
    .help = "max output tokens per request" },
  { .name = "repeats",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_REPEATS,
    .def = "1",
    .member = M(repeats),
    .cli = "repeats",
    .help = "measurements per cell, interleaved: pass 1 over the whole matrix, then pass 2, ..." },
  { .name = "kv_budget",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = (double)TB_SPEC_MAX_KV_BUDGET,
    .member = M(kv_budget),
    .cli = "kv-budget",
    .help = "KV budget in tokens, overriding the server's" },
  { .name = "labels",
    .type = TB_SPEC_LABELS,
    .flags = TB_SPEC_OVERRIDE,
    .max_items = TB_SPEC_MAX_LABELS,
    .member = NO,
    .help = "string labels (thresholds, regressions, listing)" },
  { .name = "priority",
    .type = TB_SPEC_INT,
    .min = -1000,
    .max = 1000,
    .def = "0",
    .member = NO,
    .help = "higher runs first" },
  { .name = "exclusive_group",
    .type = TB_SPEC_IDENT,
    .min = 1,
    .max = 100,
    .member = NO,
    .help = "jobs of one group never run at once (default: the endpoint's)" },
  { .name = "callbacks",
    .type = TB_SPEC_URLS,
    .max_items = TB_SPEC_MAX_CALLBACKS,
    .member = NO,
    .help = "URLs told when the job ends" },
  { .name = "max_attempts",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = 20,
    .def = "3",
    .member = NO,
    .help = "runs tried before the job fails" },
  { .name = "shards",
    .type = TB_SPEC_INT,
    .flags = TB_SPEC_AUTO,
    .min = 1,
    .max = TB_SPEC_MAX_SHARDS,
    .def = "1",
    .member = NO,
    .help = "workers that drive each cell together, its percentiles merged from "
            "all their samples (\"auto\": as many as the workers' per-shard budget "
            "needs; docs/deploy.md)" },
  /* engine tuning */
  { .name = "settle_s",
    .type = TB_SPEC_NUMBER,
    .min = 0,
    .max = 3600,
    .def = "3",
    .member = M(settle_s),
    .cli = "settle",
    .help = "readiness hold before each window, s" },
  { .name = "stall_timeout_s",
    .type = TB_SPEC_NUMBER,
    .min = 0.1,
    .max = 86400,
    .def = "20",
    .member = M(stall_timeout_s),
    .cli = "stall-timeout",
    .help = "a stream silent this long after its first token is an error, s" },
  { .name = "first_token_timeout_s",
    .type = TB_SPEC_NUMBER,
    .min = 0.1,
    .max = 86400,
    .def = "600",
    .member = M(first_token_timeout_s),
    .cli = "first-token-timeout",
    .help = "a request with no token after this long is an error, s" },
  { .name = "ready_timeout_s",
    .type = TB_SPEC_NUMBER,
    .min = 0.1,
    .max = 86400,
    .def = "300",
    .member = M(ready_timeout_s),
    .cli = "ready-timeout",
    .help = "a cell not ready after this long is an error, s" },
  { .name = "drain_timeout_s",
    .type = TB_SPEC_NUMBER,
    .min = 0,
    .max = 86400,
    .def = "120",
    .member = M(drain_timeout_s),
    .cli = "drain-timeout",
    .help = "wait for the server to drain between cells, s" },
  { .name = "metrics_interval_s",
    .type = TB_SPEC_NUMBER,
    .min = 0.01,
    .max = 60,
    .def = "0.25",
    .member = M(metrics_interval_s),
    .cli = "metrics-interval",
    .help = "/metrics sampling period in a cell, s" },
  /* rate cells (lib/engine/tb_rate.h) */
  { .name = "rates",
    .type = TB_SPEC_NUMBERS,
    .min = 0.01,
    .max = TB_SPEC_MAX_RATE,
    .max_items = TB_SPEC_MAX_LIST,
    .member = M(rates),
    .cli = "rates",
    .help = "rate cells: requests arriving per second, e.g. 1,3,10 (with no contexts or "
            "concurrency given, only rate cells run)" },
  { .name = "rate_duration_s",
    .type = TB_SPEC_NUMBER,
    .min = 0.1,
    .max = 3600,
    .def = "60",
    .member = M(rate_duration_s),
    .cli = "rate-duration",
    .help = "a rate cell's arrivals last this long, s" },
  { .name = "rate_requests",
    .type = TB_SPEC_INT,
    .min = 1,
    .max = TB_SPEC_MAX_RATE_REQUESTS,
    .member = M(rate_requests),
    .cli = "rate-requests",
    .help = "a rate cell sends this many requests (instead of arriving for rate_duration_s)" },
  { .name = "arrival",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_INLINE,
    .min = 1,
    .max = TB_ARRIVAL_TEXT_MAX - 1,
    .def = "\"poisson\"",
    .member = M(arrival),
    .cli = "arrival",
    .check = tb_arrival_check,
    .help = "arrivals: poisson, constant or gamma:B (B the burstiness; 1 is poisson)" },
  { .name = "seed",
    .type = TB_SPEC_INT,
    .min = 0,
    .max = 4294967295.0,
    .def = "1",
    .member = M(seed),
    .cli = "seed",
    .help = "seed of arrivals and lengths" },
  { .name = "input_tokens",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_INLINE,
    .min = 1,
    .max = TB_ARRIVAL_TEXT_MAX - 1,
    .def = "\"1024\"",
    .member = M(input_tokens),
    .cli = "input-tokens",
    .check = check_input,
    .help = "rate cells' prompt tokens: N or uniform:A-B" },
  { .name = "output_tokens",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_INLINE,
    .min = 1,
    .max = TB_ARRIVAL_TEXT_MAX - 1,
    .def = "\"128\"",
    .member = M(output_tokens),
    .cli = "output-tokens",
    .check = check_output,
    .help = "rate cells' output tokens: N or uniform:A-B" },
  { .name = "slo",
    .type = TB_SPEC_OBJECT,
    .sub = slo_fields,
    .nsub = TB_ARRAY_LEN(slo_fields),
    .member = M(slo),
    .cli = "slo",
    .help = "objectives of goodput, e.g. ttft_ms=500,tpot_ms=50 (also tbt_ms, e2e_ms)" },
  { .name = "sweep",
    .type = TB_SPEC_OBJECT,
    .sub = sweep_fields,
    .nsub = TB_ARRAY_LEN(sweep_fields),
    .member = M(sweep),
    .cli = "sweep",
    .help = "find the highest rate (or concurrency) meeting the SLOs, e.g. "
            "attainment_pct=90,max_rps=50 or attainment_pct=90,over=concurrency" },
  { .name = "prefix",
    .type = TB_SPEC_OBJECT,
    .sub = prefix_fields,
    .nsub = TB_ARRAY_LEN(prefix_fields),
    .member = M(prefix),
    .cli = "prefix",
    .help = "rate cells share a system prompt, e.g. tokens=2000,suffixes=8" },
  { .name = "conversation",
    .type = TB_SPEC_OBJECT,
    .sub = convo_fields,
    .nsub = TB_ARRAY_LEN(convo_fields),
    .member = M(conversation),
    .cli = "conversation",
    .help = "each arrival is a multi-turn conversation, e.g. turns=4,think_time_s=2" },
  { .name = "trace",
    .type = TB_SPEC_OBJECT,
    .sub = trace_fields,
    .nsub = TB_ARRAY_LEN(trace_fields),
    .member = M(trace),
    .cli = "trace-replay",
    .help = "a production trace replayed as a rate cell (docs/traces.md), e.g. "
            "format=mooncake,speedup=2,duration_s=60" },
  { .name = "cache",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_INLINE,
    .min = 1,
    .max = 8,
    .def = "\"reset\"",
    .member = M(cache),
    .cli = "cache",
    .check = check_cache,
    .help = "reset: the server's prefix cache emptied before each prefill scout, rate and "
            "trace cell where its engine offers it; keep: never" },
};

const struct tb_spec_field *
tb_spec_fields(size_t *n)
{
  *n = TB_ARRAY_LEN(job_fields);
  return job_fields;
}

const struct tb_spec_field *
tb_spec_field(const char *name)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(job_fields); i++)
    if (strcmp(job_fields[i].name, name) == 0)
      return &job_fields[i];
  return NULL;
}

/* What one field cannot say alone: a trace object names its trace (by
 * id, or by format beside a file); a trace cell is not sharded (issue 24:
 * its sessions would have to follow their roots to one shard each, with
 * the trace loaded by every shard), so shards other than 1 beside a trace
 * is refused rather than silently run in one process; so is shards on a
 * sweep alone (its probes are not sharded either). */
static void
check_job_across(const json_t *spec, json_t *errors)
{
  /* a trace is a file (format given: `tokbench run --trace`) or an upload
   * (id; its format is the stored one's, so format may be left out) */
  const json_t *tr = json_object_get(spec, "trace");
  if (tr != NULL && json_object_get(tr, "id") == NULL && json_object_get(tr, "format") == NULL)
    tb_specwalk_error(
      errors, "trace.id",
      "is required: the uploaded trace to replay (POST /v1/traces; its format is the "
      "stored one's, so trace.format may be left out)");
  const json_t *sh = json_object_get(spec, "shards");
  bool sharded = sh != NULL && !(json_is_integer(sh) && json_integer_value(sh) == 1);
  if (sharded && json_object_get(spec, "trace") != NULL)
    tb_specwalk_error(
      errors, "shards",
      "a trace cell cannot be sharded: leave shards out (or 1) with a trace, or run the "
      "trace in a job of its own (docs/deploy.md)");
  /* a sweep alone runs no matrix and no rates: nothing of it is sharded */
  const char *matrix[] = { "contexts", "concurrency", "prefill_contexts", "rates" };
  bool shardable = json_object_get(spec, "sweep") == NULL;
  for (size_t i = 0; i < TB_ARRAY_LEN(matrix) && !shardable; i++)
    shardable = json_object_get(spec, matrix[i]) != NULL;
  if (sharded && !shardable)
    tb_specwalk_error(
      errors, "shards",
      "a sweep's probes are not sharded and this job has nothing else: leave shards out "
      "(or 1), or give rates or a matrix to shard (docs/deploy.md)");
}

enum tb_spec_rc
tb_spec_job(const char *text, size_t len, json_t **out, json_t **errors)
{
  enum tb_spec_rc rc =
    tb_specwalk_run(text, len, job_fields, TB_ARRAY_LEN(job_fields), false, out, errors);
  if (rc != TB_SPEC_OK)
    return rc;
  json_t *e = json_array();
  check_job_across(*out, e);
  if (json_array_size(e) == 0) {
    json_decref(e);
    return TB_SPEC_OK;
  }
  json_decref(*out);
  *out = NULL;
  *errors = e;
  return TB_SPEC_INVALID;
}

json_t *
tb_spec_override(const json_t *preset_spec, const json_t *extra)
{
  json_t *merged = json_is_object(preset_spec) ? json_deep_copy(preset_spec) : json_object();
  for (size_t i = 0; i < TB_ARRAY_LEN(job_fields); i++) {
    const struct tb_spec_field *f = &job_fields[i];
    const json_t *v = json_object_get(extra, f->name);
    if (!(f->flags & TB_SPEC_OVERRIDE) || v == NULL)
      continue;
    json_t *have = json_object_get(merged, f->name);
    if (json_is_object(v) && json_is_object(have))
      json_object_update(have, (json_t *)v);
    else
      json_object_set_new(merged, f->name, json_deep_copy(v));
  }
  return merged;
}

/* ---------------------------------------------------------- the struct */

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Stores v (valid for f: normalized by the walker, or a default) at f's
 * member of s. */
static void
store(struct tb_spec *s, const struct tb_spec_field *f, const json_t *v, bool given)
{
  char *at = (char *)s + f->member;
  switch (f->type) {
  case TB_SPEC_STRING: {
    if (f->flags & TB_SPEC_INLINE) {
      snprintf(at, TB_SPEC_INLINE_MAX, "%s", json_string_value(v));
      return;
    }
    char **p = (char **)(void *)at;
    free(*p);
    *p = tb_xstrdup(json_string_value(v));
    return;
  }
  case TB_SPEC_INT: /* "auto" (TB_SPEC_AUTO) is 0 */
    *(int64_t *)(void *)at = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
    return;
  case TB_SPEC_NUMBER: *(double *)(void *)at = json_number_value(v); return;
  case TB_SPEC_TOKENS:
  case TB_SPEC_INTS: {
    struct tb_spec_list *l = (struct tb_spec_list *)(void *)at;
    l->n = 0;
    size_t i;
    const json_t *e;
    json_array_foreach (v, i, e) {
      if (l->n < TB_SPEC_MAX_LIST)
        l->v[l->n++] = (int64_t)json_integer_value(e);
    }
    qsort(l->v, l->n, sizeof l->v[0], cmp_i64);
    size_t o = 0;
    for (size_t k = 0; k < l->n; k++)
      if (o == 0 || l->v[o - 1] != l->v[k])
        l->v[o++] = l->v[k];
    l->n = o;
    l->given = given;
    return;
  }
  case TB_SPEC_NUMBERS: {
    struct tb_spec_dlist *l = (struct tb_spec_dlist *)(void *)at;
    l->n = 0;
    size_t i;
    const json_t *e;
    json_array_foreach (v, i, e) {
      if (l->n < TB_SPEC_MAX_LIST)
        l->v[l->n++] = json_number_value(e);
    }
    qsort(l->v, l->n, sizeof l->v[0], cmp_double);
    l->given = given;
    return;
  }
  case TB_SPEC_OBJECT: /* its rows' members are struct tb_spec's own */
    for (size_t i = 0; i < f->nsub; i++) {
      const json_t *m = json_object_get(v, f->sub[i].name);
      if (m != NULL && f->sub[i].member != TB_SPEC_NO_MEMBER)
        store(s, &f->sub[i], m, given);
    }
    return;
  default: return; /* no engine setting has another type */
  }
}

/* The defaults of fields[0..n) (and of their objects' rows) into s. */
static void
init_defaults(struct tb_spec *s, const struct tb_spec_field *fields, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    const struct tb_spec_field *f = &fields[i];
    if (f->member == NO)
      continue;
    if (f->type == TB_SPEC_OBJECT)
      init_defaults(s, f->sub, f->nsub);
    if (f->def == NULL)
      continue;
    json_t *v = json_loads(f->def, JSON_DECODE_ANY, NULL);
    if (v != NULL)
      store(s, f, v, false);
    json_decref(v);
  }
}

void
tb_spec_init(struct tb_spec *s)
{
  memset(s, 0, sizeof *s);
  init_defaults(s, job_fields, TB_ARRAY_LEN(job_fields));
}

void
tb_spec_free(struct tb_spec *s)
{
  free(s->model);
  s->model = NULL;
}

bool
tb_spec_parse(struct tb_spec *s, const json_t *spec, char **err)
{
  tb_spec_init(s);
  *err = NULL;
  if (!json_is_object(spec)) {
    *err = tb_xstrdup("spec: not a JSON object");
    return false;
  }
  json_t *out = json_object(), *errors = json_array();
  tb_specwalk_check(spec, job_fields, TB_ARRAY_LEN(job_fields), true, NULL, out, errors);
  if (json_array_size(errors) > 0) {
    char msg[ERR_MAX];
    size_t o = (size_t)snprintf(msg, sizeof msg, "spec:");
    size_t i;
    const json_t *e;
    json_array_foreach (errors, i, e) {
      if (o >= sizeof msg)
        break;
      o += (size_t)snprintf(msg + o, sizeof msg - o, "%s %s %s", i > 0 ? ";" : "",
                            json_string_value(json_object_get(e, "field")),
                            json_string_value(json_object_get(e, "detail")));
    }
    *err = tb_xstrdup(msg);
    json_decref(out);
    json_decref(errors);
    return false;
  }
  for (size_t i = 0; i < TB_ARRAY_LEN(job_fields); i++) {
    const json_t *v = json_object_get(out, job_fields[i].name);
    if (job_fields[i].member != NO && v != NULL)
      store(s, &job_fields[i], v, true);
  }
  json_decref(out);
  json_decref(errors);
  return true;
}

/* The integer member name of spec, else its row's default. */
static int64_t
int_or_default(const json_t *spec, const char *name)
{
  const json_t *v = json_object_get(spec, name);
  if (json_is_integer(v))
    return (int64_t)json_integer_value(v);
  const struct tb_spec_field *f = tb_spec_field(name);
  json_t *d = f != NULL && f->def != NULL ? json_loads(f->def, JSON_DECODE_ANY, NULL) : NULL;
  int64_t i = (int64_t)json_integer_value(d);
  json_decref(d);
  return i;
}

void
tb_spec_job_row(const json_t *spec, struct tb_spec_job_row *row)
{
  memset(row, 0, sizeof *row);
  row->priority = int_or_default(spec, "priority");
  row->exclusive_group = json_string_value(json_object_get(spec, "exclusive_group"));
  const json_t *labels = json_object_get(spec, "labels");
  row->labels = json_is_object(labels) ? labels : NULL;
  row->max_attempts_given = json_is_integer(json_object_get(spec, "max_attempts"));
  row->max_attempts = int_or_default(spec, "max_attempts");
}
