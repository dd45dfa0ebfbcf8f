/*
 * tb_prompt: prompts of an exact token count, measured on the server's own
 * tokenizer (METHOD.md, "Prompts of an exact size").
 *
 * A prompt is a tag unique to the run and the context,
 * `[BENCH_<run>_CTX_<ctx>]`, followed by filler words.  Its size is the
 * number of tokens of the whole chat request (the template counts):
 *  - vLLM: POST /tokenize with the chat `messages`, bisecting the word count;
 *  - SGLang: POST /tokenize of the text, plus the template's overhead taken
 *    once from a short calibration request's usage.prompt_tokens;
 *  - llama.cpp: POST /apply-template of the chat `messages`, then POST
 *    /tokenize of the prompt it gives (special tokens parsed), bisecting;
 *  - otherwise: two short calibration requests (max_tokens 1) give tokens per
 *    word and the overhead, and the size is solved from those;
 *  - a server with neither /tokenize nor usage (a gateway, a mock): a stated
 *    estimate, TB_PROMPT_ESTIMATE (source "estimate"), flagged in the cells.
 * Calibration prompts carry their own tag, so they never warm the prefix cache
 * for a measured prompt.  No client-side tokenizer.
 */
#ifndef TB_PROMPT_H
#define TB_PROMPT_H

#include <stdint.h>

#include "engine/tb_discover.h"
#include "base/tb_util.h"

/* The estimate used when the server can count nothing: each filler word is
 * one token (common words of at most four bytes), the tag one per 3 bytes,
 * the chat template TB_PROMPT_ESTIMATE_TEMPLATE tokens. */
#define TB_PROMPT_ESTIMATE_TEMPLATE 8
#define TB_PROMPT_ESTIMATE                                                        \
  "estimated: 1 token per filler word, 1 per 3 bytes of the tag, 8 for the chat " \
  "template (the server has no /tokenize and gives no usage)"

struct tb_prompt {
  char *text;     /* the user message (owned) */
  int64_t tokens; /* tokens as the server counts the chat request; -1 unknown */
  bool exact;     /* tokens verified on the server's tokenizer */
  /* Where tokens comes from (static): "tokenizer" (the server's /tokenize),
   * "calibration" (a line through two requests' usage.prompt_tokens) or
   * "estimate" (TB_PROMPT_ESTIMATE). */
  const char *source;
};

struct tb_prompt_ctx; /* calibration state kept across contexts */

struct tb_prompt_ctx *tb_prompt_ctx_new(const struct tb_discover *d, const char *api_key,
                                        const char *run_id);
void tb_prompt_ctx_free(struct tb_prompt_ctx *c);

/* Builds the prompt for context label ctx with `target` tokens (the largest
 * prompt of at most target tokens; target 0: the run's tag alone, context
 * 0).  Returns 0, or -1 with *err (caller frees). */
int tb_prompt_build(struct tb_prompt_ctx *c, int64_t ctx, int64_t target, struct tb_prompt *out,
                    char **err) TB_MUST_CHECK;
void tb_prompt_free(struct tb_prompt *p);

/* Exposed for tests: the text of tag + n filler words (new string). */
char *tb_prompt_text(const char *tag, int64_t nwords);

#endif
