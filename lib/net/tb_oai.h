/*
 * tb_oai: reading one streamed OpenAI-style chunk (the data of one SSE event
 * from /v1/chat/completions or /v1/completions).
 *
 * What the engine needs from a chunk: does it carry output (text in
 * choices[].delta.content, .reasoning, .reasoning_content, or choices[].text
 * for completions), is it role-only, did a choice finish, and the cumulative
 * usage (prompt_tokens, completion_tokens, and prompt_tokens_details.
 * cached_tokens where the server tells it) when the server sends it
 * (continuous usage stats, or the final usage-only chunk with choices: []).
 * An `error` object (some servers stream one mid-stream) is reported as such.
 * A `timings` object (llama.cpp's own clock, on the final chunk) is read by
 * the reference reader: the scanner hands such a chunk to it, once a
 * request.
 *
 * Caps: a chunk over TB_OAI_CHUNK_MAX bytes is rejected before parsing.
 *
 * Two readers with one meaning: a hand-written scanner (the hot path: one
 * pass over the bytes, no allocation) and the jansson reader (the reference).
 * The scanner answers only when it is sure jansson would give the same
 * result; anything unusual (an error object, a malformed chunk, an escaped
 * key, a huge number, deep nesting, many keys) goes to jansson.
 */
#ifndef TB_OAI_H
#define TB_OAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define TB_OAI_CHUNK_MAX (1024u * 1024u)

/* A server's own timing of one request, where it sends one: llama.cpp's
 * `timings` object on the final chunk (b11669-Debian, read live; also on a
 * non-streamed answer).  Each NAN when absent. */
struct tb_oai_timings {
  double cache_n;                /* prompt tokens served from its cache */
  double prompt_n, prompt_ms;    /* prompt tokens evaluated, and their time */
  double predicted_n;            /* output tokens */
  double predicted_ms;           /* from the first output token to the last */
  double predicted_per_token_ms; /* its time per output token */
};

struct tb_oai_chunk {
  bool has_usage;            /* usage object with completion_tokens */
  int64_t prompt_tokens;     /* -1 when absent */
  int64_t completion_tokens; /* cumulative; -1 when absent */
  int64_t cached_tokens;     /* usage.prompt_tokens_details.cached_tokens (the
                              * prompt's tokens the server's prefix cache held);
                              * -1 when absent, null or not a count */
  unsigned n_choices;
  unsigned text_choices;  /* choices whose delta carries output text */
  size_t text_bytes;      /* bytes of output text (all kinds) */
  size_t reasoning_bytes; /* of which reasoning / reasoning_content (a
                              * delta with both holds the same text twice:
                              * counted once) */
  bool role_only;         /* a delta with a role and no text */
  bool finished;          /* some choice has a non-null finish_reason */
  bool has_timings;       /* a `timings` object (llama.cpp) */
  struct tb_oai_timings timings;
  bool is_error;   /* the chunk is an error object */
  char error[200]; /* its message, truncated */
};

enum tb_oai_status {
  TB_OAI_OK = 0,
  TB_OAI_DONE = 1,      /* the `[DONE]` sentinel */
  TB_OAI_MALFORMED = -1 /* not JSON, not an object, bad member types, too big */
};

/* Parses one event's data into *out (always fully written). */
enum tb_oai_status tb_oai_parse_chunk(const char *data, size_t len,
                                      struct tb_oai_chunk *out) TB_MUST_CHECK;

/* A stream's count of output tokens, event after event (zero-initialise
 * with prompt_tokens = -1).  Output tokens are the deltas of the cumulative
 * usage.completion_tokens; a chunk with output text and no usage switches
 * the stream to counting chunks (one per choice with text): chunk_mode, a
 * flagged fallback. */
struct tb_oai_count {
  int64_t cum;           /* last cumulative completion_tokens */
  int64_t prompt_tokens; /* the last usage's, -1 before */
  int64_t cached_tokens; /* the last usage's cached_tokens (saw_cached) */
  bool saw_cached;
  bool saw_timings; /* the last `timings` the stream sent */
  struct tb_oai_timings timings;
  bool saw_usage, saw_final_usage, chunk_mode;
  bool done; /* [DONE] came */
};

/* One SSE event's data (len bytes) of the stream counted by st: true with
 * *delta, the output tokens it adds (0 for [DONE], a role-only or a usage
 * chunk without new tokens); false on a fault (a malformed chunk, an error
 * in the stream, usage going backwards) with why (NUL-terminated, at most
 * why_len bytes). */
bool tb_oai_count_event(struct tb_oai_count *st, const char *data, size_t len, int64_t *delta,
                        char *why, size_t why_len) TB_MUST_CHECK;

/* The reference reader alone (jansson, strict); same contract as above. */
enum tb_oai_status tb_oai_parse_chunk_json(const char *data, size_t len,
                                           struct tb_oai_chunk *out) TB_MUST_CHECK;

/* The scanner alone: true when it decided (*out then holds exactly what
 * tb_oai_parse_chunk_json gives, and the status is TB_OAI_OK); false when
 * the chunk must go to the reference reader (*out is then unspecified). */
bool tb_oai_scan_chunk(const char *data, size_t len, struct tb_oai_chunk *out) TB_MUST_CHECK;

#endif
