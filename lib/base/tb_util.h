/*
 * tb_util: allocation, strings and clocks shared by every module.
 *
 * Out-of-memory policy: the tb_x* allocators abort the process with a message.
 * A benchmark service that cannot allocate a few bytes cannot do anything
 * useful, and aborting beats threading ENOMEM through every caller.  Sizes
 * that come from a peer are checked against named caps before they reach an
 * allocator (see tb_buf).
 */
#ifndef TB_UTIL_H
#define TB_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TB_MUST_CHECK __attribute__((warn_unused_result))
#define TB_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Allocators that never return NULL (abort on exhaustion). */
void *tb_xmalloc(size_t n);
void *tb_xcalloc(size_t count, size_t size);
void *tb_xrealloc(void *p, size_t n);
/* Grows *buf (capacity *cap bytes) to hold at least need bytes, doubling
 * from first (or from *cap when larger); keeps the contents.  The caller
 * caps need: this only allocates. */
void tb_xgrow(char **buf, size_t *cap, size_t need, size_t first);
char *tb_xstrdup(const char *s);
char *tb_xstrndup(const char *s, size_t n);
/* New string formatted like printf; caller frees. */
char *tb_xasprintf(const char *fmt, ...) TB_PRINTF(1, 2);

/* The next item of a comma-separated list (a setting such as
 * TOKBENCH_SHARED_GROUPS): from *p, with white space around it trimmed,
 * into *item and *len (0 for an empty item, "a,,b"); *p moves past its
 * comma.  False when *p is at the end (or NULL). */
bool tb_list_next(const char **p, const char **item, size_t *len);

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
int64_t tb_time_mono_ns(void);
/* The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID),
 * -1 when the clock fails. */
int64_t tb_time_thread_cpu_ns(void);
/* Wall clock in microseconds since the epoch. */
int64_t tb_time_real_us(void);
/* Wall clock as RFC 3339 UTC text into buf (at least 32 bytes). */
void tb_time_rfc3339(int64_t real_us, char *buf, size_t len);

/* The value of a hexadecimal digit (either case); -1 for any other byte. */
int tb_hex_digit(int c);

/* Parses a decimal integer in [min, max]; false on junk or range error. */
bool tb_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) TB_MUST_CHECK;
/* Parses "0", "8192", "8k", "8K" (K = 1024), "251K", "1M" (>= 0); false on junk. */
bool tb_parse_tokens(const char *s, int64_t *out) TB_MUST_CHECK;
/* Formats a token count the way the seed reports do: 8192 -> "8K",
 * 257024 -> "251K", 1000 -> "1000". */
void tb_format_tokens(int64_t tokens, char *buf, size_t len);

/* The over-capacity rule of METHOD.md: conc x (context + max_output) >
 * budget (KV tokens); budget <= 0 is unknown: never over capacity.  One
 * rule for the plan (tb_plan) and the result model (tb_result). */
bool tb_over_capacity(int64_t conc, int64_t context, int64_t max_output, int64_t budget);

/* Constant-time comparison of two byte strings of equal length n. */
bool tb_ct_equal(const void *a, const void *b, size_t n);

/* The process's soft limit of open descriptors raised to want, at most to
 * the hard limit; never lowered.  For a binary's run (tokbench run, the
 * worker, with tb_engine_nofile): library code never calls it, the
 * process's limits are its binary's. */
void tb_raise_nofile(uint64_t want);

#endif
