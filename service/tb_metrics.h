/*
 * tb_metrics: a small thread-safe registry of counters, gauges and
 * histograms, rendered as the Prometheus text exposition format (0.0.4).
 *
 * A family (one metric name, its help, type, label names and, for
 * histograms, bucket bounds) is declared once; its series are created on
 * first use of a label-value tuple.  One mutex per registry guards all of
 * it: an update is a lock, a hash lookup and an add, cheap next to an HTTP
 * request.  Label values come from our own code (route patterns, states),
 * never from raw URLs, and each family holds at most TB_METRICS_SERIES_MAX
 * series: further tuples are dropped and counted in
 * tokbench_metrics_series_dropped_total, so a bug cannot eat the memory.
 *
 * tb_metrics_global() is the process-wide registry the api renders on
 * /metrics; tb_metrics_request() is the one call per HTTP request.
 */
#ifndef TB_METRICS_H
#define TB_METRICS_H

#include <stddef.h>

#include "base/tb_util.h"

#define TB_METRICS_FAMILIES_MAX 64
#define TB_METRICS_LABELS_MAX 4
#define TB_METRICS_BUCKETS_MAX 24
#define TB_METRICS_SERIES_MAX 2000
#define TB_METRICS_VALUE_MAX 256 /* longer label values are cut */

enum tb_metric_type {
  TB_METRIC_COUNTER,
  TB_METRIC_GAUGE,
  TB_METRIC_HISTOGRAM
};

struct tb_metrics;
struct tb_metric;

/* A new empty registry (free with tb_metrics_free). */
struct tb_metrics *tb_metrics_new(void);
void tb_metrics_free(struct tb_metrics *m);
/* The process-wide registry, created on first use (thread-safe). */
struct tb_metrics *tb_metrics_global(void);

/*
 * Declares a family, or returns the one already declared under that name
 * (the rest of the arguments must then agree; a clash is a programming
 * error and aborts, as are a bad name, too many labels or buckets, or more
 * than TB_METRICS_FAMILIES_MAX families).  label_names is NULL-terminated
 * (NULL: no labels).  buckets: upper bounds in increasing order, histograms
 * only (+Inf is implicit).  The family is borrowed from the registry.
 */
struct tb_metric *tb_metrics_family(struct tb_metrics *m, enum tb_metric_type type,
                                    const char *name, const char *help,
                                    const char *const *label_names, const double *buckets,
                                    size_t n_buckets);

/* Updates the series of the given label values (as many as the family has
 * label names; NULL values are empty strings).  add: counters and gauges
 * (a counter ignores negative amounts); set: gauges; observe: histograms. */
void tb_metric_add(struct tb_metric *f, const char *const *values, double v);
void tb_metric_set(struct tb_metric *f, const char *const *values, double v);
void tb_metric_observe(struct tb_metric *f, const char *const *values, double v);
/* Drops every series of a family (gauges refreshed from a query). */
void tb_metric_reset(struct tb_metric *f);
/* The current value of a counter or gauge series, or the count of a
 * histogram series; 0 when the series does not exist.  For tests. */
double tb_metric_value(struct tb_metric *f, const char *const *values);

/* The whole registry as Prometheus text (new string, caller frees). */
char *tb_metrics_render(struct tb_metrics *m);

/* The api's per-request call, on the global registry:
 * tokbench_http_requests_total{route,method,status} and
 * tokbench_http_request_duration_seconds{route} (histogram).  route is the
 * pattern of the routing table ("/v1/jobs/{id}"), never the raw path;
 * method goes through tb_metrics_method_label: a client choosing methods or
 * paths at will adds at most one series per status (issue 13). */
/* method as a label: one of GET HEAD POST PUT PATCH DELETE OPTIONS, else
 * "other" (static string). */
const char *tb_metrics_method_label(const char *method);
void tb_metrics_request(const char *route, const char *method, unsigned status, double seconds);

#endif
