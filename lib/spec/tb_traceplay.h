/*
 * tb_traceplay: a trace as it is played (docs/traces.md, "Replay" and
 * "Prompts"): the window of it a spec asks for, sped up, its rate scaled
 * and its lengths capped, and the prompt text of each request, carrying the
 * trace's block sharing.
 */
#ifndef TB_TRACEPLAY_H
#define TB_TRACEPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "spec/tb_trace.h"

/* How a trace is replayed (the spec's trace object): a window of its
 * roots' arrivals, played faster, its arrival rate scaled, lengths capped.
 * Zeros: the whole trace as recorded. */
struct tb_traceplay_opts {
  double start_s;      /* roots arriving before are left out */
  double duration_s;   /* roots arriving at start_s + duration_s or later
                          * are left out; 0: to the end */
  double speedup;      /* every time and delay divided by it; 0 = 1 */
  double rate_scale;   /* the roots' arrivals (not a session's delays)
                          * divided by it again; 0 = 1 */
  int64_t max_output;  /* output tokens capped; 0: as recorded */
  int64_t max_input;   /* input tokens capped (the server's length); 0 */
  size_t max_requests; /* requests kept at most; 0: all */
};

/* The replay of in as o asks, into *out (a trace of its own; free with
 * tb_trace_free): the roots inside the window, each with its session's
 * turns (a turn whose parent is left out is left out), times from the
 * window's start divided by speedup (roots: by rate_scale too; a turn keeps
 * its offset from its parent, divided by speedup), delays divided by
 * speedup, inputs (and their blocks) and outputs capped.  Its nsessions
 * and nuniq are in's.  Returns the requests kept. */
size_t tb_traceplay_window(const struct tb_trace *in, const struct tb_traceplay_opts *o,
                           struct tb_trace *out);

/* The prompt text of request i, carrying the trace's block sharing
 * (docs/traces.md, "Prompts"): words of at most four bytes (one token each
 * on usual BPE vocabularies and on tokbench-sim's), block_tokens of them per
 * block id, drawn from a generator seeded by seed and the block's dense id,
 * so equal ids give equal words and unequal ids differ (within a run: the
 * seed is the run's, so no two runs share a block); past its blocks (or in
 * a trace without blocks) words seeded by the request's index alone.  In
 * all min(in_tokens, max_words) words, separated by single spaces; the
 * count in *words.  A new string (caller frees). */
char *tb_traceplay_text(const struct tb_trace *t, size_t i, uint64_t seed, int64_t max_words,
                        int64_t *words);

#endif
