/*
 * tb_speccli: see tb_speccli.h.
 *
 * A flag's value is read by its row's type, as the walker reads a JSON
 * value; only the syntax is checked here (the ranges are the walker's, when
 * tb_spec_parse reads what the flags built).  The table is dumped row by
 * row, objects with their sub-tables.
 */
#include "spec/tb_speccli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One list item: a token count ("8k") or an integer; NULL when neither. */
static json_t *
arg_item(const struct tb_spec_field *f, const char *t)
{
  int64_t v;
  if (f->type == TB_SPEC_TOKENS ? tb_parse_tokens(t, &v)
                                : tb_parse_i64(t, INT64_MIN, INT64_MAX, &v))
    return json_integer(v);
  return NULL;
}

bool
tb_speccli_arg(const struct tb_spec_field *f, const char *text, json_t *obj)
{
  json_t *v = NULL;
  switch (f->type) {
  case TB_SPEC_TOKENS:
  case TB_SPEC_INTS: {
    v = json_array();
    if ((f->flags & TB_SPEC_EMPTY_OK) && strcmp(text, "none") == 0)
      break;
    char *copy = tb_xstrdup(text);
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
      json_t *e = arg_item(f, t);
      if (e == NULL) {
        json_decref(v);
        v = NULL;
        break;
      }
      json_array_append_new(v, e);
    }
    free(copy);
    if (v != NULL && json_array_size(v) == 0) {
      json_decref(v);
      v = NULL;
    }
    break;
  }
  case TB_SPEC_INT: {
    int64_t n;
    if ((f->flags & TB_SPEC_AUTO) && strcmp(text, "auto") == 0)
      v = json_string("auto");
    else if (tb_parse_i64(text, INT64_MIN, INT64_MAX, &n) || tb_parse_tokens(text, &n))
      v = json_integer(n);
    break;
  }
  case TB_SPEC_NUMBER: {
    char *end = NULL;
    double d = strtod(text, &end);
    if (end != text && *end == '\0' && isfinite(d))
      v = json_real(d);
    break;
  }
  case TB_SPEC_NUMBERS: {
    /* each item as a TB_SPEC_NUMBER of the same field */
    struct tb_spec_field item = *f;
    item.type = TB_SPEC_NUMBER;
    json_t *one = json_object();
    v = json_array();
    char *copy = tb_xstrdup(text);
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
      if (!tb_speccli_arg(&item, t, one)) {
        json_decref(v);
        v = NULL;
        break;
      }
      json_array_append(v, json_object_get(one, f->name));
    }
    free(copy);
    json_decref(one);
    if (v != NULL && json_array_size(v) == 0) {
      json_decref(v);
      v = NULL;
    }
    break;
  }
  case TB_SPEC_OBJECT: {
    /* "k=v,k=v": each value as its row says */
    v = json_object();
    char *copy = tb_xstrdup(text);
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(t, '=');
      const struct tb_spec_field *sub = NULL;
      if (eq != NULL) {
        *eq = '\0';
        for (size_t i = 0; i < f->nsub && sub == NULL; i++)
          if (strcmp(f->sub[i].name, t) == 0)
            sub = &f->sub[i];
      }
      if (sub == NULL || !tb_speccli_arg(sub, eq + 1, v)) {
        json_decref(v);
        v = NULL;
        break;
      }
    }
    free(copy);
    break;
  }
  default: v = json_string(text); break;
  }
  if (v == NULL)
    return false;
  json_object_set_new(obj, f->name, v);
  return true;
}

static const char *const type_names[] = {
  [TB_SPEC_UUID] = "uuid",         [TB_SPEC_STRING] = "string",   [TB_SPEC_IDENT] = "ident",
  [TB_SPEC_URL] = "url",           [TB_SPEC_INT] = "integer",     [TB_SPEC_NUMBER] = "number",
  [TB_SPEC_TOKENS] = "tokens",     [TB_SPEC_INTS] = "integers",   [TB_SPEC_LABELS] = "labels",
  [TB_SPEC_URLS] = "urls",         [TB_SPEC_OBJECT] = "object",   [TB_SPEC_SCOPES] = "scopes",
  [TB_SPEC_DURATION] = "duration", [TB_SPEC_NUMBERS] = "numbers",
};

static json_t *
table_json(const struct tb_spec_field *fields, size_t n)
{
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) {
    const struct tb_spec_field *f = &fields[i];
    json_t *o =
      json_pack("{s:s, s:s, s:b, s:b, s:b}", "name", f->name, "type", type_names[f->type],
                "required", (f->flags & TB_SPEC_REQUIRED) != 0, "override",
                (f->flags & TB_SPEC_OVERRIDE) != 0, "engine", f->member != TB_SPEC_NO_MEMBER);
    bool ranged = f->type == TB_SPEC_INT || f->type == TB_SPEC_NUMBER ||
                  f->type == TB_SPEC_TOKENS || f->type == TB_SPEC_INTS ||
                  f->type == TB_SPEC_NUMBERS || f->type == TB_SPEC_STRING ||
                  f->type == TB_SPEC_IDENT;
    if (ranged) {
      json_object_set_new(o, "min", json_real(f->min));
      json_object_set_new(o, "max", json_real(f->max));
    }
    if (f->max_items > 0) {
      json_object_set_new(o, "max_items", json_integer((json_int_t)f->max_items));
      if (f->type == TB_SPEC_TOKENS || f->type == TB_SPEC_INTS || f->type == TB_SPEC_NUMBERS)
        json_object_set_new(o, "min_items", json_integer((f->flags & TB_SPEC_EMPTY_OK) ? 0 : 1));
    }
    json_object_set_new(o, "default",
                        f->def ? json_loads(f->def, JSON_DECODE_ANY, NULL) : json_null());
    json_object_set_new(o, "cli", f->cli ? json_sprintf("--%s", f->cli) : json_null());
    json_object_set_new(o, "help", json_string(f->help ? f->help : ""));
    if (f->flags & TB_SPEC_AUTO)
      json_object_set_new(o, "auto", json_true());
    if (f->type == TB_SPEC_OBJECT)
      json_object_set_new(o, "fields", table_json(f->sub, f->nsub));
    json_array_append_new(a, o);
  }
  return a;
}

json_t *
tb_speccli_table_json(void)
{
  size_t n;
  const struct tb_spec_field *fields = tb_spec_fields(&n);
  return table_json(fields, n);
}
