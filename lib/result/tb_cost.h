/*
 * tb_cost: what a cell cost in money and energy (issue 26; docs/reports.md,
 * "Cost and energy").  Pure: the engine's tb_telemetry gathers the GPU
 * samples, this module turns a window of them and the window's tokens into
 * figures, and the renderers show them.
 *
 * Money: an endpoint's price_per_hour (in currency) pays for the whole
 * endpoint (gpu.count GPUs) for the window's wall time, so
 *   cost_per_m_output_tokens = price_per_hour x measured_s / 3600
 *                              / output_tokens x 1e6
 * and cost_per_m_tokens the same over output plus input tokens (the prompt
 * tokens of the requests the cell started: requests_started x context
 * for a decode cell, x prompt_tokens_mean for a rate cell).  Its 95%
 * interval follows total_tps_ci95 (the price and the window are exact).
 *
 * Energy: the GPUs' energy over the window [t0, t1], from NVIDIA
 * dcgm-exporter's DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter (mJ since
 * boot, summed over GPUs) read at t0 and t1 by linear interpolation
 * between the samples around them (energy_source "energy_counter"); where
 * no counter is served, the DCGM_FI_DEV_POWER_USAGE gauge (W) integrated
 * over the samples by the trapezoid rule, interpolated at the edges
 * ("power_gauge").  j_per_output_token = joules / output_tokens; its
 * interval follows total_tps_ci95 as the cost's does; avg_power_w =
 * joules / (t1 - t0).
 *
 * The self-check gpu_throttled fails when a clock-event reason other than
 * GPU idle (bit 0x1) was set in any sample of the window
 * (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, formerly
 * DCGM_FI_DEV_CLOCK_THROTTLE_REASONS; the bits are NVML's
 * nvmlClocksEventReasons, docs.nvidia.com/deploy/nvml-api).
 */
#ifndef TB_COST_H
#define TB_COST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

/* What an endpoint costs (issue 26): from a result header's "cost", an
 * endpoint object or a job's labels. */
struct tb_cost_price {
  double per_hour;  /* NAN: no price */
  char currency[4]; /* ISO 4217, "USD" when not given */
  int64_t gpus;     /* 0: unknown */
  char gpu[128];    /* the GPU's name, "" when unknown */
};

/*
 * The price of obj (borrowed; an endpoint as the worker hands it to the
 * engine, or a header's "cost"): gpu {name, count} (else hardware {gpu or
 * type, count}), price_per_hour, currency.  False when there is neither a
 * price nor a GPU count.
 */
bool tb_cost_price_of(const json_t *obj, struct tb_cost_price *p);
/* The same from a job's labels (an imported result): "gpu", "gpu_count",
 * "price_per_hour", "currency"; labels that do not parse are ignored. */
bool tb_cost_price_of_labels(const json_t *labels, struct tb_cost_price *p);
/* The header's "cost" member: {gpu: {name, count}, price_per_hour,
 * currency, telemetry}; telemetry names what the cells' energy came from
 * ("dcgm" when a telemetry_url was read, else null).  New reference. */
json_t *tb_cost_header(const struct tb_cost_price *p, bool telemetry) TB_MUST_CHECK;

/* The GPU-idle clock-event bit, the only one that is not a throttle. */
#define TB_COST_REASON_IDLE 0x1ull

/* One telemetry sample: the GPUs of the endpoint together. */
struct tb_cost_sample {
  int64_t t_ns;     /* monotonic */
  double power_w;   /* sum over GPUs; NAN: no gauge */
  double energy_mj; /* sum over GPUs of the counter; NAN: no counter */
  double util_pct;  /* mean over GPUs; NAN */
  double sm_mhz;    /* mean over GPUs; NAN */
  double temp_c;    /* the hottest GPU; NAN */
  uint64_t reasons; /* clock-event reasons, OR over GPUs */
  bool has_reasons;
  int gpus; /* GPUs seen in the sample */
};

/* What the samples say of a window. */
struct tb_cost_energy {
  bool ok;            /* joules known */
  const char *source; /* "energy_counter" | "power_gauge" */
  double joules, avg_w, span_s;
  size_t samples; /* samples inside the window */
  int gpus;
  double util_mean, util_min, util_max; /* NAN when none */
  double sm_mean, sm_min, sm_max;
  double temp_max;
  bool reasons_known;
  uint64_t reasons; /* OR over the window's samples */
};

/*
 * The window [t0, t1] of samples s[0..n) (ascending t_ns): energy as the
 * header says, the summaries over the samples inside the window (or the
 * nearest one when none is), the reasons OR-ed over samples from the last
 * one at or before t0 to the first at or after t1.  ok false when no
 * sample brackets an edge (the counter) or fewer than two samples touch
 * the window (the gauge).
 */
void tb_cost_window(const struct tb_cost_sample *s, size_t n, int64_t t0, int64_t t1,
                    struct tb_cost_energy *out);

/* "sw_power_cap, hw_slowdown" of reasons (idle left out) into buf; "" when
 * none.  Returns buf. */
const char *tb_cost_reasons_text(uint64_t reasons, char *buf, size_t len);

/*
 * Adds to a valid decode or rate cell (nothing to any other) its
 * `efficiency`:
 *   {currency, price_per_hour, gpus, gpu, tps_per_gpu, tps_per_gpu_ci95,
 *    cost_per_m_output_tokens, cost_per_m_output_tokens_ci95,
 *    cost_per_m_tokens, input_tokens,
 *    energy_source, joules, j_per_output_token, j_per_output_token_ci95,
 *    avg_power_w, telemetry_samples, gpu_util_pct {mean, min, max},
 *    sm_clock_mhz {mean, min, max}, gpu_temp_c_max, clock_event_reasons []}
 * (members unknown left out), and, when e is given and its reasons known,
 * checks.gpu_throttled (false when a reason other than idle was set: the
 * check fails with the reasons named).  p and e may be NULL; nothing is
 * added when both say nothing.
 */
void tb_cost_cell(json_t *cell, const struct tb_cost_price *p, const struct tb_cost_energy *e);

/*
 * An imported document (doc, edited) priced from its job's labels
 * (tb_cost_price_of_labels): when they give a price or a GPU count and the
 * document has no "cost" yet, sets it (telemetry null) and adds the money
 * and per-GPU figures to every valid decode and rate cell without
 * `efficiency`.  Returns whether it did.
 */
bool tb_cost_apply_labels(json_t *doc, const json_t *labels);

/*
 * The efficiency of a cell combined from its repeats (tb_result_combine;
 * reps borrowed, cell edited): the price of the first repeat's, the
 * joules summed over repeats that all have them (J per token and watts
 * over the summed tokens and windows, energy_source the first's), the
 * utilisation and clock summaries pooled (means averaged, the extremes
 * kept), and checks.gpu_throttled true when any repeat's was (the failed
 * reasons come from tb_checks_combine).  Nothing when the first repeat has
 * no efficiency.
 */
void tb_cost_combine(json_t *cell, json_t *const *reps, size_t n);

/* A cell's figure at path "efficiency.<name>" as a number; NAN when absent. */
double tb_cost_figure(const json_t *cell, const char *name);

#endif
