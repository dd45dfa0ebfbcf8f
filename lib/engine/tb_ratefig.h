/*
 * tb_ratefig: a rate cell's figures (docs/engine.md, "Rate cells"): its
 * counts and rates, its latencies, the steady-state window, a conversation
 * cell's turns, the trace cell's replay, and a measured cell's samples, the
 * server's view, the prefix check and the energy; and what a shard's cell
 * adds into its samples, whence tb_rate_cell_merged makes the merged
 * cell's.  Internal to the rate cells' files (tb_ratecell.h).
 */
#ifndef TB_RATEFIG_H
#define TB_RATEFIG_H

#include <jansson.h>

#include "base/tb_util.h"
#include "spec/tb_spec.h"

struct rcell;

/* The spec's objectives as an object (ttft_ms, tpot_ms, tbt_ms, e2e_ms:
 * those set): a cell's slo, settings.rate.slo and the sweep's slo. */
json_t *tb_ratefig_slo(const struct tb_spec_slo *slo) TB_MUST_CHECK;

/* The figures of a measured cell c into cell (its key set), its samples
 * arrays handed over to cell; or of a merged one (c->watch NULL: no
 * samples, no server series). */
void tb_ratefig_cell(struct rcell *c, json_t *cell);

/* A shard's cell c, over: what it adds into its samples (c's run's
 * env->shard->samples: tb_samples' rate section). */
void tb_ratefig_shard(struct rcell *c);

#endif
