/*
 * worker_shard: what the worker running a job does with a sharded cell once
 * its shards are stored (issue 24): the merge.  Every shard's samples are
 * read back from PostgreSQL (tb_shards_collect), decoded and merged exactly
 * (tb_samples: the union, never an average of percentiles), written as the
 * cell's figures by the one-process writer, with where each shard ran and
 * the shards' start-skew self-check (tb_samples_cell_shards).
 */
#include "worker_shard.h"

#include <stdio.h>
#include <stdlib.h>

#include "result/tb_samples.h"

int
worker_shard_merge(struct tb_db *db, const struct tb_shards_key *key, double window_s,
                   const char *client_ready, json_t *cell, char *err, size_t errlen)
{
  struct tb_shard_row *rows = NULL;
  int n = tb_shards_collect(db, key, &rows);
  if (n <= 0)
    return n;
  struct tb_samples merged;
  tb_samples_init(&merged);
  struct tb_samples_shard *where = tb_xcalloc((size_t)n, sizeof *where);
  int rc = 1;
  for (int i = 0; i < n && rc == 1; i++) {
    struct tb_samples one;
    char why[200];
    if (!tb_samples_decode(rows[i].samples, rows[i].len, &one, why, sizeof why)) {
      snprintf(err, errlen, "shard %d (worker %s): %s", rows[i].shard,
               rows[i].worker ? rows[i].worker : "?", why);
      rc = WORKER_SHARD_BAD;
    } else if (!tb_samples_merge(&merged, &one, why, sizeof why)) {
      snprintf(err, errlen, "shard %d: %s", rows[i].shard, why);
      rc = WORKER_SHARD_BAD;
    }
    tb_samples_free(&one);
    where[i] = (struct tb_samples_shard){ .worker = rows[i].worker, .host = rows[i].host,
                                          .skew_us = rows[i].skew_us,
                                          .uncert_us = rows[i].uncert_ns / 1000 };
  }
  if (rc == 1 && !tb_samples_cell(cell, &merged, client_ready, err, errlen))
    rc = WORKER_SHARD_BAD;
  if (rc == 1)
    (void)tb_samples_cell_shards(cell, where, (size_t)n, window_s);
  free(where);
  tb_samples_free(&merged);
  tb_shards_rows_free(rows, n);
  return rc;
}
