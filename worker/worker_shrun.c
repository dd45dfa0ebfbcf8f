/*
 * worker_shrun: what an idle worker does with one shard of a sharded cell
 * (issue 24; worker_shard.h): claim it (tb_shards_claim), run its part of
 * the cell with the engine against the job's endpoint, meet the other
 * shards at the barrier for the common start t0, and store its samples
 * (tb_shards_store).  A decode shard runs its share of the cell's streams;
 * a rate shard walks the cell's whole seeded schedule and sends the
 * arrivals i with i mod N equal to its number (tb_rate).  Every failure is
 * the barrier's: the job's worker sees the lease lapse or the barrier fail
 * and measures the cell again whole.
 */
#include "worker_shard.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/tb_log.h"
#include "net/tb_egress.h"
#include "net/tb_masterkey.h"
#include "result/tb_samples.h"
#include "worker.h"

/* how often a waiting shard reads its barrier, and renews its lease */
#define SHARD_POLL_NS (20LL * 1000000)
#define SHARD_BEAT_NS (1000LL * 1000000)

struct shard_run {
  struct worker_ctx *w;
  struct tb_shard *s;
  struct tb_clock_offset off;
  bool ready_sent;
  int64_t next_poll_ns, next_beat_ns;
  bool lost; /* the barrier failed, or this shard's lease is gone */
};

/* The engine's start hook: the first call says ready (with this process's
 * clock offset), later ones read the barrier until t0 is set. */
static int
shard_start(void *cls, int64_t now_ns, int64_t *t0_ns, char *why, size_t len)
{
  struct shard_run *sr = cls;
  struct worker_ctx *w = sr->w;
  if (!sr->ready_sent) {
    int rc = tb_shards_clock(w->db, 8, &sr->off);
    if (rc == 1)
      rc = tb_shards_ready(w->db, sr->s, &sr->off, w->shard.lead_s);
    if (rc != 1) {
      snprintf(why, len, "%s",
               rc == 0 ? "the barrier failed before this shard was ready"
                       : "database error at ready");
      return -1;
    }
    sr->ready_sent = true;
  }
  if (now_ns < sr->next_poll_ns)
    return 0;
  sr->next_poll_ns = now_ns + SHARD_POLL_NS;
  char st[16] = "", reason[160] = "";
  int64_t t0_us = 0;
  int rc = tb_shards_barrier(w->db, &sr->s->key, st, &t0_us, reason, sizeof reason);
  if (rc < 0)
    return 0; /* the next turn tries again */
  if (rc == 0 || strcmp(st, "failed") == 0 || strcmp(st, "merged") == 0) {
    snprintf(why, len, "barrier %s%s%s", rc == 0 ? "gone" : st, reason[0] ? ": " : "", reason);
    return -1;
  }
  if (strcmp(st, "started") != 0)
    return 0;
  *t0_ns = tb_clock_to_local_ns(&sr->off, t0_us);
  return 1;
}

/* The engine's cancel poll (every 100 ms): the shard's lease, renewed once
 * a second; a lost lease or a failed barrier stops the shard. */
static bool
shard_cancelled(void *cls)
{
  struct shard_run *sr = cls;
  if (*sr->w->stopping)
    return true;
  int64_t now = tb_time_mono_ns();
  if (now < sr->next_beat_ns)
    return sr->lost;
  sr->next_beat_ns = now + SHARD_BEAT_NS;
  if (tb_shards_beat(sr->w->db, sr->s, sr->w->shard.lease_s) == 0)
    sr->lost = true;
  return sr->lost;
}

static bool
shard_on_cell(void *cls, const json_t *cell)
{
  (void)cls;
  (void)cell;
  return true;
}

/* The job's spec cut to this shard's one cell: a decode cell (context,
 * its share of the streams), or a rate cell (phase "rate": the rate, the
 * cell's number in the run into sh->index, the shard's k and n). */
static bool
shard_spec(const struct tb_shard *s, struct tb_spec *spec, struct tb_engine_shard *sh, char **err)
{
  const json_t *job = json_object_get(s->spec, "job");
  if (!tb_spec_parse(spec, job, err))
    return false;
  spec->repeats = 1;
  spec->sweep.attainment_pct = 0; /* no sweep ... */
  spec->trace.format[0] = '\0';   /* ... and no trace: the one cell */
  const char *phase = json_string_value(json_object_get(s->spec, "phase"));
  if (phase != NULL && strcmp(phase, "rate") == 0) {
    double rate = json_number_value(json_object_get(s->spec, "rate"));
    json_int_t index = json_integer_value(json_object_get(s->spec, "index"));
    if (!(rate > 0) || index < 1 || index > 1000000) {
      *err = tb_xstrdup("the barrier's spec has no rate cell for this shard");
      return false;
    }
    spec->contexts = (struct tb_spec_list){ .n = 0, .given = false };
    spec->concurrency = (struct tb_spec_list){ .n = 0, .given = false };
    spec->prefill_contexts = (struct tb_spec_list){ .n = 0, .given = false };
    spec->rates = (struct tb_spec_dlist){ .v = { rate }, .n = 1, .given = true };
    sh->index = (unsigned)index;
    sh->k = s->shard;
    sh->n = s->nshards;
    return true;
  }
  const json_t *shares = json_object_get(s->spec, "shares");
  int64_t ctx = json_integer_value(json_object_get(s->spec, "context"));
  int64_t conc = json_integer_value(json_array_get(shares, (size_t)s->shard));
  if (conc < 1 || ctx < 0) {
    *err = tb_xstrdup("the barrier's spec has no share for this shard");
    return false;
  }
  spec->contexts = (struct tb_spec_list){ .v = { ctx }, .n = 1, .given = true };
  spec->concurrency = (struct tb_spec_list){ .v = { conc }, .n = 1, .given = true };
  spec->prefill_contexts = (struct tb_spec_list){ .n = 0, .given = true };
  spec->rates.n = 0; /* no rate cells: the one decode cell */
  return true;
}

/* Runs claimed shard s: its endpoint, its cell with the common start, its
 * samples stored.  Every failure is the barrier's: the job's worker sees
 * the lease lapse or the barrier fail and measures the cell again. */
static void
shard_run(struct worker_ctx *w, struct tb_shard *s)
{
  struct tb_queue_endpoint ep;
  memset(&ep, 0, sizeof ep);
  struct tb_spec spec;
  tb_spec_init(&spec);
  char *api_key = NULL, *err = NULL;
  json_t *result = NULL;
  struct tb_samples samples;
  tb_samples_init(&samples);
  const char *endpoint_id = json_string_value(json_object_get(s->spec, "endpoint_id"));
  const char *run_id = json_string_value(json_object_get(s->spec, "run_id"));
  if (endpoint_id == NULL || tb_queue_load_endpoint(w->db, endpoint_id, &ep) != 1 || ep.deleted) {
    err = tb_xstrdup("cannot load the endpoint");
    goto out;
  }
  char eg_why[TB_EGRESS_WHY_MAX];
  if (!tb_egress_url_reachable(tb_egress_current(), ep.base_url, eg_why, sizeof eg_why)) {
    err = tb_xasprintf("this worker's egress policy refuses the endpoint: %s", eg_why);
    goto out;
  }
  const char *why = NULL;
  if (ep.api_key_sealed != NULL && ep.api_key_sealed[0] != '\0' &&
      (!w->have_master_key ||
       (api_key = tb_masterkey_open_endpoint_key(w->master_key, ep.api_key_sealed, endpoint_id,
                                                 ep.api_key_origin, ep.base_url, &why)) == NULL)) {
    err = tb_xstrdup(why ? why : "no master key");
    goto out;
  }
  struct shard_run sr = { .w = w, .s = s };
  struct tb_engine_shard sh = { .start = shard_start, .cls = &sr, .samples = &samples };
  if (!shard_spec(s, &spec, &sh, &err))
    goto out;
  struct tb_engine_target target = w->engine;
  target.base_url = ep.base_url;
  target.run_id = run_id; /* the job's: the shards share its prompts */
  target.shard = &sh;
  if (sh.index > 0) /* a rate shard: the coordinator's cell has no server series */
    target.no_server_series = true;
  struct tb_engine_hooks hooks = { .cls = &sr,
                                   .on_cell = shard_on_cell,
                                   .cancelled = shard_cancelled };
  enum tb_engine_status st = tb_engine_run(&spec, &target, api_key, NULL, &hooks, &result, &err);
  const json_t *cells = json_object_get(result, "cells");
  const json_t *cell = json_array_get(cells, json_array_size(cells) - 1);
  const char *status = json_string_value(json_object_get(cell, "status"));
  /* a rate shard's cell ran (its samples made) even when none of its own
   * requests finished: the union judges the cell */
  bool ran = sh.index > 0 ? samples.rate.on : status != NULL && strcmp(status, "valid") == 0;
  if (st != TB_ENGINE_OK || !ran) {
    if (err == NULL)
      err = tb_xstrdup(json_string_value(json_object_get(cell, "reason"))
                         ? json_string_value(json_object_get(cell, "reason"))
                         : "the shard's cell did not measure");
    goto out;
  }
  unsigned char *blob;
  size_t len;
  tb_samples_encode(&samples, &blob, &len);
  int rc = tb_shards_store(w->db, s, blob, len, sh.skew_ns / 1000);
  free(blob);
  tb_log(rc == 1 ? TB_LOG_INFO : TB_LOG_WARN, rc == 1 ? "shard stored" : "shard not stored", "job",
         TB_LS, s->key.job_id, "cell", TB_LS, s->key.cell_key, "shard", TB_LI, (int64_t)s->shard,
         "attempt", TB_LI, (int64_t)s->key.attempt, "bytes", TB_LI, (int64_t)len, "skew_us", TB_LI,
         sh.skew_ns / 1000, NULL);
out:
  /* its barrier fails now, with why, rather than when its lease lapses */
  if (err != NULL && tb_shards_fail(w->db, s, err) < 0)
    tb_log(TB_LOG_WARN, "shard: cannot fail its barrier (its lease will)", NULL);
  if (err != NULL)
    tb_log(TB_LOG_WARN, "shard failed", "job", TB_LS, s->key.job_id, "cell", TB_LS, s->key.cell_key,
           "shard", TB_LI, (int64_t)s->shard, "error", TB_LS, err, NULL);
  if (api_key != NULL) {
    OPENSSL_cleanse(api_key, strlen(api_key));
    free(api_key);
  }
  tb_queue_endpoint_clear(&ep);
  tb_spec_free(&spec);
  tb_samples_free(&samples);
  json_decref(result);
  free(err);
}

bool
worker_shard_try(struct worker_ctx *w)
{
  char host[TB_SHARDS_HOST_MAX + 1] = "";
  if (gethostname(host, sizeof host - 1) != 0)
    host[0] = '\0';
  struct tb_shard s;
  if (tb_shards_claim(w->db, w->worker_id, host, w->shard.lease_s, &s) != 1)
    return false;
  tb_log(TB_LOG_INFO, "shard claimed", "job", TB_LS, s.key.job_id, "cell", TB_LS, s.key.cell_key,
         "shard", TB_LI, (int64_t)s.shard, "of", TB_LI, (int64_t)s.nshards, "attempt", TB_LI,
         (int64_t)s.key.attempt, NULL);
  shard_run(w, &s);
  tb_shard_clear(&s);
  return true;
}
