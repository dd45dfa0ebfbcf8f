/*
 * tb_telemetry: an endpoint's GPU telemetry during a run (issue 26): its
 * `telemetry_url`, a Prometheus text endpoint, read on a thread of its own
 * once every interval, each read summed over the GPUs into one
 * tb_cost_sample; a cell's window is then summed up by tb_cost_window.
 *
 * The names read (each checked against its source):
 * - NVIDIA dcgm-exporter (etc/default-counters.csv of
 *   github.com/NVIDIA/dcgm-exporter): DCGM_FI_DEV_POWER_USAGE (gauge, W),
 *   DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (counter, mJ since boot),
 *   DCGM_FI_DEV_GPU_UTIL (gauge, %), DCGM_FI_DEV_SM_CLOCK (gauge, MHz),
 *   DCGM_FI_DEV_GPU_TEMP (gauge, C); one series per GPU with the labels
 *   gpu="0" and UUID="GPU-..." (its README's sample output).  The
 *   clock-event reasons bitmask DCGM_FI_DEV_CLOCKS_EVENT_REASONS (DCGM 3.3
 *   and later; DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before: DCGM's "Field
 *   Constants", docs.nvidia.com/datacenter/dcgm), not in the default
 *   counters: add it to the exporter's counters file.
 * - utkuozdemir/nvidia_gpu_exporter (nvidia-smi): nvidia_smi_power_draw_watts
 *   (W), nvidia_smi_utilization_gpu_ratio (0-1), nvidia_smi_temperature_gpu
 *   (C), nvidia_smi_clocks_current_sm_clock_hz (Hz); one series per GPU by
 *   the uuid label; no energy counter, so the power gauge is integrated.
 * A GPU is one value of the gpu label, else of UUID or uuid; a series with
 * none is GPU "".  At most TB_TELEMETRY_GPUS GPUs, bodies over
 * TB_TELEMETRY_BODY_MAX are not read.
 *
 * The thread runs under SCHED_IDLE (as tb_ratewatch's): a read can come
 * late, never a request's start.  A read that fails is counted (failed) and
 * skipped.  The URL is fetched through tb_http (the egress policy, TLS
 * trust, a timeout under the interval), without the endpoint's API key:
 * telemetry is another service.
 */
#ifndef TB_TELEMETRY_H
#define TB_TELEMETRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "result/tb_cost.h"
#include "base/tb_util.h"

#define TB_TELEMETRY_GPUS 64
#define TB_TELEMETRY_BODY_MAX (4u * 1024u * 1024u)
/* The samples kept: the newest ones (over an hour at one a second). */
#define TB_TELEMETRY_KEEP 4096u
#define TB_TELEMETRY_INTERVAL_MS 1000L

/* One read of the text into *out (t_ns left as it is): false when no GPU
 * series of a name above is in it. */
bool tb_telemetry_parse(const char *text, size_t len, struct tb_cost_sample *out) TB_MUST_CHECK;

/*
 * The GPUs a telemetry text names (issue 35's provenance): their count
 * (the GPUs with a series of a name above), their model (dcgm-exporter's
 * modelName label, nvidia_gpu_exporter's nvidia_smi_gpu_info name) and
 * driver (dcgm-exporter's DCGM_FI_DRIVER_VERSION label, nvidia_smi_gpu_info
 * driver_version), each "unknown" when no series carries it; a list when
 * the GPUs differ.  {"name", "count", "driver", "source"}, new; NULL when
 * the text has no GPU series.  Pure.
 */
json_t *tb_telemetry_parse_gpus(const char *text, size_t len) TB_MUST_CHECK;

struct tb_telemetry;

/* What tb_telemetry_parse_gpus read from the first read that named GPUs
 * (new reference), or NULL when none did yet.  NULL is fine. */
json_t *tb_telemetry_gpus(struct tb_telemetry *t) TB_MUST_CHECK;

/* Starts reading url (copied) every interval_ms (<= 0: the default).
 * Never NULL; a thread that cannot start leaves the window unknown. */
struct tb_telemetry *tb_telemetry_start(const char *url, long interval_ms) TB_MUST_CHECK;

/* Asks the thread for a read now (at a window's edge: the counter is then
 * read a few milliseconds from it, not up to an interval away, and a
 * ramp-up before the window cannot bend the interpolation).  Never blocks
 * on the read.  NULL is fine. */
/* One read now, in the caller's thread (NULL or not started: nothing): a
 * sample that surely precedes what the caller starts next (the reader
 * thread runs at idle priority and may be late on a busy machine). */
void tb_telemetry_read_now(struct tb_telemetry *t);

void tb_telemetry_poke(struct tb_telemetry *t);

/* The window [t0, t1] (monotonic ns) summed up into *out (tb_cost_window);
 * when no sample is at or after t1 yet, reads once now (the cell's window
 * has ended: the read costs it nothing). */
void tb_telemetry_window(struct tb_telemetry *t, int64_t t0, int64_t t1,
                         struct tb_cost_energy *out);

/* Reads that failed or held no GPU, and reads in all. */
void tb_telemetry_counts(struct tb_telemetry *t, unsigned *failed, unsigned *reads);

/*
 * A finished cell's cost and energy (tb_cost_cell): the price and GPUs of
 * endpoint (the target's endpoint object: gpu, price_per_hour, currency,
 * hardware; may be NULL), the energy of t over the cell's window [t0, t1]
 * (t NULL: no telemetry, the money alone).  Nothing for a cell that is not
 * a valid decode or rate cell, or when neither says anything.
 */
void tb_telemetry_cell(struct tb_telemetry *t, const json_t *endpoint, json_t *cell, int64_t t0,
                       int64_t t1);

/* Stops the thread and frees t.  NULL is fine. */
void tb_telemetry_stop(struct tb_telemetry *t);

#endif
