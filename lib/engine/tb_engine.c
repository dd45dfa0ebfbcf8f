/*
 * tb_engine: the speed test matrix of METHOD.md.  See tb_engine.h.
 *
 * Where each job lives (lib/LAYERS orders them, lowest first):
 *   tb_transport  the event loop: libcurl's multi and the direct sockets on
 *                 one epoll set, the stamps of reads, the easy handles
 *   tb_run        what the cells of a run share: settings, plan, discovery,
 *                 the transport, the hooks; emit, progress, status
 *   tb_cell       one decode cell (or a scout): its streams, readiness, the
 *                 scheduler cap, the window, the drain, its figures
 *   tb_matrix     contexts, scouts, decode cells, gates, repeats
 *   tb_engine     the run's entry points: discovery, header, the matrix,
 *                 then the rate cells (tb_rate), the status
 *
 * Design.  One thread, one libcurl multi handle driven by one epoll loop
 * (curl's socket interface: CURLMOPT_SOCKETFUNCTION registers fds with epoll,
 * CURLMOPT_TIMERFUNCTION sets a deadline the loop honours).  Every stream of
 * a cell is an easy handle on that multi; connections stay in the multi's
 * pool, so a stream that finishes is replaced on a kept-alive connection.
 * /metrics samples during a cell are easy handles on the same loop, so no
 * blocking call ever delays a read.
 *
 * Timing.  Each read is stamped once, with the kernel's receive stamp of
 * its oldest byte (tb_rxts: SO_TIMESTAMPNS) converted to CLOCK_MONOTONIC,
 * else with the monotonic clock when the loop reads it: on the engine's own
 * reads the stamp comes with the bytes (recvmsg), on libcurl streams from a
 * one-byte MSG_PEEK just before the loop hands the socket to libcurl.  Every
 * event in that read carries the same stamp, so parsing one event never
 * delays the next one's arrival time, and neither does the loop's own
 * wake-up or its work on other sockets.  Tokens are attributed to the
 * window by arrival stamp, so the window is exactly duration_s long however
 * late the loop notices its end.
 *
 * Stream transport.  On a plain-HTTP endpoint (no proxy in the
 * environment) the streams' sockets are the engine's own (tb_direct): libcurl resolves
 * the endpoint and picks its address once (a CONNECT_ONLY probe), then each
 * slot of a cell keeps one kept-alive connection, writes its request with
 * one sendmsg and reads the response with one recvmsg per readiness, which
 * returns the kernel's receive stamp with the bytes (tb_rxts), parsed by
 * tb_h1 (HTTP/1.1 framing) and tb_stream.  Per read that is one system call
 * where libcurl's read path makes three (the stamp peek, recv and a poll()
 * that asks whether more is pending) and about half the CPU time per token
 * on a bench (bench/bench_engine.sh prints both).  Over TLS, through a
 * proxy, or with TB_ENGINE_CURL_STREAMS=1, streams are libcurl easy handles
 * on the multi, stamped by a peek before libcurl reads.  Everything else
 * (discovery, /metrics, aborts) is libcurl.
 *
 * A cell: C streams start at once; readiness = every stream has produced a
 * token and (where the engine's running/waiting gauges answer) running = C,
 * waiting = 0, held for settle_s; without usable gauges readiness is the
 * client's at once, and the cell says why (readiness_reason).  Gauges that
 * hold R < C running and the rest of ours waiting for SCHED_CAP_S make the
 * cell over capacity with that measured cap, and every cell above it at this
 * context or a larger one is over capacity without running;
 * then the window [w0, w0 + duration); at its end every stream is cut (its
 * connection closed, which aborts the request on vLLM; SGLang also gets
 * /abort_request) and the loop waits for the server to drain.
 *
 * Counting.  A stream's bytes, on either transport, go to tb_stream (the
 * consumer the rate cells use too: SSE, counting, token stamps, why a
 * stream failed); the cell adds up what its streams report.  Output tokens
 * are the deltas of cumulative usage.completion_tokens (continuous usage
 * stats).  A chunk with output but no usage switches that stream to
 * counting chunks (one per choice with text), and the cell's token_source
 * becomes "chunks": a flagged fallback, never silent.
 *
 * Result.  The document (header, cells, status) is tb_result's model; the
 * engine fills it from what it measured.
 *
 * Faults: any stream error (transport, HTTP status, malformed SSE or JSON, a
 * stream cut before [DONE], a stall, a missing usage chunk where the server
 * gives usage, a stream ended before max_tokens) makes the cell an error
 * with the first reason; the run goes on, unless the failure would be the
 * same in every cell (HTTP 401/403/404 on the chat route, streams ended
 * early before any cell was measured): then the run stops there, failed,
 * with one line naming the cause and the setting that would help.
 */
#include "engine/tb_engine.h"

#include <stdlib.h>
#include <string.h>

#include "engine/tb_matrix.h"
#include "engine/tb_rate.h"
#include "engine/tb_run.h"
#include "engine/tb_telemetry.h"
#include "net/tb_http.h"
#include "net/tb_rxts.h"
#include "result/tb_provenance.h"
#include "result/tb_result.h"

#define NOFILE_SPARE 256 /* descriptors beside the streams' (tb_engine_nofile) */

uint64_t
tb_engine_nofile(const struct tb_spec *spec)
{
  struct tb_plan p;
  tb_plan_init(&p, spec, NULL);
  uint64_t streams = (uint64_t)p.max_concurrency; /* 1 without a matrix */
  if (p.rate && streams < TB_RATE_MAX_INFLIGHT)
    streams = TB_RATE_MAX_INFLIGHT;
  tb_plan_free(&p);
  return 2 * streams + NOFILE_SPARE;
}

/* ------------------------------------------------------ rate cells */

/* tb_rate_env's callbacks over the run (cls). */
struct rate_ctx {
  struct tb_run *r;
  json_t *cells;
};

static bool
rate_emit(void *cls, json_t *cell)
{
  struct rate_ctx *x = cls;
  return tb_run_emit(x->r, x->cells, cell);
}

static void
rate_keep(void *cls, const json_t *cell)
{
  struct rate_ctx *x = cls;
  json_array_append(x->cells, (json_t *)cell);
}

static void
rate_progress(void *cls, const json_t *key)
{
  struct rate_ctx *x = cls;
  tb_run_progress(x->r, key, 0, 0);
}

static bool
rate_cancelled(void *cls)
{
  struct rate_ctx *x = cls;
  return tb_run_cancelled(x->r);
}

static bool
rate_shard_cell(void *cls, double rate, unsigned index, json_t *cell, int64_t window_ns[2])
{
  struct rate_ctx *x = cls;
  return x->r->hooks->shard_rate(x->r->hooks->cls, rate, index, cell, window_ns);
}

/* The plan's rate cells and sweep (tb_rate), after the matrix. */
static void
run_rate_cells(struct tb_run *r, const json_t *done_cells, json_t *cells, json_t **sweep)
{
  struct rate_ctx x = { r, cells };
  const struct tb_rate_env env = {
    .d = &r->d,
    .api_key = r->api_key,
    .run_id = r->run_id,
    .cell_memory_max = r->cell_memory_max,
    .kernel_stamps = r->tp.kernel_stamps,
    .server_series = r->server_series,
    .curl_streams = r->tp.curl_streams,
    .error_bodies = r->hooks != NULL && r->hooks->error_bodies,
    .done_cells = done_cells,
    .trace = r->tgt->trace,
    .cls = &x,
    .emit = rate_emit,
    .keep = rate_keep,
    .progress = rate_progress,
    .cancelled = rate_cancelled,
    .telemetry = r->tel,
    .endpoint = r->tgt->endpoint,
    .shard_cell = r->hooks != NULL && r->hooks->shard_rate != NULL ? rate_shard_cell : NULL,
    .shard = r->tgt->shard != NULL && r->tgt->shard->index > 0 ? r->tgt->shard : NULL,
    .reset_memo = &r->reset_memo,
  };
  if (tb_rate_run(&r->plan, &env, sweep) == TB_RATE_CANCELLED)
    r->cancelled = true;
}

/* The result document's status for status. */
/* The result's provenance block (lib/result/tb_provenance): from its header
 * (when the run got one), what discovery said of the endpoint (when it
 * answered) and the GPUs the telemetry named; the caller adds the spec's
 * hash and who ran each cell. */
static void
set_provenance(struct tb_run *r, json_t *doc, bool has_header, bool discovered,
               const json_t *endpoint)
{
  json_t *id = discovered ? tb_discover_identity(&r->d) : NULL;
  json_t *gpus = tb_telemetry_gpus(r->tel);
  bool tel = json_string_value(json_object_get(endpoint, "telemetry_url")) != NULL;
  struct tb_provenance_run in = {
    .header = has_header ? doc : NULL,
    .identity = id,
    .gpus = gpus,
    .gpus_why = !tel ? "the endpoint has no telemetry_url"
                     : "its telemetry named no GPU (no read answered with dcgm-exporter's or "
                       "nvidia_gpu_exporter's series)",
    .streams = r->tp.epfd < 0 ? NULL
               : r->tp.direct ? tb_direct_transport(&r->tp.dt)
                              : "libcurl",
    .streams_why = r->tp.epfd < 0 ? "the run stopped before its streams were set up"
                   : r->tp.direct
                     ? tb_direct_uring_why(&r->tp.dt)
                     : "the streams go through libcurl (TLS, a proxy, or TB_ENGINE_CURL_STREAMS=1)",
  };
  json_object_set_new(doc, "provenance", tb_provenance_new(&in));
  json_decref(id);
  json_decref(gpus);
}

static const char *
status_name(enum tb_engine_status status, const json_t *cells)
{
  return status == TB_ENGINE_FAILED      ? "failed"
         : status == TB_ENGINE_CANCELLED ? "cancelled"
                                         : tb_result_status_of_cells(cells);
}

enum tb_engine_status
tb_engine_run(const struct tb_spec *spec, const struct tb_engine_target *tgt, const char *api_key,
              const json_t *done_cells, const struct tb_engine_hooks *hooks, json_t **result,
              char **err)
{
  struct tb_run run;
  struct tb_run *r = &run;
  memset(r, 0, sizeof *r);
  r->hooks = hooks;
  /* For side-by-side measurements (bench/bench_engine.sh) only. */
  r->server_series = !tgt->no_server_series;
  /* first thing: the kernel switches stamping on during discovery, not in
   * the middle of a measurement */
  tb_transport_init(&r->tp, !tgt->client_stamps, tgt->curl_streams);
  r->api_key = api_key;
  *err = NULL;
  *result = NULL;
  enum tb_engine_status status = TB_ENGINE_FAILED;
  json_t *header = NULL, *sweep = NULL;
  json_t *cells = json_array();
  int64_t started_us = tb_time_real_us();
  bool discovered = false;
  tb_http_global_init();

  if (tb_run_settings(r, spec, tgt, err) != 0 ||
      !(discovered = tb_discover_run(r->base_url, api_key, spec->model, &r->d, err) == 0) ||
      tb_run_plan(r, err) != 0)
    goto out;
  const char *tel_url = json_string_value(json_object_get(tgt->endpoint, "telemetry_url"));
  if (tel_url != NULL) /* from now on: a read before the first window (issue 26) */
    r->tel = tb_telemetry_start(tel_url, 0);
  header = tb_run_header(r, tgt->endpoint, started_us);
  if (r->plan.rate)
    json_object_set_new(json_object_get(header, "settings"), "rate", tb_rate_settings_json(spec));
  if (hooks != NULL && hooks->on_header != NULL)
    hooks->on_header(hooks->cls, header);
  if (tb_transport_open(&r->tp, r->d.base_url, api_key, err) != 0)
    goto out;
  r->pc = tb_prompt_ctx_new(&r->d, api_key, r->run_id);
  r->total_cells = (unsigned)r->plan.n_cells;
  tb_matrix_run(r, cells, done_cells);
  if (r->plan.rate && !r->cancelled && r->stop == NULL)
    run_rate_cells(r, done_cells, cells, &sweep);
  status = tb_run_status(r, header, err);

out:
  *result =
    tb_result_finish(header, r->run_id, started_us, status_name(status, cells), *err, cells);
  if (sweep != NULL)
    json_object_set_new(*result, "sweep", sweep);
  set_provenance(r, *result, header != NULL, discovered, tgt->endpoint);
  tb_run_free(r);
  return status;
}

json_t *
tb_engine_probe(const char *base_url, const char *api_key, char **err)
{
  struct tb_discover d;
  *err = NULL;
  if (tb_discover_run(base_url, api_key, NULL, &d, err) != 0) {
    tb_discover_free(&d);
    return NULL;
  }
  json_t *j = tb_discover_to_json(&d);
  tb_discover_free(&d);
  return j;
}

bool
tb_engine_target_cfg(struct tb_engine_target *t, const struct tb_cfg *cfg, char **err)
{
  bool series = true;
  if (!tb_cfg_get_bool(cfg, "TB_ENGINE_CLIENT_STAMPS", &t->client_stamps, err) ||
      !tb_cfg_get_bool(cfg, "TB_ENGINE_SERVER_SERIES", &series, err) ||
      !tb_cfg_get_bool(cfg, "TB_ENGINE_CURL_STREAMS", &t->curl_streams, err))
    return false;
  t->no_server_series = !series;
  return true;
}
