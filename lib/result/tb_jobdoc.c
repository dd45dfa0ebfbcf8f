/*
 * tb_jobdoc: see tb_jobdoc.h.  Pure functions over a row's text, so the
 * api's handlers and the unit tests build the same document.
 */
#include "result/tb_jobdoc.h"

#include <string.h>

#include "base/tb_redact.h"

bool
tb_jobdoc_terminal(const char *state)
{
  return state != NULL && (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
                           strcmp(state, "cancelled") == 0);
}

bool
tb_jobdoc_state_ok(const char *state)
{
  return tb_jobdoc_terminal(state) ||
         (state != NULL && (strcmp(state, "queued") == 0 || strcmp(state, "running") == 0));
}

const char *
tb_jobdoc_status_of(const char *state)
{
  if (state != NULL && strcmp(state, "succeeded") == 0)
    return "complete";
  if (state != NULL && strcmp(state, "failed") == 0)
    return "failed";
  if (state != NULL && strcmp(state, "cancelled") == 0)
    return "cancelled";
  return "running";
}

static json_t *
load_object(const char *text)
{
  json_t *v = text != NULL ? json_loads(text, 0, NULL) : NULL;
  if (!json_is_object(v)) {
    json_decref(v);
    return NULL;
  }
  return v;
}

json_t *
tb_jobdoc_build(const struct tb_jobdoc_row *row)
{
  json_t *d = tb_jobdoc_terminal(row->state) ? load_object(row->result) : NULL;
  if (d == NULL) {
    /* not finished (or finished without a document): header + cells so far */
    d = load_object(row->header);
    if (d == NULL)
      d = json_object();
    json_t *cells = row->cells != NULL ? json_loads(row->cells, 0, NULL) : NULL;
    if (!json_is_array(cells)) {
      json_decref(cells);
      cells = json_array();
    }
    json_object_set_new(d, "cells", cells);
    json_object_set_new(d, "status", json_string(tb_jobdoc_status_of(row->state)));
    json_object_set_new(d, "error", row->error != NULL ? json_string(row->error) : json_null());
    if (row->cells_total >= 0)
      json_object_set_new(d, "progress",
                          json_pack("{s:I}", "cells_total", (json_int_t)row->cells_total));
  }
  json_object_set_new(d, "job_id", json_string(row->job_id != NULL ? row->job_id : ""));
  json_object_set_new(d, "state", json_string(row->state != NULL ? row->state : ""));
  json_t *safe = tb_redact_document(d);
  json_decref(d);
  return safe;
}
