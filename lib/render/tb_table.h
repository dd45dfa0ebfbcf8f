/*
 * tb_table: a result document (api/result.schema.json) printed as the seed
 * reports' plain-text tables for a terminal: header (model, engine,
 * endpoint, status, KV budget, settings, the redacted launch command),
 * prefill, the decode matrix and all measurements, as Markdown-style pipes.
 * The other formats of the same document are tb_report's.
 *
 * Thread-safe: no global state.
 */
#ifndef TB_TABLE_H
#define TB_TABLE_H

#include <jansson.h>
#include <stdio.h>

/* Prints doc's tables to f.  doc is borrowed; members of the wrong type print
 * as empty or "nan", never a crash.  The launch command is redacted
 * (tb_redact_command). */
void tb_table_print(FILE *f, const json_t *doc);

/* Prints one finished cell as a line of `tokbench run`'s progress: phase,
 * context, concurrency and status, then the headline figures of a valid
 * cell or the reason of an error, its failed self-checks ("[checks failed:
 * ...]"), and a newline ("\r\033[K" first, to clear a progress bar).  cell
 * is borrowed. */
void tb_table_cell_line(FILE *f, const json_t *cell);

#endif
