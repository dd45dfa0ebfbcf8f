/*
 * tb_regdoc: the "regressions" member of a result document (the verdict
 * tb_regress records, lib/db/tb_regress.h; the one `tokbench compare`
 * judges over files), read and told in words: whether it regressed, why
 * each regression counts, and its headline.  Pure readers of a JSON
 * document: the renderers (tb_verdictview), the CLI and the callbacks
 * (tb_deliver) tell a verdict with them, without the database.
 *
 * Thread-safe: no global state.
 */
#ifndef TB_REGDOC_H
#define TB_REGDOC_H

#include <jansson.h>
#include <stdbool.h>

#include "base/tb_util.h"

/*
 * Reads a result's "regressions" (borrowed, may be NULL): the object
 * tb_regress.h describes, or a bare array of regressions (documents written by hand or by older
 * versions).  Returns whether the job regressed (the object's "regressed";
 * an array: not empty) and, when cells is not NULL, the regressions array
 * in *cells (borrowed; NULL when none).
 */
bool tb_regdoc_regressed(const json_t *regressions, const json_t **cells);

/*
 * Why one regression entry (an element of "cells") counts, in one line of
 * UTF-8 (new string, caller frees), e.g.
 *   "8K × 32 total_tps: −6.1% (CI −7.9…−4.3%, p < 0.001, 12 earlier runs)"
 *   "8K × 32 total_tps: −10.0% (against the last good run: too little history)"
 *   "8K × 32: lost (valid before, error now)"
 */
char *tb_regdoc_why(const json_t *entry);

/*
 * The verdict of a "regressions" (either shape; may be NULL) in one
 * sentence (new string, caller frees), e.g.
 *   "Regressed: 2 significant regressions beyond 2.0% against up to 12
 *    earlier runs."
 *   "No significant regression beyond 2.0% against up to 12 earlier runs."
 *   "Too little history (fewer than 3 earlier runs): compared with the last
 *    good job; no regression beyond 5.0%."
 * NULL when there is no verdict to tell (regressions NULL).
 */
char *tb_regdoc_headline(const json_t *regressions);

/*
 * The verdict on cost and energy (the matrix's cost_per_m_output_tokens,
 * cost_per_m_tokens and j_per_output_token, where judged) in one sentence
 * (new string, caller frees), e.g.
 *   "Cost and energy against history (the matrix): J per output token
 *    −3.2% (CI −4.1…−2.3%), better; Cost per M output tokens +6.0% (CI
 *    +4.0…+8.0%), worse (told, never a regression)."
 * NULL when none was judged.
 */
char *tb_regdoc_efficiency(const json_t *regressions);

#endif
