/*
 * sim_stream: what a generation writes on its connection: stream headers, SSE
 * events (each preceded by its ": t=<ns>" stamp comment when asked, framed
 * as HTTP chunks when chunked; "data:" without a space for TGI, CRLF line
 * ends and ": ping" keep-alives for a gateway), the role, token, finish and
 * usage chunks of each flavour, in-band error and malformed events (fault
 * injection), and the non-streaming answer.
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_STREAM_H
#define SIM_STREAM_H

#include "sim_state.h"

/* Appends one SSE event (payload = "data: ...\n\n" text) with its stamp,
 * framed as an HTTP chunk when chunked. */
void sim_stream_sse_event(struct server *s, struct gen *g, const char *payload, size_t n);

/* Sends the event of len bytes formatted in s->ev, adding its "\n\n". */
void sim_stream_sse_data(struct server *s, struct gen *g, int len);

/* The usage object of g into buf (snprintf's return); details adds
 * prompt_tokens_details.cached_tokens. */
int sim_stream_usage_json(char *buf, size_t cap, const struct gen *g, bool details);

/* llama.cpp's timings of g from the model's clock, in ms: its prompt
 * (prefill start to first token) and its predicted tokens (first token to
 * the latest, n - 1 steps; 0.001 for a single token, as llama.cpp says). */
double sim_stream_prompt_ms(const struct gen *g);
double sim_stream_predicted_ms(const struct gen *g);

/* llama.cpp's "timings" object of g into buf (snprintf's return): b11669
 * adds cache_n. */
int sim_stream_timings_json(const struct server *s, const struct gen *g, char *buf, size_t cap);

/* Head of a chunk, up to and including "\"choices\":". */
int sim_stream_chunk_head(struct server *s, const struct gen *g, char *buf, size_t cap);

/* Emits the first chat chunk: the assistant role, empty content. */
void sim_stream_emit_role(struct server *s, struct gen *g);

/* Emits output tokens [g->out, g->out + k) as one chunk. */
void sim_stream_emit_tokens(struct server *s, struct gen *g, int64_t k, bool last);

/* Emits the flavour's in-band error event (fault error=N). */
void sim_stream_emit_error(struct server *s, struct gen *g);

/* Emits a malformed SSE event (fault injection). */
void sim_stream_emit_malformed(struct server *s, struct gen *g);

/* Writes and sends the headers of an event stream (chunked, or close-
 * delimited for HTTP/1.0). */
void sim_stream_headers(struct server *s, struct gen *g);

/* Non-streaming answer, once every token is generated. */
void sim_stream_reply_complete(struct server *s, struct gen *g);

#endif
