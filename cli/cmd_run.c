/*
 * tokbench run: the speed test matrix against one endpoint, from a terminal,
 * without the service.  A thin shell around tb_engine_run: the settings'
 * flags are the job spec's fields (tb_spec's table: one flag per field with a
 * `cli` name, the same ranges and defaults as the api) parsed by
 * tb_spec_parse; cells come back through hooks and are shown as a progress bar
 * (terminal) or written as JSON lines (otherwise); the finished document is
 * printed as the seed reports' tables and optionally saved with --output.
 *
 * Exit status: 0 the run finished (error cells are results too), 1 the run
 * failed (e.g. the endpoint is unreachable), 2 bad usage, 130 interrupted.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "spec/tb_speccli.h"
#include "spec/tb_specwalk.h"
#include "spec/tb_trace.h"
#include "base/tb_cfg.h"
#include "engine/tb_engine.h"
#include "net/tb_http.h"
#include "render/tb_table.h"
#include "result/tb_provenance.h"
#include "base/tb_util.h"

#define KEY_FILE_MAX 4096
#define RESUME_LINE_MAX (1024 * 1024)

static volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
  interrupted = 1;
}

static const char usage_head[] =
  "usage: tokbench run --url URL [options]\n"
  "\n"
  "Runs the speed test matrix (METHOD.md) against one OpenAI-compatible\n"
  "endpoint (vLLM, SGLang or generic): a cold prefill scout per context, then\n"
  "sustained decode at each (context, concurrency) for a fixed window.\n"
  "\n"
  "Endpoint:\n"
  "  --url URL               base URL, e.g. http://127.0.0.1:8000 (no /v1)\n"
  "  --api-key-file F        file holding the endpoint's API key (first line);\n"
  "                          else env TOKBENCH_ENDPOINT_API_KEY; sent as Bearer\n"
  "  --cacert FILE           PEM file of the CAs to trust for an https URL\n"
  "  --trace FILE            replay a production trace as a rate cell (gzip or not;\n"
  "                          docs/traces.md); with --trace-format\n"
  "  --trace-format F        mooncake, azure, burstgpt, bailian or weka\n"
  "                          (a self-signed or private CA's certificate),\n"
  "                          instead of the system's\n"
  "  --name NAME             endpoint name for the report header\n"
  "  --launch-command CMD    server launch command for the report (secrets\n"
  "                          are redacted)\n"
  "  --gpu NAME:COUNT        the GPUs the endpoint runs on (e.g. H200:2)\n"
  "  --price-per-hour X      what the endpoint costs an hour: cost per million\n"
  "                          tokens in every cell (--currency C, default USD)\n"
  "  --telemetry-url URL     the GPUs' telemetry (dcgm-exporter's /metrics),\n"
  "                          read during cells: joules per token, throttling\n"
  "Settings (the job spec's fields, same ranges and defaults; K = 1024):\n";

static const char usage_tail[] =
  "Output:\n"
  "  --output FILE           write the result document (JSON) to FILE\n"
  "  --jsonl                 JSON lines on stdout (a header line, then one\n"
  "                          line per cell as measured, then the document);\n"
  "                          the default when stdout is not a terminal\n"
  "  --table                 print the report tables even when stdout is not\n"
  "                          a terminal (instead of JSON lines)\n"
  "  --resume FILE           a JSON lines file of an earlier run: its cells are\n"
  "                          kept, not measured again\n"
  "  --run-id ID             run id (part of the prompt tags; default: new)\n"
  "  --cell-memory-kb N      KiB the endpoint may make one cell buffer (SSE\n"
  "                          lines and events of all its streams; default\n"
  "                          262144); over it the cell fails\n"
  "  -q, --quiet             no progress bar\n"
  "  -v, --verbose           say on stderr how the streams were read\n"
  "                          (io_uring, epoll or libcurl, and why)\n"
  "  -h, --help              this text\n"
  "\n"
  "Exit status: 0 finished (error cells are results), 1 run failed,\n"
  "2 bad usage, 130 interrupted (the partial result is still written).\n";

/* The environment the run reads besides TOKBENCH_ENDPOINT_API_KEY. */
static const struct tb_cfg_key run_keys[] = {
  TB_ENGINE_CFG_KEYS,
};

/* --gpu, --price-per-hour, --currency, --telemetry-url (which: 0..3) into
 * the endpoint object the engine reads (tb_telemetry_cell, tb_cost); false
 * with a message on a bad value. */
static bool
cost_opt(json_t *endpoint, int which, const char *v)
{
  char *end = NULL;
  if (which == 0) {
    const char *colon = strrchr(v, ':');
    int64_t n = 0;
    if (colon == NULL || colon == v || !tb_parse_i64(colon + 1, 1, 4096, &n)) {
      fprintf(stderr, "tokbench run: --gpu NAME:COUNT (e.g. H200:2)\n");
      return false;
    }
    json_object_set_new(
      endpoint, "gpu",
      json_pack("{s:s%, s:I}", "name", v, (size_t)(colon - v), "count", (json_int_t)n));
  } else if (which == 1) {
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || !(x >= 0 && x <= 1e8)) {
      fprintf(stderr, "tokbench run: --price-per-hour: a number from 0 to 1e8\n");
      return false;
    }
    json_object_set_new(endpoint, "price_per_hour", json_real(x));
  } else if (which == 2) {
    if (strlen(v) != 3 || strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != 3) {
      fprintf(stderr, "tokbench run: --currency: an ISO 4217 code (USD, EUR)\n");
      return false;
    }
    json_object_set_new(endpoint, "currency", json_string(v));
  } else {
    if (!tb_specwalk_url_ok(v)) {
      fprintf(stderr, "tokbench run: --telemetry-url: an http:// or https:// URL\n");
      return false;
    }
    json_object_set_new(endpoint, "telemetry_url", json_string(v));
  }
  return true;
}

/* The usage, its settings from tb_spec's table. */
static void
usage(FILE *f)
{
  fputs(usage_head, f);
  size_t n;
  const struct tb_spec_field *fields = tb_spec_fields(&n);
  for (size_t i = 0; i < n; i++) {
    if (fields[i].cli == NULL)
      continue;
    enum tb_spec_type t = fields[i].type;
    const char *meta = t == TB_SPEC_TOKENS || t == TB_SPEC_INTS || t == TB_SPEC_NUMBERS ? "LIST"
                       : t == TB_SPEC_OBJECT                                            ? "K=V,.."
                       : t == TB_SPEC_NUMBER                                            ? "S"
                       : t == TB_SPEC_INT                                               ? "N"
                                                                                        : "NAME";
    char flag[48];
    snprintf(flag, sizeof flag, "%s %s", fields[i].cli, meta);
    fprintf(f, "  --%-21s %s", flag, fields[i].help);
    if (fields[i].def != NULL)
      fprintf(f, " (default %s)", fields[i].def);
    if (t == TB_SPEC_INT || t == TB_SPEC_NUMBER)
      fprintf(f, "; %.15g to %.15g", fields[i].min, fields[i].max);
    fputc('\n', f);
  }
  fputs(usage_tail, f);
  fputs("\nEnvironment:\n", f);
  tb_cfg_help_keys(run_keys, TB_ARRAY_LEN(run_keys), f);
}

struct run_ui {
  bool tty_progress;
  bool jsonl;
  FILE *out;
  int64_t t0;
};

/* ------------------------------------------------------------- hooks */

static const char *
str(const json_t *o, const char *k)
{
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

static void
print_line(FILE *f, const json_t *j)
{
  char *s = json_dumps(j, JSON_COMPACT);
  if (s != NULL) {
    fprintf(f, "%s\n", s);
    fflush(f);
    free(s);
  }
}

static bool
hook_cell(void *cls, const json_t *cell)
{
  struct run_ui *ui = cls;
  if (ui->jsonl)
    print_line(stdout, cell);
  if (ui->tty_progress) {
    tb_table_cell_line(stderr, cell);
  }
  return true;
}

static void
hook_progress(void *cls, const json_t *key, unsigned done, unsigned total, double eta_s)
{
  struct run_ui *ui = cls;
  if (!ui->tty_progress)
    return;
  unsigned width = 30;
  unsigned fill = total ? done * width / total : 0;
  char bar[64];
  for (unsigned i = 0; i < width; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[width] = '\0';
  int m = (int)(eta_s / 60), s = (int)fmod(eta_s, 60);
  char pass[32] = "";
  if (json_is_integer(json_object_get(key, "repeat"))) /* --repeats: the pass */
    snprintf(pass, sizeof pass, " (repeat %" PRId64 ")",
             (int64_t)json_integer_value(json_object_get(key, "repeat")));
  fprintf(stderr, "\r\033[K[%s] cell %u of %u · %s %s x%" PRId64 "%s · about %dm%02ds left", bar,
          done + 1, total, str(key, "phase"), str(key, "context_label"),
          (int64_t)json_integer_value(json_object_get(key, "concurrency")), pass, m, s);
  fflush(stderr);
}

static bool
hook_cancelled(void *cls)
{
  return interrupted != 0;
}

static void
hook_header(void *cls, const json_t *header)
{
  struct run_ui *ui = cls;
  if (ui->jsonl)
    print_line(stdout, header);
  if (ui->tty_progress) {
    const json_t *eng = json_object_get(header, "engine");
    const json_t *cap = json_object_get(header, "capacity");
    fprintf(stderr, "%s · %s %s · KV budget %s (%s)\n",
            str(json_object_get(header, "model"), "served"), str(eng, "name"), str(eng, "version"),
            json_is_integer(json_object_get(cap, "kv_budget_tokens")) ? "known" : "unknown",
            str(cap, "source"));
  }
}

/* ------------------------------------------------------------- flags */

/* The cells of a JSON lines file; sets *run_id from its header line. */
static json_t *
read_resume(const char *path, char **run_id, const char **why)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    *why = strerror(errno);
    return NULL;
  }
  json_t *cells = json_array();
  char *line = tb_xmalloc(RESUME_LINE_MAX);
  while (fgets(line, RESUME_LINE_MAX, f) != NULL) {
    json_t *j = json_loads(line, 0, NULL);
    if (!json_is_object(j)) {
      json_decref(j);
      continue;
    }
    const json_t *cs = json_object_get(j, "cells");
    if (json_is_array(cs)) {
      /* a whole result document: its cells */
      size_t i;
      json_t *c;
      json_array_foreach (cs, i, c) {
        const char *st = json_string_value(json_object_get(c, "status"));
        if (st != NULL && strcmp(st, "error") != 0)
          json_array_append(cells, c);
      }
    } else if (json_is_string(json_object_get(j, "phase"))) {
      const char *st = json_string_value(json_object_get(j, "status"));
      /* error cells are measured again */
      if (st != NULL && strcmp(st, "error") != 0)
        json_array_append(cells, j);
    }
    const char *rid = json_string_value(json_object_get(j, "run_id"));
    if (rid != NULL && *run_id == NULL)
      *run_id = tb_xstrdup(rid);
    json_decref(j);
  }
  free(line);
  fclose(f);
  return cells;
}

/* --trace FILE and --trace-format F into the spec's trace object (beside
 * --trace-replay's options): both or neither; a trace object with no file
 * is an error here (the service names an uploaded one instead). */
static bool
trace_flags(json_t *spec, const char *file, const char *format)
{
  json_t *t = json_object_get(spec, "trace");
  if (file == NULL && format == NULL) {
    if (t == NULL)
      return true;
    fprintf(stderr, "tokbench run: --trace-replay needs --trace FILE --trace-format F\n");
    return false;
  }
  if (file == NULL || format == NULL) {
    fprintf(stderr, "tokbench run: --trace FILE and --trace-format F go together "
                    "(mooncake, azure, burstgpt, bailian or weka)\n");
    return false;
  }
  if (t == NULL) {
    t = json_object();
    json_object_set_new(spec, "trace", t);
  }
  json_object_set_new(t, "format", json_string(format));
  return true;
}

/* The trace file, read whole (at most TB_TRACE_MAX_BYTES, gzip inflated
 * by tb_trace_parse to the same cap), parsed into *t. */
static bool
read_trace(const char *path, const char *format, struct tb_trace *t)
{
  enum tb_trace_format f;
  if (!tb_trace_format_parse(format, &f)) {
    fprintf(stderr, "tokbench run: --trace-format: mooncake, azure, burstgpt, bailian or weka\n");
    return false;
  }
  FILE *fp = fopen(path, "rb");
  if (fp == NULL) {
    fprintf(stderr, "tokbench run: --trace %s: %s\n", path, strerror(errno));
    return false;
  }
  size_t cap = 1 << 20, len = 0;
  char *buf = tb_xmalloc(cap);
  size_t n;
  while ((n = fread(buf + len, 1, cap - len, fp)) > 0) {
    len += n;
    if (len == cap) {
      if (cap > TB_TRACE_MAX_BYTES)
        break;
      cap *= 2;
      buf = tb_xrealloc(buf, cap);
    }
  }
  bool bad = ferror(fp) != 0;
  fclose(fp);
  char why[TB_TRACE_ERR_MAX];
  bool ok = false;
  if (bad)
    fprintf(stderr, "tokbench run: --trace %s: cannot read it\n", path);
  else if (len > TB_TRACE_MAX_BYTES)
    fprintf(stderr, "tokbench run: --trace %s: larger than %u bytes\n", path, TB_TRACE_MAX_BYTES);
  else if (tb_trace_parse(buf, len, f, t, why, sizeof why) != 0)
    fprintf(stderr, "tokbench run: --trace %s: %s\n", path, why);
  else
    ok = true;
  free(buf);
  return ok;
}

/* The options besides the job spec's fields. */
enum {
  O_URL = 256,
  O_KEYFILE,
  O_OUTPUT,
  O_JSONL,
  O_TABLE,
  O_RESUME,
  O_NAME,
  O_LAUNCH,
  O_RUNID,
  O_CELLMEM,
  O_CACERT,
  O_TRACE,
  O_TRACEFMT,
  O_GPU = 300,
  O_PRICE,
  O_CURRENCY,
  O_TELEMETRY,  /* cost_opt */
  O_SPEC = 512, /* + the field's index in tb_spec's table */
};

static const struct option fixed_opts[] = {
  { "url", required_argument, NULL, O_URL },
  { "api-key-file", required_argument, NULL, O_KEYFILE },
  { "output", required_argument, NULL, O_OUTPUT },
  { "jsonl", no_argument, NULL, O_JSONL },
  { "table", no_argument, NULL, O_TABLE },
  { "resume", required_argument, NULL, O_RESUME },
  { "name", required_argument, NULL, O_NAME },
  { "launch-command", required_argument, NULL, O_LAUNCH },
  { "run-id", required_argument, NULL, O_RUNID },
  { "cell-memory-kb", required_argument, NULL, O_CELLMEM },
  { "cacert", required_argument, NULL, O_CACERT },
  { "gpu", required_argument, NULL, O_GPU },
  { "price-per-hour", required_argument, NULL, O_PRICE },
  { "currency", required_argument, NULL, O_CURRENCY },
  { "telemetry-url", required_argument, NULL, O_TELEMETRY },
  { "trace", required_argument, NULL, O_TRACE },
  { "trace-format", required_argument, NULL, O_TRACEFMT },
  { "quiet", no_argument, NULL, 'q' },
  { "verbose", no_argument, NULL, 'v' },
  { "help", no_argument, NULL, 'h' },
};

/* One run's flags and what it holds; everything owned is freed by
 * run_free. */
struct run {
  json_t *spec;     /* the spec fields' flags, as a job spec object */
  json_t *endpoint; /* --name, --launch-command, cost_opt's flags */
  const char *key_file, *output, *resume, *url, *cacert;
  const char *trace_file, *trace_format;
  int64_t cell_kb;
  bool force_jsonl, force_table, quiet, verbose;
  char *run_id;
  struct tb_spec settings;
  struct tb_trace trace;
  char *key;
  json_t *done, *result;
  struct tb_cfg *cfg;
  struct tb_engine_target target;
  char *err;
};

/* One option of getopt_long's into r: -1 to go on, else the exit status
 * (0 after --help, 2 on a bad flag, told on stderr). */
static int
run_flag(struct run *r, int opt, const struct tb_spec_field *fields, size_t nfields, char **argv)
{
  if (opt >= O_SPEC && (size_t)(opt - O_SPEC) < nfields) {
    const struct tb_spec_field *f = &fields[opt - O_SPEC];
    if (!tb_speccli_arg(f, optarg, r->spec)) {
      fprintf(stderr, "tokbench run: bad value for --%s: '%s'\n", f->cli, optarg);
      return 2;
    }
    return -1;
  }
  if (opt >= O_GPU && opt <= O_TELEMETRY)
    return cost_opt(r->endpoint, opt - O_GPU, optarg) ? -1 : 2;
  switch (opt) {
  case O_URL: r->url = optarg; break;
  case O_KEYFILE: r->key_file = optarg; break;
  case O_OUTPUT: r->output = optarg; break;
  case O_JSONL: r->force_jsonl = true; break;
  case O_TABLE: r->force_table = true; break;
  case O_RESUME: r->resume = optarg; break;
  case O_NAME: json_object_set_new(r->endpoint, "name", json_string(optarg)); break;
  case O_LAUNCH: json_object_set_new(r->endpoint, "launch_command", json_string(optarg)); break;
  case O_RUNID:
    free(r->run_id);
    r->run_id = tb_xstrdup(optarg);
    break;
  case O_CELLMEM:
    if (!tb_parse_i64(optarg, 1, 64 * 1024 * 1024, &r->cell_kb)) {
      fprintf(stderr, "tokbench run: --cell-memory-kb: 1 to 67108864 (KiB)\n");
      return 2;
    }
    break;
  case O_CACERT: r->cacert = optarg; break;
  case O_TRACE: r->trace_file = optarg; break;
  case O_TRACEFMT: r->trace_format = optarg; break;
  case 'q': r->quiet = true; break;
  case 'v': r->verbose = true; break;
  case 'h': usage(stdout); return 0;
  default:
    fprintf(stderr,
            "tokbench run: unknown or incomplete option '%s' "
            "(see tokbench run --help)\n",
            argv[optind - 1]);
    return 2;
  }
  return -1;
}

/* The command line into r (every field of the job spec with a flag is an
 * option), then the checks that need no file: -1 to go on, else the exit
 * status. */
static int
run_parse(struct run *r, int argc, char **argv)
{
  size_t nfields;
  const struct tb_spec_field *fields = tb_spec_fields(&nfields);
  struct option *opts = tb_xcalloc(TB_ARRAY_LEN(fixed_opts) + nfields + 1, sizeof *opts);
  size_t nopts = 0;
  for (size_t i = 0; i < TB_ARRAY_LEN(fixed_opts); i++)
    opts[nopts++] = fixed_opts[i];
  for (size_t i = 0; i < nfields; i++)
    if (fields[i].cli != NULL)
      opts[nopts++] = (struct option){ fields[i].cli, required_argument, NULL, O_SPEC + (int)i };
  int rc = -1, opt;
  optind = 1;
  opterr = 0;
  while (rc < 0 && (opt = getopt_long(argc, argv, "qvh", opts, NULL)) != -1)
    rc = run_flag(r, opt, fields, nfields, argv);
  free(opts);
  if (rc >= 0)
    return rc;
  if (optind < argc) {
    fprintf(stderr, "tokbench run: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  if (r->url == NULL) {
    fprintf(stderr, "tokbench run: --url is required (see tokbench run --help)\n");
    return 2;
  }
  if (!trace_flags(r->spec, r->trace_file, r->trace_format))
    return 2;
  /* the flags' values against the job spec's table: the api's ranges */
  if (!tb_spec_parse(&r->settings, r->spec, &r->err)) {
    fprintf(stderr, "tokbench run: bad settings: %s\n", r->err);
    return 2;
  }
  return -1;
}

/* The key, the CAs, the cells to resume, the trace and the environment
 * into r->target; false with a message on stderr. */
static bool
run_target(struct run *r)
{
  if (r->key_file != NULL) {
    char *why = NULL;
    r->key = tb_cfg_read_key_file(r->key_file, KEY_FILE_MAX, &why);
    if (r->key == NULL) {
      fprintf(stderr, "tokbench run: --api-key-file: %s\n", why);
      free(why);
      return false;
    }
  } else if (getenv("TOKBENCH_ENDPOINT_API_KEY") != NULL &&
             getenv("TOKBENCH_ENDPOINT_API_KEY")[0] != '\0') {
    r->key = tb_xstrdup(getenv("TOKBENCH_ENDPOINT_API_KEY"));
  }
  if (r->cacert != NULL && !tb_http_set_ca_file(r->cacert, &r->err)) {
    fprintf(stderr, "tokbench run: --cacert: %s\n", r->err);
    return false;
  }
  if (r->resume != NULL) {
    const char *why = NULL;
    r->done = read_resume(r->resume, &r->run_id, &why);
    if (r->done == NULL) {
      fprintf(stderr, "tokbench run: cannot read --resume %s: %s\n", r->resume, why);
      return false;
    }
  }
  if (r->trace_file != NULL && !read_trace(r->trace_file, r->trace_format, &r->trace))
    return false;
  r->target = (struct tb_engine_target){ .base_url = r->url,
                                         .run_id = r->run_id,
                                         .endpoint = r->endpoint,
                                         .key_hint = "tokbench run --api-key-file",
                                         .model_hint = "tokbench run --model",
                                         .cell_memory_max = (size_t)r->cell_kb * 1024,
                                         .trace = r->trace_file != NULL ? &r->trace : NULL };
  r->cfg = tb_cfg_load(run_keys, TB_ARRAY_LEN(run_keys), NULL, &r->err);
  if (r->cfg == NULL || !tb_engine_target_cfg(&r->target, r->cfg, &r->err)) {
    fprintf(stderr, "tokbench run: %s\n", r->err);
    return false;
  }
  return true;
}

/* What the engine's provenance block leaves to the program that ran it
 * (lib/result/tb_provenance): the spec's hash (the flags as a job spec),
 * and who ran each cell: this process, "cli", with no database to hold a
 * clock offset against. */
static void
provenance(struct run *r)
{
  json_t *prov = json_object_get(r->result, "provenance");
  if (prov == NULL)
    return;
  tb_provenance_set_spec(prov, r->spec, "tokbench run");
  json_t *cells = json_array();
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(r->result, "cells"), i, c)
    json_array_append_new(cells,
                          tb_provenance_cell(c, "cli", 0, false, 0, 0,
                                             "tokbench run: no database to measure an offset to"));
  tb_provenance_set_cells(prov, cells);
}

/* --verbose: the transport the streams went by (provenance.transport). */
static void
say_transport(const json_t *result)
{
  const json_t *t = json_object_get(json_object_get(result, "provenance"), "transport");
  const char *via = json_string_value(json_object_get(t, "streams"));
  const char *why = json_string_value(json_object_get(t, "io_uring"));
  fprintf(stderr, "tokbench run: streams read by %s (io_uring: %s)\n", via ? via : "unknown",
          why ? why : "unknown");
}

/* The matrix run with its progress, then its result written and printed;
 * the exit status. */
static int
run_matrix(struct run *r)
{
  struct run_ui ui = { 0 };
  bool stdout_tty = isatty(STDOUT_FILENO);
  ui.jsonl = r->force_jsonl || (!stdout_tty && !r->force_table);
  ui.tty_progress = !r->quiet && isatty(STDERR_FILENO) && !ui.jsonl;
  struct tb_engine_hooks hooks = {
    .cls = &ui,
    .on_cell = hook_cell,
    .on_progress = hook_progress,
    .cancelled = hook_cancelled,
    .on_header = hook_header,
    .error_bodies = true, /* the user's own endpoint: its answer helps */
  };
  struct sigaction sa = { 0 };
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  tb_raise_nofile(tb_engine_nofile(&r->settings));
  enum tb_engine_status st =
    tb_engine_run(&r->settings, &r->target, r->key, r->done, &hooks, &r->result, &r->err);
  provenance(r);
  if (ui.tty_progress)
    fprintf(stderr, "\r\033[K");
  if (r->verbose)
    say_transport(r->result);
  if (r->output != NULL && r->result != NULL) {
    if (json_dump_file(r->result, r->output, JSON_INDENT(2)) != 0)
      fprintf(stderr, "tokbench run: cannot write %s\n", r->output);
  }
  if (st == TB_ENGINE_FAILED) {
    /* libcurl's words for a certificate it could not verify */
    bool cert = r->err != NULL && r->cacert == NULL &&
                (strstr(r->err, "SSL certificate problem") != NULL ||
                 strstr(r->err, "certificate verify failed") != NULL);
    fprintf(stderr, "tokbench run: %s%s\n", r->err ? r->err : "run failed",
            cert ? " (a self-signed or private CA: --cacert FILE trusts it)" : "");
    return 1;
  }
  if (ui.jsonl)
    print_line(stdout, r->result);
  else
    tb_table_print(stdout, r->result);
  if (st == TB_ENGINE_CANCELLED) {
    fprintf(stderr, "tokbench run: interrupted; partial result kept\n");
    return 130;
  }
  return 0;
}

static void
run_free(struct run *r)
{
  if (r->key != NULL) {
    OPENSSL_cleanse(r->key, strlen(r->key));
    free(r->key);
  }
  free(r->run_id);
  free(r->err);
  tb_cfg_free(r->cfg);
  json_decref(r->done);
  json_decref(r->result);
  json_decref(r->endpoint);
  json_decref(r->spec);
  tb_spec_free(&r->settings);
  tb_trace_free(&r->trace);
}

int
tb_cli_run(int argc, char **argv)
{
  struct run r = { .spec = json_object(),
                   .endpoint = json_object(),
                   .cell_kb = TB_ENGINE_CELL_MEMORY_DEFAULT / 1024 };
  tb_spec_init(&r.settings);
  int rc = run_parse(&r, argc, argv);
  if (rc < 0)
    rc = run_target(&r) ? run_matrix(&r) : 2;
  run_free(&r);
  return rc;
}
