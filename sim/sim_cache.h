/*
 * sim_cache: the simulator's block-level prefix cache, as vLLM's automatic
 * prefix caching keeps one: a prompt's token ids are cut into full blocks
 * of block_size tokens, each block named by a hash chained over all blocks
 * before it (so a block matches only under the same prefix), and a new
 * prompt reuses the longest run of leading blocks the cache holds.  Only
 * full blocks are cached; a prompt shorter than a block has none.
 *
 * Capacity is in blocks (the KV budget / block size).  Eviction is least
 * recently used, and a prompt's blocks are touched last block first, so a
 * chain is evicted from its tail and its shared head stays longest, which
 * is what vLLM's free-block queue does.
 *
 * Lookups and inserts cost O(blocks of the prompt); no allocation after
 * sim_cache_new.  One thread (the sim's loop) owns it.
 */
#ifndef SIM_CACHE_H
#define SIM_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct sim_cache;

/* A cache of at most max_blocks blocks (>= 1).  Never NULL. */
struct sim_cache *sim_cache_new(int64_t max_blocks);
void sim_cache_free(struct sim_cache *c);

/* The block chain of ids[0..n): out[i] names block i (tokens
 * [i*bs, (i+1)*bs)); only full blocks.  Returns the number of blocks
 * written, at most out_cap. */
size_t sim_cache_chain(const int32_t *ids, size_t n, int64_t bs, uint64_t *out, size_t out_cap);

/* The chain continued: as sim_cache_chain, but the first block's hash
 * starts from h (the hash of the block before it; 0 starts a chain). */
size_t sim_cache_chain_from(uint64_t h, const int32_t *ids, size_t n, int64_t bs, uint64_t *out,
                            size_t out_cap);

/* How many leading blocks of chain[0..n) the cache holds; those become the
 * most recently used. */
size_t sim_cache_match(struct sim_cache *c, const uint64_t *chain, size_t n);

/* Caches chain[0..n) (present blocks are refreshed), evicting the least
 * recently used blocks as needed.  A chain longer than the capacity keeps
 * its head. */
void sim_cache_insert(struct sim_cache *c, const uint64_t *chain, size_t n);

/* Blocks held now. */
int64_t sim_cache_blocks(const struct sim_cache *c);
/* Drops every block (an engine's prefix-cache reset); the capacity stays. */
void sim_cache_clear(struct sim_cache *c);

#endif
