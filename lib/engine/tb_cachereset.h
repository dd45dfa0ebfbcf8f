/*
 * tb_cachereset: a server's prefix cache emptied before a cell, where its
 * engine offers a way (issue 25; docs/traces.md, "Prefix-cache control"):
 *  - vLLM: POST /reset_prefix_cache (vllm/entrypoints/serve/cache/
 *    api_router.py; mounted only when the server runs with
 *    VLLM_SERVER_DEV_MODE=1, so a stock server answers 404);
 *  - SGLang: POST /flush_cache (200 when flushed; 400 while requests run
 *    or wait: it then does nothing);
 *  - llama.cpp: POST /slots/{id}?action=erase for every slot (0 ..
 *    total_slots - 1), as its server README documents the slots API;
 *    b11669 serves slot actions only when started with --slot-save-path
 *    (else 501 "This server does not support slots action", read live);
 *  - any other engine: no call.
 * The answer is one of three, recorded in the cell as cache_reset:
 * "done" (every call 2xx), "unsupported" (no such engine or route: 404,
 * 405, 501, or an engine without one) or "refused" (any other answer, or no
 * answer), with the reason beside it.
 *
 * A run asks once: its struct tb_cache_reset_memo remembers a server's
 * "unsupported" answer, and the run's later cells are "unsupported" with
 * the same reason, marked as learned earlier, without a call; "refused"
 * (busy, an error, no answer) is transient and asked again every cell.
 */
#ifndef TB_CACHERESET_H
#define TB_CACHERESET_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/tb_discover.h"

#define TB_CACHERESET_WHY_MAX 256
#define TB_CACHERESET_TIMEOUT_MS 10000
#define TB_CACHERESET_MAX_SLOTS 1024 /* llama.cpp slots erased at most */

enum tb_cache_reset {
  TB_CACHE_RESET_DONE,
  TB_CACHE_RESET_UNSUPPORTED,
  TB_CACHE_RESET_REFUSED,
};

/* "done", "unsupported", "refused". */
const char *tb_cache_reset_name(enum tb_cache_reset r);

/* Resets d's server's prefix cache as its engine offers (above); why gets
 * one line saying what was called and what came back (never a secret). */
enum tb_cache_reset tb_cache_reset(const struct tb_discover *d, const char *api_key, char *why,
                                   size_t whylen);

/* What a run learned of its server's reset: owned by the run (zeroed at
 * its start), one per run, never shared between runs. */
struct tb_cache_reset_memo {
  bool unsupported;                /* a call answered 404, 405 or 501 */
  char why[TB_CACHERESET_WHY_MAX]; /* that answer's reason */
};

/* The suffix of a remembered reason (cache_reset_detail). */
#define TB_CACHERESET_LEARNED " (learned earlier in this run: not asked again)"

/* tb_cache_reset through memo m (NULL: ask every time): when a call of
 * this run was answered unsupported, no call, the reason remembered with
 * TB_CACHERESET_LEARNED; else tb_cache_reset, an unsupported answer of the
 * server's remembered in m (an engine without a reset route is asked
 * nothing, so there is nothing to remember). */
enum tb_cache_reset tb_cache_reset_once(struct tb_cache_reset_memo *m, const struct tb_discover *d,
                                        const char *api_key, char *why, size_t whylen);

#endif
