/*
 * tb_json: see tb_json.h.
 */
#include "base/tb_json.h"

#include <math.h>
#include <string.h>

const char *
tb_json_str(const json_t *o, const char *k)
{
  return json_string_value(json_object_get(o, k));
}

double
tb_json_num(const json_t *o, const char *k)
{
  const json_t *v = json_object_get(o, k);
  if (!json_is_number(v))
    return NAN;
  double d = json_number_value(v);
  return isfinite(d) ? d : NAN;
}

bool
tb_json_int(const json_t *o, const char *k, int64_t *out)
{
  const json_t *v = json_object_get(o, k);
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return true;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (isfinite(d) && d == floor(d) && fabs(d) < 9e15) {
      *out = (int64_t)d;
      return true;
    }
  }
  return false;
}

double
tb_json_pct(const json_t *cell, const char *k, const char *p)
{
  const json_t *v = json_object_get(cell, k);
  if (json_is_object(v))
    return tb_json_num(v, p);
  if (strcmp(p, "p50") == 0 && json_is_number(v))
    return tb_json_num(cell, k);
  return NAN;
}
