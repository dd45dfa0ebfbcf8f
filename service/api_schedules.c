/*
 * api_schedules: /v1/schedules, jobs of the caller's project run on a cron
 * (issue 35, item 1; api_schedules.h says how they fire).
 *   POST   /v1/schedules        {endpoint_id, preset | spec, cron, timezone,
 *                               labels?, paused?} -> 201 + Location
 *   GET    /v1/schedules        the project's, oldest first
 *   GET    /v1/schedules/{id}   one
 *   PATCH  /v1/schedules/{id}   any of those members: pause ({"paused":
 *                               true}), resume, a new cron, zone, spec,
 *                               preset, endpoint or labels -> 200
 *   DELETE /v1/schedules/{id}   204 (its jobs stay)
 *
 * A schedule is checked as a whole when it is made and after every change,
 * so what is stored can fire: the spec is a job spec as POST /v1/jobs
 * takes one (tb_spec_job, with the schedule's endpoint, the preset's spec
 * for a preset), within the job size limits; the cron parses, the zone is
 * a TZif file of TOKBENCH_ZONEINFO_DIR, and over the year after now the
 * cron fires, never twice within TOKBENCH_SCHEDULE_MIN_INTERVAL_S (422
 * naming cron or timezone).  TOKBENCH_LIMIT_SCHEDULES per project: 429.
 * Another project's schedule, like its endpoint, is 404 (or "no such
 * endpoint").  The statements: service/q_schedules.c.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_handlers.h"
#include "api_jobs.h"
#include "api_schedules.h"
#include "api_spec.h"
#include "q_presets.h"
#include "q_schedules.h"
#include "base/tb_cron.h"
#include "spec/tb_plan.h"
#include "spec/tb_specwalk.h"

bool
tb_api_schedules_config(struct tb_api *api, char **err)
{
  if (!tb_cfg_get_int(api->cfg, "TOKBENCH_LIMIT_SCHEDULES", 0, 1000000, &api->limit_schedules,
                      err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_SCHEDULE_MIN_INTERVAL_S", 0, 366 * 86400LL,
                      &api->schedule_min_interval_s, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_SCHEDULE_TICK_MS", 0, 3600000, &api->schedule_tick_ms,
                      err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_SCHEDULE_CLOCK_OFFSET_S", -100LL * 366 * 86400,
                      100LL * 366 * 86400, &api->schedule_clock_offset_s, err))
    return false;
  api->zoneinfo_dir = tb_cfg_get(api->cfg, "TOKBENCH_ZONEINFO_DIR");
  return true;
}

int
tb_api_schedules_job_spec(const json_t *base, const char *endpoint_id, const json_t *labels,
                          const char *schedule_id, json_t **out, json_t **errors)
{
  json_t *spec = json_is_object(base) ? json_deep_copy(base) : json_object();
  json_object_set_new(spec, "endpoint_id", json_string(endpoint_id));
  if (json_object_size(labels) > 0 || schedule_id != NULL) {
    json_t *l = json_object_get(spec, "labels");
    if (!json_is_object(l)) {
      l = json_object();
      json_object_set_new(spec, "labels", l);
    }
    if (json_is_object(labels))
      json_object_update(l, (json_t *)labels);
    if (schedule_id != NULL)
      json_object_set_new(l, TB_API_SCHEDULE_LABEL, json_string(schedule_id));
  }
  char *text = json_dumps(spec, JSON_COMPACT);
  json_decref(spec);
  *out = NULL;
  *errors = NULL;
  int rc = text != NULL ? tb_spec_job(text, strlen(text), out, errors) : TB_SPEC_INVALID;
  free(text);
  if (rc != TB_SPEC_OK) {
    if (*errors == NULL)
      *errors = json_array();
    size_t i;
    json_t *e;
    json_array_foreach (*errors, i, e) { /* name the fields under spec. */
      const char *f = json_string_value(json_object_get(e, "field"));
      char *nf = tb_xasprintf("spec.%s", f ? f : "");
      json_object_set_new(e, "field", json_string(nf));
      free(nf);
    }
    return TB_SPEC_INVALID;
  }
  return TB_SPEC_OK;
}

bool
tb_api_schedules_next(const char *dir, const char *cron, const char *zone, int64_t after_s,
                      int64_t min_interval_s, int64_t *next_s, struct tb_api_schedules_why *why)
{
  struct tb_cron c;
  char cw[TB_CRON_WHY_MAX];
  why->field = "cron";
  if (!tb_cron_parse(cron, &c, cw)) {
    snprintf(why->detail, sizeof why->detail, "%s", cw);
    return false;
  }
  struct tb_tz *tz = NULL;
  const char *tw;
  if (tb_tz_load(dir, zone, &tz, &tw) != TB_TZ_OK) {
    why->field = "timezone";
    snprintf(why->detail, sizeof why->detail,
             "unknown time zone \"%.64s\": an IANA name such as Europe/Berlin, "
             "America/New_York or UTC",
             zone);
    return false;
  }
  bool ok = true;
  int64_t n = tb_cron_next(&c, tz, after_s);
  if (n == TB_CRON_NEVER) {
    snprintf(why->detail, sizeof why->detail,
             "never fires: no date matches it within %d years (30 February, 31 April, ...)",
             TB_CRON_HORIZON_DAYS / 366);
    ok = false;
  } else if (min_interval_s > 0) {
    int64_t gap = tb_cron_min_gap(&c, tz, after_s, 366 * 86400LL, min_interval_s);
    if (gap < min_interval_s) {
      snprintf(why->detail, sizeof why->detail,
               "fires %lld s apart at its closest (DST included), more often than the minimum "
               "interval of %lld s (TOKBENCH_SCHEDULE_MIN_INTERVAL_S)",
               (long long)gap, (long long)min_interval_s);
      ok = false;
    }
  }
  tb_tz_free(tz);
  *next_s = n;
  return ok;
}

/* ------------------------------------------------------------------ bodies */

#define F(n, t, fl, lo, hi)                                                              \
  {                                                                                      \
    .name = n, .type = t, .flags = fl, .min = lo, .max = hi, .member = TB_SPEC_NO_MEMBER \
  }

/* The members the walker checks ("spec" and "paused" are checked by hand:
 * a whole job spec, a boolean). */
static const struct tb_spec_field sched_fields[] = {
  F("endpoint_id", TB_SPEC_UUID, TB_SPEC_REQUIRED, 0, 0),
  F("preset", TB_SPEC_STRING, 0, 1, 100),
  F("cron", TB_SPEC_STRING, TB_SPEC_REQUIRED, 1, TB_CRON_TEXT_MAX),
  F("timezone", TB_SPEC_STRING, TB_SPEC_REQUIRED, 1, TB_TZ_NAME_MAX),
  { .name = "labels",
    .type = TB_SPEC_LABELS,
    .max_items = TB_SPEC_MAX_LABELS,
    .member = TB_SPEC_NO_MEMBER },
};

/* A schedule as it will be stored, freed in one place (sched_clear). */
struct sched {
  char endpoint_id[TB_API_ID_LEN + 1];
  char *preset; /* a preset's name, or NULL */
  json_t *spec; /* the normalised job spec, or NULL */
  char *cron, *timezone;
  json_t *labels; /* an object */
  bool paused;
};

static void
sched_clear(struct sched *s)
{
  free(s->preset);
  free(s->cron);
  free(s->timezone);
  json_decref(s->spec);
  json_decref(s->labels);
  memset(s, 0, sizeof *s);
}

/* A stored schedule's document into *s (create: an empty one). */
static void
sched_from_doc(const json_t *doc, struct sched *s)
{
  memset(s, 0, sizeof *s);
  const char *ep = json_string_value(json_object_get(doc, "endpoint_id"));
  snprintf(s->endpoint_id, sizeof s->endpoint_id, "%s", ep ? ep : "");
  const char *p = json_string_value(json_object_get(doc, "preset"));
  s->preset = p != NULL ? tb_xstrdup(p) : NULL;
  json_t *spec = json_object_get(doc, "spec");
  s->spec = json_is_object(spec) ? json_incref(spec) : NULL;
  const char *c = json_string_value(json_object_get(doc, "cron"));
  const char *tz = json_string_value(json_object_get(doc, "timezone"));
  s->cron = tb_xstrdup(c ? c : "");
  s->timezone = tb_xstrdup(tz ? tz : "");
  json_t *l = json_object_get(doc, "labels");
  s->labels = json_is_object(l) ? json_deep_copy(l) : json_object();
  s->paused = json_is_true(json_object_get(doc, "paused"));
}

/* What a body changes. */
struct change {
  bool spec, preset, endpoint, when, paused, labels; /* when: cron or timezone */
};

/* The body's members over *s, each checked on its own; false with a reply
 * queued.  patch: nothing is required. */
static bool
apply_body(struct tb_api_req *r, json_t *body, bool patch, struct sched *s, struct change *ch,
           enum MHD_Result *ret)
{
  json_t *walked = json_object(), *errors = json_array(), *rest = json_copy(body);
  json_object_del(rest, "spec");
  json_object_del(rest, "paused");
  tb_specwalk_check(rest, sched_fields, TB_ARRAY_LEN(sched_fields), patch, NULL, walked, errors);
  json_decref(rest);
  json_t *paused = json_object_get(body, "paused"), *spec = json_object_get(body, "spec");
  const char *preset = json_string_value(json_object_get(walked, "preset"));
  if (paused != NULL && !json_is_boolean(paused))
    tb_specwalk_error(errors, "paused", "true or false");
  if (spec != NULL && !json_is_object(spec))
    tb_specwalk_error(errors, "spec", "a job spec: an object, the body of POST /v1/jobs");
  if (preset != NULL && !tb_api_segment_ok(preset, strlen(preset), 100))
    tb_specwalk_error(errors, "preset", "a preset's name: 1 to 100 of [A-Za-z0-9._~-]");
  if (preset != NULL && spec != NULL)
    tb_specwalk_error(errors, "preset", "a schedule runs a preset or a spec, not both");
  if (!patch && preset == NULL && spec == NULL && json_array_size(errors) == 0)
    tb_specwalk_error(errors, "spec", "give spec (a job spec) or preset (a preset's name)");
  bool ok = json_array_size(errors) == 0;
  if (!ok) {
    *ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, errors);
    errors = NULL;
    goto out;
  }
  const char *v;
  if ((v = json_string_value(json_object_get(walked, "endpoint_id"))) != NULL) {
    ch->endpoint = strcmp(v, s->endpoint_id) != 0;
    snprintf(s->endpoint_id, sizeof s->endpoint_id, "%s", v);
  }
  if ((v = json_string_value(json_object_get(walked, "cron"))) != NULL) {
    ch->when |= strcmp(v, s->cron) != 0;
    free(s->cron);
    s->cron = tb_xstrdup(v);
  }
  if ((v = json_string_value(json_object_get(walked, "timezone"))) != NULL) {
    ch->when |= strcmp(v, s->timezone) != 0;
    free(s->timezone);
    s->timezone = tb_xstrdup(v);
  }
  json_t *labels = json_object_get(walked, "labels");
  if (labels != NULL) {
    ch->labels = true;
    json_decref(s->labels);
    s->labels = json_incref(labels);
  }
  if (paused != NULL) {
    ch->paused = json_is_true(paused) != s->paused;
    s->paused = json_is_true(paused);
  }
  if (preset != NULL) { /* a preset now: no spec */
    ch->preset = true;
    free(s->preset);
    s->preset = tb_xstrdup(preset);
    json_decref(s->spec);
    s->spec = NULL;
  }
  if (spec != NULL) { /* normalised below, with the endpoint */
    ch->spec = true;
    free(s->preset);
    s->preset = NULL;
    json_decref(s->spec);
    s->spec = json_incref(spec);
  }
out:
  json_decref(errors);
  json_decref(walked);
  return ok;
}

/* The spec of a run of s (the preset's, read through db, or its own),
 * with the labels a run carries, checked as a job of the project:
 * tb_spec_job and the job size limits.  A spec of its own becomes the
 * normalised one (without the run's labels).  normalise: the spec came in
 * the body, so an endpoint_id of its own must be the schedule's.  False
 * with a reply queued. */
static bool
check_run(struct tb_api_req *r, struct tb_db *db, struct sched *s, bool normalise,
          enum MHD_Result *ret)
{
  json_t *base = NULL, *job = NULL, *errors = NULL;
  bool ok = false;
  if (s->preset != NULL) {
    char *text = NULL;
    int rc = tb_q_presets_get(db, r->project_id, s->preset, NULL, &text);
    if (rc <= 0) {
      *ret = rc < 0 ? tb_api_reply_db(r, rc)
                    : tb_api_reply_invalid(r, "preset", "no preset of this name in this project");
      return false;
    }
    base = json_loads(text, 0, NULL);
    free(text);
  } else {
    base = json_incref(s->spec);
    const char *ep = json_string_value(json_object_get(base, "endpoint_id"));
    if (normalise && ep != NULL && strcasecmp(ep, s->endpoint_id) != 0) {
      json_decref(base);
      *ret = tb_api_reply_invalid(r, "spec.endpoint_id",
                                  "differs from the schedule's endpoint_id (leave it out)");
      return false;
    }
  }
  /* with the schedule's labels and its label (an id not known yet: any
   * UUID has its length), so that what a run will carry is checked now */
  if (tb_api_schedules_job_spec(base, s->endpoint_id, s->labels,
                                "00000000-0000-4000-8000-000000000000", &job,
                                &errors) != TB_SPEC_OK) {
    *ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, errors);
    goto out;
  }
  struct tb_spec_job_row jr;
  tb_spec_job_row(job, &jr);
  const struct tb_tenancy *ten = &r->api->tenancy;
  double secs = ten->job_seconds > 0 ? tb_plan_job_seconds(job, 0) : -1;
  struct tb_tenancy_refusal why;
  if (!tb_tenancy_check_job(ten, secs, jr.max_attempts_given ? jr.max_attempts : 0, &why)) {
    *ret = tb_api_reply_refusal(r, &why);
    goto out;
  }
  if (s->preset == NULL) { /* stored without the run's labels: a run merges them again */
    json_t *own = NULL, *e2 = NULL;
    if (tb_api_schedules_job_spec(base, s->endpoint_id, NULL, NULL, &own, &e2) != TB_SPEC_OK) {
      *ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, e2);
      goto out;
    }
    json_decref(s->spec);
    s->spec = own;
  }
  ok = true;
out:
  json_decref(base);
  json_decref(job);
  return ok;
}

/* The next slot of s after the schedules' clock now (epoch seconds' text
 * into next, "" while paused), the cron and zone checked (a schedule only
 * paused is not: pausing always works; resuming checks).  False with a
 * reply queued. */
static bool
plan(struct tb_api_req *r, struct tb_db *db, const struct sched *s, bool check, char next[24],
     enum MHD_Result *ret)
{
  next[0] = '\0';
  if (!check && s->paused)
    return true;
  int64_t now = 0, n = 0;
  int rc = tb_q_schedules_now(db, r->api->schedule_clock_offset_s, &now);
  if (rc < 0) {
    *ret = tb_api_reply_db(r, rc);
    return false;
  }
  struct tb_api_schedules_why why;
  if (!tb_api_schedules_next(r->api->zoneinfo_dir, s->cron, s->timezone, now,
                             r->api->schedule_min_interval_s, &n, &why)) {
    *ret = tb_api_reply_invalid(r, why.field, why.detail);
    return false;
  }
  if (s->paused)
    next[0] = '\0';
  else
    snprintf(next, 24, "%lld", (long long)n);
  return true;
}

/* The row of s (texts borrowed from s and the buffers given). */
static void
to_row(const struct sched *s, const char *next, char **spec_text, char **labels_text,
       struct tb_q_schedules_row *row)
{
  *spec_text = s->spec != NULL ? json_dumps(s->spec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  *labels_text = json_dumps(s->labels, JSON_COMPACT | JSON_SORT_KEYS);
  *row = (struct tb_q_schedules_row){
    .endpoint_id = s->endpoint_id,
    .preset_name = s->preset,
    .spec = *spec_text,
    .cron = s->cron,
    .timezone = s->timezone,
    .labels = *labels_text,
    .paused = s->paused,
    .next_run_s = next[0] != '\0' ? next : NULL,
  };
}

/* The reply to an insert or update that wrote nothing (rc > 1) or failed. */
static enum MHD_Result
reply_unwritten(struct tb_api_req *r, int rc, int64_t count)
{
  if (rc == TB_Q_SCHEDULES_NO_ENDPOINT)
    return tb_api_reply_invalid(r, "endpoint_id", "no such endpoint in this project");
  if (rc == TB_Q_SCHEDULES_NO_PRESET)
    return tb_api_reply_invalid(r, "preset", "no preset of this name in this project");
  if (rc == TB_Q_SCHEDULES_FULL) {
    char d[200];
    long long max = (long long)r->api->limit_schedules;
    snprintf(d, sizeof d,
             "this project holds %lld schedules, the most allowed (TOKBENCH_LIMIT_SCHEDULES=%lld): "
             "delete one first",
             (long long)count, max);
    r->retry_after_s = TB_API_LIMIT_RETRY_S;
    return tb_api_reply_error(r, TB_EC_LIMIT_REACHED, d,
                              json_pack("{s:s,s:s,s:I,s:I}", "limit", "schedules", "setting",
                                        "TOKBENCH_LIMIT_SCHEDULES", "max", (json_int_t)max, "value",
                                        (json_int_t)count));
  }
  if (rc == 0)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such schedule", NULL);
  return tb_api_reply_db(r, rc < 0 ? rc : TB_DB_HARD);
}

/* ---------------------------------------------------------------- routes */

static const char *const allowed[] = { "endpoint_id", "preset", "spec",   "cron",
                                       "timezone",    "labels", "paused", NULL };

enum MHD_Result
tb_api_schedules_create(struct tb_api_req *r)
{
  enum MHD_Result ret;
  json_t *body = tb_api_body_json(r, &ret);
  if (body == NULL)
    return ret;
  struct sched s;
  struct change ch = { 0 };
  sched_from_doc(NULL, &s);
  char next[24] = "", *spec_text = NULL, *labels_text = NULL, *doc = NULL;
  struct tb_db *db = NULL;
  if (!tb_api_only_members(r, body, allowed, &ret) || !apply_body(r, body, false, &s, &ch, &ret))
    goto out;
  db = tb_api_db_get(r);
  if (!check_run(r, db, &s, true, &ret) || !plan(r, db, &s, true, next, &ret))
    goto out;
  struct tb_q_schedules_row row;
  to_row(&s, next, &spec_text, &labels_text, &row);
  int64_t count = 0;
  int rc = tb_q_schedules_insert(db, r->project_id, &row, r->api->limit_schedules, &doc, &count);
  if (rc != 1) {
    ret = reply_unwritten(r, rc == 0 ? TB_DB_HARD : rc, count);
    goto out;
  }
  json_t *o = json_loads(doc, 0, NULL);
  const char *id = json_string_value(json_object_get(o, "id"));
  ret = tb_api_reply_at(r, MHD_HTTP_CREATED, doc, "/v1/schedules/", id ? id : "");
  json_decref(o);
out:
  if (db != NULL)
    tb_api_db_put(r, db);
  free(doc);
  free(spec_text);
  free(labels_text);
  sched_clear(&s);
  json_decref(body);
  return ret;
}

enum MHD_Result
tb_api_schedules_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_schedules_list, "schedules");
}

enum MHD_Result
tb_api_schedules_get(struct tb_api_req *r)
{
  return tb_api_reply_get(r, tb_q_schedules_get, "no such schedule");
}

enum MHD_Result
tb_api_schedules_patch(struct tb_api_req *r)
{
  enum MHD_Result ret;
  json_t *body = tb_api_body_json(r, &ret), *cur = NULL;
  if (body == NULL)
    return ret;
  struct sched s = { 0 };
  struct change ch = { 0 };
  char next[24] = "", *spec_text = NULL, *labels_text = NULL, *doc = NULL;
  struct tb_db *db = NULL;
  if (!tb_api_only_members(r, body, allowed, &ret))
    goto out;
  db = tb_api_db_get(r);
  int rc = tb_q_schedules_get(db, r->id, r->project_id, &doc);
  if (!tb_api_found(r, rc > 0 && doc != NULL ? 1 : rc, "no such schedule", &ret))
    goto out;
  cur = json_loads(doc, 0, NULL);
  free(doc);
  doc = NULL;
  sched_from_doc(cur, &s);
  if (!apply_body(r, body, true, &s, &ch, &ret))
    goto out;
  /* the run is checked again when what it runs changed; the times when
   * they, or the pause, did (resuming plans the next slot from now) */
  if ((ch.spec || ch.preset || ch.endpoint || ch.labels) && !check_run(r, db, &s, ch.spec, &ret))
    goto out;
  bool reschedule = ch.when || ch.paused;
  if (reschedule && !plan(r, db, &s, ch.when || !s.paused, next, &ret))
    goto out;
  struct tb_q_schedules_row row;
  to_row(&s, next, &spec_text, &labels_text, &row);
  rc = tb_q_schedules_update(db, r->id, r->project_id, &row, reschedule, &doc);
  if (rc != 1) {
    ret = reply_unwritten(r, rc, 0);
    goto out;
  }
  ret = tb_api_reply_text(r, MHD_HTTP_OK, doc, NULL);
out:
  if (db != NULL)
    tb_api_db_put(r, db);
  free(doc);
  free(spec_text);
  free(labels_text);
  sched_clear(&s);
  json_decref(cur);
  json_decref(body);
  return ret;
}

enum MHD_Result
tb_api_schedules_delete(struct tb_api_req *r)
{
  return tb_api_reply_delete(r, tb_q_schedules_delete, "no such schedule");
}
