/*
 * api_routes: the static routing table and its matcher.
 *
 * A path is literal segments and parameters: "{id}" matches a UUID only
 * (anything else is a 404 before any database work) and is copied to r->id;
 * "{name}" matches one segment of [A-Za-z0-9._~-] (at most TB_API_PARAM_MAX)
 * into r->param.  A path known with another method answers 405 with Allow.
 */
#include <string.h>

#include "api.h"
#include "api_handlers.h"

#define R TB_SCOPE_READ
#define W TB_SCOPE_WRITE
#define A TB_SCOPE_ADMIN

static const struct tb_api_route routes[] = {
  { .method = "GET", .path = "/healthz", .fn = tb_api_healthz },
  { .method = "GET", .path = "/readyz", .fn = tb_api_readyz },

  { .method = "POST", .path = "/v1/keys", .scope = A, .json_body = true, .fn = tb_api_keys_create },
  { .method = "GET", .path = "/v1/keys", .scope = A, .fn = tb_api_keys_list },
  { .method = "DELETE", .path = "/v1/keys/{id}", .scope = A, .fn = tb_api_keys_revoke },

  { .method = "POST",
    .path = "/v1/endpoints",
    .scope = W,
    .json_body = true,
    .fn = tb_api_endpoints_create },
  { .method = "GET", .path = "/v1/endpoints", .scope = R, .fn = tb_api_endpoints_list },
  { .method = "GET", .path = "/v1/endpoints/{id}", .scope = R, .fn = tb_api_endpoints_get },
  { .method = "PATCH",
    .path = "/v1/endpoints/{id}",
    .scope = W,
    .json_body = true,
    .fn = tb_api_endpoints_patch },
  { .method = "DELETE", .path = "/v1/endpoints/{id}", .scope = W, .fn = tb_api_endpoints_delete },
  { .method = "POST",
    .path = "/v1/endpoints/{id}/probe",
    .scope = W,
    .fn = tb_api_endpoints_probe },

  { .method = "POST", .path = "/v1/jobs", .scope = W, .json_body = true, .fn = tb_api_jobs_submit },
  { .method = "GET", .path = "/v1/jobs", .scope = R, .fn = tb_api_jobs_list },
  { .method = "GET", .path = "/v1/jobs/{id}", .scope = R, .fn = tb_api_jobs_get },
  { .method = "POST", .path = "/v1/jobs/{id}/cancel", .scope = W, .fn = tb_api_jobs_cancel },
  { .method = "GET", .path = "/v1/jobs/{id}/result", .scope = R, .fn = tb_api_jobs_result },
  { .method = "GET", .path = "/v1/jobs/{id}/events", .scope = R, .fn = tb_api_jobs_events },

  /* Reports, comparisons, thresholds, import, web frontend (issue 6,
   * api_report.c).  / and /web/{name} are static files: no key. */
  { .method = "GET", .path = "/v1/jobs/{id}/report", .scope = R, .fn = tb_api_jobs_report },
  { .method = "GET", .path = "/v1/compare", .scope = R, .fn = tb_api_compare },
  { .method = "POST",
    .path = "/v1/results",
    .scope = W,
    .json_body = true,
    .fn = tb_api_results_import },
  { .method = "GET", .path = "/v1/thresholds", .scope = R, .fn = tb_api_thresholds_list },
  { .method = "GET", .path = "/v1/series", .scope = R, .fn = tb_api_series },
  { .method = "GET", .path = "/v1/pareto", .scope = R, .fn = tb_api_pareto },
  { .method = "POST",
    .path = "/v1/thresholds",
    .scope = W,
    .json_body = true,
    .fn = tb_api_thresholds_put },
  { .method = "DELETE", .path = "/v1/thresholds/{id}", .scope = W, .fn = tb_api_thresholds_delete },
  { .method = "GET", .path = "/", .fn = tb_api_web_index },
  { .method = "GET", .path = "/web/{name}", .fn = tb_api_web_file },

  /* CI integration (issue 7).  POST /v1/hooks/{id} and /metrics ask no API
   * key: a signature, and TOKBENCH_METRICS_TOKEN, authenticate them. */
  { .method = "POST",
    .path = "/v1/presets",
    .scope = W,
    .json_body = true,
    .fn = tb_api_presets_create },
  { .method = "GET", .path = "/v1/presets", .scope = R, .fn = tb_api_presets_list },
  { .method = "GET", .path = "/v1/presets/{name}", .scope = R, .fn = tb_api_presets_get },
  { .method = "PUT",
    .path = "/v1/presets/{name}",
    .scope = W,
    .json_body = true,
    .fn = tb_api_presets_put },
  { .method = "DELETE", .path = "/v1/presets/{name}", .scope = W, .fn = tb_api_presets_delete },
  { .method = "POST", .path = "/v1/presets/{name}/jobs", .scope = W, .fn = tb_api_presets_run },
  { .method = "POST",
    .path = "/v1/hooks",
    .scope = W,
    .json_body = true,
    .fn = tb_api_hooks_create },
  { .method = "GET", .path = "/v1/hooks", .scope = R, .fn = tb_api_hooks_list },
  { .method = "GET", .path = "/v1/hooks/{id}", .scope = R, .fn = tb_api_hooks_get },
  { .method = "DELETE", .path = "/v1/hooks/{id}", .scope = W, .fn = tb_api_hooks_delete },
  { .method = "POST",
    .path = "/v1/hooks/{id}",
    .admit = tb_api_hooks_admit,
    .fn = tb_api_hooks_receive },
  { .method = "POST",
    .path = "/v1/callbacks",
    .scope = W,
    .json_body = true,
    .fn = tb_api_deliveries_callback_create },
  { .method = "GET", .path = "/v1/callbacks", .scope = R, .fn = tb_api_deliveries_callback_list },
  { .method = "DELETE",
    .path = "/v1/callbacks/{id}",
    .scope = W,
    .fn = tb_api_deliveries_callback_delete },
  { .method = "GET", .path = "/v1/deliveries", .scope = R, .fn = tb_api_deliveries_list },
  { .method = "GET", .path = "/metrics", .fn = tb_api_metrics },

  /* Production traces (issue 25): the body of a POST is the trace file. */
  { .method = "POST",
    .path = "/v1/traces",
    .scope = W,
    .upload = true,
    .fn = tb_api_traces_upload },
  { .method = "GET", .path = "/v1/traces", .scope = R, .fn = tb_api_traces_list },
  { .method = "GET", .path = "/v1/traces/{id}", .scope = R, .fn = tb_api_traces_get },
  { .method = "DELETE", .path = "/v1/traces/{id}", .scope = W, .fn = tb_api_traces_delete },

  /* Schedules (issue 35): jobs run on a cron in a time zone. */
  { .method = "POST",
    .path = "/v1/schedules",
    .scope = W,
    .json_body = true,
    .fn = tb_api_schedules_create },
  { .method = "GET", .path = "/v1/schedules", .scope = R, .fn = tb_api_schedules_list },
  { .method = "GET", .path = "/v1/schedules/{id}", .scope = R, .fn = tb_api_schedules_get },
  { .method = "PATCH",
    .path = "/v1/schedules/{id}",
    .scope = W,
    .json_body = true,
    .fn = tb_api_schedules_patch },
  { .method = "DELETE", .path = "/v1/schedules/{id}", .scope = W, .fn = tb_api_schedules_delete },
  /* Share links (issue 35, api_shares.h).  The body of a job's or an
   * endpoint's share is optional; GET /s/{name} asks no key: the token in
   * the path is the share's. */
  { .method = "POST", .path = "/v1/jobs/{id}/shares", .scope = W, .fn = tb_api_shares_job },
  { .method = "POST",
    .path = "/v1/compare/shares",
    .scope = W,
    .json_body = true,
    .fn = tb_api_shares_compare },
  { .method = "POST",
    .path = "/v1/endpoints/{id}/shares",
    .scope = W,
    .fn = tb_api_shares_endpoint },
  { .method = "GET", .path = "/v1/shares", .scope = R, .fn = tb_api_shares_list },
  { .method = "DELETE", .path = "/v1/shares/{id}", .scope = W, .fn = tb_api_shares_revoke },
  { .method = "GET", .path = "/s/{name}", .fn = tb_api_shares_open },
  /* Signed results (issue 35): the public keys, no API key asked. */
  { .method = "GET", .path = "/v1/signing-keys", .fn = tb_api_signing_keys },
};

bool
tb_api_segment_ok(const char *s, size_t n, size_t max)
{
  if (n == 0 || n > max)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '~' || c == '-'))
      return false;
  }
  return true;
}

/* Matches path against pattern; fills id/param of r when given. */
static bool
match(const char *pattern, const char *path, struct tb_api_req *r)
{
  const char *p = pattern, *u = path;
  while (*p != '\0' && *u != '\0') {
    if (*p != '/' || *u != '/')
      return false;
    p++;
    u++;
    size_t pl = strcspn(p, "/"), ul = strcspn(u, "/");
    if (pl == 4 && strncmp(p, "{id}", 4) == 0) {
      char id[TB_API_ID_LEN + 1];
      if (ul != TB_API_ID_LEN)
        return false;
      memcpy(id, u, ul);
      id[ul] = '\0';
      if (!tb_api_is_uuid(id))
        return false;
      if (r != NULL)
        for (size_t i = 0; i <= ul; i++) /* lower case: ids compare as text */
          r->id[i] = (char)((id[i] >= 'A' && id[i] <= 'F') ? id[i] + 32 : id[i]);
    } else if (pl == 6 && strncmp(p, "{name}", 6) == 0) {
      if (!tb_api_segment_ok(u, ul, TB_API_PARAM_MAX))
        return false;
      if (r != NULL) {
        memcpy(r->param, u, ul);
        r->param[ul] = '\0';
      }
    } else if (pl != ul || strncmp(p, u, pl) != 0) {
      return false;
    }
    p += pl;
    u += ul;
  }
  return *p == '\0' && *u == '\0';
}

enum tb_api_match
tb_api_route_find(struct tb_api_req *r, const char *method, const char *path)
{
  bool path_known = false;
  size_t alen = 0;
  r->allow[0] = '\0';
  r->route = NULL;
  for (size_t i = 0; i < TB_ARRAY_LEN(routes); i++) {
    if (!match(routes[i].path, path, NULL))
      continue;
    path_known = true;
    size_t ml = strlen(routes[i].method);
    if (alen + ml + 3 < sizeof r->allow && strstr(r->allow, routes[i].method) == NULL) {
      if (alen > 0) {
        memcpy(r->allow + alen, ", ", 2);
        alen += 2;
      }
      memcpy(r->allow + alen, routes[i].method, ml + 1);
      alen += ml;
    }
    if (r->route == NULL && strcmp(routes[i].method, method) == 0) {
      r->route = &routes[i];
      (void)match(routes[i].path, path, r);
    }
  }
  if (r->route != NULL)
    return TB_API_MATCH_OK;
  if (!path_known)
    return TB_API_MATCH_NO_PATH;
  if (alen + 10 < sizeof r->allow)
    memcpy(r->allow + alen, ", OPTIONS", 10);
  return TB_API_MATCH_NO_METHOD;
}
