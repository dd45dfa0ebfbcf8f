/*
 * tb_prom: the Prometheus text exposition format, as vLLM and SGLang serve it
 * on /metrics: `name{label="value",...} value [timestamp]`, `#` lines.
 *
 * The parser walks the text once and hands each sample to a callback; helpers
 * sum a metric over its label sets (vLLM has one series per engine/model) and
 * read one label of the first series of a metric (vllm:cache_config_info
 * carries the KV cache size as labels).  Caps: TB_PROM_BODY_MAX on the text,
 * TB_PROM_LINE_MAX on a line (longer lines are skipped, not fatal).
 */
#ifndef TB_PROM_H
#define TB_PROM_H

#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

#define TB_PROM_BODY_MAX (8u * 1024u * 1024u)
#define TB_PROM_LINE_MAX (64u * 1024u)

/* name and labels are not NUL-terminated; labels is the text between the
 * braces (possibly empty).  Return false to stop. */
typedef bool (*tb_prom_sample_fn)(void *cls, const char *name, size_t name_len, const char *labels,
                                  size_t labels_len, double value);

/* Walks every well-formed sample; malformed lines are skipped.  Returns the
 * number of samples seen, or -1 if the text is over TB_PROM_BODY_MAX. */
long tb_prom_parse(const char *text, size_t len, tb_prom_sample_fn fn, void *cls) TB_MUST_CHECK;

/* Sum of every series of `name` (exact metric name); false if none. */
bool tb_prom_sum(const char *text, size_t len, const char *name, double *out) TB_MUST_CHECK;

/* Value of label `label` on the first series of `name`, unescaped into buf
 * (NUL-terminated, truncated to len-1); false if absent. */
bool tb_prom_label(const char *text, size_t len, const char *name, const char *label, char *buf,
                   size_t buflen) TB_MUST_CHECK;

/* True when some sample's metric name starts with prefix (e.g. "vllm:"). */
bool tb_prom_has_prefix(const char *text, size_t len, const char *prefix);

/* Finds label `label` in a label text; unescapes into buf. */
bool tb_prom_find_label(const char *labels, size_t labels_len, const char *label, char *buf,
                        size_t buflen) TB_MUST_CHECK;

#endif
