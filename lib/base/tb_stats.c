/*
 * tb_stats: percentiles and the uncertainty of figures.  See tb_stats.h.
 *
 * Why batch means for a cell's tok/s.  The figure is tokens in the window /
 * window, i.e. the mean of the per-slice rates.  The slices are not
 * independent: a server that runs slow for a moment (a longer prefill of a
 * replacement request, a clock dip) runs slow for a few slices in a row, so
 * sd(slices) / sqrt(n) would understate the error.  Averaging b consecutive
 * slices into a batch leaves batch means that are nearly independent once b
 * exceeds the correlation length, and their spread then estimates the
 * error of the overall mean.  b = sqrt(n) is the usual consistent choice
 * (Flegal and Jones, "Batch means and spectral variance estimators in
 * Markov chain Monte Carlo", Ann. Statist. 38(2), 2010); with 30 one-second
 * slices that is 6 batches of 5 s.  Few batches give few degrees of
 * freedom, and Student's t widens the interval for it.
 */
#include "base/tb_stats.h"

#include <math.h>
#include <stdlib.h>

#include "base/tb_util.h"

void
tb_stats_add(struct tb_stats *s, int64_t x)
{
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    s->v = tb_xrealloc(s->v, s->cap * sizeof *s->v);
  }
  s->v[s->n++] = x;
}

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

double
tb_stats_quantile(struct tb_stats *s, double q)
{
  if (s->n == 0)
    return NAN;
  qsort(s->v, s->n, sizeof *s->v, cmp_i64);
  if (q <= 0)
    return (double)s->v[0];
  if (q >= 1)
    return (double)s->v[s->n - 1];
  double pos = q * (double)(s->n - 1);
  size_t lo = (size_t)pos;
  double frac = pos - (double)lo;
  if (lo + 1 >= s->n)
    return (double)s->v[lo];
  return (double)s->v[lo] + frac * (double)(s->v[lo + 1] - s->v[lo]);
}

void
tb_stats_reset(struct tb_stats *s)
{
  s->n = 0;
}

void
tb_stats_free(struct tb_stats *s)
{
  free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
}

/* ------------------------------------------------------------ uncertainty */

double
tb_stats_mean(const double *x, size_t n)
{
  if (n == 0)
    return NAN;
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += x[i];
  return sum / (double)n;
}

double
tb_stats_sd(const double *x, size_t n)
{
  if (n < 2)
    return NAN;
  double m = tb_stats_mean(x, n), ss = 0;
  for (size_t i = 0; i < n; i++)
    ss += (x[i] - m) * (x[i] - m);
  return sqrt(ss / (double)(n - 1));
}

double
tb_stats_t975(unsigned df)
{
  /* one t quantile in the library (the regularized incomplete beta,
   * inverted, below); test_stats holds it to the printed tables */
  return df == 0 ? NAN : tb_stats_t_quantile(0.975, (double)df);
}

double
tb_stats_batch_se(const double *x, size_t n, unsigned *df)
{
  if (df != NULL)
    *df = 0;
  if (n < 2)
    return NAN;
  size_t b = (size_t)floor(sqrt((double)n));
  while (b * b > n) /* floating point at perfect squares */
    b--;
  if (b == 0)
    b = 1;
  size_t k = n / b;
  if (k < 2)
    return NAN;
  double *bm = tb_xcalloc(k, sizeof *bm);
  for (size_t i = 0; i < k; i++)
    bm[i] = tb_stats_mean(x + i * b, b);
  double se = tb_stats_sd(bm, k) / sqrt((double)k);
  free(bm);
  if (df != NULL)
    *df = (unsigned)(k - 1);
  return se;
}

bool
tb_stats_ci95(double mean, double se, unsigned df, double *lo, double *hi)
{
  *lo = *hi = NAN;
  if (!isfinite(mean) || !isfinite(se) || se < 0 || df == 0)
    return false;
  double h = tb_stats_t975(df) * se;
  *lo = mean - h;
  *hi = mean + h;
  return true;
}

bool
tb_stats_median_ci95(struct tb_stats *s, double *lo, double *hi)
{
  *lo = *hi = NAN;
  size_t n = s->n;
  if (n < 6)
    return false;
  qsort(s->v, n, sizeof *s->v, cmp_i64);
  /* P(B <= i) summed in log space (2^-n underflows past n = 1074). */
  double ln2n = (double)n * log(2.0), cdf = 0;
  double lgn = lgamma((double)n + 1);
  size_t j = 0; /* the largest j with P(B <= j - 1) <= 0.025 */
  for (size_t i = 0; i < n / 2; i++) {
    double lp = lgn - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) - ln2n;
    cdf += exp(lp);
    if (cdf > 0.025)
      break;
    j = i + 1;
  }
  if (j == 0)
    return false;
  *lo = (double)s->v[j - 1];
  *hi = (double)s->v[n - j];
  return true;
}

/* ---- Student's t ---------------------------------------------------------
 * Computed here (no libm beyond lgamma/exp/log): through the regularized
 * incomplete beta function, evaluated by its continued fraction with the
 * modified Lentz method (Numerical Recipes, 2nd ed., 6.4).  The quantile is
 * found by bisection on the CDF, which is monotone and cheap. */

/* One step of the modified Lentz method: folds the term aa into c and d
 * and returns the factor d * c the fraction is multiplied by. */
static double
lentz_step(double aa, double *c, double *d)
{
  const double fpmin = 1e-300;
  *d = 1.0 + aa * *d;
  if (fabs(*d) < fpmin)
    *d = fpmin;
  *c = 1.0 + aa / *c;
  if (fabs(*c) < fpmin)
    *c = fpmin;
  *d = 1.0 / *d;
  return *d * *c;
}

/* The continued fraction of I_x(a, b), converging for x < (a+1)/(a+b+2). */
static double
betacf(double a, double b, double x)
{
  double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  /* the first term: d = 1 / (1 - qab x / qap), c = 1, h = d */
  double c = 1.0, d = 1.0;
  (void)lentz_step(-qab * x / qap, &c, &d);
  c = 1.0;
  double h = d;
  for (int m = 1; m <= 1000; m++) {
    int m2 = 2 * m;
    h *= lentz_step(m * (b - m) * x / ((qam + m2) * (a + m2)), &c, &d);
    double del = lentz_step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)), &c, &d);
    h *= del;
    if (fabs(del - 1.0) < 1e-16)
      break;
  }
  return h;
}

double
tb_stats_betainc(double a, double b, double x)
{
  if (!(a > 0) || !(b > 0) || !(x >= 0 && x <= 1))
    return NAN;
  if (x == 0 || x == 1)
    return x;
  double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
  double bt = exp(lbt);
  if (x < (a + 1.0) / (a + b + 2.0))
    return bt * betacf(a, b, x) / a;
  return 1.0 - bt * betacf(b, a, 1.0 - x) / b;
}

double
tb_stats_t_two_sided(double t, double df)
{
  if (isinf(t))
    return 0.0;
  return tb_stats_betainc(df / 2.0, 0.5, df / (df + t * t));
}

double
tb_stats_t_cdf(double t, double df)
{
  if (!(df > 0) || isnan(t))
    return NAN;
  double tail = 0.5 * tb_stats_t_two_sided(t, df);
  return t > 0 ? 1.0 - tail : tail;
}

double
tb_stats_t_quantile(double p, double df)
{
  if (!(p > 0 && p < 1) || !(df > 0))
    return NAN;
  if (p < 0.5)
    return -tb_stats_t_quantile(1.0 - p, df);
  double lo = 0, hi = 1;
  while (tb_stats_t_cdf(hi, df) < p && hi < 1e12)
    hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * (1 + hi); i++) {
    double mid = 0.5 * (lo + hi);
    if (tb_stats_t_cdf(mid, df) < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}
