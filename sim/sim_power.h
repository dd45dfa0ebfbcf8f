/*
 * sim_power: the simulator's GPUs draw power (issue 26).  A
 * dcgm-exporter-shaped Prometheus text at GET /sim/dcgm/metrics (no key:
 * telemetry is another service), one series per GPU with dcgm-exporter's
 * labels (gpu="0", UUID="GPU-...", device="nvidia0", modelName; its
 * README's sample output, github.com/NVIDIA/dcgm-exporter), the names and
 * units of its etc/default-counters.csv: DCGM_FI_DEV_POWER_USAGE (gauge, W),
 * DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (counter, mJ since boot),
 * DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_SM_CLOCK (MHz), DCGM_FI_DEV_GPU_TEMP
 * (C), and DCGM_FI_DEV_CLOCKS_EVENT_REASONS (NVML's bitmask: 0x1 GPU idle,
 * 0x4 SW power cap, ...; DCGM's "Field Constants").
 *
 * The model (the profile's "power" object, sim/README.md): the endpoint's
 * energy since the simulator started is
 *   E = idle_w x gpus x elapsed_s + j_per_decode_token x tokens generated
 *       + j_per_prefill_token x prompt tokens prefilled (cache hits left out)
 * split evenly over the GPUs (each counter starts at a per-GPU "boot"
 * offset).  The power gauge is E's slope over the reads of the last 250 ms
 * or more.  An injected throttle (--throttle MASK[@t=S]) sets its reasons
 * from S seconds on and lowers the SM clock by a third; it changes no
 * timing.  /sim/expected gives the truth (sim_power_expected).
 */
#ifndef SIM_POWER_H
#define SIM_POWER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_util.h"

struct server;
struct sim_profile;

/* --throttle MASK[@t=S]: reasons (hex or decimal, not 0) from S seconds
 * after start (default 0). */
struct sim_throttle {
  uint64_t mask; /* 0: none */
  double after_s;
};
bool sim_power_parse_throttle(struct sim_throttle *t, const char *v, char *err,
                              size_t errlen) TB_MUST_CHECK;

/* The telemetry text of s at now (new string, *len its length).  Updates
 * the gauge's state. */
char *sim_power_metrics(struct server *s, int64_t now, size_t *len) TB_MUST_CHECK;

/* Adds "power" to an expected-cell document: {gpus, idle_w (all GPUs),
 * j_per_decode_token, j_per_prefill_token, avg_power_w and
 * j_per_output_token of the cell's steady decode (total_tok_s from doc)}. */
void sim_power_expected(const struct sim_profile *p, json_t *doc);

#endif
