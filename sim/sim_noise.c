/*
 * sim_noise: the seeded noise model (see sim_noise.h).
 *
 * The generator is splitmix64 (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014): one 64-bit state, good
 * enough statistics for jitter, and trivially reproducible from a seed.
 * Normal draws by Box-Muller.
 */
#include "sim_noise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_tok.h" /* the one 64-bit hash of sim/ */

static uint64_t
splitmix64(uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double
uniform(uint64_t *s)
{
  return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double
normal(uint64_t *s)
{
  double u1 = uniform(s), u2 = uniform(s);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void
sim_noise_init(struct sim_noise *n)
{
  memset(n, 0, sizeof *n);
  n->seed = 1;
  n->slow_after_s = -1;
  n->run_factor = 1;
}

/* "5%" or "0.05" in [0, max]. */
static bool
fraction(const char *s, double max, double *out)
{
  char *end;
  if (*s == '\0')
    return false;
  double v = strtod(s, &end);
  if (*end == '%') {
    v /= 100;
    end++;
  }
  if (*end != '\0' || !(v >= 0 && v <= max))
    return false;
  *out = v;
  return true;
}

bool
sim_noise_parse(struct sim_noise *n, const char *spec, char *err, size_t errlen)
{
  if (strlen(spec) >= SIM_NOISE_SPEC_CAP) {
    snprintf(err, errlen, "noise spec too long");
    return false;
  }
  char buf[SIM_NOISE_SPEC_CAP];
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  for (char *it = strtok_r(buf, ",;", &save); it != NULL; it = strtok_r(NULL, ",;", &save)) {
    while (*it == ' ')
      it++;
    char *eq = strchr(it, '=');
    if (eq == NULL) {
      snprintf(err, errlen, "noise item '%s' needs a value (drift=, jitter=, seed=)", it);
      return false;
    }
    *eq = '\0';
    const char *v = eq + 1;
    bool ok;
    if (strcmp(it, "drift") == 0) {
      ok = fraction(v, 1, &n->drift);
    } else if (strcmp(it, "jitter") == 0) {
      ok = fraction(v, 1, &n->jitter);
    } else if (strcmp(it, "seed") == 0) {
      int64_t x;
      ok = tb_parse_i64(v, 0, INT64_MAX, &x);
      n->seed = (uint64_t)x;
    } else {
      snprintf(err, errlen, "unknown noise item '%s' (drift, jitter, seed)", it);
      return false;
    }
    if (!ok) {
      snprintf(err, errlen, "bad value for noise item %s: '%s'", it, v);
      return false;
    }
  }
  return true;
}

bool
sim_noise_parse_slowdown(struct sim_noise *n, const char *spec, char *err, size_t errlen)
{
  if (strlen(spec) >= SIM_NOISE_SPEC_CAP) {
    snprintf(err, errlen, "slowdown spec too long");
    return false;
  }
  char buf[SIM_NOISE_SPEC_CAP];
  snprintf(buf, sizeof buf, "%s", spec);
  char *at = strchr(buf, '@');
  if (at != NULL)
    *at++ = '\0';
  double s;
  if (!fraction(buf, 0.99, &s)) {
    snprintf(err, errlen, "slowdown '%s': want a share below 100%%, e.g. 5%%", buf);
    return false;
  }
  n->slowdown = s;
  n->slow_requests = 0;
  n->slow_after_s = -1;
  if (at == NULL)
    return true;
  if (strncmp(at, "requests=", 9) == 0) {
    if (tb_parse_i64(at + 9, 1, INT64_MAX, &n->slow_requests))
      return true;
  } else if (strncmp(at, "t=", 2) == 0) {
    char *end;
    double t = strtod(at + 2, &end);
    if (at[2] != '\0' && *end == '\0' && t >= 0 && t <= 1e9) {
      n->slow_after_s = t;
      return true;
    }
  }
  snprintf(err, errlen, "slowdown '@%s': want @requests=N or @t=SECONDS", at);
  return false;
}

bool
sim_noise_active(const struct sim_noise *n)
{
  return n->drift > 0 || n->jitter > 0 || n->slowdown > 0;
}

void
sim_noise_start(struct sim_noise *n, int64_t now_ns)
{
  n->start_ns = now_ns;
  n->rng = n->seed;
  n->requests = 0;
  n->slow_on = n->slowdown > 0 && n->slow_requests == 0 && n->slow_after_s <= 0;
  n->run[0] = '\0';
  n->run_factor = sim_noise_drift_factor(n->drift, n->seed, "", 0);
}

double
sim_noise_drift_factor(double drift, uint64_t seed, const char *run, size_t len)
{
  if (!(drift > 0))
    return 1;
  uint64_t s = seed ^ sim_tok_fnv64(SIM_TOK_FNV64_INIT, run, len);
  (void)splitmix64(&s); /* decorrelate neighbouring seeds */
  return exp(drift * normal(&s));
}

/* The run named by the first "[BENCH_<run>_CTX_" or "[BENCH_<run>_CAL"
 * tag of text: its start and length, or false. */
static bool
tag_run(const char *text, size_t len, const char **run, size_t *run_len)
{
  static const char open[] = "[BENCH_";
  const size_t ol = sizeof open - 1;
  for (size_t i = 0; i + ol < len; i++) {
    if (memcmp(text + i, open, ol) != 0)
      continue;
    const char *p = text + i + ol;
    size_t rest = len - i - ol;
    const char *close =
      memchr(p, ']', rest < SIM_NOISE_TAG_CAP + 32 ? rest : SIM_NOISE_TAG_CAP + 32);
    if (close == NULL)
      return false;
    /* the run is what comes before the last "_CTX_" or "_CAL" */
    size_t n = (size_t)(close - p);
    for (size_t k = n; k-- > 0;) {
      if (p[k] == '_' && (n - k >= 4) &&
          (memcmp(p + k, "_CTX", 4) == 0 || memcmp(p + k, "_CAL", 4) == 0)) {
        if (k == 0 || k >= SIM_NOISE_TAG_CAP)
          return false;
        *run = p;
        *run_len = k;
        return true;
      }
    }
    return false;
  }
  return false;
}

void
sim_noise_request(struct sim_noise *n, const char *text, size_t len)
{
  n->requests++;
  if (n->slowdown > 0 && n->slow_requests > 0 && n->requests >= n->slow_requests)
    n->slow_on = true;
  const char *run;
  size_t rl;
  if (text == NULL || !(n->drift > 0) || !tag_run(text, len, &run, &rl))
    return;
  if (strlen(n->run) == rl && memcmp(n->run, run, rl) == 0)
    return;
  memcpy(n->run, run, rl);
  n->run[rl] = '\0';
  n->run_factor = sim_noise_drift_factor(n->drift, n->seed, run, rl);
}

/* The request's tag, if any, from one text. */
static bool
request_text(struct sim_noise *n, const json_t *v)
{
  const char *s = json_string_value(v);
  const char *run;
  size_t rl;
  if (s == NULL || !tag_run(s, json_string_length(v), &run, &rl))
    return false;
  if (strlen(n->run) != rl || memcmp(n->run, run, rl) != 0) {
    memcpy(n->run, run, rl);
    n->run[rl] = '\0';
    n->run_factor = sim_noise_drift_factor(n->drift, n->seed, run, rl);
  }
  return true;
}

void
sim_noise_request_body(struct sim_noise *n, const json_t *body)
{
  sim_noise_request(n, NULL, 0); /* counted; the run comes below */
  if (!(n->drift > 0))
    return;
  const json_t *msgs = json_object_get(body, "messages");
  size_t i, j;
  const json_t *m, *part;
  json_array_foreach (msgs, i, m) {
    const json_t *content = json_object_get(m, "content");
    if (json_is_string(content) && request_text(n, content))
      return;
    json_array_foreach (content, j, part) {
      if (request_text(n, json_object_get(part, "text")))
        return;
    }
  }
  (void)request_text(n, json_object_get(body, "prompt"));
}

json_t *
sim_noise_json(const struct sim_noise *n)
{
  json_t *o = json_object();
  json_object_set_new(o, "active", json_boolean(sim_noise_active(n)));
  json_object_set_new(o, "drift", json_real(n->drift));
  json_object_set_new(o, "jitter", json_real(n->jitter));
  json_object_set_new(o, "seed", json_integer((json_int_t)(n->seed & INT64_MAX)));
  json_object_set_new(o, "run", json_string(n->run));
  json_object_set_new(o, "drift_factor", json_real(n->run_factor));
  json_object_set_new(o, "slowdown", json_real(n->slowdown));
  json_object_set_new(o, "slowdown_after_requests",
                      n->slow_requests > 0 ? json_integer(n->slow_requests) : json_null());
  json_object_set_new(o, "slowdown_after_s",
                      n->slow_after_s >= 0 ? json_real(n->slow_after_s) : json_null());
  json_object_set_new(o, "slowdown_on", json_boolean(n->slow_on));
  json_object_set_new(o, "requests", json_integer(n->requests));
  return o;
}

double
sim_noise_step_factor(struct sim_noise *n, int64_t now_ns, double time_scale)
{
  if (!sim_noise_active(n))
    return 1;
  if (!n->slow_on && n->slowdown > 0 && n->slow_after_s > 0 &&
      (double)(now_ns - n->start_ns) * time_scale >= n->slow_after_s * 1e9)
    n->slow_on = true;
  double f = n->run_factor;
  if (n->jitter > 0)
    f *= exp(n->jitter * normal(&n->rng) - n->jitter * n->jitter / 2);
  if (n->slow_on)
    f /= 1 - n->slowdown;
  return f;
}
