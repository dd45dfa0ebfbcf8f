/*
 * tb_telemetry: an endpoint's GPU telemetry during a run.  See
 * tb_telemetry.h.
 *
 * The samples sit in a ring of TB_TELEMETRY_KEEP under a mutex; the thread
 * appends, tb_telemetry_window copies them out (a few hundred KiB at most)
 * and sums the copy up without the lock.
 */
#include "engine/tb_telemetry.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/tb_http.h"
#include "net/tb_prom.h"

#define NS_PER_S 1000000000LL

/* ------------------------------------------------------------- parsing */

enum field {
  F_POWER,
  F_ENERGY,
  F_UTIL,
  F_SM,
  F_TEMP,
  F_REASONS,
  F_N
};

/* A metric's name, its field and the factor to our unit. */
static const struct {
  const char *name;
  enum field f;
  double scale;
} names[] = {
  { "DCGM_FI_DEV_POWER_USAGE", F_POWER, 1 },
  { "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", F_ENERGY, 1 },
  { "DCGM_FI_DEV_GPU_UTIL", F_UTIL, 1 },
  { "DCGM_FI_DEV_SM_CLOCK", F_SM, 1 },
  { "DCGM_FI_DEV_GPU_TEMP", F_TEMP, 1 },
  { "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", F_REASONS, 1 },
  { "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", F_REASONS, 1 },
  { "nvidia_smi_power_draw_watts", F_POWER, 1 },
  { "nvidia_smi_utilization_gpu_ratio", F_UTIL, 100 },
  { "nvidia_smi_clocks_current_sm_clock_hz", F_SM, 1e-6 },
  { "nvidia_smi_temperature_gpu", F_TEMP, 1 },
};

struct gpu {
  char key[80];
  double v[F_N];
};

struct acc {
  struct gpu g[TB_TELEMETRY_GPUS];
  int n;
};

static struct gpu *
gpu_of(struct acc *a, const char *labels, size_t len)
{
  char key[80] = "";
  if (!tb_prom_find_label(labels, len, "gpu", key, sizeof key) &&
      !tb_prom_find_label(labels, len, "UUID", key, sizeof key) &&
      !tb_prom_find_label(labels, len, "uuid", key, sizeof key))
    key[0] = '\0';
  for (int i = 0; i < a->n; i++)
    if (strcmp(a->g[i].key, key) == 0)
      return &a->g[i];
  if (a->n == TB_TELEMETRY_GPUS)
    return NULL;
  struct gpu *g = &a->g[a->n++];
  memcpy(g->key, key, sizeof key);
  for (int f = 0; f < F_N; f++)
    g->v[f] = NAN;
  return g;
}

static bool
acc_sample(void *cls, const char *name, size_t name_len, const char *labels, size_t labels_len,
           double value)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(names); i++) {
    if (strlen(names[i].name) != name_len || memcmp(names[i].name, name, name_len) != 0)
      continue;
    struct gpu *g = gpu_of(cls, labels, labels_len);
    if (g != NULL && isfinite(value) && isnan(g->v[names[i].f]))
      g->v[names[i].f] = value * names[i].scale;
    break;
  }
  return true;
}

bool
tb_telemetry_parse(const char *text, size_t len, struct tb_cost_sample *out)
{
  struct acc *a = tb_xcalloc(1, sizeof *a);
  bool ok = text != NULL && tb_prom_parse(text, len, acc_sample, a) >= 0 && a->n > 0;
  double sum[F_N] = { 0 }, mx[F_N];
  int cnt[F_N] = { 0 };
  uint64_t reasons = 0;
  for (int f = 0; f < F_N; f++)
    mx[f] = -INFINITY;
  for (int i = 0; ok && i < a->n; i++)
    for (int f = 0; f < F_N; f++) {
      double v = a->g[i].v[f];
      if (isnan(v))
        continue;
      sum[f] += v;
      mx[f] = v > mx[f] ? v : mx[f];
      cnt[f]++;
      if (f == F_REASONS && v >= 0 && v < 18446744073709551616.0)
        reasons |= (uint64_t)v;
    }
  int64_t t = out->t_ns;
  memset(out, 0, sizeof *out);
  out->t_ns = t;
  out->gpus = ok ? a->n : 0;
  out->power_w = cnt[F_POWER] ? sum[F_POWER] : NAN;
  out->energy_mj = cnt[F_ENERGY] ? sum[F_ENERGY] : NAN;
  out->util_pct = cnt[F_UTIL] ? sum[F_UTIL] / cnt[F_UTIL] : NAN;
  out->sm_mhz = cnt[F_SM] ? sum[F_SM] / cnt[F_SM] : NAN;
  out->temp_c = cnt[F_TEMP] ? mx[F_TEMP] : NAN;
  out->has_reasons = cnt[F_REASONS] > 0;
  out->reasons = reasons;
  /* a counter on some GPUs only would sum to a fraction: none then */
  if (cnt[F_ENERGY] != 0 && cnt[F_ENERGY] != a->n)
    out->energy_mj = NAN;
  free(a);
  return ok;
}

/* ------------------------------------------------------------- the GPUs */

#define LABEL_MAX 128

struct ident {
  struct {
    char key[80], name[LABEL_MAX], driver[LABEL_MAX];
  } g[TB_TELEMETRY_GPUS];
  int n;
};

static bool
ident_sample(void *cls, const char *name, size_t name_len, const char *labels, size_t labels_len,
             double value)
{
  (void)value;
  struct ident *id = cls;
  bool info = name_len == 19 && memcmp(name, "nvidia_smi_gpu_info", 19) == 0, known = info;
  for (size_t i = 0; i < TB_ARRAY_LEN(names) && !known; i++)
    known = strlen(names[i].name) == name_len && memcmp(names[i].name, name, name_len) == 0;
  if (!known)
    return true;
  char key[80] = "";
  if (!tb_prom_find_label(labels, labels_len, "gpu", key, sizeof key) &&
      !tb_prom_find_label(labels, labels_len, "UUID", key, sizeof key) &&
      !tb_prom_find_label(labels, labels_len, "uuid", key, sizeof key))
    key[0] = '\0';
  int k = 0;
  while (k < id->n && strcmp(id->g[k].key, key) != 0)
    k++;
  if (k == id->n) {
    if (id->n == TB_TELEMETRY_GPUS)
      return true;
    memset(&id->g[k], 0, sizeof id->g[k]);
    memcpy(id->g[k].key, key, sizeof key);
    id->n++;
  }
  /* a label cut at LABEL_MAX, or absent, leaves the field as it was: "" */
  if (id->g[k].name[0] == '\0' &&
      !tb_prom_find_label(labels, labels_len, info ? "name" : "modelName", id->g[k].name,
                          LABEL_MAX))
    id->g[k].name[0] = '\0';
  if (id->g[k].driver[0] == '\0' &&
      !tb_prom_find_label(labels, labels_len, info ? "driver_version" : "DCGM_FI_DRIVER_VERSION",
                          id->g[k].driver, LABEL_MAX))
    id->g[k].driver[0] = '\0';
  return true;
}

/* One value for all the GPUs, a list of the distinct ones when they differ,
 * "unknown" when some GPU's is not known. */
static json_t *
common_value(const struct ident *id, bool driver)
{
  json_t *list = json_array();
  for (int i = 0; i < id->n; i++) {
    const char *v = driver ? id->g[i].driver : id->g[i].name;
    if (*v == '\0') {
      json_decref(list);
      return json_string("unknown");
    }
    bool seen = false;
    size_t k;
    json_t *e;
    json_array_foreach (list, k, e)
      seen = seen || strcmp(json_string_value(e), v) == 0;
    if (!seen)
      json_array_append_new(list, json_string(v));
  }
  if (json_array_size(list) == 1) {
    json_t *one = json_incref(json_array_get(list, 0));
    json_decref(list);
    return one;
  }
  return list;
}

json_t *
tb_telemetry_parse_gpus(const char *text, size_t len)
{
  struct ident *id = tb_xcalloc(1, sizeof *id);
  json_t *out = NULL;
  if (text != NULL && tb_prom_parse(text, len, ident_sample, id) >= 0 && id->n > 0)
    out = json_pack(
      "{s:o, s:I, s:o, s:s}", "name", common_value(id, false), "count", (json_int_t)id->n, "driver",
      common_value(id, true), "source",
      "the endpoint's GPU telemetry (its /metrics): GPUs by their gpu/UUID label, modelName and "
      "DCGM_FI_DRIVER_VERSION labels (dcgm-exporter) or nvidia_smi_gpu_info");
  free(id);
  return out;
}

/* ------------------------------------------------------------- the thread */

struct tb_telemetry {
  char *url;
  long interval_ms;
  bool poked; /* a read is wanted now */
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool started, stop;
  struct tb_cost_sample *ring; /* TB_TELEMETRY_KEEP */
  size_t n, head;              /* samples held; the oldest's slot */
  unsigned failed, reads;
  json_t *gpus; /* tb_telemetry_parse_gpus of the first read naming GPUs */
};

/* One read, appended (the lock not held by the caller). */
static void
read_once(struct tb_telemetry *t)
{
  struct tb_http_resp resp;
  struct tb_cost_sample s = { 0 };
  long timeout = t->interval_ms * 8 / 10;
  bool ok = tb_http_call("GET", t->url, NULL, NULL, 0, timeout < 200 ? 200 : timeout,
                         TB_TELEMETRY_BODY_MAX, &resp) == 0 &&
            resp.status == 200;
  s.t_ns = tb_time_mono_ns();
  ok = ok && tb_telemetry_parse(resp.body, resp.len, &s);
  pthread_mutex_lock(&t->mu);
  bool named = t->gpus != NULL;
  pthread_mutex_unlock(&t->mu);
  json_t *gpus = ok && !named ? tb_telemetry_parse_gpus(resp.body, resp.len) : NULL;
  tb_http_resp_free(&resp);
  pthread_mutex_lock(&t->mu);
  if (gpus != NULL && t->gpus == NULL) {
    t->gpus = gpus;
    gpus = NULL;
  }
  t->reads++;
  if (!ok) {
    t->failed++;
  } else if (t->n < TB_TELEMETRY_KEEP) {
    t->ring[(t->head + t->n++) % TB_TELEMETRY_KEEP] = s;
  } else {
    t->ring[t->head] = s;
    t->head = (t->head + 1) % TB_TELEMETRY_KEEP;
  }
  pthread_mutex_unlock(&t->mu);
  json_decref(gpus); /* another thread's read named them first */
}

json_t *
tb_telemetry_gpus(struct tb_telemetry *t)
{
  if (t == NULL)
    return NULL;
  pthread_mutex_lock(&t->mu);
  json_t *g = t->gpus != NULL ? json_deep_copy(t->gpus) : NULL;
  pthread_mutex_unlock(&t->mu);
  return g;
}

static void *
tel_main(void *arg)
{
  struct tb_telemetry *t = arg;
  struct sched_param sp = { 0 };
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
  int64_t next = tb_time_mono_ns();
  pthread_mutex_lock(&t->mu);
  while (!t->stop) {
    int64_t now = tb_time_mono_ns();
    if (t->poked) {
      t->poked = false;
      next = now;
    }
    if (now < next) {
      struct timespec ts = { (time_t)(next / NS_PER_S), (long)(next % NS_PER_S) };
      int rc = pthread_cond_timedwait(&t->cv, &t->mu, &ts);
      if (rc != 0 && rc != ETIMEDOUT && rc != EINTR)
        break;
      continue;
    }
    pthread_mutex_unlock(&t->mu);
    read_once(t);
    next += (int64_t)t->interval_ms * 1000000;
    if (next < tb_time_mono_ns())
      next = tb_time_mono_ns();
    pthread_mutex_lock(&t->mu);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

struct tb_telemetry *
tb_telemetry_start(const char *url, long interval_ms)
{
  struct tb_telemetry *t = tb_xcalloc(1, sizeof *t);
  t->url = tb_xstrdup(url);
  t->interval_ms = interval_ms > 0 ? interval_ms : TB_TELEMETRY_INTERVAL_MS;
  t->ring = tb_xcalloc(TB_TELEMETRY_KEEP, sizeof *t->ring);
  pthread_mutex_init(&t->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  t->started = pthread_create(&t->th, NULL, tel_main, t) == 0;
  return t;
}

void
tb_telemetry_poke(struct tb_telemetry *t)
{
  if (t == NULL || !t->started)
    return;
  pthread_mutex_lock(&t->mu);
  t->poked = true;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

void
tb_telemetry_read_now(struct tb_telemetry *t)
{
  if (t != NULL && t->started)
    read_once(t);
}

void
tb_telemetry_window(struct tb_telemetry *t, int64_t t0, int64_t t1, struct tb_cost_energy *out)
{
  pthread_mutex_lock(&t->mu);
  bool after = t->n > 0 && t->ring[(t->head + t->n - 1) % TB_TELEMETRY_KEEP].t_ns >= t1;
  pthread_mutex_unlock(&t->mu);
  if (!after && t->started)
    read_once(t);
  pthread_mutex_lock(&t->mu);
  size_t n = t->n;
  struct tb_cost_sample *copy = tb_xcalloc(n ? n : 1, sizeof *copy);
  for (size_t i = 0; i < n; i++)
    copy[i] = t->ring[(t->head + i) % TB_TELEMETRY_KEEP];
  pthread_mutex_unlock(&t->mu);
  tb_cost_window(copy, n, t0, t1, out);
  free(copy);
}

void
tb_telemetry_counts(struct tb_telemetry *t, unsigned *failed, unsigned *reads)
{
  pthread_mutex_lock(&t->mu);
  *failed = t->failed;
  *reads = t->reads;
  pthread_mutex_unlock(&t->mu);
}

void
tb_telemetry_cell(struct tb_telemetry *t, const json_t *endpoint, json_t *cell, int64_t t0,
                  int64_t t1)
{
  struct tb_cost_price p;
  bool priced = tb_cost_price_of(endpoint, &p);
  if (t == NULL && !priced)
    return;
  struct tb_cost_energy e;
  if (t != NULL)
    tb_telemetry_window(t, t0, t1, &e);
  tb_cost_cell(cell, priced ? &p : NULL, t != NULL ? &e : NULL);
}

void
tb_telemetry_stop(struct tb_telemetry *t)
{
  if (t == NULL)
    return;
  if (t->started) {
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th, NULL);
  }
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t->ring);
  free(t->url);
  json_decref(t->gpus);
  free(t);
}
