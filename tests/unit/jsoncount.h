/*
 * jsoncount.h: what jansson allocates, for the unit tests that hold a reader
 * to the memory it takes (test_jsonscan, test_trace): a counting allocator
 * through json_set_alloc_funcs (glibc's chunk rounding and header counted),
 * and JSON texts of many copies of one item.
 *
 * Header-only (static inline functions) because only the tests include it.
 */
#ifndef TB_TEST_JSONCOUNT_H
#define TB_TEST_JSONCOUNT_H

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static size_t jsoncount_in_use, jsoncount_peak;

/* glibc: 8 bytes of header, chunks of 16, at least 32 */
static inline size_t
jsoncount_chunk(size_t n)
{
  size_t c = (n + 8 + 15) & ~(size_t)15;
  return c < 32 ? 32 : c;
}

static inline void *
jsoncount_malloc(size_t n)
{
  size_t *p = malloc(n + 16);
  if (p == NULL)
    return NULL;
  p[0] = n;
  jsoncount_in_use += jsoncount_chunk(n);
  if (jsoncount_in_use > jsoncount_peak)
    jsoncount_peak = jsoncount_in_use;
  return p + 2;
}

static inline void
jsoncount_free(void *q)
{
  if (q == NULL)
    return;
  size_t *p = (size_t *)q - 2;
  jsoncount_in_use -= jsoncount_chunk(p[0]);
  free(p);
}

/* Counting from zero, until jsoncount_stop. */
static inline void
jsoncount_start(void)
{
  jsoncount_in_use = jsoncount_peak = 0;
  json_set_alloc_funcs(jsoncount_malloc, jsoncount_free);
}

/* Back to malloc; the peak bytes jansson held meanwhile. */
static inline size_t
jsoncount_stop(void)
{
  json_set_alloc_funcs(malloc, free);
  return jsoncount_peak;
}

/* head, reps copies of item (comma-separated), tail; NULL when out of
 * memory.  The caller frees. */
static inline char *
jsoncount_repeat(const char *head, const char *item, size_t reps, const char *tail)
{
  size_t hl = strlen(head), il = strlen(item), tl = strlen(tail);
  char *s = malloc(hl + reps * (il + 1) + tl + 1);
  if (s == NULL)
    return NULL;
  memcpy(s, head, hl);
  size_t o = hl;
  for (size_t i = 0; i < reps; i++) {
    if (i > 0)
      s[o++] = ',';
    memcpy(s + o, item, il);
    o += il;
  }
  memcpy(s + o, tail, tl + 1);
  return s;
}

#endif
