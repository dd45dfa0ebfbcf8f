/*
 * tb_run: what the cells of one run share, and what is done on it from
 * every layer (see tb_run.h).
 */
#include "engine/tb_run.h"

#include <inttypes.h>
#include <stdlib.h>

#include "base/tb_redact.h"
#include "engine/tb_telemetry.h"
#include "result/tb_result.h"

/* ------------------------------------------------------------ settings */

/* The run's settings: the parsed spec (tb_spec: validated, lists sorted),
 * its plan before discovery, and the target; nothing here reads JSON. */
int
tb_run_settings(struct tb_run *r, const struct tb_spec *s, const struct tb_engine_target *t,
                char **err)
{
  if (t == NULL || t->base_url == NULL || t->base_url[0] == '\0') {
    *err = tb_xstrdup("spec: base_url missing");
    return -1;
  }
  r->tgt = t;
  r->spec = s;
  r->base_url = tb_xstrdup(t->base_url);
  r->cell_memory_max =
    t->cell_memory_max != 0 ? t->cell_memory_max : (size_t)TB_ENGINE_CELL_MEMORY_DEFAULT;
  if (t->run_id != NULL && t->run_id[0] != '\0')
    r->run_id = tb_xstrdup(t->run_id);
  else
    r->run_id = tb_xasprintf("%" PRIx64, (uint64_t)tb_time_real_us());
  tb_plan_init(&r->plan, s, NULL);
  if (r->plan.matrix && r->plan.n_concurrency == 0) {
    *err = tb_xstrdup("spec: concurrency is empty");
    return -1;
  }
  return 0;
}

/* The plan again on what discovery found: the contexts the spec leaves to
 * the engine, the cells the server cannot run, the KV budget. */
int
tb_run_plan(struct tb_run *r, char **err)
{
  const struct tb_plan_facts f = {
    .max_model_len = r->d.max_model_len,
    .kv_budget = r->d.kv_budget,
    .max_running = r->d.max_running,
  };
  tb_plan_free(&r->plan);
  tb_plan_init(&r->plan, r->spec, &f);
  if (r->plan.matrix && r->plan.n_contexts == 0 && r->plan.n_prefill == 0) {
    *err = tb_xasprintf("no context fits max_model_len %" PRId64 " with max output %" PRId64,
                        r->d.max_model_len, r->spec->max_output);
    return -1;
  }
  return 0;
}

/* --------------------------------------------------------------- result */

/* The result's header (tb_result) from the run's settings and discovery. */
json_t *
tb_run_header(struct tb_run *r, const json_t *ep, int64_t started_us)
{
  const char *lc = json_string_value(json_object_get(ep, "launch_command"));
  char *red = tb_redact_command(lc);
  json_t *prov = tb_discover_provenance(&r->d);
  const struct tb_plan *p = &r->plan;
  struct tb_result_header h = {
    .run_id = r->run_id,
    .started_us = started_us,
    .url = r->d.base_url,
    .endpoint = ep,
    .engine = tb_discover_kind_name(r->d.kind),
    .engine_version = r->d.version,
    .model = r->d.model,
    .max_model_len = r->d.max_model_len,
    .launch_command = red,
    .kv_budget = p->kv_budget,
    .kv_source = p->kv_override ? "override" : r->d.kv_source,
    .max_running = r->d.max_running,
    .provenance = prov,
    .metrics = r->d.has_metrics,
    .contexts = p->contexts,
    .n_contexts = p->n_contexts,
    .concurrency = p->concurrency,
    .n_concurrency = p->n_concurrency,
    .prefill = p->prefill,
    .n_prefill = p->n_prefill,
    .duration_s = r->spec->duration_s,
    .settle_s = r->spec->settle_s,
    .max_output = r->spec->max_output,
    .repeats = p->repeats,
    .telemetry = r->tel != NULL,
  };
  json_t *doc = tb_result_header_new(&h);
  json_decref(prov);
  free(red);
  return doc;
}

/* Emits a finished cell: into the result and through the hook.  false:
 * the hook asked to stop. */
bool
tb_run_emit(struct tb_run *r, json_t *cells, json_t *cell)
{
  json_array_append(cells, cell);
  r->done_count++;
  bool go = true;
  if (r->hooks != NULL && r->hooks->on_cell != NULL)
    go = r->hooks->on_cell(r->hooks->cls, cell);
  json_decref(cell);
  if (!go)
    r->cancelled = true;
  return go;
}

void
tb_run_progress(struct tb_run *r, const json_t *key, unsigned remaining_cells,
                unsigned remaining_scouts)
{
  if (r->hooks == NULL || r->hooks->on_progress == NULL)
    return;
  double per = r->n_cell_timed ? r->avg_cell_s : r->spec->duration_s + r->spec->settle_s + 1.0;
  double eta = per * remaining_cells + 2.0 * remaining_scouts;
  r->hooks->on_progress(r->hooks->cls, key, r->done_count, r->total_cells, eta);
}

bool
tb_run_cancelled(void *cls)
{
  const struct tb_run *r = cls;
  return r->hooks != NULL && r->hooks->cancelled != NULL && r->hooks->cancelled(r->hooks->cls);
}

void
tb_run_free(struct tb_run *r)
{
  tb_telemetry_stop(r->tel);
  tb_transport_free(&r->tp);
  tb_prompt_ctx_free(r->pc);
  tb_plan_free(&r->plan);
  free(r->base_url);
  free(r->run_id);
  free(r->stop);
  tb_discover_free(&r->d);
}

/* The run's end: its status, the measured scheduler cap in the header. */
enum tb_engine_status
tb_run_status(struct tb_run *r, json_t *header, char **err)
{
  enum tb_engine_status status = r->cancelled ? TB_ENGINE_CANCELLED : TB_ENGINE_OK;
  if (r->stop != NULL && !r->cancelled) {
    /* Nothing can be measured: one line, not N identical error cells. */
    *err = r->stop;
    r->stop = NULL;
    status = TB_ENGINE_FAILED;
  }
  if (r->cap_requests > 0 && header != NULL) {
    json_t *cap = json_object_get(header, "capacity");
    if (json_is_object(cap))
      json_object_set_new(cap, "scheduler_cap",
                          json_pack("{s:I, s:I, s:I, s:s}", "requests", (json_int_t)r->cap_requests,
                                    "context", (json_int_t)r->cap_ctx, "concurrency",
                                    (json_int_t)r->cap_conc, "source",
                                    "measured: running/waiting gauges"));
  }
  return status;
}
