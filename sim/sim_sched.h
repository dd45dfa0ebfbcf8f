/*
 * sim_sched: the simulator's scheduler (the model of continuous batching,
 * sim/README.md): the timer heap, the FIFO queue and its admission (KV
 * reservation, max running requests), the prefill lane and the prefix cache,
 * a generation's life from first byte to finish or abort, and the two phases
 * of a decode step.
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_SCHED_H
#define SIM_SCHED_H

#include "sim_state.h"

/* Puts g in the timer heap, due at `due` (ns). */
void sim_sched_heap_push(struct server *s, struct gen *g, int64_t due);

/* Takes g out of the timer heap (nothing if it is not there). */
void sim_sched_heap_remove(struct server *s, struct gen *g);

/* Appends g to the FIFO admission queue (state G_QUEUED). */
void sim_sched_queue_push(struct server *s, struct gen *g);

/* Detaches g from everything that holds it (heap, queue, batch, prefill
 * group, KV reservation, its connection) and frees it. */
void sim_sched_gen_free(struct server *s, struct gen *g);

/* Sends an API abort (SGLang /abort_request) to the client. */
void sim_sched_gen_abort_api(struct server *s, struct gen *g);

/* Admits queued requests, in order, while they fit (running requests, KV). */
void sim_sched_try_admit(struct server *s, int64_t now);
/* An engine's prefix-cache reset: the block cache and the whole-prompt
 * entries emptied.  Returns the tokens the cache held. */
int64_t sim_sched_cache_reset(struct server *s);

/* g's deadline has come: first byte (stream headers, then queue), end of
 * prefill (first token) or end of a stall (back into the batch). */
void sim_sched_on_timer_gen(struct server *s, struct gen *g, int64_t now);

/* A decode step, first phase: every stream in the batch advances one token;
 * the chunks are formatted and their connections queued, not sent (see the
 * design note at the top).  `now` is the step's time for the model. */
void sim_sched_decode_prepare(struct server *s, int64_t sched, int64_t now);

/* Second phase, at the deadline: stamp and send, in batch order. */
void sim_sched_decode_send(struct server *s);

/* One decode step, both phases at once (the deadline has passed). */
void sim_sched_decode_step(struct server *s, int64_t sched, int64_t now);

#endif
