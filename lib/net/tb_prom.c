/*
 * tb_prom: Prometheus text parsing.  See tb_prom.h.
 *
 * Line by line, no allocation: a sample line is split into name, the label
 * block (quotes and escapes respected, so a '}' inside a label value does not
 * end it) and the value, parsed with strtod from a bounded copy.
 */
#include "net/tb_prom.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool
name_char(char c, bool first)
{
  return isalpha((unsigned char)c) || c == '_' || c == ':' || (!first && isdigit((unsigned char)c));
}

/* Parses one line; false when it is not a sample. */
static bool
parse_line(const char *l, size_t n, const char **name, size_t *name_len, const char **labels,
           size_t *labels_len, double *value)
{
  size_t i = 0;
  while (i < n && (l[i] == ' ' || l[i] == '\t'))
    i++;
  if (i == n || l[i] == '#')
    return false;
  size_t ns = i;
  while (i < n && name_char(l[i], i == ns))
    i++;
  if (i == ns)
    return false;
  *name = l + ns;
  *name_len = i - ns;
  *labels = l + i;
  *labels_len = 0;
  if (i < n && l[i] == '{') {
    size_t ls = ++i;
    bool in_q = false;
    while (i < n) {
      char c = l[i];
      if (in_q) {
        if (c == '\\')
          i++;
        else if (c == '"')
          in_q = false;
      } else if (c == '"') {
        in_q = true;
      } else if (c == '}') {
        break;
      }
      i++;
    }
    if (i >= n)
      return false;
    *labels = l + ls;
    *labels_len = i - ls;
    i++;
  }
  while (i < n && (l[i] == ' ' || l[i] == '\t'))
    i++;
  size_t vs = i;
  while (i < n && l[i] != ' ' && l[i] != '\t')
    i++;
  size_t vlen = i - vs;
  if (vlen == 0 || vlen >= 64)
    return false;
  char num[64];
  memcpy(num, l + vs, vlen);
  num[vlen] = '\0';
  char *end = NULL;
  double v = strtod(num, &end);
  if (end == num || *end != '\0')
    return false;
  *value = v;
  return true;
}

long
tb_prom_parse(const char *text, size_t len, tb_prom_sample_fn fn, void *cls)
{
  if (len > TB_PROM_BODY_MAX)
    return -1;
  long count = 0;
  size_t i = 0;
  while (i < len) {
    const char *nl = memchr(text + i, '\n', len - i);
    size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
    const char *l = text + i;
    i += n + 1;
    if (n > 0 && l[n - 1] == '\r')
      n--;
    if (n > TB_PROM_LINE_MAX)
      continue;
    const char *name, *labels;
    size_t name_len, labels_len;
    double v;
    if (!parse_line(l, n, &name, &name_len, &labels, &labels_len, &v))
      continue;
    count++;
    if (!fn(cls, name, name_len, labels, labels_len, v))
      break;
  }
  return count;
}

/* What tb_prom_sum and tb_prom_label look for in the samples of one
 * metric name: the sum of its values (label NULL), or the value of a label
 * (the first sample that has it). */
struct name_ctx {
  const char *name, *label;
  size_t name_len;
  char *buf;
  size_t buflen;
  double sum;
  bool found;
};

static bool
name_cb(void *cls, const char *name, size_t name_len, const char *labels, size_t labels_len,
        double value)
{
  struct name_ctx *c = cls;
  if (name_len != c->name_len || memcmp(name, c->name, name_len) != 0)
    return true;
  if (c->label == NULL) {
    if (!isnan(value)) {
      c->sum += value;
      c->found = true;
    }
    return true;
  }
  if (tb_prom_find_label(labels, labels_len, c->label, c->buf, c->buflen)) {
    c->found = true;
    return false;
  }
  return true;
}

bool
tb_prom_sum(const char *text, size_t len, const char *name, double *out)
{
  struct name_ctx c = { .name = name, .name_len = strlen(name) };
  if (tb_prom_parse(text, len, name_cb, &c) < 0 || !c.found)
    return false;
  *out = c.sum;
  return true;
}

bool
tb_prom_find_label(const char *labels, size_t n, const char *label, char *buf, size_t buflen)
{
  size_t want = strlen(label);
  size_t i = 0;
  while (i < n) {
    while (i < n && (labels[i] == ' ' || labels[i] == ','))
      i++;
    size_t ks = i;
    while (i < n && labels[i] != '=' && labels[i] != ' ')
      i++;
    size_t klen = i - ks;
    while (i < n && labels[i] == ' ')
      i++;
    if (i >= n || labels[i] != '=')
      return false;
    i++;
    while (i < n && labels[i] == ' ')
      i++;
    if (i >= n || labels[i] != '"')
      return false;
    i++;
    bool match = klen == want && memcmp(labels + ks, label, want) == 0;
    size_t o = 0;
    while (i < n && labels[i] != '"') {
      char c = labels[i];
      if (c == '\\' && i + 1 < n) {
        i++;
        c = labels[i] == 'n' ? '\n' : labels[i];
      }
      if (match && buflen > 0 && o + 1 < buflen)
        buf[o++] = c;
      i++;
    }
    if (i >= n)
      return false;
    i++;
    if (match) {
      if (buflen > 0)
        buf[o] = '\0';
      return true;
    }
  }
  return false;
}

bool
tb_prom_label(const char *text, size_t len, const char *name, const char *label, char *buf,
              size_t buflen)
{
  struct name_ctx c = {
    .name = name, .label = label, .name_len = strlen(name), .buf = buf, .buflen = buflen
  };
  if (tb_prom_parse(text, len, name_cb, &c) < 0)
    return false;
  return c.found;
}

struct prefix_cls {
  const char *prefix;
  size_t len;
  bool found;
};

static bool
prefix_fn(void *cls, const char *name, size_t name_len, const char *labels, size_t labels_len,
          double value)
{
  struct prefix_cls *p = cls;
  (void)labels;
  (void)labels_len;
  (void)value;
  if (name_len >= p->len && memcmp(name, p->prefix, p->len) == 0) {
    p->found = true;
    return false;
  }
  return true;
}

bool
tb_prom_has_prefix(const char *text, size_t len, const char *prefix)
{
  struct prefix_cls p = { .prefix = prefix, .len = strlen(prefix), .found = false };
  if (tb_prom_parse(text, len, prefix_fn, &p) < 0)
    return false;
  return p.found;
}
