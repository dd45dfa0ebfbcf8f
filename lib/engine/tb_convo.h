/*
 * tb_convo: one conversation of a multi-turn workload (issue 15, item 3;
 * docs/engine.md, "Conversations").
 *
 * A conversation is the chat a user holds with the server: turn t's request
 * carries every earlier turn (the user's message and the server's own
 * answer, as a chat client resends its history) and the new user message.
 * The answer is taken from the stream as the server sent it: the text of
 * choices[0].delta.content of each chunk (reasoning text is not carried
 * over, as chat templates drop it), so the next turn's prompt holds exactly
 * what the server generated and its prefix cache can serve it.
 *
 * Caps: an answer over its cap (set per turn by the caller from the turn's
 * max_tokens) fails the turn; the history's bytes are kept for the caller's
 * memory budget (tb_convo_bytes).  Owns its memory; one thread.
 */
#ifndef TB_CONVO_H
#define TB_CONVO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

/* Bytes an answer may take per output token asked (a token is a few bytes
 * of text; JSON escapes of odd bytes take six), and at least this many. */
#define TB_CONVO_BYTES_PER_TOKEN 64u
#define TB_CONVO_ANSWER_MIN (64u * 1024u)

struct tb_convo {
  json_t *messages; /* the history: system?, user, assistant, user, ... */
  char *answer;     /* the current turn's answer so far */
  size_t alen, acap, amax;
  size_t bytes;  /* text held: every message's content and the answer */
  size_t *total; /* a sum over conversations kept with bytes, or NULL */
};

/* A new conversation; system (may be NULL) is its first message.  total
 * (may be NULL, borrowed): a sum of several conversations' bytes (a cell's
 * memory budget), kept up to date by every call here, tb_convo_free
 * taking this one's out. */
void tb_convo_init(struct tb_convo *cv, const char *system, size_t *total);
void tb_convo_free(struct tb_convo *cv);

/*
 * The body of the next turn: the history plus the user message text, with
 * model, max_tokens and streaming with usage (as the rate cells' bodies),
 * compact JSON (new string, caller frees), or NULL when jansson fails.  The
 * user message joins the history; the answer is reset, its cap set from
 * max_tokens.
 */
char *tb_convo_next(struct tb_convo *cv, const char *model, const char *text,
                    int64_t max_tokens) TB_MUST_CHECK;

/*
 * One SSE event's data of the turn's stream: its choices[0].delta.content
 * joins the answer.  [DONE], usage-only and role-only chunks add nothing.
 * False when the answer would go over its cap (the turn should fail);
 * a chunk that is not JSON adds nothing (the stream's reader judges it).
 */
bool tb_convo_take(struct tb_convo *cv, const char *data, size_t len) TB_MUST_CHECK;

/* The turn ended well: its answer joins the history as the assistant's. */
void tb_convo_answered(struct tb_convo *cv);

/* Text bytes held (history and answer). */
size_t tb_convo_bytes(const struct tb_convo *cv);

#endif
