/*
 * tb_util: allocation, strings and clocks.  See tb_util.h for the policy.
 */
#include "base/tb_util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void
oom(size_t n)
{
  fprintf(stderr, "tokbench: out of memory allocating %zu bytes\n", n);
  abort();
}

void *
tb_xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);
  if (p == NULL)
    oom(n);
  return p;
}

void *
tb_xcalloc(size_t count, size_t size)
{
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (p == NULL)
    oom(count * size);
  return p;
}

void *
tb_xrealloc(void *p, size_t n)
{
  void *q = realloc(p, n ? n : 1);
  if (q == NULL)
    oom(n);
  return q;
}

void
tb_xgrow(char **buf, size_t *cap, size_t need, size_t first)
{
  if (need <= *cap)
    return;
  size_t ncap = *cap ? *cap : first ? first : 1;
  while (ncap < need)
    ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
  *buf = tb_xrealloc(*buf, ncap);
  *cap = ncap;
}

char *
tb_xstrdup(const char *s)
{
  return tb_xstrndup(s, strlen(s));
}

char *
tb_xstrndup(const char *s, size_t n)
{
  size_t len = strnlen(s, n);
  char *p = tb_xmalloc(len + 1);
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

char *
tb_xasprintf(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    abort();
  char *p = tb_xmalloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

bool
tb_list_next(const char **p, const char **item, size_t *len)
{
  const char *s = *p;
  if (s == NULL || *s == '\0')
    return false;
  size_t l = strcspn(s, ",");
  const char *a = s, *b = s + l;
  while (a < b && isspace((unsigned char)*a))
    a++;
  while (b > a && isspace((unsigned char)b[-1]))
    b--;
  *item = a;
  *len = (size_t)(b - a);
  *p = s[l] == ',' ? s + l + 1 : s + l;
  return true;
}

int64_t
tb_time_mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
tb_time_thread_cpu_ns(void)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
tb_time_real_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
tb_time_rfc3339(int64_t real_us, char *buf, size_t len)
{
  time_t secs = (time_t)(real_us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char base[24];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, len, "%s.%03dZ", base, (int)((real_us / 1000) % 1000));
}

int
tb_hex_digit(int c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

bool
tb_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
  /* strtoll would accept leading blanks and a '+': we do not. */
  if (s == NULL || !((*s >= '0' && *s <= '9') || *s == '-'))
    return false;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    return false;
  if (v < min || v > max)
    return false;
  *out = v;
  return true;
}

bool
tb_parse_tokens(const char *s, int64_t *out)
{
  if (s == NULL || *s == '\0')
    return false;
  size_t len = strlen(s);
  int64_t mult = 1;
  char last = s[len - 1];
  if (last == 'k' || last == 'K')
    mult = 1024;
  else if (last == 'm' || last == 'M')
    mult = 1024 * 1024;
  char num[32];
  size_t nlen = mult == 1 ? len : len - 1;
  if (nlen == 0 || nlen >= sizeof num)
    return false;
  memcpy(num, s, nlen);
  num[nlen] = '\0';
  int64_t v;
  if (!tb_parse_i64(num, 0, INT64_MAX / (1024 * 1024), &v))
    return false;
  *out = v * mult;
  return true;
}

bool
tb_over_capacity(int64_t conc, int64_t context, int64_t max_output, int64_t budget)
{
  if (budget <= 0)
    return false;
  return conc * (context + max_output) > budget;
}

void
tb_format_tokens(int64_t tokens, char *buf, size_t len)
{
  if (tokens >= 1024 && tokens % 1024 == 0)
    snprintf(buf, len, "%" PRId64 "K", tokens / 1024);
  else if (tokens >= 10240)
    snprintf(buf, len, "%" PRId64 "K", tokens / 1024);
  else
    snprintf(buf, len, "%" PRId64, tokens);
}

bool
tb_ct_equal(const void *a, const void *b, size_t n)
{
  const unsigned char *x = a, *y = b;
  unsigned char acc = 0;
  for (size_t i = 0; i < n; i++)
    acc |= (unsigned char)(x[i] ^ y[i]);
  return acc == 0;
}

void
tb_raise_nofile(uint64_t want)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)want) {
    rl.rlim_cur = (rlim_t)want < rl.rlim_max ? (rlim_t)want : rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
}
