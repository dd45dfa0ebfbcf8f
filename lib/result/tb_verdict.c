/*
 * tb_verdict: change points and the verdict of a job against its history.
 * See tb_verdict.h for the method.  Student's t distribution is
 * tb_stats'.
 */
#include "result/tb_verdict.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *
tb_verdict_outcome_name(enum tb_verdict_outcome o)
{
  switch (o) {
  case TB_VERDICT_SAME: return "same";
  case TB_VERDICT_BETTER: return "better";
  case TB_VERDICT_WORSE: return "worse";
  case TB_VERDICT_INCONCLUSIVE: return "inconclusive";
  case TB_VERDICT_TOO_LITTLE: return "too_little_history";
  }
  return "inconclusive";
}

double
tb_verdict_cell_alpha(size_t ncells)
{
  return TB_VERDICT_ALPHA / (double)(ncells > 0 ? ncells : 1);
}

bool
tb_verdict_welch(double m1, double v1, double n1, double m2, double v2, double n2, double *t,
                 double *df, double *p)
{
  if (!(n1 >= 2 && n2 >= 2 && v1 >= 0 && v2 >= 0 && v1 + v2 > 0) || !isfinite(m1) || !isfinite(m2))
    return false;
  double a = v1 / n1, b = v2 / n2;
  double se = sqrt(a + b);
  *t = (m2 - m1) / se;
  *df = (a + b) * (a + b) / (a * a / (n1 - 1) + b * b / (n2 - 1));
  *p = tb_stats_t_two_sided(*t, *df);
  return true;
}

/* ---- two groups of one series ------------------------------------------ */

static double
mean_of(const double *x, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += x[i];
  return s / (double)n;
}

static double
ss_of(const double *x, size_t n, double m)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (x[i] - m) * (x[i] - m);
  return s;
}

/* The pooled two-sample t-test of b[0..nb) (new) against a[0..na)
 * (baseline); extra_var is added to the variance of b's mean.  *diff =
 * mean(b) - mean(a), *se its standard error, *df; returns the two-sided
 * p-value, NAN when there is no test (na + nb < 3). */
static double
pooled_test(const double *a, size_t na, const double *b, size_t nb, double extra_var, double *diff,
            double *se, double *df)
{
  *diff = *se = *df = NAN;
  if (na == 0 || nb == 0 || na + nb < 3)
    return NAN;
  double ma = mean_of(a, na), mb = mean_of(b, nb);
  *df = (double)(na + nb - 2);
  double sp2 = (ss_of(a, na, ma) + ss_of(b, nb, mb)) / *df;
  double v = sp2 * (1.0 / (double)na + 1.0 / (double)nb) + extra_var;
  *diff = mb - ma;
  *se = sqrt(v);
  if (!(*se > 0))
    return *diff == 0 ? 1.0 : 0.0;
  return tb_stats_t_two_sided(*diff / *se, *df);
}

/* ---- change points ----------------------------------------------------- */

/* The best split of y[lo..hi) by the energy statistic, or 0 when none. */
static size_t
best_split(const double *y, size_t lo, size_t hi)
{
  double wr = 0, wl = 0, bx = 0;
  for (size_t i = lo; i < hi; i++)
    for (size_t j = i + 1; j < hi; j++)
      wr += fabs(y[i] - y[j]);
  size_t best = 0;
  double bestq = -INFINITY;
  for (size_t tau = lo + 1; tau < hi; tau++) {
    size_t p = tau - 1;
    double dl = 0, dr = 0;
    for (size_t i = lo; i < p; i++)
      dl += fabs(y[p] - y[i]);
    for (size_t j = p + 1; j < hi; j++)
      dr += fabs(y[p] - y[j]);
    wr -= dr;
    wl += dl;
    bx += dr - dl;
    double m = (double)(tau - lo), k = (double)(hi - tau);
    double e = 2.0 * bx / (m * k);
    if (m > 1)
      e -= wl / (m * (m - 1) / 2.0);
    if (k > 1)
      e -= wr / (k * (k - 1) / 2.0);
    double q = m * k / (m + k) * e;
    if (q > bestq) {
      bestq = q;
      best = tau;
    }
  }
  return best;
}

struct cps {
  size_t *out;
  size_t cap, n;
};

static void
cp_add(struct cps *c, size_t at)
{
  if (c->n < c->cap) {
    /* keep ascending: insertion into a short list */
    size_t i = c->n;
    while (i > 0 && c->out[i - 1] > at) {
      c->out[i] = c->out[i - 1];
      i--;
    }
    c->out[i] = at;
  }
  c->n++;
}

static void
cp_segment(const double *y, size_t lo, size_t hi, double alpha, struct cps *c, int depth)
{
  if (hi - lo < 3 || depth > 64)
    return;
  size_t tau = best_split(y, lo, hi);
  if (tau == 0)
    return;
  double diff, se, df;
  double p = pooled_test(y + lo, tau - lo, y + tau, hi - tau, 0, &diff, &se, &df);
  if (!(p <= alpha))
    return;
  cp_add(c, tau);
  cp_segment(y, lo, tau, alpha, c, depth + 1);
  cp_segment(y, tau, hi, alpha, c, depth + 1);
}

size_t
tb_verdict_change_points(const double *y, size_t n, double alpha, size_t *out, size_t cap)
{
  struct cps c = { .out = out, .cap = cap, .n = 0 };
  cp_segment(y, 0, n, alpha, &c, 0);
  return c.n;
}

/* ---- the verdict ------------------------------------------------------- */

static void
verdict_none(struct tb_verdict *v, enum tb_verdict_outcome o, size_t n_base)
{
  memset(v, 0, sizeof *v);
  v->outcome = o;
  v->effect = v->ci_lo = v->ci_hi = v->p = v->mean_base = v->mean_new = NAN;
  v->n_base = n_base;
}

void
tb_verdict_judge(const struct tb_verdict_point *pts, size_t n, double min_effect,
                 bool higher_better, double alpha, struct tb_verdict *v)
{
  double *y = tb_xcalloc(n + 1, sizeof *y), *se = tb_xcalloc(n + 1, sizeof *se);
  size_t *cp = tb_xcalloc(n + 1, sizeof *cp);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(pts[i].value) && pts[i].value > 0) {
      y[m] = pts[i].value;
      se[m++] = pts[i].se;
    }
  if (m < TB_VERDICT_MIN_HISTORY + 1) {
    verdict_none(v, TB_VERDICT_TOO_LITTLE, m > 0 ? m - 1 : 0);
    goto out;
  }
  size_t ncp = tb_verdict_change_points(y, m, TB_VERDICT_CP_ALPHA, cp, n);
  if (ncp > n)
    ncp = n;
  /* the new group and the start of its baseline */
  size_t from = m - 1, base_lo = 0;
  bool step = false;
  if (ncp > 0 && m - cp[ncp - 1] <= TB_VERDICT_CONFIRM) {
    from = cp[ncp - 1];
    step = true;
    base_lo = ncp > 1 ? cp[ncp - 2] : 0;
  } else if (ncp > 0) {
    base_lo = cp[ncp - 1];
  }
  if (from - base_lo > TB_VERDICT_WINDOW)
    base_lo = from - TB_VERDICT_WINDOW;
  size_t nb = from - base_lo, nn = m - from;
  if (nb < TB_VERDICT_MIN_HISTORY) {
    verdict_none(v, TB_VERDICT_TOO_LITTLE, nb);
    goto out;
  }
  /* the new runs' own noise beyond what the baseline's runs had */
  double s0 = 0, extra = 0;
  size_t k0 = 0;
  for (size_t i = base_lo; i < from; i++)
    if (isfinite(se[i])) {
      s0 += se[i] * se[i];
      k0++;
    }
  s0 = k0 ? s0 / (double)k0 : 0;
  for (size_t i = from; i < m; i++)
    if (isfinite(se[i]) && se[i] * se[i] > s0)
      extra += se[i] * se[i] - s0;
  extra /= (double)nn * (double)nn;

  double diff, sd, df;
  double p = pooled_test(y + base_lo, nb, y + from, nn, extra, &diff, &sd, &df);
  double mb = mean_of(y + base_lo, nb);
  memset(v, 0, sizeof *v);
  v->n_base = nb;
  v->n_new = nn;
  v->new_from = from;
  v->step = step;
  v->p = p;
  v->effect = diff / mb;
  v->mean_base = mb;
  v->mean_new = mean_of(y + from, nn);
  double q = sd > 0 ? tb_stats_t_quantile(0.975, df) : 0;
  v->ci_lo = (diff - q * sd) / mb;
  v->ci_hi = (diff + q * sd) / mb;
  double good = higher_better ? v->effect : -v->effect;
  double glo = higher_better ? v->ci_lo : -v->ci_hi, ghi = higher_better ? v->ci_hi : -v->ci_lo;
  if (p <= alpha && good < -min_effect)
    v->outcome = TB_VERDICT_WORSE;
  else if (p <= alpha && good > min_effect)
    v->outcome = TB_VERDICT_BETTER;
  else if (glo > -min_effect && ghi < min_effect)
    v->outcome = TB_VERDICT_SAME;
  else
    v->outcome = TB_VERDICT_INCONCLUSIVE;
out:
  free(cp);
  free(se);
  free(y);
}

/* ---- the matrix -------------------------------------------------------- */

struct kv {
  long job;
  double lr; /* log(value / cell baseline median) */
};

static int
kv_cmp(const void *a, const void *b)
{
  const struct kv *x = a, *y = b;
  return x->job < y->job ? -1 : x->job > y->job;
}

static int
dbl_cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of the usable values of pts[0..n) (NAN when fewer than min). */
static double
median_usable(const struct tb_verdict_point *pts, size_t n, size_t min)
{
  double *x = tb_xcalloc(n + 1, sizeof *x);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(pts[i].value) && pts[i].value > 0)
      x[k++] = pts[i].value;
  double med = NAN;
  if (k >= min && k > 0) {
    qsort(x, k, sizeof *x, dbl_cmp);
    med = k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
  }
  free(x);
  return med;
}

void
tb_verdict_matrix(const struct tb_verdict_point *const *cells, const size_t *ncell, size_t ncells,
                  double min_effect, bool higher_better, double alpha, struct tb_verdict *v,
                  double *mean_out, long *jobs_out, size_t cap, size_t *nout)
{
  size_t total = 0;
  for (size_t c = 0; c < ncells; c++)
    total += ncell[c];
  struct kv *kv = tb_xcalloc(total + 1, sizeof *kv);
  size_t k = 0;
  long judged = 0;
  bool have_judged = false;
  for (size_t c = 0; c < ncells; c++) {
    size_t n = ncell[c];
    if (n == 0)
      continue;
    const struct tb_verdict_point *p = cells[c];
    if (!(isfinite(p[n - 1].value) && p[n - 1].value > 0))
      continue;
    double med = median_usable(p, n - 1, TB_VERDICT_MIN_HISTORY);
    if (!isfinite(med) || !(med > 0))
      continue;
    if (!have_judged || p[n - 1].job > judged)
      judged = p[n - 1].job;
    have_judged = true;
    for (size_t i = 0; i < n; i++)
      if (isfinite(p[i].value) && p[i].value > 0) {
        kv[k].job = p[i].job;
        kv[k++].lr = log(p[i].value / med);
      }
  }
  qsort(kv, k, sizeof *kv, kv_cmp);
  struct tb_verdict_point *s = tb_xcalloc(k + 1, sizeof *s);
  size_t ns = 0;
  for (size_t i = 0; i < k;) {
    size_t j = i;
    double sum = 0;
    while (j < k && kv[j].job == kv[i].job)
      sum += kv[j++].lr;
    if (kv[i].job <= judged) {
      s[ns].job = kv[i].job;
      s[ns].value = exp(sum / (double)(j - i));
      s[ns++].se = NAN;
    }
    i = j;
  }
  if (have_judged && ns > 0 && s[ns - 1].job == judged)
    tb_verdict_judge(s, ns, min_effect, higher_better, alpha, v);
  else
    verdict_none(v, TB_VERDICT_TOO_LITTLE, 0);
  if (nout != NULL)
    *nout = ns;
  for (size_t i = 0; i < ns && i < cap; i++) {
    if (mean_out != NULL)
      mean_out[i] = s[i].value;
    if (jobs_out != NULL)
      jobs_out[i] = s[i].job;
  }
  free(s);
  free(kv);
}
