/*
 * tb_stats: percentiles of a sample (nanosecond durations as int64).
 * Linear interpolation between closest ranks (the usual "type 7"), so p50 of
 * an even sample is the mean of the two middle values, as a median should be.
 */
#ifndef TB_STATS_H
#define TB_STATS_H

#include <stddef.h>
#include <stdint.h>

struct tb_stats {
  int64_t *v;
  size_t n, cap;
};

void tb_stats_add(struct tb_stats *s, int64_t x);
/* q in [0,1]; sorts in place.  Returns NAN for an empty sample. */
double tb_stats_quantile(struct tb_stats *s, double q);
void tb_stats_reset(struct tb_stats *s);
void tb_stats_free(struct tb_stats *s);

#endif
