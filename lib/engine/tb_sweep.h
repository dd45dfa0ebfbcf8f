/*
 * tb_sweep: a sweep's search (tb_rate.h; docs/engine.md, "Sweeps"): each
 * probe the search's next value (tb_plan_sweep_next), run as a rate cell
 * (tb_rate_one_cell: over rate, open loop; over concurrency, closed loop),
 * until it converges or runs out of probes, then the sweep's object.
 * Internal to the rate cells' files (tb_ratecell.h).
 */
#ifndef TB_SWEEP_H
#define TB_SWEEP_H

#include <jansson.h>

#include "base/tb_util.h"

struct rrun;

/* The sweep of r's plan: its probes (cells, each emitted or kept), then
 * its object (new): what it searched, each probe, what it found and why it
 * stopped. */
json_t *tb_sweep_run(struct rrun *r) TB_MUST_CHECK;

#endif
