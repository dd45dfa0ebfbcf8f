/*
 * tb_provenance: see tb_provenance.h.  Every fact is read from where the
 * document already holds it (the header that tb_result_header_new wrote
 * from discovery: engine, model, capacity and its *_source and "unknown"
 * members), so the block and the header cannot disagree; only what the
 * header has no place for (which answer named the engine, the simulator,
 * the GPUs) comes from discovery's and telemetry's own JSON.
 */
#include "result/tb_provenance.h"

#include <stdlib.h>
#include <string.h>

#include "base/tb_build.h"
#include "base/tb_crypto.h"
#include "base/tb_jcs.h"

/* {"value": v or "unknown", "source": source, else why, else a default}.
 * v is borrowed; null and absent are unknown. */
static json_t *
fact(const json_t *v, const char *source, const char *why)
{
  bool known = v != NULL && !json_is_null(v);
  const char *s = known ? source : why;
  if (s == NULL || *s == '\0' || (!known && strcmp(s, "none") == 0))
    s = known ? "the result's header" : "no surface discovery read gave it";
  return json_pack("{s:o, s:s}", "value",
                   known ? json_deep_copy(v) : json_string(TB_PROVENANCE_UNKNOWN), "source", s);
}

/* An unknown fact, for why. */
static json_t *
fact_unknown(const char *why)
{
  return json_pack("{s:s, s:s}", "value", TB_PROVENANCE_UNKNOWN, "source", why);
}

static const char *
str_of(const json_t *o, const char *key)
{
  return json_string_value(json_object_get(o, key));
}

/* The discovery facts of the header h and discovery's identity id. */
static json_t *
discovery(const json_t *h, const json_t *id)
{
  const json_t *eng = json_object_get(h, "engine"), *model = json_object_get(h, "model");
  const json_t *cap = json_object_get(h, "capacity");
  const json_t *unk = json_object_get(cap, "unknown");
  json_t *d = json_object();
  json_object_set_new(d, "engine",
                      fact(json_object_get(eng, "name"), str_of(id, "engine_source"), NULL));
  json_object_set_new(d, "engine_version",
                      fact(json_object_get(eng, "version"), str_of(cap, "version_source"),
                           "no surface discovery read named a version"));
  json_object_set_new(d, "model",
                      fact(json_object_get(model, "served"), str_of(id, "model_source"), NULL));
  json_object_set_new(d, "max_model_len",
                      fact(json_object_get(model, "max_model_len"),
                           str_of(cap, "max_model_len_source"), str_of(unk, "max_model_len")));
  json_object_set_new(d, "kv_budget_tokens",
                      fact(json_object_get(cap, "kv_budget_tokens"), str_of(cap, "source"),
                           str_of(unk, "kv_budget_tokens")));
  json_object_set_new(d, "max_running_requests",
                      fact(json_object_get(cap, "max_running_requests"),
                           str_of(cap, "max_running_source"), str_of(unk, "max_running_requests")));
  return d;
}

/* Every fact of discovery unknown, for why. */
static json_t *
discovery_unknown(const char *why)
{
  static const char *const names[] = {
    "engine", "engine_version", "model", "max_model_len", "kv_budget_tokens", "max_running_requests"
  };
  json_t *d = json_object();
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    json_object_set_new(d, names[i], fact_unknown(why));
  return d;
}

json_t *
tb_provenance_new(const struct tb_provenance_run *in)
{
  const json_t *h = in->header, *id = in->identity;
  const char *no_disc = "no discovery: the run ended before it (see error)";
  json_t *p = json_object();
  json_object_set_new(p, "tokbench", tb_build_json());
  json_object_set_new(p, "job_spec_sha256", json_string(TB_PROVENANCE_UNKNOWN));
  json_object_set_new(p, "discovery",
                      h != NULL && id != NULL ? discovery(h, id) : discovery_unknown(no_disc));
  if (id != NULL)
    json_object_set_new(p, "simulator",
                        fact(json_object_get(id, "simulator"), str_of(id, "simulator_source"),
                             str_of(id, "simulator_source")));
  else
    json_object_set_new(p, "simulator", fact_unknown(no_disc));
  const json_t *lc = h != NULL ? json_object_get(h, "launch_command") : NULL;
  json_object_set_new(p, "launch_command",
                      json_is_string(lc)
                        ? fact(lc, "the endpoint's launch_command, redacted (tb_redact)", NULL)
                        : fact_unknown("the endpoint gives no launch_command"));
  if (json_is_object(in->gpus)) {
    json_object_set_new(p, "gpu", json_deep_copy(in->gpus));
  } else {
    const char *u = TB_PROVENANCE_UNKNOWN;
    json_object_set_new(p, "gpu",
                        json_pack("{s:s, s:s, s:s, s:s}", "name", u, "count", u, "driver", u,
                                  "source",
                                  in->gpus_why != NULL ? in->gpus_why : "no GPU telemetry"));
  }
  const char *why = in->streams_why != NULL && in->streams_why[0] ? in->streams_why : NULL;
  json_object_set_new(p, "transport",
                      json_pack("{s:s, s:s}", "streams",
                                in->streams != NULL ? in->streams : TB_PROVENANCE_UNKNOWN,
                                "io_uring",
                                why != NULL ? why
                                : in->streams != NULL && strcmp(in->streams, "io_uring") == 0
                                  ? "in use: multishot recvmsg into a provided buffer ring"
                                  : TB_PROVENANCE_UNKNOWN));
  json_object_set_new(p, "cells", json_string(TB_PROVENANCE_UNKNOWN));
  return p;
}

void
tb_provenance_set_spec(json_t *prov, const json_t *spec, const char *binary)
{
  if (!json_is_object(prov))
    return;
  size_t len = 0;
  char *text = spec != NULL ? tb_jcs_dumps(spec, &len) : NULL;
  char hex[65];
  if (text != NULL)
    tb_crypto_sha256_hex(text, len, hex);
  json_object_set_new(prov, "job_spec_sha256",
                      json_string(text != NULL ? hex : TB_PROVENANCE_UNKNOWN));
  free(text);
  if (binary != NULL)
    json_object_set_new(json_object_get(prov, "tokbench"), "binary", json_string(binary));
}

void
tb_provenance_set_cells(json_t *prov, json_t *cells)
{
  if (json_is_object(prov))
    json_object_set_new(prov, "cells", cells);
  else
    json_decref(cells);
}

/* A sharded cell's shards (its "shards".where, in shard order). */
static json_t *
shards_of(const json_t *cell)
{
  const json_t *where = json_object_get(json_object_get(cell, "shards"), "where");
  if (!json_is_array(where))
    return NULL;
  json_t *out = json_array();
  size_t i;
  const json_t *w;
  json_array_foreach (where, i, w) {
    json_t *e = json_pack("{s:I}", "shard", (json_int_t)i);
    static const char *const copy[] = { "worker", "host", "clock_offset_ms",
                                        "clock_uncertainty_ms" };
    for (size_t k = 0; k < sizeof copy / sizeof copy[0]; k++) {
      const json_t *v = json_object_get(w, copy[k]);
      json_object_set_new(e, copy[k],
                          v != NULL ? json_deep_copy(v) : json_string(TB_PROVENANCE_UNKNOWN));
    }
    const json_t *skew = json_object_get(w, "skew_ms");
    json_object_set_new(e, "start_skew_ms",
                        skew != NULL ? json_deep_copy(skew) : json_string(TB_PROVENANCE_UNKNOWN));
    json_array_append_new(out, e);
  }
  return out;
}

json_t *
tb_provenance_cell(const json_t *cell, const char *worker, int attempt, bool have_clock,
                   double offset_ms, double uncert_ms, const char *clock_source)
{
  json_t *e = json_object();
  static const char *const key[] = { "phase", "context", "concurrency" };
  for (size_t k = 0; k < sizeof key / sizeof key[0]; k++) {
    const json_t *v = json_object_get(cell, key[k]);
    json_object_set_new(e, key[k], v != NULL ? json_deep_copy(v) : json_null());
  }
  json_object_set_new(e, "worker", json_string(worker != NULL ? worker : TB_PROVENANCE_UNKNOWN));
  json_object_set_new(e, "attempt",
                      attempt > 0 ? json_integer(attempt) : json_string(TB_PROVENANCE_UNKNOWN));
  json_object_set_new(e, "clock_offset_ms",
                      have_clock ? json_real(offset_ms) : json_string(TB_PROVENANCE_UNKNOWN));
  json_object_set_new(e, "clock_uncertainty_ms",
                      have_clock ? json_real(uncert_ms) : json_string(TB_PROVENANCE_UNKNOWN));
  json_object_set_new(e, "clock_source",
                      json_string(clock_source != NULL ? clock_source : TB_PROVENANCE_UNKNOWN));
  json_t *sh = shards_of(cell);
  if (sh != NULL)
    json_object_set_new(e, "shards", sh);
  return e;
}
