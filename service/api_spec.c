/*
 * api_spec: see api_spec.h.
 *
 * Each body is described by a static table of fields (name, type, range);
 * one walker checks the object against its table, so the rules of a field
 * sit on one line.  Values are copied into a new normalized object; nothing
 * of the input is kept.
 */
#include "api_spec.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tb_auth.h"
#include "tb_redact.h"

enum ftype {
  F_UUID,       /* string, a UUID */
  F_STRING,     /* string of [min, max] bytes */
  F_IDENT,      /* string of [A-Za-z0-9._-], [min, max] bytes */
  F_URL,        /* http(s) URL */
  F_INT,        /* integer in [min, max] */
  F_NUMBER,     /* number in [min, max] */
  F_TOKENS,     /* array of ints or "8k" strings, each in [min, max] */
  F_INTS,       /* array of ints in [min, max] */
  F_LABELS,     /* object of string -> string */
  F_URLS,       /* array of URLs */
  F_HARDWARE,   /* object: hardware table */
  F_ENGINE,     /* object: engine table */
  F_SCOPES,     /* array of scope names */
  F_DURATION,   /* "30d" or seconds */
};

struct field {
  const char *name;
  enum ftype type;
  bool required;  /* on create */
  bool nullable;  /* null allowed on patch (clears) */
  double min, max;
  size_t max_items;
};

static const struct field job_fields[] = {
  { "endpoint_id", F_UUID, true, false, 0, 0, 0 },
  { "model", F_STRING, false, false, 1, 256, 0 },
  { "contexts", F_TOKENS, false, false, 1, (double)TB_SPEC_MAX_CONTEXT, TB_SPEC_MAX_LIST },
  { "concurrency", F_INTS, false, false, 1, TB_SPEC_MAX_CONCURRENCY, TB_SPEC_MAX_LIST },
  { "prefill_contexts", F_TOKENS, false, false, 1, (double)TB_SPEC_MAX_CONTEXT, TB_SPEC_MAX_LIST },
  { "duration_s", F_NUMBER, false, false, 0.1, 3600, 0 },
  { "max_output", F_INT, false, false, 1, 1048576, 0 },
  { "kv_budget", F_INT, false, false, 1, 1e13, 0 },
  { "labels", F_LABELS, false, false, 0, 0, TB_SPEC_MAX_LABELS },
  { "priority", F_INT, false, false, -1000, 1000, 0 },
  { "exclusive_group", F_IDENT, false, false, 1, 100, 0 },
  { "callbacks", F_URLS, false, false, 0, 0, TB_SPEC_MAX_CALLBACKS },
  { "max_attempts", F_INT, false, false, 1, 20, 0 },
  /* engine tuning (lib/tb_engine.h) */
  { "settle_s", F_NUMBER, false, false, 0, 3600, 0 },
  { "stall_timeout_s", F_NUMBER, false, false, 0.1, 86400, 0 },
  { "first_token_timeout_s", F_NUMBER, false, false, 0.1, 86400, 0 },
  { "ready_timeout_s", F_NUMBER, false, false, 0.1, 86400, 0 },
  { "drain_timeout_s", F_NUMBER, false, false, 0, 86400, 0 },
  { "metrics_interval_s", F_NUMBER, false, false, 0.01, 60, 0 },
};

static const struct field endpoint_fields[] = {
  { "name", F_STRING, true, false, 1, 200, 0 },
  { "base_url", F_URL, true, false, 0, 0, 0 },
  { "api_key", F_STRING, false, true, 1, TB_SPEC_MAX_API_KEY, 0 },
  { "engine_hint", F_IDENT, false, true, 1, 50, 0 },
  { "hardware", F_HARDWARE, false, false, 0, 0, 0 },
  { "engine", F_ENGINE, false, false, 0, 0, 0 },
  { "launch_command", F_STRING, false, true, 0, TB_SPEC_MAX_LAUNCH, 0 },
  { "exclusive_group", F_IDENT, false, true, 1, 100, 0 },
};

static const struct field hardware_fields[] = {
  { "gpu", F_STRING, false, false, 0, 200, 0 },
  { "type", F_STRING, false, false, 0, 200, 0 },
  { "count", F_INT, false, false, 1, 4096, 0 },
  { "vram_gb", F_NUMBER, false, false, 0, 1e6, 0 },
};

static const struct field engine_fields[] = {
  { "name", F_STRING, false, false, 0, 500, 0 },
  { "version", F_STRING, false, false, 0, 500, 0 },
  { "quantization", F_STRING, false, false, 0, 500, 0 },
  { "backend", F_STRING, false, false, 0, 500, 0 },
  { "repository", F_STRING, false, false, 0, 500, 0 },
  { "build", F_STRING, false, false, 0, 500, 0 },
  { "commit", F_STRING, false, false, 0, 500, 0 },
};

static const struct field key_fields[] = {
  { "name", F_STRING, false, false, 0, 200, 0 },
  { "scopes", F_SCOPES, false, false, 0, 0, 3 },
  { "expires_in", F_DURATION, false, true, 0, 0, 0 },
};

static void
add_err(json_t *errors, const char *field, const char *fmt, ...) TB_PRINTF(3, 4);

static void
add_err(json_t *errors, const char *field, const char *fmt, ...)
{
  char detail[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  json_t *f = json_string(field);
  if (f == NULL)
    f = json_string("(field name not UTF-8)");
  json_array_append_new(errors, json_pack("{s:o,s:s}", "field", f, "detail", detail));
}

bool
tb_spec_url_ok(const char *url)
{
  size_t n = strlen(url);
  if (n > TB_SPEC_MAX_URL)
    return false;
  const char *rest;
  if (strncmp(url, "http://", 7) == 0)
    rest = url + 7;
  else if (strncmp(url, "https://", 8) == 0)
    rest = url + 8;
  else
    return false;
  for (const char *p = url; *p; p++)
    if ((unsigned char)*p <= 0x20 || *p == 0x7f)
      return false;
  size_t host = strcspn(rest, "/?#");
  if (host == 0)
    return false;
  if (memchr(rest, '@', host) != NULL) /* credentials do not belong in a listed URL */
    return false;
  if (rest[0] == ':')
    return false;
  return true;
}

static bool
ident_ok(const char *s)
{
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '.' || *s == '_' || *s == '-'))
      return false;
  return true;
}

static bool
get_int(const json_t *v, double min, double max, int64_t *out)
{
  if (!json_is_integer(v))
    return false;
  json_int_t i = json_integer_value(v);
  if ((double)i < min || (double)i > max)
    return false;
  *out = (int64_t)i;
  return true;
}

static void check_object(const json_t *obj, const struct field *fields, size_t nfields,
                         bool patch, const char *prefix, json_t *out, json_t *errors);

/* Checks one value against its field; adds the normalized value to out. */
static void
check_field(const struct field *f, const json_t *v, bool patch, const char *path,
            json_t *out, json_t *errors)
{
  char sub[256];
  if (json_is_null(v) && patch && f->nullable) {
    json_object_set_new(out, f->name, json_null());
    return;
  }
  switch (f->type) {
  case F_UUID: {
    const char *s = json_string_value(v);
    bool ok = s != NULL && strlen(s) == 36;
    for (int i = 0; ok && i < 36; i++) {
      char c = s[i];
      ok = (i == 8 || i == 13 || i == 18 || i == 23) ? c == '-' : isxdigit((unsigned char)c) != 0;
    }
    if (!ok) {
      add_err(errors, path, "must be a UUID string");
      return;
    }
    char low[37];
    for (int i = 0; i < 37; i++)
      low[i] = (char)tolower((unsigned char)s[i]);
    json_object_set_new(out, f->name, json_string(low));
    return;
  }
  case F_STRING:
  case F_IDENT:
  case F_URL: {
    const char *s = json_string_value(v);
    if (s == NULL) {
      add_err(errors, path, "must be a string");
      return;
    }
    size_t n = json_string_length(v);
    if (strlen(s) != n) {
      add_err(errors, path, "must not contain NUL characters");
      return;
    }
    if (f->type == F_URL) {
      if (!tb_spec_url_ok(s)) {
        add_err(errors, path, "must be an http:// or https:// URL with a host and no credentials "
                              "(at most %d bytes)", TB_SPEC_MAX_URL);
        return;
      }
    } else if ((double)n < f->min || (double)n > f->max) {
      add_err(errors, path, "must be %.0f to %.0f bytes long", f->min, f->max);
      return;
    } else if (f->type == F_IDENT && !ident_ok(s)) {
      add_err(errors, path, "may hold only letters, digits, '.', '_' and '-'");
      return;
    }
    json_object_set_new(out, f->name, json_stringn(s, n));
    return;
  }
  case F_INT: {
    int64_t i;
    if (!get_int(v, f->min, f->max, &i)) {
      add_err(errors, path, "must be an integer from %.0f to %.0f", f->min, f->max);
      return;
    }
    json_object_set_new(out, f->name, json_integer(i));
    return;
  }
  case F_NUMBER: {
    if (!json_is_number(v) || !isfinite(json_number_value(v)) ||
        json_number_value(v) < f->min || json_number_value(v) > f->max) {
      add_err(errors, path, "must be a number from %g to %g", f->min, f->max);
      return;
    }
    json_object_set_new(out, f->name, json_real(json_number_value(v)));
    return;
  }
  case F_TOKENS:
  case F_INTS: {
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > f->max_items) {
      add_err(errors, path, "must be an array of 1 to %zu items", f->max_items);
      return;
    }
    json_t *arr = json_array();
    size_t i;
    const json_t *e;
    bool bad = false;
    json_array_foreach(v, i, e) {
      snprintf(sub, sizeof sub, "%.160s[%zu]", path, i);
      int64_t t = 0;
      bool ok;
      if (f->type == F_TOKENS && json_is_string(e))
        ok = tb_parse_tokens(json_string_value(e), &t) && t >= f->min && t <= f->max;
      else
        ok = get_int(e, f->min, f->max, &t);
      if (!ok) {
        if (f->type == F_TOKENS)
          add_err(errors, sub, "must be a token count from %.0f to %.0f (an integer or a "
                               "string like \"8k\")", f->min, f->max);
        else
          add_err(errors, sub, "must be an integer from %.0f to %.0f", f->min, f->max);
        bad = true;
        continue;
      }
      for (size_t j = 0; j < json_array_size(arr); j++) {
        if (json_integer_value(json_array_get(arr, j)) == t) {
          add_err(errors, sub, "duplicate value %lld", (long long)t);
          bad = true;
          ok = false;
          break;
        }
      }
      if (ok)
        json_array_append_new(arr, json_integer(t));
    }
    if (bad)
      json_decref(arr);
    else
      json_object_set_new(out, f->name, arr);
    return;
  }
  case F_LABELS: {
    if (!json_is_object(v) || json_object_size(v) > f->max_items) {
      add_err(errors, path, "must be an object of at most %zu string labels", f->max_items);
      return;
    }
    json_t *o = json_object();
    const char *k;
    const json_t *e;
    json_object_foreach((json_t *)v, k, e) {
      snprintf(sub, sizeof sub, "%.160s.%.64s", path, k);
      size_t kl = strlen(k);
      if (kl == 0 || kl > TB_SPEC_MAX_LABEL_KEY || !ident_ok(k)) {
        add_err(errors, sub, "label names are 1 to %d of [A-Za-z0-9._-]", TB_SPEC_MAX_LABEL_KEY);
        continue;
      }
      const char *s = json_string_value(e);
      if (s == NULL || json_string_length(e) > TB_SPEC_MAX_LABEL_VALUE ||
          strlen(s) != json_string_length(e)) {
        add_err(errors, sub, "label values are strings of at most %d bytes",
                TB_SPEC_MAX_LABEL_VALUE);
        continue;
      }
      json_object_set_new(o, k, json_string(s));
    }
    json_object_set_new(out, f->name, o);
    return;
  }
  case F_URLS: {
    if (!json_is_array(v) || json_array_size(v) > f->max_items) {
      add_err(errors, path, "must be an array of at most %zu URLs", f->max_items);
      return;
    }
    json_t *arr = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
      snprintf(sub, sizeof sub, "%.160s[%zu]", path, i);
      const char *s = json_string_value(e);
      if (s == NULL || strlen(s) != json_string_length(e) || !tb_spec_url_ok(s)) {
        add_err(errors, sub, "must be an http:// or https:// URL");
        continue;
      }
      json_array_append_new(arr, json_string(s));
    }
    json_object_set_new(out, f->name, arr);
    return;
  }
  case F_HARDWARE:
  case F_ENGINE: {
    if (!json_is_object(v)) {
      add_err(errors, path, "must be an object");
      return;
    }
    json_t *o = json_object();
    if (f->type == F_HARDWARE)
      check_object(v, hardware_fields, TB_ARRAY_LEN(hardware_fields), true, path, o, errors);
    else
      check_object(v, engine_fields, TB_ARRAY_LEN(engine_fields), true, path, o, errors);
    json_object_set_new(out, f->name, o);
    return;
  }
  case F_SCOPES: {
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > f->max_items) {
      add_err(errors, path, "must be an array of 1 to 3 of \"read\", \"write\", \"admin\"");
      return;
    }
    unsigned mask = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
      snprintf(sub, sizeof sub, "%.160s[%zu]", path, i);
      unsigned m;
      const char *s = json_string_value(e);
      if (s == NULL || strchr(s, ',') != NULL || !tb_auth_parse_scopes(s, &m)) {
        add_err(errors, sub, "must be \"read\", \"write\" or \"admin\"");
        continue;
      }
      mask |= m;
    }
    json_object_set_new(out, f->name, json_integer(mask));
    return;
  }
  case F_DURATION: {
    int64_t s = 0;
    bool ok;
    if (json_is_string(v))
      ok = tb_auth_parse_duration(json_string_value(v), &s);
    else
      ok = get_int(v, 1, (double)TB_AUTH_MAX_EXPIRY_S, &s);
    if (!ok) {
      add_err(errors, path, "must be seconds (an integer) or a duration like \"30d\", \"12h\"");
      return;
    }
    json_object_set_new(out, f->name, json_integer(s));
    return;
  }
  }
}

static void
check_object(const json_t *obj, const struct field *fields, size_t nfields, bool patch,
             const char *prefix, json_t *out, json_t *errors)
{
  char path[160];
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)obj, k, v) {
    const struct field *f = NULL;
    for (size_t i = 0; i < nfields && f == NULL; i++)
      if (strcmp(fields[i].name, k) == 0)
        f = &fields[i];
    if (prefix != NULL)
      snprintf(path, sizeof path, "%s.%.100s", prefix, k);
    else
      snprintf(path, sizeof path, "%.100s", k);
    if (f == NULL) {
      add_err(errors, path, "unknown field");
      continue;
    }
    check_field(f, v, patch, path, out, errors);
  }
  if (!patch) {
    for (size_t i = 0; i < nfields; i++) {
      if (fields[i].required && json_object_get(obj, fields[i].name) == NULL) {
        if (prefix != NULL)
          snprintf(path, sizeof path, "%s.%s", prefix, fields[i].name);
        else
          snprintf(path, sizeof path, "%s", fields[i].name);
        add_err(errors, path, "is required");
      }
    }
  }
}

static enum tb_spec_rc
run(const char *text, size_t len, const struct field *fields, size_t nfields, bool patch,
    json_t **out, json_t **errors)
{
  *out = NULL;
  *errors = json_array();
  json_error_t je;
  json_t *in = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (in == NULL || !json_is_object(in)) {
    if (in == NULL)
      add_err(*errors, "", "not JSON: line %d, column %d: %s", je.line, je.column, je.text);
    else
      add_err(*errors, "", "the body must be a JSON object");
    json_decref(in);
    return TB_SPEC_BAD_JSON;
  }
  json_t *o = json_object();
  check_object(in, fields, nfields, patch, NULL, o, *errors);
  json_decref(in);
  if (json_array_size(*errors) > 0) {
    /* the api_key may sit in o: wipe what we can before freeing */
    json_t *k = json_object_get(o, "api_key");
    if (json_is_string(k))
      json_string_setn(k, "", 0);
    json_decref(o);
    return TB_SPEC_INVALID;
  }
  json_decref(*errors);
  *errors = NULL;
  *out = o;
  return TB_SPEC_OK;
}

enum tb_spec_rc
tb_spec_job(const char *text, size_t len, json_t **out, json_t **errors)
{
  return run(text, len, job_fields, TB_ARRAY_LEN(job_fields), false, out, errors);
}

enum tb_spec_rc
tb_spec_endpoint(const char *text, size_t len, bool patch, json_t **out, json_t **errors)
{
  enum tb_spec_rc rc = run(text, len, endpoint_fields, TB_ARRAY_LEN(endpoint_fields), patch,
                           out, errors);
  if (rc != TB_SPEC_OK)
    return rc;
  const char *lc = json_string_value(json_object_get(*out, "launch_command"));
  if (lc != NULL) {
    char *red = tb_redact_command(lc);
    json_object_set_new(*out, "launch_command", json_string(red));
    free(red);
  }
  return rc;
}

enum tb_spec_rc
tb_spec_key(const char *text, size_t len, json_t **out, json_t **errors)
{
  return run(text, len, key_fields, TB_ARRAY_LEN(key_fields), false, out, errors);
}
