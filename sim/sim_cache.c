/*
 * sim_cache: block-level prefix cache.  Design in sim_cache.h.
 *
 * Blocks live in a fixed array of nodes, linked into one LRU list (head the
 * most recent) or the free list.  An open-addressed table (linear probing,
 * backward-shift deletion, at most half full) maps a block's chain hash to
 * its node.
 */
#include "sim_cache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_util.h"

struct node {
  uint64_t key;
  int32_t prev, next; /* LRU list, or next in the free list; -1: none */
  uint32_t slot;      /* where the table holds it */
};

struct sim_cache {
  struct node *nodes;
  int64_t max, used;
  int32_t head, tail, free_head;
  uint32_t *table; /* node index + 1; 0: empty */
  uint32_t mask;
};

static uint32_t
home(const struct sim_cache *c, uint64_t key)
{
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return (uint32_t)key & c->mask;
}

struct sim_cache *
sim_cache_new(int64_t max_blocks)
{
  if (max_blocks < 1)
    max_blocks = 1;
  if (max_blocks > (1 << 28))
    max_blocks = 1 << 28; /* 4 GiB of tokens at 16 per block: beyond any profile */
  struct sim_cache *c = tb_xcalloc(1, sizeof(*c));
  c->max = max_blocks;
  c->nodes = tb_xcalloc((size_t)max_blocks, sizeof(*c->nodes));
  for (int64_t i = 0; i < max_blocks; i++)
    c->nodes[i].next = i + 1 < max_blocks ? (int32_t)(i + 1) : -1;
  c->free_head = 0;
  c->head = c->tail = -1;
  uint64_t size = 2;
  while (size < (uint64_t)max_blocks * 2)
    size *= 2;
  c->table = tb_xcalloc((size_t)size, sizeof(*c->table));
  c->mask = (uint32_t)(size - 1);
  return c;
}

void
sim_cache_free(struct sim_cache *c)
{
  if (c == NULL)
    return;
  free(c->nodes);
  free(c->table);
  free(c);
}

int64_t
sim_cache_blocks(const struct sim_cache *c)
{
  return c->used;
}

void
sim_cache_clear(struct sim_cache *c)
{
  for (int64_t i = 0; i < c->max; i++)
    c->nodes[i].next = i + 1 < c->max ? (int32_t)(i + 1) : -1;
  c->free_head = 0;
  c->head = c->tail = -1;
  c->used = 0;
  memset(c->table, 0, ((size_t)c->mask + 1) * sizeof(*c->table));
}

size_t
sim_cache_chain(const int32_t *ids, size_t n, int64_t bs, uint64_t *out, size_t out_cap)
{
  return sim_cache_chain_from(0, ids, n, bs, out, out_cap);
}

size_t
sim_cache_chain_from(uint64_t h, const int32_t *ids, size_t n, int64_t bs, uint64_t *out,
                     size_t out_cap)
{
  if (bs <= 0)
    return 0;
  size_t blocks = n / (size_t)bs, k = 0;
  if (h == 0)
    h = 14695981039346656037ull;
  for (; k < blocks && k < out_cap; k++) {
    for (size_t i = k * (size_t)bs; i < (k + 1) * (size_t)bs; i++) {
      uint32_t v = (uint32_t)ids[i];
      for (int b = 0; b < 4; b++) {
        h ^= (v >> (8 * b)) & 0xff;
        h *= 1099511628211ull;
      }
    }
    out[k] = h; /* chained: the next block starts from this one's hash */
  }
  return k;
}

/* The node holding key, or -1. */
static int32_t
find(const struct sim_cache *c, uint64_t key)
{
  for (uint32_t i = home(c, key);; i = (i + 1) & c->mask) {
    uint32_t v = c->table[i];
    if (v == 0)
      return -1;
    if (c->nodes[v - 1].key == key)
      return (int32_t)(v - 1);
  }
}

static void
unlink_node(struct sim_cache *c, int32_t n)
{
  struct node *x = &c->nodes[n];
  if (x->prev >= 0)
    c->nodes[x->prev].next = x->next;
  else
    c->head = x->next;
  if (x->next >= 0)
    c->nodes[x->next].prev = x->prev;
  else
    c->tail = x->prev;
  x->prev = x->next = -1;
}

static void
push_head(struct sim_cache *c, int32_t n)
{
  struct node *x = &c->nodes[n];
  x->prev = -1;
  x->next = c->head;
  if (c->head >= 0)
    c->nodes[c->head].prev = n;
  c->head = n;
  if (c->tail < 0)
    c->tail = n;
}

/* Removes table slot i, shifting back the run after it (linear probing). */
static void
table_delete(struct sim_cache *c, uint32_t i)
{
  c->table[i] = 0;
  for (uint32_t j = (i + 1) & c->mask; c->table[j] != 0; j = (j + 1) & c->mask) {
    uint32_t h = home(c, c->nodes[c->table[j] - 1].key);
    /* may the entry at j move to the hole at i?  Only if its home is not
     * in the cyclic range (i, j]. */
    bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
    if (stays)
      continue;
    c->table[i] = c->table[j];
    c->nodes[c->table[i] - 1].slot = i;
    c->table[j] = 0;
    i = j;
  }
}

static void
evict_tail(struct sim_cache *c)
{
  int32_t n = c->tail;
  unlink_node(c, n);
  table_delete(c, c->nodes[n].slot);
  c->nodes[n].next = c->free_head;
  c->free_head = n;
  c->used--;
}

static void
add(struct sim_cache *c, uint64_t key)
{
  if (c->free_head < 0)
    evict_tail(c);
  int32_t n = c->free_head;
  c->free_head = c->nodes[n].next;
  c->nodes[n].key = key;
  uint32_t i = home(c, key);
  while (c->table[i] != 0)
    i = (i + 1) & c->mask;
  c->table[i] = (uint32_t)n + 1;
  c->nodes[n].slot = i;
  push_head(c, n);
  c->used++;
}

/* Links node n right after node a (a in the LRU list). */
static void
insert_after(struct sim_cache *c, int32_t a, int32_t n)
{
  struct node *x = &c->nodes[n];
  x->prev = a;
  x->next = c->nodes[a].next;
  if (x->next >= 0)
    c->nodes[x->next].prev = n;
  else
    c->tail = n;
  c->nodes[a].next = n;
}

size_t
sim_cache_match(struct sim_cache *c, const uint64_t *chain, size_t n)
{
  /* One lookup a block: the matched blocks go to the front in chain order
   * (block 0 the most recent, as if touched last block first), each
   * after the one before it. */
  size_t k = 0;
  int32_t prev = -1;
  for (; k < n; k++) {
    int32_t x = find(c, chain[k]);
    if (x < 0)
      break;
    if (x == prev)
      continue; /* the same key twice in a row: already in place */
    unlink_node(c, x);
    if (prev < 0)
      push_head(c, x);
    else
      insert_after(c, prev, x);
    prev = x;
  }
  return k;
}

void
sim_cache_insert(struct sim_cache *c, const uint64_t *chain, size_t n)
{
  if ((int64_t)n > c->max)
    n = (size_t)c->max;
  for (size_t i = n; i-- > 0;) {
    int32_t x = find(c, chain[i]);
    if (x >= 0) {
      unlink_node(c, x);
      push_head(c, x);
    } else {
      add(c, chain[i]);
    }
  }
}
