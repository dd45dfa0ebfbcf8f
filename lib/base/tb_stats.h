/*
 * tb_stats: percentiles of a sample (nanosecond durations as int64), and
 * the uncertainty of a cell's figures (docs/reports.md, "Uncertainty").
 *
 * Percentiles: linear interpolation between closest ranks (the usual
 * "type 7"), so p50 of an even sample is the mean of the two middle values,
 * as a median should be.
 *
 * Uncertainty, all deterministic (no random resampling, so one result
 * document always renders the same interval):
 *  - the mean of a time series of equal slices (tokens per slice of the
 *    window): its standard error by non-overlapping batch means, which stays
 *    honest when neighbouring slices are correlated (a slow second is often
 *    followed by another);
 *  - the mean of independent repeats: the ordinary standard error;
 *  - a 95% interval from either with Student's t on the right degrees of
 *    freedom;
 *  - the median: the distribution-free order-statistic interval (ranks
 *    from Binomial(n, 1/2)), defined from n = 6 on.
 */
#ifndef TB_STATS_H
#define TB_STATS_H

#include <stdbool.h>
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

/* Mean of x[0..n); NAN when n == 0. */
double tb_stats_mean(const double *x, size_t n);
/* Sample standard deviation (n - 1 in the denominator); NAN when n < 2. */
double tb_stats_sd(const double *x, size_t n);
/* The 0.975 quantile of Student's t with df degrees of freedom (df >= 1;
 * NAN for 0): tb_stats_t_quantile(0.975, df). */
double tb_stats_t975(unsigned df);

/*
 * Standard error of the mean of a series x[0..n) of equal-width slices by
 * batch means: batches of b = floor(sqrt(n)) consecutive slices, k = n / b
 * batches (the last n - k*b slices only count in the mean, not here), SE =
 * sd(batch means) / sqrt(k).  *df (may be NULL) gets k - 1.  NAN when
 * k < 2 (fewer than two slices).
 */
double tb_stats_batch_se(const double *x, size_t n, unsigned *df);

/* A 95% interval mean +- t975(df) * se into lo, hi; false (lo, hi NAN)
 * when se or mean is not finite or df is 0. */
bool tb_stats_ci95(double mean, double se, unsigned df, double *lo, double *hi);

/*
 * The distribution-free 95% interval of the median of s (sorts in place):
 * [x_(j), x_(n+1-j)] for the largest j with P(Binomial(n, 1/2) < j) <=
 * 0.025, so its coverage is at least 95% for any continuous distribution.
 * false (lo, hi NAN) when n < 6: no such interval exists.
 */
bool tb_stats_median_ci95(struct tb_stats *s, double *lo, double *hi);

/* The regularized incomplete beta function I_x(a, b) for a, b > 0 and x in
 * [0, 1] (continued fraction, Numerical Recipes' betacf); NAN outside. */
double tb_stats_betainc(double a, double b, double x);

/* Student's t cumulative distribution P(T <= t) with df > 0 degrees of
 * freedom; NAN for df <= 0 or t NAN. */
double tb_stats_t_cdf(double t, double df);
/* P(|T| >= |t|), computed without cancellation for large |t|. */
double tb_stats_t_two_sided(double t, double df);

/* The t quantile: q with P(T <= q) = p, p in (0, 1), df > 0; NAN outside. */
double tb_stats_t_quantile(double p, double df);

#endif
