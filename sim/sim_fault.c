/*
 * sim_fault: parser for fault specs (syntax in sim_fault.h).
 */
#include "sim_fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
sim_fault_init(struct sim_fault *f)
{
  memset(f, 0, sizeof(*f));
  f->cut_after = -1;
  f->stall_after = -1;
  f->malformed_after = -1;
  f->error_after = -1;
}

static bool
num(const char *s, double min, double max, double *out)
{
  char *end;
  if (*s == '\0')
    return false;
  double v = strtod(s, &end);
  if (*end != '\0' || !(v >= min && v <= max))
    return false;
  *out = v;
  return true;
}

bool
sim_fault_parse(struct sim_fault *f, const char *spec, char *err, size_t errlen)
{
  if (strlen(spec) >= SIM_FAULT_SPEC_CAP) {
    snprintf(err, errlen, "fault spec too long");
    return false;
  }
  char buf[SIM_FAULT_SPEC_CAP];
  snprintf(buf, sizeof(buf), "%s", spec);
  char *save = NULL;
  for (char *item = strtok_r(buf, ",; ", &save); item; item = strtok_r(NULL, ",; ", &save)) {
    char *val = strchr(item, '=');
    if (val)
      *val++ = '\0';
    double a, b;
    bool ok = false;
    if (strcmp(item, "status") == 0) {
      ok = val && num(val, 400, 599, &a) && a == (int)a;
      if (ok)
        f->status = (int)a;
    } else if (strcmp(item, "cut") == 0) {
      ok = val && num(val, 0, 1e9, &a);
      if (ok)
        f->cut_after = (int64_t)a;
    } else if (strcmp(item, "stall") == 0) {
      char *colon = val ? strchr(val, ':') : NULL;
      if (colon) {
        *colon = '\0';
        ok = num(val, 0, 1e9, &a) && num(colon + 1, 0, 3.6e6, &b);
        if (ok) {
          f->stall_after = (int64_t)a;
          f->stall_ms = b;
        }
      }
    } else if (strcmp(item, "malformed") == 0) {
      ok = val && num(val, 0, 1e9, &a);
      if (ok)
        f->malformed_after = (int64_t)a;
    } else if (strcmp(item, "error") == 0) {
      ok = val && num(val, 0, 1e9, &a);
      if (ok)
        f->error_after = (int64_t)a;
    } else if (strcmp(item, "first_byte") == 0) {
      ok = val && num(val, 0, 3.6e6, &a);
      if (ok)
        f->first_byte_ms = a;
    } else if (strcmp(item, "no_usage") == 0) {
      ok = val == NULL || strcmp(val, "1") == 0 || strcmp(val, "true") == 0;
      if (ok)
        f->no_usage = true;
    } else if (strcmp(item, "refuse") == 0) {
      ok = val && num(val, 1, 3.6e6, &a);
      if (ok)
        f->refuse_ms = a;
    } else if (strcmp(item, "none") == 0) {
      ok = val == NULL;
      if (ok)
        sim_fault_init(f);
    }
    if (!ok) {
      snprintf(err, errlen, "bad fault item '%s'", item);
      return false;
    }
  }
  return true;
}
