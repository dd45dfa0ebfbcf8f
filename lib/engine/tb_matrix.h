/*
 * tb_matrix: the matrix of a run, context by context and pass by pass
 * (see tb_matrix.c).  Above tb_cell; tb_engine_run calls it.
 */
#ifndef TB_MATRIX_H
#define TB_MATRIX_H

#include <jansson.h>

#include "engine/tb_run.h"

/* Measures the plan's matrix into cells (every finished cell emitted
 * through tb_run_emit as it comes); done_cells (may be NULL) are an
 * earlier attempt's, kept.  Stops early when the run is cancelled or a
 * failure stops it (r->cancelled, r->stop). */
void tb_matrix_run(struct tb_run *r, json_t *cells, const json_t *done_cells);

#endif
