/*
 * sim_power: the simulator's GPUs draw power.  See sim_power.h.
 */
#include "sim_power.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_state.h"

#define GAUGE_MIN_NS 250000000LL
#define IDLE_SM_MHZ 210.0
#define REASON_IDLE 0x1ull
/* The driver its GPUs report (dcgm-exporter's DCGM_FI_DRIVER_VERSION label,
 * a "label" field of its default-counters.csv): a made-up one, for the
 * provenance's GPU driver to have something to read. */
#define SIM_DRIVER_VERSION "550.90.07"

bool
sim_power_parse_throttle(struct sim_throttle *t, const char *v, char *err, size_t errlen)
{
  memset(t, 0, sizeof *t);
  char mask[32];
  const char *at = strchr(v, '@');
  size_t n = at ? (size_t)(at - v) : strlen(v);
  if (n == 0 || n >= sizeof mask)
    goto bad;
  memcpy(mask, v, n);
  mask[n] = '\0';
  char *end = NULL;
  unsigned long long m = strtoull(mask, &end, 0);
  if (end == mask || *end != '\0' || m == 0)
    goto bad;
  t->mask = m;
  if (at != NULL) {
    if (strncmp(at, "@t=", 3) != 0)
      goto bad;
    t->after_s = strtod(at + 3, &end);
    if (end == at + 3 || *end != '\0' || !(t->after_s >= 0) || t->after_s > 1e7)
      goto bad;
  }
  return true;
bad:
  snprintf(err, errlen,
           "--throttle: MASK[@t=S] (a clock-event bitmask, not 0, e.g. 0x4; "
           "S seconds after start)");
  return false;
}

/* The endpoint's energy (J) since start. */
static double
energy_j(const struct server *s, int64_t now)
{
  const struct sim_profile *p = s->p;
  double el = (double)(now - s->started_ns) / 1e9;
  uint64_t pre = s->st.prompt_tokens > s->st.prefix_hit_tokens
                   ? s->st.prompt_tokens - s->st.prefix_hit_tokens
                   : 0;
  return p->idle_w * p->gpus * el + p->j_decode * (double)s->st.tokens_generated +
         p->j_prefill * (double)pre;
}

char *
sim_power_metrics(struct server *s, int64_t now, size_t *len)
{
  const struct sim_profile *p = s->p;
  double e = energy_j(s, now);
  if (now - s->pw_t >= GAUGE_MIN_NS) {
    s->pw_w = (e - s->pw_e) / ((double)(now - s->pw_t) / 1e9);
    s->pw_t = now;
    s->pw_e = e;
  } else if (s->pw_w == 0) {
    s->pw_w = p->idle_w * p->gpus;
  }
  bool busy = s->running > 0;
  const struct sim_throttle *th = &s->cfg->throttle;
  bool thr = th->mask != 0 && (double)(now - s->started_ns) / 1e9 >= th->after_s;
  uint64_t reasons = (busy ? 0 : REASON_IDLE) | (thr ? th->mask : 0);
  double sm = busy ? p->sm_mhz : IDLE_SM_MHZ;
  if (thr)
    sm *= 2.0 / 3.0;
  double util = busy ? 100.0 * (s->running < 4 ? 0.5 + 0.125 * s->running : 1.0) : 0;
  const char *model = p->hardware[0] ? p->hardware : "Simulated GPU";
  size_t cap = 1024 + (size_t)p->gpus * 1800;
  char *out = tb_xmalloc(cap);
  size_t at = (size_t)snprintf(
    out, cap,
    "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
    "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
    "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
    "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
    "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n"
    "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
    "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n"
    "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %%).\n"
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    "# HELP DCGM_FI_DEV_CLOCKS_EVENT_REASONS Current clock event reasons (bitmask).\n"
    "# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge\n");
  for (int g = 0; g < p->gpus && at < cap; g++) {
    char lab[512];
    snprintf(lab, sizeof lab,
             "gpu=\"%d\",UUID=\"GPU-5157%04x-0000-4000-8000-00000000%04x\",device=\"nvidia%d\","
             "modelName=\"%.100s\",Hostname=\"tokbench-sim\",DCGM_FI_DRIVER_VERSION=\"%s\"",
             g, (unsigned)g, (unsigned)g, g, model, SIM_DRIVER_VERSION);
    double w = s->pw_w / p->gpus;
    /* each GPU's counter since its boot: an offset of its own */
    double mj = (e / p->gpus) * 1e3 + 1e9 * (g + 1);
    at += (size_t)snprintf(out + at, cap - at,
                           "DCGM_FI_DEV_SM_CLOCK{%s} %.0f\n"
                           "DCGM_FI_DEV_GPU_TEMP{%s} %.0f\n"
                           "DCGM_FI_DEV_POWER_USAGE{%s} %.3f\n"
                           "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{%s} %.0f\n"
                           "DCGM_FI_DEV_GPU_UTIL{%s} %.0f\n"
                           "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{%s} %llu\n",
                           lab, sm, lab, 30.0 + w / 10.0, lab, w, lab, mj, lab, util, lab,
                           (unsigned long long)reasons);
  }
  *len = at < cap ? at : cap - 1;
  return out;
}

void
sim_power_expected(const struct sim_profile *p, json_t *doc)
{
  double tps = json_number_value(json_object_get(doc, "total_tok_s"));
  double idle = p->idle_w * p->gpus;
  double w = idle + p->j_decode * tps;
  json_t *o = json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "gpus", p->gpus, "idle_w", idle,
                        "j_per_decode_token", p->j_decode, "j_per_prefill_token", p->j_prefill,
                        "sm_clock_mhz", p->sm_mhz, "avg_power_w", w, "j_per_output_token",
                        tps > 0 ? w / tps : 0.0);
  json_object_set_new(doc, "power", o);
}
