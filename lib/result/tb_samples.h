/*
 * tb_samples: one shard's per-request samples of a cell, their compact
 * lossless encoding, and the exact merge of a cell's shards (issue 24).
 *
 * A cell driven by N workers is judged as one cell: its percentiles are
 * those of the union of every shard's samples, never an average of the
 * shards' percentiles (which is not a percentile of anything).  So each
 * shard keeps every sample, stores it (db: a bytea per shard) and the cell
 * is computed from the union, by the same writer a one-process cell uses
 * (tb_result_cell_set_decode): the figures of a merged cell are identical
 * to those of one process holding all its samples.
 *
 * What a shard holds:
 *  - four series of microseconds (int64 >= 0): TTFT and e2e per request,
 *    time per output token per stream, and every gap between two token
 *    chunks; a series keeps its order (the encoding is lossless as a
 *    sequence, not only as a multiset);
 *  - the figures that add: output tokens in the window, requests completed
 *    and started, requests meeting the SLOs (goodput), the count's
 *    resolution (tokens), the streams it drove, the requests active on
 *    average (x 1000), shards that counted chunks, socket reads and those
 *    the kernel stamped;
 *  - output tokens per slice of the window, the slices cut on the common
 *    timeline (the same slice width and count in every shard of a cell), so
 *    that the merged series is the element-wise sum, tokens/s adds up over
 *    exactly one interval and issue 14's batch means run over the merged
 *    timeline.
 *
 * The encoding: "TBS1", then unsigned LEB128 varints: the slice width (us),
 * the slice count, each slice's tokens, the ten counters, and per series
 * its count and its values as zig-zag deltas from the previous (the first
 * from 0).  A rate cell's document goes on (no trailing bytes otherwise):
 * the count of its counters (14) and their values, its eight series
 * (tb_samples_rseries), the count of turns and per turn its six counters
 * and its TTFT series, then the first error's length and bytes (at most
 * TB_SAMPLES_MAX_ERROR, no NUL).  A shard whose server timed its requests
 * (tb_srvtime: llama.cpp's `timings`) writes "TBS2" instead, its timings
 * right after the magic, the rest as above: the source (1: llama.cpp), the
 * requests, tokens_equal, cache_n and prompt_n, then its seven series
 * (prompt us, prompt milli-tokens/s, time per output token us, tokens
 * predicted, TTFT minus prompt us, the server's span per interval us,
 * tokbench's TPOT against it in ppm: the last and the fifth may be
 * negative) each as a
 * count and zig-zag values (not deltas), at most TB_SAMPLES_MAX_VALUES and
 * |v| < 2^53; the merge adds them (tb_srvtime_merge) and the merged cell
 * carries their `server_timings`.  A sorted series of microsecond latencies costs about one or two
 * bytes a value.  Decoding checks every length against the bytes left and
 * against TB_SAMPLES_MAX_VALUES, so a bad or hostile blob is a clear error,
 * never a large allocation or a read past its end.
 */
#ifndef TB_SAMPLES_H
#define TB_SAMPLES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_stats.h"
#include "result/tb_srvtime.h"

enum tb_samples_series {
  TB_SAMPLES_TTFT,
  TB_SAMPLES_TPOT,
  TB_SAMPLES_E2E,
  TB_SAMPLES_GAP,
  TB_SAMPLES_NSERIES
};

/* caps of one shard's document: values in one series, slices */
#define TB_SAMPLES_MAX_VALUES (64u * 1024 * 1024)
#define TB_SAMPLES_MAX_SLICES (1u << 20)

/* A rate cell's own series (issue 24, part 1): microseconds, on the common
 * timeline (after the cell's t0, the same instant in every shard). */
enum tb_samples_rseries {
  TB_SAMPLES_LAG,   /* per started request: actual start - scheduled start
                     * (aligned with START) */
  TB_SAMPLES_START, /* per started request: its start after t0 ... */
  TB_SAMPLES_END,   /* ... and its end (aligned with START, failed ones too) */
  TB_SAMPLES_SCHED, /* per arrival the shard owned (dropped ones too): its
                     * scheduled time after t0 */
  /* per started request, aligned with START and END (the whole request,
   * for a window computed on the union, issue 25's steady state): */
  TB_SAMPLES_ROK,     /* 1 when it ended soundly, else 0 */
  TB_SAMPLES_RTTFT,   /* its TTFT + 1 (0: none) */
  TB_SAMPLES_RTPOT,   /* its time per output token + 1 (0: none) */
  TB_SAMPLES_RTOKENS, /* its output tokens */
  TB_SAMPLES_NRSERIES
};

#define TB_SAMPLES_MAX_TURNS 64u
#define TB_SAMPLES_MAX_ERROR 199u

/* One turn of a conversation cell: what adds, and its TTFTs (us). */
struct tb_samples_turn {
  struct tb_stats ttft;
  int64_t sent, ok, pr_sum, pr_n, cached_sum, cached_prompt_sum;
};

/* What a shard of a rate cell adds beside the decode figures (on: this is
 * a rate cell's document).  Counters add, but arrivals_us and last_end_us,
 * instants on the common timeline, merge as their maximum. */
struct tb_samples_rate {
  bool on;
  struct tb_stats s[TB_SAMPLES_NRSERIES];
  int64_t scheduled, errors, dropped;
  int64_t pr_sum, pr_n, cached_sum, cached_prompt_sum, cached_n; /* prompts as counted */
  int64_t conv_started, conv_completed, conv_abandoned, conv_dropped;
  int64_t arrivals_us; /* the end of the arrivals after t0 */
  int64_t last_end_us; /* the last request's end after t0 */
  struct tb_samples_turn *turns;
  size_t nturns;
  /* the first failed request's reason ("": none); a merge keeps the first
   * shard's that has one */
  char first_error[TB_SAMPLES_MAX_ERROR + 1];
};

struct tb_samples {
  struct tb_stats s[TB_SAMPLES_NSERIES]; /* microseconds */
  struct tb_samples_rate rate;           /* a rate cell's (rate.on) */
  int64_t slice_us;                      /* width of a slice (0: none) */
  int64_t *slices;                       /* output tokens per slice */
  size_t nslices;
  int64_t tokens;               /* output tokens in the window */
  int64_t completed;            /* requests completed in the window */
  int64_t started;              /* requests started in the cell */
  int64_t good;                 /* completed requests meeting the SLOs */
  int64_t resolution;           /* tokens the window's cut can be off by */
  int64_t streams;              /* streams (C) this shard drove */
  int64_t active_milli;         /* requests active on average x 1000 */
  int64_t chunked;              /* shards that counted chunks, not usage */
  int64_t reads, stamped_reads; /* socket reads, those the kernel stamped */
  struct tb_srvtime srv;        /* the server's own timings of its requests */
};

void tb_samples_init(struct tb_samples *m);
void tb_samples_free(struct tb_samples *m);
/* Appends one value (us, clamped at 0) to a series. */
void tb_samples_add(struct tb_samples *m, enum tb_samples_series k, int64_t us);
/* Appends one value (us, clamped at 0) to a rate series (sets rate.on). */
void tb_samples_radd(struct tb_samples *m, enum tb_samples_rseries k, int64_t us);
/* Turn t (0-based, < TB_SAMPLES_MAX_TURNS) of m, the turns before it made
 * (sets rate.on); NULL past the cap. */
struct tb_samples_turn *tb_samples_turn(struct tb_samples *m, size_t t);

/* Sets the window's slices: n slices of width_us, tokens[i] each (copied).
 * false (nothing changed) when n or width_us is out of range. */
bool tb_samples_set_slices(struct tb_samples *m, int64_t width_us, const int64_t *tokens, size_t n);

/* The encoding of m into *out (tb_xmalloc'd, *len bytes; the caller frees). */
void tb_samples_encode(const struct tb_samples *m, unsigned char **out, size_t *len);
/* Decodes len bytes into m (initialised here; freed by the caller even on
 * failure).  false with a reason in err on anything malformed: magic,
 * truncation, an over-long varint, a count over its cap or the bytes left,
 * a negative value, trailing bytes. */
bool tb_samples_decode(const unsigned char *buf, size_t len, struct tb_samples *m, char *err,
                       size_t errlen);

/* Adds shard `from` into `into`: the series appended, the counters added,
 * the slices summed element-wise (a rate cell's the same way; its turns
 * by number).  An empty `into` (no slices yet) takes
 * from's timeline.  false with a reason in err (into unchanged) when the
 * two timelines differ (slice width or count): shards of one cell are cut
 * on one timeline, and two that are not cannot be added. */
bool tb_samples_merge(struct tb_samples *into, const struct tb_samples *from, char *err,
                      size_t errlen);
/* The inter-start gaps of a merged rate cell: the union's starts sorted,
 * the sum and sum of squares of consecutive gaps (ns), their count.
 * Sorts the START series (its alignment with END is not kept). */
void tb_samples_start_gaps(struct tb_samples *m, double *sum, double *sum2, uint64_t *n);
/* The union's requests in flight over time from START and END: the most
 * at once and the area (requests x ns) from t0 to the last end. */
void tb_samples_in_flight(const struct tb_samples *m, unsigned *max, double *area_ns);

/* The q-quantile (type 7, tb_stats) of a series, in microseconds; NAN when
 * empty.  Sorts that series in place. */
double tb_samples_quantile(struct tb_samples *m, enum tb_samples_series k, double q);

/*
 * Writes a merged decode cell: the figures of tb_result_cell_set_decode
 * (total_tps over the window of nslices x slice width, its batch-means
 * uncertainty over the summed slices, TTFT and time between tokens from the
 * union, completed, started, output_tokens, measured_s; conc = the streams
 * of all shards; avg_active (client), token_source "chunks" when any shard
 * counted chunks, kernel_stamped = stamped reads / reads (1 with no read)),
 * and e2e_ms and itl_ms {p50, p90, p99} of the union.  (The goodput
 * counter travels in the encoding for rate cells; a decode cell has no
 * SLOs and shows none.)
 * client_ready: NULL when every shard's window followed the server's
 * gauges, else why not (tb_result_decode.client_ready).  false with a
 * reason when m has no window.  Sorts m's series.
 */
bool tb_samples_cell(json_t *cell, struct tb_samples *m, const char *client_ready, char *err,
                     size_t errlen);

/* One shard of a merged cell: where it ran and how well it started. */
struct tb_samples_shard {
  const char *worker, *host;
  int64_t skew_us;         /* its start on the server's timeline - T0 */
  int64_t uncert_us;       /* its clock offset's uncertainty */
  int64_t clock_offset_us; /* the database's clock - its wall clock (issue 35) */
  bool has_clock_offset;
};

/*
 * Records a merged cell's shards in cell.shards: count, where [{worker,
 * host, skew_ms, clock_uncertainty_ms, clock_offset_ms (when known)}], skew_p50_ms and skew_max_ms (of
 * |skew|), clock_uncertainty_max_ms and skew_limit_ms = max(2 ms, 1% of
 * window_s) (tb_clock_skew_limit_us).  The self-check: when the largest
 * |skew| is above the limit the cell's status becomes "error" with the
 * reason, and false is returned (the tokens of the shards did not cover
 * one interval).  n == 0 writes nothing and returns true.
 */
bool tb_samples_cell_shards(json_t *cell, const struct tb_samples_shard *sh, size_t n,
                            double window_s);

#endif
