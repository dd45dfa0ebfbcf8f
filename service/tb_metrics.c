/*
 * tb_metrics: registry and Prometheus text rendering (see tb_metrics.h).
 *
 * Layout: a registry holds up to TB_METRICS_FAMILIES_MAX families in
 * declaration order; a family holds its series in a chained hash table
 * (key: the label values joined by 0x1f; a 0x1f inside a value becomes a
 * space) plus a list in
 * creation order, so the rendered text is stable from scrape to scrape.
 * One mutex per registry; families point back to it.
 */
#include "tb_metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_SIZE 256u

struct series {
  struct series *hash_next;
  struct series *next; /* creation order */
  char *key;           /* the values joined by 0x1f, for lookups */
  char *value_buf;     /* the same, split: values point into it */
  char **values;
  double value; /* counter/gauge; histogram: sum */
  double count; /* histogram */
  double *bucket_counts;
};

struct tb_metric {
  struct tb_metrics *reg;
  enum tb_metric_type type;
  char *name;
  char *help;
  size_t n_labels;
  char *labels[TB_METRICS_LABELS_MAX];
  size_t n_buckets;
  double buckets[TB_METRICS_BUCKETS_MAX];
  struct series *hash[HASH_SIZE];
  struct series *first, *last;
  size_t n_series;
};

struct tb_metrics {
  pthread_mutex_t mu;
  size_t n_families;
  struct tb_metric *families[TB_METRICS_FAMILIES_MAX];
  double dropped; /* series refused over TB_METRICS_SERIES_MAX */
};

struct tb_metrics *
tb_metrics_new(void)
{
  struct tb_metrics *m = tb_xcalloc(1, sizeof *m);
  pthread_mutex_init(&m->mu, NULL);
  return m;
}

static void
series_free(struct series *s)
{
  free(s->key);
  free(s->value_buf);
  free(s->values);
  free(s->bucket_counts);
  free(s);
}

static void
family_clear(struct tb_metric *f)
{
  for (struct series *s = f->first, *n; s != NULL; s = n) {
    n = s->next;
    series_free(s);
  }
  memset(f->hash, 0, sizeof f->hash);
  f->first = f->last = NULL;
  f->n_series = 0;
}

void
tb_metrics_free(struct tb_metrics *m)
{
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->n_families; i++) {
    struct tb_metric *f = m->families[i];
    family_clear(f);
    free(f->name);
    free(f->help);
    for (size_t j = 0; j < f->n_labels; j++)
      free(f->labels[j]);
    free(f);
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static struct tb_metrics *global_reg;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void
global_init(void)
{
  global_reg = tb_metrics_new();
}

struct tb_metrics *
tb_metrics_global(void)
{
  pthread_once(&global_once, global_init);
  return global_reg;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names, no ':' for label names. */
static bool
valid_name(const char *s, bool colon)
{
  if (s == NULL || s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (; *s != '\0'; s++) {
    char c = *s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || (colon && c == ':');
    if (!ok)
      return false;
  }
  return true;
}

static void
die(const char *what, const char *name)
{
  fprintf(stderr, "tb_metrics: %s: %s\n", what, name != NULL ? name : "(null)");
  abort();
}

struct tb_metric *
tb_metrics_family(struct tb_metrics *m, enum tb_metric_type type, const char *name,
                  const char *help, const char *const *label_names, const double *buckets,
                  size_t n_buckets)
{
  size_t nl = 0;
  while (label_names != NULL && label_names[nl] != NULL) {
    if (!valid_name(label_names[nl], false) || strcmp(label_names[nl], "le") == 0)
      die("bad label name", label_names[nl]);
    nl++;
  }
  if (!valid_name(name, true))
    die("bad metric name", name);
  if (nl > TB_METRICS_LABELS_MAX)
    die("too many labels", name);
  if (type == TB_METRIC_HISTOGRAM ? (n_buckets == 0 || n_buckets > TB_METRICS_BUCKETS_MAX)
                                  : n_buckets != 0)
    die("bad buckets", name);
  for (size_t i = 1; i < n_buckets; i++)
    if (!(buckets[i] > buckets[i - 1]))
      die("buckets not increasing", name);
  pthread_mutex_lock(&m->mu);
  struct tb_metric *f = NULL;
  for (size_t i = 0; i < m->n_families; i++)
    if (strcmp(m->families[i]->name, name) == 0)
      f = m->families[i];
  if (f != NULL) {
    pthread_mutex_unlock(&m->mu);
    if (f->type != type || f->n_labels != nl || f->n_buckets != n_buckets)
      die("family redeclared differently", name);
    return f;
  }
  if (m->n_families == TB_METRICS_FAMILIES_MAX) {
    pthread_mutex_unlock(&m->mu);
    die("too many families", name);
  }
  f = tb_xcalloc(1, sizeof *f);
  f->reg = m;
  f->type = type;
  f->name = tb_xstrdup(name);
  f->help = tb_xstrdup(help != NULL ? help : "");
  f->n_labels = nl;
  for (size_t i = 0; i < nl; i++)
    f->labels[i] = tb_xstrdup(label_names[i]);
  f->n_buckets = n_buckets;
  for (size_t i = 0; i < n_buckets; i++)
    f->buckets[i] = buckets[i];
  m->families[m->n_families++] = f;
  pthread_mutex_unlock(&m->mu);
  return f;
}

static uint32_t
fnv1a(const char *s)
{
  uint32_t h = 2166136261u;
  for (; *s != '\0'; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* The key of a tuple: each value cut to TB_METRICS_VALUE_MAX, 0x1f between. */
static char *
make_key(const struct tb_metric *f, const char *const *values)
{
  size_t len = 1;
  for (size_t i = 0; i < f->n_labels; i++) {
    const char *v = values != NULL && values[i] != NULL ? values[i] : "";
    len += strnlen(v, TB_METRICS_VALUE_MAX) + 1;
  }
  char *k = tb_xmalloc(len), *p = k;
  for (size_t i = 0; i < f->n_labels; i++) {
    const char *v = values != NULL && values[i] != NULL ? values[i] : "";
    size_t n = strnlen(v, TB_METRICS_VALUE_MAX);
    for (size_t j = 0; j < n; j++)
      *p++ = v[j] == '\x1f' ? ' ' : v[j];
    *p++ = '\x1f';
  }
  *p = '\0';
  return k;
}

/* The series of a tuple, created when create is true; NULL when absent or
 * over the cap.  Called with the registry locked. */
static struct series *
find_series(struct tb_metric *f, const char *const *values, bool create)
{
  char *key = make_key(f, values);
  uint32_t h = fnv1a(key) % HASH_SIZE;
  struct series *s;
  for (s = f->hash[h]; s != NULL; s = s->hash_next)
    if (strcmp(s->key, key) == 0)
      break;
  if (s != NULL || !create) {
    free(key);
    return s;
  }
  if (f->n_series >= TB_METRICS_SERIES_MAX) {
    f->reg->dropped += 1;
    free(key);
    return NULL;
  }
  s = tb_xcalloc(1, sizeof *s);
  s->key = key;
  /* the values point into one split copy of the key */
  s->value_buf = tb_xstrdup(key);
  s->values = tb_xcalloc(f->n_labels + 1, sizeof *s->values);
  char *p = s->value_buf;
  for (size_t i = 0; i < f->n_labels; i++) {
    s->values[i] = p;
    p = strchr(p, '\x1f');
    *p++ = '\0';
  }
  if (f->type == TB_METRIC_HISTOGRAM)
    s->bucket_counts = tb_xcalloc(f->n_buckets, sizeof *s->bucket_counts);
  s->hash_next = f->hash[h];
  f->hash[h] = s;
  if (f->last != NULL)
    f->last->next = s;
  else
    f->first = s;
  f->last = s;
  f->n_series++;
  return s;
}

void
tb_metric_add(struct tb_metric *f, const char *const *values, double v)
{
  if (f->type == TB_METRIC_HISTOGRAM || (f->type == TB_METRIC_COUNTER && !(v >= 0)))
    return;
  pthread_mutex_lock(&f->reg->mu);
  struct series *s = find_series(f, values, true);
  if (s != NULL)
    s->value += v;
  pthread_mutex_unlock(&f->reg->mu);
}

void
tb_metric_set(struct tb_metric *f, const char *const *values, double v)
{
  if (f->type != TB_METRIC_GAUGE)
    return;
  pthread_mutex_lock(&f->reg->mu);
  struct series *s = find_series(f, values, true);
  if (s != NULL)
    s->value = v;
  pthread_mutex_unlock(&f->reg->mu);
}

void
tb_metric_observe(struct tb_metric *f, const char *const *values, double v)
{
  if (f->type != TB_METRIC_HISTOGRAM || isnan(v))
    return;
  pthread_mutex_lock(&f->reg->mu);
  struct series *s = find_series(f, values, true);
  if (s != NULL) {
    s->value += v;
    s->count += 1;
    for (size_t i = 0; i < f->n_buckets; i++)
      if (v <= f->buckets[i])
        s->bucket_counts[i] += 1; /* each bucket counts all below its bound */
  }
  pthread_mutex_unlock(&f->reg->mu);
}

void
tb_metric_reset(struct tb_metric *f)
{
  pthread_mutex_lock(&f->reg->mu);
  family_clear(f);
  pthread_mutex_unlock(&f->reg->mu);
}

double
tb_metric_value(struct tb_metric *f, const char *const *values)
{
  pthread_mutex_lock(&f->reg->mu);
  struct series *s = find_series(f, values, false);
  double v = s == NULL ? 0 : f->type == TB_METRIC_HISTOGRAM ? s->count : s->value;
  pthread_mutex_unlock(&f->reg->mu);
  return v;
}

/* A growable text buffer for rendering (our own data: no cap needed beyond
 * the series caps). */
struct out {
  char *p;
  size_t len, cap;
};

static void
out_putn(struct out *o, const char *s, size_t n)
{
  if (o->len + n + 1 > o->cap) {
    while (o->len + n + 1 > o->cap)
      o->cap = o->cap ? o->cap * 2 : 4096;
    o->p = tb_xrealloc(o->p, o->cap);
  }
  memcpy(o->p + o->len, s, n);
  o->len += n;
  o->p[o->len] = '\0';
}

static void
out_puts(struct out *o, const char *s)
{
  out_putn(o, s, strlen(s));
}

static void
out_num(struct out *o, double v)
{
  char b[40];
  if (isnan(v))
    out_puts(o, "NaN");
  else if (isinf(v))
    out_puts(o, v > 0 ? "+Inf" : "-Inf");
  else {
    snprintf(b, sizeof b, "%.17g", v);
    out_puts(o, b);
  }
}

/* Help text escaping: backslash and newline. */
static void
out_help(struct out *o, const char *s)
{
  for (; *s != '\0'; s++) {
    if (*s == '\\')
      out_puts(o, "\\\\");
    else if (*s == '\n')
      out_puts(o, "\\n");
    else
      out_putn(o, s, 1);
  }
}

/* Label value escaping: backslash, double quote, newline. */
static void
out_lvalue(struct out *o, const char *s)
{
  for (; *s != '\0'; s++) {
    if (*s == '\\')
      out_puts(o, "\\\\");
    else if (*s == '"')
      out_puts(o, "\\\"");
    else if (*s == '\n')
      out_puts(o, "\\n");
    else
      out_putn(o, s, 1);
  }
}

/* name{l1="v1",...,extra} value\n (extra: an already formatted le pair). */
static void
out_sample(struct out *o, const struct tb_metric *f, const char *suffix, const struct series *s,
           const char *le, double v)
{
  out_puts(o, f->name);
  out_puts(o, suffix);
  if (f->n_labels > 0 || le != NULL) {
    out_puts(o, "{");
    for (size_t i = 0; i < f->n_labels; i++) {
      if (i > 0)
        out_puts(o, ",");
      out_puts(o, f->labels[i]);
      out_puts(o, "=\"");
      out_lvalue(o, s->values[i]);
      out_puts(o, "\"");
    }
    if (le != NULL) {
      if (f->n_labels > 0)
        out_puts(o, ",");
      out_puts(o, "le=\"");
      out_puts(o, le);
      out_puts(o, "\"");
    }
    out_puts(o, "}");
  }
  out_puts(o, " ");
  out_num(o, v);
  out_puts(o, "\n");
}

static const char *const type_names[] = {
  [TB_METRIC_COUNTER] = "counter",
  [TB_METRIC_GAUGE] = "gauge",
  [TB_METRIC_HISTOGRAM] = "histogram",
};

char *
tb_metrics_render(struct tb_metrics *m)
{
  struct out o = { 0 };
  out_puts(&o, "");
  pthread_mutex_lock(&m->mu);
  for (size_t i = 0; i < m->n_families; i++) {
    const struct tb_metric *f = m->families[i];
    out_puts(&o, "# HELP ");
    out_puts(&o, f->name);
    out_puts(&o, " ");
    out_help(&o, f->help);
    out_puts(&o, "\n# TYPE ");
    out_puts(&o, f->name);
    out_puts(&o, " ");
    out_puts(&o, type_names[f->type]);
    out_puts(&o, "\n");
    for (const struct series *s = f->first; s != NULL; s = s->next) {
      if (f->type != TB_METRIC_HISTOGRAM) {
        out_sample(&o, f, "", s, NULL, s->value);
        continue;
      }
      for (size_t b = 0; b < f->n_buckets; b++) {
        char le[40];
        snprintf(le, sizeof le, "%.17g", f->buckets[b]);
        out_sample(&o, f, "_bucket", s, le, s->bucket_counts[b]);
      }
      out_sample(&o, f, "_bucket", s, "+Inf", s->count);
      out_sample(&o, f, "_sum", s, NULL, s->value);
      out_sample(&o, f, "_count", s, NULL, s->count);
    }
  }
  out_puts(&o, "# HELP tokbench_metrics_series_dropped_total Series refused over the "
               "per-family cap.\n# TYPE tokbench_metrics_series_dropped_total counter\n"
               "tokbench_metrics_series_dropped_total ");
  out_num(&o, m->dropped);
  out_puts(&o, "\n");
  pthread_mutex_unlock(&m->mu);
  return o.p;
}

static const double request_buckets[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                          0.25,   0.5,   1,      2.5,   5,    10,    30,   60 };

static struct tb_metric *req_family, *lat_family;
static pthread_once_t request_once = PTHREAD_ONCE_INIT;

static void
request_init(void)
{
  static const char *const req_labels[] = { "route", "method", "status", NULL };
  static const char *const lat_labels[] = { "route", NULL };
  struct tb_metrics *m = tb_metrics_global();
  req_family =
    tb_metrics_family(m, TB_METRIC_COUNTER, "tokbench_http_requests_total",
                      "HTTP requests by route pattern, method and status.", req_labels, NULL, 0);
  lat_family = tb_metrics_family(m, TB_METRIC_HISTOGRAM, "tokbench_http_request_duration_seconds",
                                 "HTTP request latency by route pattern.", lat_labels,
                                 request_buckets, TB_ARRAY_LEN(request_buckets));
}

const char *
tb_metrics_method_label(const char *method)
{
  static const char *const known[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS" };
  for (size_t i = 0; method != NULL && i < TB_ARRAY_LEN(known); i++)
    if (strcmp(method, known[i]) == 0)
      return known[i];
  return "other";
}

void
tb_metrics_request(const char *route, const char *method, unsigned status, double seconds)
{
  pthread_once(&request_once, request_init);
  char st[16];
  /* a status outside HTTP's range is ours to fix, not a new series */
  snprintf(st, sizeof st, "%u", status >= 100 && status <= 599 ? status : 0u);
  const char *rv[] = { route != NULL ? route : "unmatched", tb_metrics_method_label(method), st };
  tb_metric_add(req_family, rv, 1);
  const char *lv[] = { rv[0] };
  tb_metric_observe(lat_family, lv, seconds);
}
