/*
 * tb_specwalk: see tb_specwalk.h.
 *
 * One check function a field type (check_fn, in checks[] by enum
 * tb_spec_type): each writes the normalized value into the output object
 * under the field's name and adds each problem at its path (the value's,
 * or an item's: "contexts[2]", "labels.team").  tb_specwalk_check walks the object's members (unknown ones are
 * errors), then the required rows not given; TB_SPEC_OBJECT rows walk their
 * sub-table the same way, their paths under the row's ("sweep.max_rps").
 */
#include "spec/tb_specwalk.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/tb_scope.h"

void
tb_specwalk_error(json_t *errors, const char *field, const char *fmt, ...)
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
tb_specwalk_url_ok(const char *url)
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

/* The check of one field type: the value into out under f->name, or
 * its errors at path. */
typedef void (*check_fn)(const struct tb_spec_field *f, const json_t *v, const char *path,
                         json_t *out, json_t *errors);

static void
check_uuid(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
           json_t *errors)
{
  const char *s = json_string_value(v);
  bool ok = s != NULL && strlen(s) == 36;
  for (int i = 0; ok && i < 36; i++) {
    char c = s[i];
    ok = (i == 8 || i == 13 || i == 18 || i == 23) ? c == '-' : isxdigit((unsigned char)c) != 0;
  }
  if (!ok) {
    tb_specwalk_error(errors, path, "must be a UUID string");
    return;
  }
  char low[37];
  for (int i = 0; i < 37; i++)
    low[i] = (char)tolower((unsigned char)s[i]);
  json_object_set_new(out, f->name, json_string(low));
}

static void
check_string(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
             json_t *errors)
{
  const char *s = json_string_value(v);
  if (s == NULL) {
    tb_specwalk_error(errors, path, "must be a string");
    return;
  }
  size_t n = json_string_length(v);
  if (strlen(s) != n) {
    tb_specwalk_error(errors, path, "must not contain NUL characters");
    return;
  }
  if (f->type == TB_SPEC_URL) {
    if (!tb_specwalk_url_ok(s)) {
      tb_specwalk_error(errors, path,
                        "must be an http:// or https:// URL with a host and no credentials "
                        "(at most %d bytes)",
                        TB_SPEC_MAX_URL);
      return;
    }
  } else if ((double)n < f->min || (double)n > f->max) {
    tb_specwalk_error(errors, path, "must be %.0f to %.0f bytes long", f->min, f->max);
    return;
  } else if (f->type == TB_SPEC_IDENT && !ident_ok(s)) {
    tb_specwalk_error(errors, path, "may hold only letters, digits, '.', '_' and '-'");
    return;
  } else if (f->check != NULL && f->check(s) != NULL) {
    tb_specwalk_error(errors, path, "%s", f->check(s));
    return;
  }
  json_object_set_new(out, f->name, json_stringn(s, n));
}

static void
check_int(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
          json_t *errors)
{
  int64_t i;
  if ((f->flags & TB_SPEC_AUTO) && json_is_string(v) && strcmp(json_string_value(v), "auto") == 0) {
    json_object_set_new(out, f->name, json_string("auto"));
    return;
  }
  if (!get_int(v, f->min, f->max, &i)) {
    tb_specwalk_error(errors, path, "must be an integer from %.0f to %.0f%s", f->min, f->max,
                      (f->flags & TB_SPEC_AUTO) ? ", or \"auto\"" : "");
    return;
  }
  json_object_set_new(out, f->name, json_integer(i));
}

static void
check_number(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
             json_t *errors)
{
  if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < f->min ||
      json_number_value(v) > f->max) {
    tb_specwalk_error(errors, path, "must be a number from %g to %g", f->min, f->max);
    return;
  }
  json_object_set_new(out, f->name, json_real(json_number_value(v)));
}

static void
check_ints(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
           json_t *errors)
{
  char sub[256];
  size_t min_items = (f->flags & TB_SPEC_EMPTY_OK) ? 0 : 1;
  if (!json_is_array(v) || json_array_size(v) < min_items || json_array_size(v) > f->max_items) {
    tb_specwalk_error(errors, path, "must be an array of %zu to %zu items", min_items,
                      f->max_items);
    return;
  }
  json_t *arr = json_array();
  size_t i;
  const json_t *e;
  bool bad = false;
  json_array_foreach (v, i, e) {
    snprintf(sub, sizeof sub, "%.160s[%zu]", path, i);
    int64_t t = 0;
    bool ok;
    if (f->type == TB_SPEC_TOKENS && json_is_string(e))
      ok = tb_parse_tokens(json_string_value(e), &t) && t >= f->min && t <= f->max;
    else
      ok = get_int(e, f->min, f->max, &t);
    if (!ok) {
      if (f->type == TB_SPEC_TOKENS)
        tb_specwalk_error(errors, sub,
                          "must be a token count from %.0f to %.0f (an integer or a "
                          "string like \"8k\")",
                          f->min, f->max);
      else
        tb_specwalk_error(errors, sub, "must be an integer from %.0f to %.0f", f->min, f->max);
      bad = true;
      continue;
    }
    for (size_t j = 0; j < json_array_size(arr); j++) {
      if (json_integer_value(json_array_get(arr, j)) == t) {
        tb_specwalk_error(errors, sub, "duplicate value %lld", (long long)t);
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
}

static void
check_numbers(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
              json_t *errors)
{
  char sub[256];
  if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > f->max_items) {
    tb_specwalk_error(errors, path, "must be an array of 1 to %zu numbers", f->max_items);
    return;
  }
  json_t *arr = json_array();
  size_t i, j;
  const json_t *e;
  bool bad = false;
  json_array_foreach (v, i, e) {
    snprintf(sub, sizeof sub, "%.160s[%zu]", path, i);
    double x = json_number_value(e);
    if (!json_is_number(e) || !isfinite(x) || x < f->min || x > f->max) {
      tb_specwalk_error(errors, sub, "must be a number from %g to %g", f->min, f->max);
      bad = true;
      continue;
    }
    for (j = 0; j < json_array_size(arr); j++)
      if (json_number_value(json_array_get(arr, j)) == x)
        break;
    if (j < json_array_size(arr)) {
      tb_specwalk_error(errors, sub, "duplicate value %g", x);
      bad = true;
      continue;
    }
    json_array_append_new(arr, json_real(x));
  }
  if (bad)
    json_decref(arr);
  else
    json_object_set_new(out, f->name, arr);
}

static void
check_labels(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
             json_t *errors)
{
  char sub[256];
  if (!json_is_object(v) || json_object_size(v) > f->max_items) {
    tb_specwalk_error(errors, path, "must be an object of at most %zu string labels", f->max_items);
    return;
  }
  json_t *o = json_object();
  const char *k;
  const json_t *e;
  json_object_foreach ((json_t *)v, k, e) {
    snprintf(sub, sizeof sub, "%.160s.%.64s", path, k);
    size_t kl = strlen(k);
    if (kl == 0 || kl > TB_SPEC_MAX_LABEL_KEY || !ident_ok(k)) {
      tb_specwalk_error(errors, sub, "label names are 1 to %d of [A-Za-z0-9._-]",
                        TB_SPEC_MAX_LABEL_KEY);
      continue;
    }
    const char *s = json_string_value(e);
    if (s == NULL || json_string_length(e) > TB_SPEC_MAX_LABEL_VALUE ||
        strlen(s) != json_string_length(e)) {
      tb_specwalk_error(errors, sub, "label values are strings of at most %d bytes",
                        TB_SPEC_MAX_LABEL_VALUE);
      continue;
    }
    json_object_set_new(o, k, json_string(s));
  }
  json_object_set_new(out, f->name, o);
}

static void
check_urls(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
           json_t *errors)
{
  char sub[256];
  if (!json_is_array(v) || json_array_size(v) > f->max_items) {
    tb_specwalk_error(errors, path, "must be an array of at most %zu URLs", f->max_items);
    return;
  }
  json_t *arr = json_array();
  size_t i;
  const json_t *e;
  json_array_foreach (v, i, e) {
    snprintf(sub, sizeof sub, "%.160s[%zu]", path, i);
    const char *s = json_string_value(e);
    if (s == NULL || strlen(s) != json_string_length(e) || !tb_specwalk_url_ok(s)) {
      tb_specwalk_error(errors, sub, "must be an http:// or https:// URL");
      continue;
    }
    json_array_append_new(arr, json_string(s));
  }
  json_object_set_new(out, f->name, arr);
}

static void
check_object(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
             json_t *errors)
{
  if (!json_is_object(v)) {
    tb_specwalk_error(errors, path, "must be an object");
    return;
  }
  json_t *o = json_object();
  tb_specwalk_check(v, f->sub, f->nsub, true, path, o, errors);
  json_object_set_new(out, f->name, o);
}

static void
check_scopes(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
             json_t *errors)
{
  char sub[256];
  if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > f->max_items) {
    tb_specwalk_error(errors, path, "must be an array of 1 to 3 of \"read\", \"write\", \"admin\"");
    return;
  }
  unsigned mask = 0;
  size_t i;
  const json_t *e;
  json_array_foreach (v, i, e) {
    snprintf(sub, sizeof sub, "%.160s[%zu]", path, i);
    unsigned m;
    const char *s = json_string_value(e);
    if (s == NULL || strchr(s, ',') != NULL || !tb_scope_parse(s, &m)) {
      tb_specwalk_error(errors, sub, "must be \"read\", \"write\" or \"admin\"");
      continue;
    }
    mask |= m;
  }
  json_object_set_new(out, f->name, json_integer(mask));
}

static void
check_duration(const struct tb_spec_field *f, const json_t *v, const char *path, json_t *out,
               json_t *errors)
{
  int64_t s = 0;
  bool ok;
  if (json_is_string(v))
    ok = tb_scope_parse_duration(json_string_value(v), &s);
  else
    ok = get_int(v, 1, (double)TB_SCOPE_MAX_EXPIRY_S, &s);
  if (!ok) {
    tb_specwalk_error(errors, path,
                      "must be seconds (an integer) or a duration like \"30d\", \"12h\"");
    return;
  }
  json_object_set_new(out, f->name, json_integer(s));
}

/* Checks one value against its field; adds the normalized value to out. */
static void
check_field(const struct tb_spec_field *f, const json_t *v, bool patch, const char *path,
            json_t *out, json_t *errors)
{
  static const check_fn checks[] = {
    [TB_SPEC_UUID] = check_uuid,       [TB_SPEC_STRING] = check_string,
    [TB_SPEC_IDENT] = check_string,    [TB_SPEC_URL] = check_string,
    [TB_SPEC_INT] = check_int,         [TB_SPEC_NUMBER] = check_number,
    [TB_SPEC_TOKENS] = check_ints,     [TB_SPEC_INTS] = check_ints,
    [TB_SPEC_NUMBERS] = check_numbers, [TB_SPEC_LABELS] = check_labels,
    [TB_SPEC_URLS] = check_urls,       [TB_SPEC_OBJECT] = check_object,
    [TB_SPEC_SCOPES] = check_scopes,   [TB_SPEC_DURATION] = check_duration,
  };
  if (json_is_null(v) && patch && (f->flags & TB_SPEC_NULLABLE)) {
    json_object_set_new(out, f->name, json_null());
    return;
  }
  if ((size_t)f->type < sizeof checks / sizeof checks[0] && checks[f->type] != NULL)
    checks[f->type](f, v, path, out, errors);
}

void
tb_specwalk_check(const json_t *obj, const struct tb_spec_field *fields, size_t nfields, bool patch,
                  const char *prefix, json_t *out, json_t *errors)
{
  char path[160];
  const char *k;
  const json_t *v;
  json_object_foreach ((json_t *)obj, k, v) {
    const struct tb_spec_field *f = NULL;
    for (size_t i = 0; i < nfields && f == NULL; i++)
      if (strcmp(fields[i].name, k) == 0)
        f = &fields[i];
    if (prefix != NULL)
      snprintf(path, sizeof path, "%s.%.100s", prefix, k);
    else
      snprintf(path, sizeof path, "%.100s", k);
    if (f == NULL) {
      tb_specwalk_error(errors, path, "unknown field");
      continue;
    }
    check_field(f, v, patch, path, out, errors);
  }
  if (!patch) {
    for (size_t i = 0; i < nfields; i++) {
      if ((fields[i].flags & TB_SPEC_REQUIRED) && json_object_get(obj, fields[i].name) == NULL) {
        if (prefix != NULL)
          snprintf(path, sizeof path, "%s.%s", prefix, fields[i].name);
        else
          snprintf(path, sizeof path, "%s", fields[i].name);
        tb_specwalk_error(errors, path, "is required");
      }
    }
  }
}

enum tb_spec_rc
tb_specwalk_run(const char *text, size_t len, const struct tb_spec_field *fields, size_t nfields,
                bool patch, json_t **out, json_t **errors)
{
  *out = NULL;
  *errors = json_array();
  json_error_t je;
  json_t *in = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (in == NULL || !json_is_object(in)) {
    if (in == NULL)
      tb_specwalk_error(*errors, "", "not JSON: line %d, column %d: %s", je.line, je.column,
                        je.text);
    else
      tb_specwalk_error(*errors, "", "the body must be a JSON object");
    json_decref(in);
    return TB_SPEC_BAD_JSON;
  }
  json_t *o = json_object();
  tb_specwalk_check(in, fields, nfields, patch, NULL, o, *errors);
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
