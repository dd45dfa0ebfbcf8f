/*
 * tb_arrival: seeded arrival processes and length distributions for rate
 * cells (docs/engine.md, "Rate cells").
 *
 * The generator is xoshiro256** (Blackman and Vigna, "Scrambled linear
 * pseudorandom number generators", ACM TOMS 47(4), 2021), its state filled
 * from the spec's seed by splitmix64 (Steele, Lea and Flood, OOPSLA 2014), as
 * its authors recommend.  Never rand(): the same seed gives the same
 * schedule on every machine and libc.
 *
 * Arrival processes, all of mean inter-arrival 1 / rate:
 *  - "poisson": exponential gaps (coefficient of variation 1);
 *  - "gamma:B": gamma gaps of shape 1 / B and scale B / rate, so B is the
 *    burstiness factor of vLLM's benchmark (B = 1 is Poisson, B > 1
 *    burstier, B < 1 smoother; CV = sqrt(B));
 *  - "constant": every gap exactly 1 / rate.
 * Lengths: "N" (fixed) or "uniform:A-B" (integers A..B, both included).
 */
#ifndef TB_ARRIVAL_H
#define TB_ARRIVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define TB_ARRIVAL_TEXT_MAX 32    /* "gamma:0.25", "uniform:128-4096" */
#define TB_ARRIVAL_BURST_MIN 0.01 /* gamma burstiness range */
#define TB_ARRIVAL_BURST_MAX 100.0

struct tb_rng {
  uint64_t s[4];
};

/* splitmix64's finalizer: 64 bits mixed into 64 (a bijection), for hash
 * tables and for seeds drawn from ids. */
uint64_t tb_rng_mix64(uint64_t x);
/* A generator seeded from seed (any value, 0 included). */
void tb_rng_seed(struct tb_rng *r, uint64_t seed);
/* The next 64 random bits. */
uint64_t tb_rng_next(struct tb_rng *r);
/* Uniform in the open interval (0, 1). */
double tb_rng_uniform(struct tb_rng *r);
/* Standard normal (Box-Muller). */
double tb_rng_normal(struct tb_rng *r);
/* Gamma of shape k > 0 and scale 1 (Marsaglia and Tsang, ACM TOMS 26(3),
 * 2000; for k < 1 boosted by U^(1/k)). */
double tb_rng_gamma(struct tb_rng *r, double k);

enum tb_arrival_kind {
  TB_ARRIVAL_POISSON,
  TB_ARRIVAL_GAMMA,
  TB_ARRIVAL_CONSTANT
};

struct tb_arrival {
  enum tb_arrival_kind kind;
  double burstiness; /* gamma only (1 for Poisson) */
  double rate;       /* requests per second */
  struct tb_rng rng;
};

/* Parses "poisson", "constant", "gamma:B" (B in [TB_ARRIVAL_BURST_MIN,
 * TB_ARRIVAL_BURST_MAX]).  NULL when text is good, else a one-line reason
 * (static). */
const char *tb_arrival_check(const char *text);

/* Sets a up from text (checked by tb_arrival_check), rate > 0 and seed.
 * false when text is bad. */
bool tb_arrival_init(struct tb_arrival *a, const char *text, double rate,
                     uint64_t seed) TB_MUST_CHECK;
/* The coefficient of variation of a's gaps: 1 (Poisson), sqrt(B) (gamma),
 * 0 (constant). */
double tb_arrival_cv(const struct tb_arrival *a);
/* The next gap between arrivals, in seconds (> 0). */
double tb_arrival_gap_s(struct tb_arrival *a);

/* A length: fixed (lo == hi) or uniform on [lo, hi]. */
struct tb_length {
  int64_t lo, hi;
};

/* Parses "N" or "uniform:A-B" (K suffixes allowed: "8k"), each in [min, max],
 * A <= B.  NULL when good (and *out set when out is not NULL), else a
 * one-line reason (static). */
const char *tb_length_parse(const char *text, int64_t min, int64_t max, struct tb_length *out);
/* A draw of l. */
int64_t tb_length_draw(const struct tb_length *l, struct tb_rng *r);

#endif
