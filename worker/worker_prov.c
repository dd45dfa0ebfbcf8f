/*
 * worker_prov: the worker's part of a result's provenance (issue 35, item
 * 3; lib/result/tb_provenance): its clock offset to the database, measured
 * and recorded as an attempt begins (lib/db/tb_ranby), and, as the job
 * ends, the spec's hash and who ran each cell, read back from the cells'
 * rows so that the cells of earlier attempts (other workers) are told
 * right too.  Nothing here fails a job: a fact that cannot be had is
 * "unknown", with why.
 */
#include <string.h>

#include "base/tb_clock.h"
#include "base/tb_log.h"
#include "db/tb_ranby.h"
#include "db/tb_shards.h"
#include "result/tb_provenance.h"
#include "worker.h"

/* Probes of the database's clock per attempt (as a shard's barrier takes). */
#define CLOCK_PROBES 8

void
worker_prov_clock(struct worker_ctx *w, const struct tb_queue_lease *l)
{
  struct tb_clock_offset off;
  int rc = tb_shards_clock(w->db, CLOCK_PROBES, &off); /* has the wall offset too */
  if (rc == 1)
    rc = tb_ranby_attempt(w->db, l, off.wall_offset_ns / 1000, (off.uncert_ns + 999) / 1000);
  if (rc != 1)
    tb_log(TB_LOG_WARN, "clock offset not recorded: the result will say unknown", "job", TB_LS,
           l->job_id, NULL);
}

/* The row of rows (tb_ranby_cells) with cell's key, or NULL. */
static const json_t *
row_of(const json_t *rows, const json_t *cell)
{
  const char *phase = json_string_value(json_object_get(cell, "phase"));
  json_int_t ctx = json_integer_value(json_object_get(cell, "context"));
  json_int_t conc = json_integer_value(json_object_get(cell, "concurrency"));
  size_t i;
  const json_t *r;
  json_array_foreach (rows, i, r) {
    const char *p = json_string_value(json_object_get(r, "phase"));
    if (p != NULL && phase != NULL && strcmp(p, phase) == 0 &&
        json_integer_value(json_object_get(r, "context")) == ctx &&
        json_integer_value(json_object_get(r, "concurrency")) == conc)
      return r;
  }
  return NULL;
}

static const char clock_how[] =
  "tb_clock: NTP-style probes of the database's clock_timestamp() as the attempt began "
  "(the database's clock minus the worker's)";

/* One cell's entry from its row (NULL: not stored). */
static json_t *
entry(const json_t *cell, const json_t *row, bool rows_ok)
{
  if (row == NULL)
    return tb_provenance_cell(cell, NULL, 0, false, 0, 0,
                              rows_ok ? "the cell was not stored"
                                      : "the cells' rows could not be read (database error)");
  const char *worker = json_string_value(json_object_get(row, "worker"));
  int attempt = (int)json_integer_value(json_object_get(row, "attempt"));
  const json_t *off = json_object_get(row, "clock_offset_us");
  const json_t *unc = json_object_get(row, "clock_uncert_us");
  bool clock = json_is_integer(off) && json_is_integer(unc);
  return tb_provenance_cell(cell, worker, attempt, clock,
                            clock ? (double)json_integer_value(off) / 1e3 : 0,
                            clock ? (double)json_integer_value(unc) / 1e3 : 0,
                            clock            ? clock_how
                            : worker == NULL ? "stored before cells named their worker"
                                             : "that attempt recorded no clock offset");
}

void
worker_prov_finish(struct worker_ctx *w, const struct tb_queue_job *job, json_t *result)
{
  json_t *prov = json_object_get(result, "provenance");
  if (!json_is_object(prov))
    return;
  tb_provenance_set_spec(prov, job->spec, "tokbench-worker");
  json_t *rows = NULL;
  bool rows_ok = tb_ranby_cells(w->db, job->lease.job_id, &rows) >= 0;
  json_t *cells = json_array();
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(result, "cells"), i, c)
    json_array_append_new(cells, entry(c, rows_ok ? row_of(rows, c) : NULL, rows_ok));
  tb_provenance_set_cells(prov, cells);
  json_decref(rows);
}
