/*
 * api_spec: see api_spec.h.
 *
 * Each body is a static table of fields (name, type, range) checked by the
 * one walker of lib/spec/tb_specwalk (tb_specwalk_run), the walker a job spec is
 * checked by, so the rules of a field sit on one line.
 */
#include "api_spec.h"

#include <stdlib.h>

#include "base/tb_redact.h"
#include "spec/tb_specwalk.h"

#define S(n, t, fl, lo, hi)                                                              \
  {                                                                                      \
    .name = n, .type = t, .flags = fl, .min = lo, .max = hi, .member = TB_SPEC_NO_MEMBER \
  }

static const struct tb_spec_field hardware_fields[] = {
  S("gpu", TB_SPEC_STRING, 0, 0, 200),
  S("type", TB_SPEC_STRING, 0, 0, 200),
  S("count", TB_SPEC_INT, 0, 1, 4096),
  S("vram_gb", TB_SPEC_NUMBER, 0, 0, 1e6),
};

static const struct tb_spec_field engine_fields[] = {
  S("name", TB_SPEC_STRING, 0, 0, 500),         S("version", TB_SPEC_STRING, 0, 0, 500),
  S("quantization", TB_SPEC_STRING, 0, 0, 500), S("backend", TB_SPEC_STRING, 0, 0, 500),
  S("repository", TB_SPEC_STRING, 0, 0, 500),   S("build", TB_SPEC_STRING, 0, 0, 500),
  S("commit", TB_SPEC_STRING, 0, 0, 500),
};

/* What the price pays for (issue 26): tokens/s per GPU divides by count. */
static const struct tb_spec_field gpu_fields[] = {
  S("name", TB_SPEC_STRING, 0, 1, 200),
  S("count", TB_SPEC_INT, 0, 1, 4096),
};

/* ISO 4217: three capital letters (USD, EUR). */
static const char *
currency_check(const char *s)
{
  for (int i = 0; i < 3; i++)
    if (s[i] < 'A' || s[i] > 'Z')
      return "must be an ISO 4217 code: three capital letters (USD, EUR)";
  return NULL;
}

static const struct tb_spec_field endpoint_fields[] = {
  S("name", TB_SPEC_STRING, TB_SPEC_REQUIRED, 1, 200),
  S("base_url", TB_SPEC_URL, TB_SPEC_REQUIRED, 0, 0),
  S("api_key", TB_SPEC_STRING, TB_SPEC_NULLABLE, 1, TB_API_SPEC_MAX_API_KEY),
  S("engine_hint", TB_SPEC_IDENT, TB_SPEC_NULLABLE, 1, 50),
  { .name = "hardware",
    .type = TB_SPEC_OBJECT,
    .sub = hardware_fields,
    .nsub = TB_ARRAY_LEN(hardware_fields),
    .member = TB_SPEC_NO_MEMBER },
  { .name = "engine",
    .type = TB_SPEC_OBJECT,
    .sub = engine_fields,
    .nsub = TB_ARRAY_LEN(engine_fields),
    .member = TB_SPEC_NO_MEMBER },
  S("launch_command", TB_SPEC_STRING, TB_SPEC_NULLABLE, 0, TB_API_SPEC_MAX_LAUNCH),
  S("exclusive_group", TB_SPEC_IDENT, TB_SPEC_NULLABLE, 1, 100),
  { .name = "gpu",
    .type = TB_SPEC_OBJECT,
    .flags = TB_SPEC_NULLABLE,
    .sub = gpu_fields,
    .nsub = TB_ARRAY_LEN(gpu_fields),
    .member = TB_SPEC_NO_MEMBER },
  S("price_per_hour", TB_SPEC_NUMBER, TB_SPEC_NULLABLE, 0, 1e8),
  { .name = "currency",
    .type = TB_SPEC_STRING,
    .flags = TB_SPEC_NULLABLE,
    .min = 3,
    .max = 3,
    .check = currency_check,
    .member = TB_SPEC_NO_MEMBER },
  S("telemetry_url", TB_SPEC_URL, TB_SPEC_NULLABLE, 0, 0),
};

static const struct tb_spec_field key_fields[] = {
  S("name", TB_SPEC_STRING, 0, 0, 200),
  { .name = "scopes", .type = TB_SPEC_SCOPES, .max_items = 3, .member = TB_SPEC_NO_MEMBER },
  S("expires_in", TB_SPEC_DURATION, TB_SPEC_NULLABLE, 0, 0),
};

enum tb_spec_rc
tb_api_spec_endpoint(const char *text, size_t len, bool patch, json_t **out, json_t **errors)
{
  enum tb_spec_rc rc =
    tb_specwalk_run(text, len, endpoint_fields, TB_ARRAY_LEN(endpoint_fields), patch, out, errors);
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
tb_api_spec_key(const char *text, size_t len, json_t **out, json_t **errors)
{
  return tb_specwalk_run(text, len, key_fields, TB_ARRAY_LEN(key_fields), false, out, errors);
}
