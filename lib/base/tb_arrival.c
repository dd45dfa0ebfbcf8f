/*
 * tb_arrival: see tb_arrival.h.
 *
 * Everything is a pure function of the seed: no clock, no global state.
 * Draws that could come out 0 or infinite (log of 0, a gap of 0) are kept
 * out by taking uniforms on the open interval (0, 1).
 */
#include "base/tb_arrival.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t
tb_rng_mix64(uint64_t x)
{
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t
splitmix64(uint64_t *s)
{
  return tb_rng_mix64(*s += 0x9e3779b97f4a7c15ULL);
}

static uint64_t
rotl(uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

void
tb_rng_seed(struct tb_rng *r, uint64_t seed)
{
  uint64_t s = seed;
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&s);
}

uint64_t
tb_rng_next(struct tb_rng *r)
{
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double
tb_rng_uniform(struct tb_rng *r)
{
  return ((double)(tb_rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
}

double
tb_rng_normal(struct tb_rng *r)
{
  double u1 = tb_rng_uniform(r), u2 = tb_rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double
tb_rng_gamma(struct tb_rng *r, double k)
{
  if (k < 1) {
    /* Gamma(k) = Gamma(k + 1) * U^(1/k) */
    double g = tb_rng_gamma(r, k + 1);
    return g * pow(tb_rng_uniform(r), 1.0 / k);
  }
  double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = tb_rng_normal(r);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    double u = tb_rng_uniform(r);
    if (u < 1.0 - 0.0331 * x * x * x * x)
      return d * v;
    if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
      return d * v;
  }
}

/* "gamma:B" -> B; false on junk. */
static bool
parse_gamma(const char *text, double *b)
{
  if (strncmp(text, "gamma:", 6) != 0)
    return false;
  char *end = NULL;
  double v = strtod(text + 6, &end);
  if (end == text + 6 || *end != '\0' || !isfinite(v))
    return false;
  *b = v;
  return true;
}

const char *
tb_arrival_check(const char *text)
{
  if (text == NULL)
    return "must be a string";
  if (strcmp(text, "poisson") == 0 || strcmp(text, "constant") == 0)
    return NULL;
  double b;
  if (!parse_gamma(text, &b))
    return "must be \"poisson\", \"constant\" or \"gamma:B\" (B the burstiness)";
  if (b < TB_ARRIVAL_BURST_MIN || b > TB_ARRIVAL_BURST_MAX)
    return "gamma's burstiness B must be from 0.01 to 100";
  return NULL;
}

bool
tb_arrival_init(struct tb_arrival *a, const char *text, double rate, uint64_t seed)
{
  memset(a, 0, sizeof *a);
  if (tb_arrival_check(text) != NULL || !(rate > 0) || !isfinite(rate))
    return false;
  a->rate = rate;
  a->burstiness = 1;
  if (strcmp(text, "poisson") == 0)
    a->kind = TB_ARRIVAL_POISSON;
  else if (strcmp(text, "constant") == 0)
    a->kind = TB_ARRIVAL_CONSTANT;
  else {
    a->kind = TB_ARRIVAL_GAMMA;
    (void)parse_gamma(text, &a->burstiness);
  }
  tb_rng_seed(&a->rng, seed);
  return true;
}

double
tb_arrival_cv(const struct tb_arrival *a)
{
  switch (a->kind) {
  case TB_ARRIVAL_CONSTANT: return 0;
  case TB_ARRIVAL_GAMMA: /* shape 1/B: CV = 1/sqrt(shape) */ return sqrt(a->burstiness);
  case TB_ARRIVAL_POISSON:
  default: return 1;
  }
}

double
tb_arrival_gap_s(struct tb_arrival *a)
{
  switch (a->kind) {
  case TB_ARRIVAL_CONSTANT: return 1.0 / a->rate;
  case TB_ARRIVAL_GAMMA: {
    double k = 1.0 / a->burstiness;
    return tb_rng_gamma(&a->rng, k) * (a->burstiness / a->rate);
  }
  case TB_ARRIVAL_POISSON:
  default: return -log(tb_rng_uniform(&a->rng)) / a->rate;
  }
}

/* One count in [min, max]: "8192" or "8k". */
static bool
parse_count(const char *s, int64_t min, int64_t max, int64_t *out)
{
  int64_t v;
  if (!tb_parse_tokens(s, &v) || v < min || v > max)
    return false;
  *out = v;
  return true;
}

const char *
tb_length_parse(const char *text, int64_t min, int64_t max, struct tb_length *out)
{
  struct tb_length l;
  if (text == NULL || strlen(text) >= TB_ARRIVAL_TEXT_MAX)
    return "must be \"N\" or \"uniform:A-B\" (at most 31 bytes)";
  if (strncmp(text, "uniform:", 8) == 0) {
    char buf[TB_ARRIVAL_TEXT_MAX];
    memcpy(buf, text + 8, strlen(text + 8) + 1); /* < TB_ARRIVAL_TEXT_MAX - 8 */
    char *dash = strchr(buf, '-');
    if (dash == NULL)
      return "uniform lengths are \"uniform:A-B\"";
    *dash = '\0';
    if (!parse_count(buf, min, max, &l.lo) || !parse_count(dash + 1, min, max, &l.hi))
      return "lengths must be token counts in range (see the field's bounds)";
    if (l.lo > l.hi)
      return "uniform:A-B needs A <= B";
  } else if (parse_count(text, min, max, &l.lo)) {
    l.hi = l.lo;
  } else {
    return "must be a token count (\"256\", \"1k\") or \"uniform:A-B\", in range";
  }
  if (out != NULL)
    *out = l;
  return NULL;
}

int64_t
tb_length_draw(const struct tb_length *l, struct tb_rng *r)
{
  if (l->hi <= l->lo)
    return l->lo;
  uint64_t span = (uint64_t)(l->hi - l->lo) + 1;
  return l->lo + (int64_t)(tb_rng_next(r) % span);
}
