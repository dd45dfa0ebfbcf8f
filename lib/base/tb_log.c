/*
 * tb_log: JSON-lines logger.  Each line is built in one buffer and written
 * with one write(2), so lines of concurrent threads and processes sharing a
 * file do not interleave.
 *
 * The api logs every request, so a line is formatted straight into a stack
 * buffer (no allocation, no JSON library): strings are escaped as RFC 8259
 * asks, bytes that are not valid UTF-8 are replaced by U+FFFD, and a line
 * longer than the buffer is cut at a field boundary and marked
 * "truncated":true rather than lost.
 */
#include "base/tb_log.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tb_util.h"

#define TB_LOG_LINE_MAX 8192

static const char *log_component = "tokbench";
static enum tb_log_level log_min = TB_LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };

void
tb_log_init(const char *component, enum tb_log_level min_level)
{
  log_component = component;
  log_min = min_level;
}

int
tb_log_level_parse(const char *s)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(level_names); i++)
    if (s != NULL && strcmp(s, level_names[i]) == 0)
      return (int)i;
  return -1;
}

struct line {
  char buf[TB_LOG_LINE_MAX];
  size_t len;
  bool full; /* something did not fit */
};

static void
put(struct line *l, const char *s, size_t n)
{
  if (l->full || n > sizeof l->buf - 32 - l->len) { /* keep room for the tail */
    l->full = true;
    return;
  }
  memcpy(l->buf + l->len, s, n);
  l->len += n;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
  unsigned char c = s[0];
  size_t len;
  uint32_t min;
  if (c < 0x80)
    return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  uint32_t cp = c & (0xFF >> (len + 1));
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

static void
put_string(struct line *l, const char *s)
{
  put(l, "\"", 1);
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  size_t i = 0;
  while (i < n && !l->full) {
    size_t run = i;
    while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
      run++;
    put(l, s + i, run - i);
    i = run;
    if (i >= n)
      break;
    unsigned char c = p[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      put(l, esc, 2);
      i++;
    } else if (c < 0x20) {
      switch (c) {
      case '\n': put(l, "\\n", 2); break;
      case '\r': put(l, "\\r", 2); break;
      case '\t': put(l, "\\t", 2); break;
      default: snprintf(esc, sizeof esc, "\\u%04x", c); put(l, esc, 6);
      }
      i++;
    } else {
      size_t u = utf8_len(p + i, n - i);
      if (u == 0) {
        put(l, "\xEF\xBF\xBD", 3); /* U+FFFD */
        i++;
      } else {
        put(l, s + i, u);
        i += u;
      }
    }
  }
  put(l, "\"", 1);
}

static void
put_key(struct line *l, const char *key)
{
  put(l, ",", 1);
  put_string(l, key);
  put(l, ":", 1);
}

void
tb_log(enum tb_log_level level, const char *msg, ...)
{
  if (level < log_min)
    return;
  struct line l;
  l.len = 0;
  l.full = false;
  char ts[40];
  tb_time_rfc3339(tb_time_real_us(), ts, sizeof ts);
  put(&l, "{\"ts\":\"", 7);
  put(&l, ts, strlen(ts));
  put(&l, "\",\"level\":\"", 11);
  put(&l, level_names[level], strlen(level_names[level]));
  put(&l, "\"", 1);
  put_key(&l, "component");
  put_string(&l, log_component);
  put_key(&l, "msg");
  put_string(&l, msg ? msg : "");
  va_list ap;
  va_start(ap, msg);
  for (;;) {
    const char *key = va_arg(ap, const char *);
    if (key == NULL)
      break;
    int type = va_arg(ap, int);
    size_t mark = l.len;
    bool was_full = l.full;
    char num[48];
    put_key(&l, key);
    switch (type) {
    case TB_LS: {
      const char *s = va_arg(ap, const char *);
      if (s != NULL)
        put_string(&l, s);
      else
        put(&l, "null", 4);
      break;
    }
    case TB_LI:
      snprintf(num, sizeof num, "%" PRId64, va_arg(ap, int64_t));
      put(&l, num, strlen(num));
      break;
    case TB_LD: {
      double d = va_arg(ap, double);
      if (isfinite(d))
        snprintf(num, sizeof num, "%.17g", d);
      else
        snprintf(num, sizeof num, "null");
      put(&l, num, strlen(num));
      break;
    }
    default: abort(); /* a programming error: wrong type tag */
    }
    if (l.full && !was_full)
      l.len = mark; /* drop the field that did not fit, whole */
  }
  va_end(ap);
  if (l.full) {
    l.full = false;
    static const char trunc[] = ",\"truncated\":true";
    memcpy(l.buf + l.len, trunc, sizeof trunc - 1); /* room kept by put() */
    l.len += sizeof trunc - 1;
  }
  l.buf[l.len++] = '}';
  l.buf[l.len++] = '\n';
  ssize_t w = write(STDERR_FILENO, l.buf, l.len);
  (void)w;
}
