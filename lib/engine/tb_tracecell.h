/*
 * tb_tracecell: the trace cell (docs/traces.md): the spec's trace replayed
 * as a rate cell (tb_ratecell) after the spec's rates, each root request
 * arriving at its recorded time and the turns after it in its session at
 * their recorded delay, each with a prompt of the trace's blocks
 * (tb_traceplay_text) and the trace's output length.  Internal to the rate
 * cells' files (tb_ratecell.h).
 */
#ifndef TB_TRACECELL_H
#define TB_TRACECELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

struct rrun;
struct rcell;
struct sess;

/* The trace cell's replay of r->env->trace as the spec's trace object asks,
 * into r (r->tr, its roots, each request's first turn after it and next
 * sibling, the summary, the prompts' seed); r->tr_err where the cell
 * cannot run.  tb_rate.c's teardown frees them. */
void tb_tracecell_setup(struct rrun *r);

/* The trace cell: the spec's trace replayed (kept from done_cells when an
 * earlier attempt measured it), emitted.  false: stop. */
bool tb_tracecell_run(struct rrun *r);

/* Root k's arrival in the replay, ns after the cell's t0. */
int64_t tb_tracecell_root_ns(const struct rrun *r, size_t k);

/* The body of trace request i, want output tokens (new string); NULL when
 * it cannot be made. */
char *tb_tracecell_body(struct rrun *r, int64_t i, int64_t want) TB_MUST_CHECK;

/* Session ss's trace request ended (at now; failed or not): the turns that
 * follow it are due in c (none after a failure). */
void tb_tracecell_after(struct rcell *c, const struct sess *ss, bool failed, int64_t now);

#endif
