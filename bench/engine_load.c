/*
 * engine_load: tb_engine's cost and accuracy against tokbench-sim, for
 * bench_engine.sh.  Runs one decode cell of STREAMS streams for DURATION
 * seconds through tb_engine_run (every token counted, as in a real run) and
 * reads the simulator's send stamps (": t=<ns>" comments) through the
 * engine's on_event hook, so it prints, for that cell:
 *   tokens/s measured, CPU time per million tokens (the whole process, over
 *   the cell), added delay = arrival - send stamp (p50, p99), gap error =
 *   |measured gap - stamped gap| between consecutive events of a stream
 *   (p99), and read lag = when the engine parsed the event - send stamp
 *   (p50, p99).  The arrival is what the engine records (the kernel's receive
 *   stamp where it has one, see tb_rxts.h); the lag shows how far behind its
 *   loop reads, which the kernel stamp keeps out of the figures.
 * After those ten figures it prints four more for bench_firehose.sh: the
 * SSE data events the engine handled over the cell, the requests it
 * completed there, CPU microseconds per completed request, and the CPU
 * seconds the process spent over the cell.
 * usage: engine_load URL STREAMS DURATION_S [MAX_OUTPUT]
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "engine/tb_engine.h"
#include "base/tb_stats.h"
#include "base/tb_util.h"

struct slot {
  int64_t stamp, last_arrival, last_stamp;
};

struct bench {
  struct slot *slots;
  unsigned n;
  struct tb_stats delay, gap, lag;
  int64_t tokens, events;
  bool in_cell;
  double cpu0, cpu1;
  int64_t tok0, tok1, ev0, ev1;
};

static double
cpu_s(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void
on_event(void *cls, unsigned slot, int64_t arrival, const char *comment, size_t len, int64_t tokens)
{
  struct bench *b = cls;
  if (slot >= b->n)
    return;
  struct slot *s = &b->slots[slot];
  if (comment != NULL) {
    if (len > 3 && comment[0] == ' ' && comment[1] == 't' && comment[2] == '=')
      s->stamp = strtoll(comment + 3, NULL, 10);
    else if (len > 2 && comment[0] == 't' && comment[1] == '=')
      s->stamp = strtoll(comment + 2, NULL, 10);
    return;
  }
  b->tokens += tokens;
  b->events++;
  if (s->stamp == 0 || tokens == 0)
    return;
  if (b->in_cell) {
    tb_stats_add(&b->delay, arrival - s->stamp);
    tb_stats_add(&b->lag, tb_time_mono_ns() - s->stamp);
    if (s->last_stamp != 0) {
      int64_t e = (arrival - s->last_arrival) - (s->stamp - s->last_stamp);
      tb_stats_add(&b->gap, e < 0 ? -e : e);
    }
  }
  s->last_arrival = arrival;
  s->last_stamp = s->stamp;
  s->stamp = 0;
}

static void
on_progress(void *cls, const json_t *key, unsigned done, unsigned total, double eta)
{
  struct bench *b = cls;
  const char *ph = json_string_value(json_object_get(key, "phase"));
  if (ph != NULL && strcmp(ph, "decode") == 0) {
    b->in_cell = true;
    b->cpu0 = cpu_s();
    b->tok0 = b->tokens;
    b->ev0 = b->events;
  }
}

static bool
on_cell(void *cls, const json_t *cell)
{
  struct bench *b = cls;
  const char *ph = json_string_value(json_object_get(cell, "phase"));
  if (ph != NULL && strcmp(ph, "decode") == 0 && b->in_cell) {
    b->in_cell = false;
    b->cpu1 = cpu_s();
    b->tok1 = b->tokens;
    b->ev1 = b->events;
  }
  return true;
}

static bool
env_is(const char *name, const char *value)
{
  const char *v = getenv(name);
  return v != NULL && strcmp(v, value) == 0;
}

int
main(int argc, char **argv)
{
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: engine_load URL STREAMS DURATION_S [MAX_OUTPUT]\n");
    return 2;
  }
  /* the streams' descriptors: the library never raises the limit, its
   * callers do (the hard limit here, so that a base build's library, which
   * raised it itself, is measured the same) */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  struct bench b = { 0 };
  b.n = (unsigned)strtol(argv[2], NULL, 10);
  b.slots = calloc(b.n, sizeof *b.slots);
  struct tb_spec spec;
  tb_spec_init(&spec);
  spec.contexts = (struct tb_spec_list){ .v = { 1024 }, .n = 1, .given = true };
  spec.concurrency = (struct tb_spec_list){ .v = { (int64_t)b.n }, .n = 1, .given = true };
  spec.prefill_contexts = (struct tb_spec_list){ .n = 0, .given = true };
  spec.duration_s = strtod(argv[3], NULL);
  spec.max_output = argc == 5 ? strtoll(argv[4], NULL, 10) : 15000;
  spec.settle_s = 0.5;
  struct tb_engine_target target = { .base_url = argv[1], .run_id = "bench" };
  /* the engine's switches (TB_ENGINE_CFG_KEYS) as the binaries read them;
   * with getenv, not tb_engine_target_cfg, so that this file still links
   * against an older libtokbench.a (BENCH_ENGINE_BASE_LIB), which reads
   * them itself */
  target.client_stamps = env_is("TB_ENGINE_CLIENT_STAMPS", "1");
  target.no_server_series = env_is("TB_ENGINE_SERVER_SERIES", "0");
  target.curl_streams = env_is("TB_ENGINE_CURL_STREAMS", "1");
  struct tb_engine_hooks hooks = {
    .cls = &b, .on_cell = on_cell, .on_progress = on_progress, .on_event = on_event
  };
  json_t *res = NULL;
  char *err = NULL;
  enum tb_engine_status st = tb_engine_run(&spec, &target, NULL, NULL, &hooks, &res, &err);
  int rc = 1;
  const json_t *cells = json_object_get(res, "cells");
  const json_t *cell = json_array_get(cells, json_array_size(cells) - 1);
  if (st != TB_ENGINE_OK || cell == NULL ||
      strcmp(json_string_value(json_object_get(cell, "status")), "valid") != 0) {
    fprintf(stderr, "engine_load: %s %s\n", err ? err : "",
            cell ? json_string_value(json_object_get(cell, "reason")) : "");
    goto out;
  }
  double tps = json_number_value(json_object_get(cell, "total_tps"));
  double cpu = b.cpu1 - b.cpu0;
  int64_t toks = b.tok1 - b.tok0;
  /* 10th: the server series' samples (tb_sampler; 0 with it off) */
  json_int_t samples = json_integer_value(
    json_object_get(json_object_get(json_object_get(cell, "server_series"), "summary"), "samples"));
  json_int_t done = json_integer_value(json_object_get(cell, "completed"));
  /* 15th: how the streams were read (provenance.transport.streams) */
  const char *via = json_string_value(
    json_object_get(json_object_get(json_object_get(res, "provenance"), "transport"), "streams"));
  printf("%u %.0f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %lld %lld %lld %.3f %.4f %s\n", b.n, tps,
         toks > 0 ? cpu / (double)toks * 1e6 : 0.0, tb_stats_quantile(&b.delay, 0.5) / 1e6,
         tb_stats_quantile(&b.delay, 0.99) / 1e6, tb_stats_quantile(&b.gap, 0.99) / 1e6,
         json_number_value(json_object_get(json_object_get(cell, "tbt_ms"), "p50")),
         tb_stats_quantile(&b.lag, 0.5) / 1e6, tb_stats_quantile(&b.lag, 0.99) / 1e6,
         (long long)samples, (long long)(b.ev1 - b.ev0), (long long)done,
         done > 0 ? cpu / (double)done * 1e6 : 0.0, cpu, via != NULL ? via : "unknown");
  rc = 0;
out:
  free(err);
  json_decref(res);
  tb_spec_free(&spec);
  tb_stats_free(&b.delay);
  tb_stats_free(&b.gap);
  tb_stats_free(&b.lag);
  free(b.slots);
  return rc;
}
