/*
 * worker_spec: what the worker adds to a job's spec: its endpoint (the
 * report header's endpoint block) and a run id.  The job's settings are
 * parsed by lib/spec/tb_spec (tb_spec_parse, in worker_job.c) against the table
 * the api validated them with; nothing here knows a setting's name.
 */
#include <stdio.h>
#include <string.h>

#include "base/tb_crypto.h"
#include "worker.h"

json_t *
worker_endpoint_header(const struct tb_queue_endpoint *ep)
{
  json_t *e = json_object();
  if (ep->name != NULL)
    json_object_set_new(e, "name", json_string(ep->name));
  if (json_is_object(ep->hardware))
    json_object_set_new(e, "hardware", json_deep_copy(ep->hardware));
  json_t *eng = json_is_object(ep->engine) ? json_deep_copy(ep->engine) : json_object();
  if (ep->engine_hint != NULL && json_object_get(eng, "hint") == NULL)
    json_object_set_new(eng, "hint", json_string(ep->engine_hint));
  json_object_set_new(e, "engine", eng);
  if (ep->launch_command != NULL)
    json_object_set_new(e, "launch_command", json_string(ep->launch_command));
  return e;
}

char *
worker_run_id(const char *job_id, int attempt)
{
  unsigned char nonce[3] = { 0 };
  char hex[7];
  if (!tb_crypto_random(nonce, sizeof nonce)) {
    /* the clock is unique enough for a prompt tag */
    int64_t t = tb_time_real_us();
    memcpy(nonce, &t, sizeof nonce);
  }
  tb_hex_encode(nonce, sizeof nonce, hex);
  return tb_xasprintf("%s.%d.%s", job_id, attempt, hex);
}
