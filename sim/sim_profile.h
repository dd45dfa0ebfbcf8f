/*
 * sim_profile: the performance model of one served model on one machine,
 * loaded from a JSON profile (sim/profiles/<name>.json, format in
 * sim/README.md), and the ground truth it predicts for a benchmark cell.
 *
 * Durations returned here are modelled, unscaled milliseconds; the server
 * divides them by --time-scale.
 */
#ifndef SIM_PROFILE_H
#define SIM_PROFILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_util.h"

#define SIM_PROFILE_MAX_POINTS 64
#define SIM_PROFILE_TEXT_CAP 256

/* A table over (context, batch), bilinear between points, clamped outside. */
struct sim_grid {
  int nctx, nbatch;
  double ctx[SIM_PROFILE_MAX_POINTS];
  double batch[SIM_PROFILE_MAX_POINTS];
  double v[SIM_PROFILE_MAX_POINTS][SIM_PROFILE_MAX_POINTS]; /* [ctx][batch] */
};

struct sim_profile {
  char name[SIM_PROFILE_TEXT_CAP];
  char model[SIM_PROFILE_TEXT_CAP];
  char model_root[SIM_PROFILE_TEXT_CAP];
  int64_t max_model_len;
  int64_t kv_budget;  /* tokens */
  int64_t block_size; /* tokens per KV block (vLLM metrics) */
  int64_t max_running;
  char engine_name[SIM_PROFILE_TEXT_CAP];
  char engine_version[SIM_PROFILE_TEXT_CAP];
  char hardware[SIM_PROFILE_TEXT_CAP];
  json_t *engine; /* the profile's "engine" object, owned */
  int nprefill;
  double prefill_ctx[SIM_PROFILE_MAX_POINTS];
  double prefill_tps[SIM_PROFILE_MAX_POINTS];
  struct sim_grid decode; /* step ms */
  struct sim_grid cached; /* cached TTFT ms */
  /* power (sim_power; the profile's optional "power" object) */
  int gpus;                   /* engine.gpu_count, 1 when absent */
  double idle_w;              /* per GPU */
  double j_decode, j_prefill; /* J per token, the whole endpoint */
  double sm_mhz;              /* SM clock under load */
};

/* Loads a profile from a JSON file.  false with a message in err (cap
 * errlen) on a missing file or a bad profile.  Free with sim_profile_free. */
bool sim_profile_load(struct sim_profile *p, const char *path, char *err,
                      size_t errlen) TB_MUST_CHECK;
/* Same, from JSON text (for tests). */
bool sim_profile_parse(struct sim_profile *p, const char *text, char *err,
                       size_t errlen) TB_MUST_CHECK;
void sim_profile_free(struct sim_profile *p);

/* Modelled decode step (ms) for a batch of `batch` streams whose prompts
 * average `ctx` tokens. */
double sim_profile_step_ms(const struct sim_profile *p, double batch, double ctx);
/* Cold prefill time (ms) of a prompt of ctx tokens: ctx / speed(ctx). */
double sim_profile_prefill_ms(const struct sim_profile *p, double ctx);
/* TTFT (ms) of a prefix-cache hit with `batch` requests running. */
double sim_profile_cached_ms(const struct sim_profile *p, double batch, double ctx);
/* Prefill (ms) of a prompt of ctx tokens whose first `cached` tokens the
 * prefix cache holds (a shared prefix): the cold prefill of the rest,
 * prefill(ctx) - prefill(cached), and never less than a full hit's
 * cached_ms(batch, ctx).  cached <= 0: the cold prefill. */
double sim_profile_prefix_ms(const struct sim_profile *p, double batch, double ctx, double cached);

/* Ground truth for a cell: new JSON object (caller decrefs), durations
 * divided by scale.  See sim/README.md for the members. */
json_t *sim_profile_expected(const struct sim_profile *p, int64_t ctx, int64_t conc,
                             int64_t max_tokens, double scale);

#endif
