/*
 * tokbench-sim: an OpenAI-compatible inference server simulator with the
 * protocol of vLLM / SGLang and a performance model taken from measured
 * reports.  Flags and everything else: sim/README.md.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_fault.h"
#include "sim_profile.h"
#include "sim_server.h"
#include "base/tb_util.h"

static void
usage(FILE *f)
{
  fprintf(
    f,
    "usage: tokbench-sim [options]\n"
    "  --profile NAME|FILE   tiny (default), vllm-h200x2-step3p7, sglang-rtxpro6000x4-step3p7,\n"
    "                        bench, or a path to a profile JSON file\n"
    "  --profiles-dir DIR    where profile names are looked up first\n"
    "  --flavour F           the server imitated (default vllm = vllm-2026):\n"
    "                        %s\n"
    "  --host ADDR           listen address, IPv4 or IPv6 (default 127.0.0.1; ::1)\n"
    "  --tls-cert FILE       serve HTTPS with this PEM certificate (chain)\n"
    "  --tls-key FILE        and this PEM private key (both or neither)\n"
    "  --port N              listen port (default 8000; 0 = any free port)\n"
    "  --api-key KEY         require 'Authorization: Bearer KEY' where the flavour does\n"
    "  --time-scale S        divide every modelled duration by S (default 1)\n"
    "  --spec-k K            speculative mode: K tokens per chunk (default 1)\n"
    "  --reasoning FIELD     reasoning_content | reasoning | both | auto (the flavour's):\n"
    "                        the first tokens go to delta.FIELD\n"
    "  --reasoning-tokens N  how many output tokens are reasoning (default 16)\n"
    "  --eos-after N         without ignore_eos, stop after N tokens (default 0: never)\n"
    "  --early-stop N        every request ends (\"stop\") after N tokens, even with\n"
    "                        ignore_eos and a larger max_tokens (default 0: never)\n"
    "  --metrics M           engine (default) | none (404) | foreign (a gateway's own\n"
    "                        /metrics: no running/waiting gauges)\n"
    "  --no-usage            no usage in any answer, whatever stream_options ask\n"
    "  --no-tokenize         POST /tokenize answers 404\n"
    "  --dev-mode            vLLM flavours: as with VLLM_SERVER_DEV_MODE=1 (POST\n"
    "                        /reset_prefix_cache served; else 404, as vLLM)\n"
    "  --slot-save-path DIR  llama.cpp flavours: as llama-server started with it (POST\n"
    "                        /slots/{id}?action=erase served; else 501, as b11669)\n"
    "  --fault SPEC          fault applied to every generation request (see README)\n"
    "  --noise SPEC          seeded noise on decode steps: drift=2%%,jitter=5%%,seed=7\n"
    "  --slowdown P[@requests=N|@t=S]  decode steps 1/(1-P) as long from then on\n"
    "  --throttle MASK[@t=S] the GPUs' clock-event reasons (e.g. 0x4, SW power cap) from\n"
    "                        S s on, at /sim/dcgm/metrics (the SM clock a third lower)\n"
    "  --stamps              a ': t=<ns>' comment line before every SSE event (else only\n"
    "                        on requests with 'X-Tokbench-Stamps: 1')\n"
    "  --no-stamps           none unless a request asks (the default)\n"
    "  --model NAME          served model name (default: the profile's)\n"
    "  --max-model-len N     override the profile's max_model_len\n"
    "  --kv-tokens N         override the profile's KV budget (tokens)\n"
    "  --max-running N       override the profile's max running requests\n"
    "  --max-conns N         connection cap (default 10000)\n"
    "  --realtime            SCHED_FIFO priority and locked memory (best effort; root)\n",
    sim_flavour_names());
}

static bool
try_load(struct sim_profile *p, const char *dir, const char *name, char *err, size_t errlen)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/%s.json", dir, name) >= (int)sizeof(path))
    return false;
  if (access(path, R_OK) != 0)
    return false;
  if (!sim_profile_load(p, path, err, errlen)) {
    fprintf(stderr, "tokbench-sim: %s\n", err);
    exit(1);
  }
  return true;
}

/* Finds a profile by name: --profiles-dir, $TB_SIM_PROFILES, next to the
 * binary (../sim/profiles, ../../sim/profiles, ../../../sim/profiles), then
 * ./sim/profiles. */
static bool
find_profile(struct sim_profile *p, const char *name, const char *dir, char *err, size_t errlen)
{
  size_t nl = strlen(name);
  if (strchr(name, '/') || (nl > 5 && strcmp(name + nl - 5, ".json") == 0))
    return sim_profile_load(p, name, err, errlen);
  if (dir && try_load(p, dir, name, err, errlen))
    return true;
  const char *envdir = getenv("TB_SIM_PROFILES");
  if (envdir && try_load(p, envdir, name, err, errlen))
    return true;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
      *slash = '\0';
    static const char *const rel[] = { "/../sim/profiles", "/../../sim/profiles",
                                       "/../../../sim/profiles" };
    for (size_t i = 0; i < TB_ARRAY_LEN(rel); i++) {
      char d[PATH_MAX];
      if (snprintf(d, sizeof(d), "%s%s", exe, rel[i]) < (int)sizeof(d) &&
          try_load(p, d, name, err, errlen))
        return true;
    }
  }
  if (try_load(p, "sim/profiles", name, err, errlen))
    return true;
  snprintf(err, errlen, "profile '%s' not found (try --profiles-dir)", name);
  return false;
}

/* The command line: the server's config, and what is settled after it. */
struct sim_args {
  struct sim_config cfg;
  const char *reasoning;      /* --reasoning, or NULL */
  bool metrics_set;           /* --metrics was given */
  const char *profile, *pdir; /* --profile, --profiles-dir (or NULL) */
  const char *model;          /* --model, or NULL */
  int64_t kv, maxrun, maxlen; /* --kv-tokens, --max-running, --max-model-len; 0: the profile's */
  char err[512];
};

/* The defaults, before the command line. */
static void
args_init(struct sim_args *g)
{
  *g = (struct sim_args){
    .cfg = {
      .host = "127.0.0.1",
      .port = 8000,
      .time_scale = 1,
      .spec_k = 1,
      .reasoning_tokens = 16,
      .max_conns = 10000,
    },
    .profile = "tiny",
  };
  g->cfg.dialect = sim_flavour_find("vllm", &g->cfg.profile_version);
  g->cfg.flavour = g->cfg.dialect->family;
  sim_fault_init(&g->cfg.fault);
  sim_noise_init(&g->cfg.noise);
}

/* An option without a value (but --help) into cfg; false when a is none. */
static bool
switch_option(struct sim_config *cfg, const char *a)
{
  if (strcmp(a, "--stamps") == 0)
    cfg->stamps = true;
  else if (strcmp(a, "--no-stamps") == 0)
    cfg->stamps = false;
  else if (strcmp(a, "--no-usage") == 0)
    cfg->no_usage = true;
  else if (strcmp(a, "--no-tokenize") == 0)
    cfg->no_tokenize = true;
  else if (strcmp(a, "--dev-mode") == 0)
    cfg->dev_mode = true;
  else if (strcmp(a, "--realtime") == 0)
    cfg->realtime = true;
  else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)
    cfg->verbose = true;
  else
    return false;
  return true;
}

/* Option a of the profile, the flavour and the listener, with value v;
 * *ok false on a bad value; false when a is none of them. */
static bool
serve_option(struct sim_args *g, const char *a, const char *v, bool *ok)
{
  struct sim_config *cfg = &g->cfg;
  int64_t x = 0; /* stays 0 where a value does not parse (then exit 2) */
  if (strcmp(a, "--profile") == 0) {
    g->profile = v;
  } else if (strcmp(a, "--profiles-dir") == 0) {
    g->pdir = v;
  } else if (strcmp(a, "--flavour") == 0 || strcmp(a, "--flavor") == 0) {
    cfg->dialect = sim_flavour_find(v, &cfg->profile_version);
    *ok = cfg->dialect != NULL;
    if (*ok)
      cfg->flavour = cfg->dialect->family;
    else
      fprintf(stderr, "tokbench-sim: flavours: %s\n", sim_flavour_names());
  } else if (strcmp(a, "--host") == 0) {
    cfg->host = v;
  } else if (strcmp(a, "--tls-cert") == 0) {
    cfg->tls_cert = v;
  } else if (strcmp(a, "--tls-key") == 0) {
    cfg->tls_key = v;
  } else if (strcmp(a, "--port") == 0) {
    *ok = tb_parse_i64(v, 0, 65535, &x);
    cfg->port = (int)x;
  } else if (strcmp(a, "--api-key") == 0) {
    cfg->api_key = v[0] ? v : NULL;
  } else if (strcmp(a, "--max-conns") == 0) {
    *ok = tb_parse_i64(v, 1, 1000000, &x);
    cfg->max_conns = (int)x;
  } else {
    return false;
  }
  return true;
}

/* Option a of the answers (timing, reasoning, ends, metrics, switches),
 * with value v; *ok false on a bad value; false when a is none of them. */
static bool
answer_option(struct sim_args *g, const char *a, const char *v, bool *ok)
{
  struct sim_config *cfg = &g->cfg;
  int64_t x = 0; /* stays 0 where a value does not parse (then exit 2) */
  if (strcmp(a, "--time-scale") == 0) {
    char *end;
    cfg->time_scale = strtod(v, &end);
    *ok = *end == '\0' && cfg->time_scale > 0 && cfg->time_scale <= 1e6;
  } else if (strcmp(a, "--spec-k") == 0) {
    *ok = tb_parse_i64(v, 1, 64, &x);
    cfg->spec_k = (int)x;
  } else if (strcmp(a, "--reasoning") == 0) {
    *ok = strcmp(v, "reasoning_content") == 0 || strcmp(v, "reasoning") == 0 ||
          strcmp(v, "both") == 0 || strcmp(v, "auto") == 0 || strcmp(v, "none") == 0;
    g->reasoning = v;
  } else if (strcmp(a, "--reasoning-tokens") == 0) {
    *ok = tb_parse_i64(v, 0, INT32_MAX, &cfg->reasoning_tokens);
  } else if (strcmp(a, "--eos-after") == 0) {
    *ok = tb_parse_i64(v, 0, INT32_MAX, &cfg->eos_after);
  } else if (strcmp(a, "--early-stop") == 0) {
    *ok = tb_parse_i64(v, 0, INT32_MAX, &cfg->early_stop);
  } else if (strcmp(a, "--metrics") == 0) {
    *ok = sim_metrics_parse(v, &cfg->metrics);
    g->metrics_set = true;
  } else if (strcmp(a, "--slot-save-path") == 0) {
    cfg->slot_save = v[0] != '\0'; /* the sim saves nothing: the path is only a switch */
    *ok = cfg->slot_save;
  } else {
    return false;
  }
  return true;
}

/* ok, after the parser's message in err when false. */
static bool
parsed(bool ok, const char *err)
{
  if (!ok)
    fprintf(stderr, "tokbench-sim: %s\n", err);
  return ok;
}

/* Option a of the faults, the noise and the model's sizes, with value v;
 * *ok false on a bad value; false when a is none of them. */
static bool
model_option(struct sim_args *g, const char *a, const char *v, bool *ok)
{
  struct sim_config *cfg = &g->cfg;
  char *err = g->err;
  size_t cap = sizeof(g->err);
  if (strcmp(a, "--fault") == 0)
    *ok = parsed(sim_fault_parse(&cfg->fault, v, err, cap), err);
  else if (strcmp(a, "--noise") == 0)
    *ok = parsed(sim_noise_parse(&cfg->noise, v, err, cap), err);
  else if (strcmp(a, "--slowdown") == 0)
    *ok = parsed(sim_noise_parse_slowdown(&cfg->noise, v, err, cap), err);
  else if (strcmp(a, "--throttle") == 0)
    *ok = parsed(sim_power_parse_throttle(&cfg->throttle, v, err, cap), err);
  else if (strcmp(a, "--model") == 0)
    g->model = v;
  else if (strcmp(a, "--max-model-len") == 0)
    *ok = tb_parse_tokens(v, &g->maxlen) && g->maxlen >= 16;
  else if (strcmp(a, "--kv-tokens") == 0)
    *ok = tb_parse_tokens(v, &g->kv) && g->kv >= 16;
  else if (strcmp(a, "--max-running") == 0)
    *ok = tb_parse_i64(v, 1, 1000000, &g->maxrun);
  else
    return false;
  return true;
}

/* The command line into g: -1 to go on, else the exit status (after the
 * message, or the help). */
static int
parse_args(struct sim_args *g, int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (switch_option(&g->cfg, a))
      continue;
    if (v == NULL) {
      fprintf(stderr, "tokbench-sim: %s needs a value\n", a);
      usage(stderr);
      return 2;
    }
    i++;
    bool ok = true;
    if (!serve_option(g, a, v, &ok) && !answer_option(g, a, v, &ok) &&
        !model_option(g, a, v, &ok)) {
      fprintf(stderr, "tokbench-sim: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "tokbench-sim: bad value for %s: %s\n", a, v);
      return 2;
    }
  }
  return -1;
}

/* What follows from the options together: a gateway's switches, the
 * reasoning field; 2 (after the message) when TLS is half given, else -1. */
static int
settle_args(struct sim_args *g)
{
  struct sim_config *cfg = &g->cfg;
  if (cfg->flavour == SIM_FLAVOUR_GATEWAY) {
    /* a bare gateway: the switches for servers that give less */
    cfg->no_usage = true;
    if (!g->metrics_set)
      cfg->metrics = SIM_METRICS_FOREIGN;
  }
  if (g->reasoning != NULL && strcmp(g->reasoning, "none") != 0)
    cfg->reasoning_field =
      strcmp(g->reasoning, "auto") == 0 ? cfg->dialect->reasoning : g->reasoning;
  if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL)) {
    fprintf(stderr, "tokbench-sim: --tls-cert and --tls-key go together\n");
    return 2;
  }
  return -1;
}

/* The profile into *p, with the command line's overrides; false after the
 * message. */
static bool
load_profile(struct sim_args *g, struct sim_profile *p)
{
  if (!find_profile(p, g->profile, g->pdir, g->err, sizeof(g->err))) {
    fprintf(stderr, "tokbench-sim: %s\n", g->err);
    return false;
  }
  if (g->model)
    snprintf(p->model, sizeof(p->model), "%s", g->model);
  if (g->kv)
    p->kv_budget = g->kv;
  if (g->maxrun)
    p->max_running = g->maxrun;
  if (g->maxlen)
    p->max_model_len = g->maxlen;
  return true;
}

int
main(int argc, char **argv)
{
  struct sim_args g;
  args_init(&g);
  int rc = parse_args(&g, argc, argv);
  if (rc < 0)
    rc = settle_args(&g);
  if (rc >= 0)
    return rc;
  struct sim_profile p;
  if (!load_profile(&g, &p))
    return 1;
  g.cfg.profile = &p;
  rc = sim_server_run(&g.cfg);
  sim_profile_free(&p);
  return rc;
}
