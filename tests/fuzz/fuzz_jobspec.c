/* libFuzzer target: the api's request-body validators (service/api_spec.c):
 * the job spec, the endpoint body (create and patch), the key body, and the
 * launch-command redaction.  Checks that each answers exactly one of
 * "normalized object" / "error list", that every error names a field, that
 * a normalized spec validates again to itself, and that redaction never
 * leaves the value of an --api-key flag in place. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_spec.h"
#include "base/tb_redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_errors(const json_t *errors)
{
  if (!json_is_array(errors) || json_array_size(errors) == 0)
    abort();
  size_t i;
  const json_t *e;
  json_array_foreach (errors, i, e) {
    if (!json_is_string(json_object_get(e, "field")) ||
        !json_is_string(json_object_get(e, "detail")))
      abort();
  }
}

static void
one(enum tb_spec_rc rc, json_t *out, json_t *errors)
{
  if (rc == TB_SPEC_OK) {
    if (!json_is_object(out) || errors != NULL)
      abort();
  } else {
    if (out != NULL)
      abort();
    check_errors(errors);
  }
  json_decref(out);
  json_decref(errors);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *text = (const char *)data;
  json_t *out = NULL, *errors = NULL;
  enum tb_spec_rc rc = tb_spec_job(text, size, &out, &errors);
  if (rc == TB_SPEC_OK) {
    /* normalized specs are fixed points */
    char *again = json_dumps(out, JSON_COMPACT);
    json_t *out2 = NULL, *err2 = NULL;
    if (again == NULL || tb_spec_job(again, strlen(again), &out2, &err2) != TB_SPEC_OK ||
        !json_equal(out, out2))
      abort();
    free(again);
    json_decref(out2);
    json_decref(err2);
  }
  one(rc, out, errors);
  one(tb_api_spec_endpoint(text, size, false, &out, &errors), out, errors);
  one(tb_api_spec_endpoint(text, size, true, &out, &errors), out, errors);
  one(tb_api_spec_key(text, size, &out, &errors), out, errors);

  /* redaction: a NUL-terminated copy, and a known secret after the flag */
  char *cmd = malloc(size + 1);
  if (cmd == NULL)
    return 0;
  memcpy(cmd, data, size);
  cmd[size] = '\0';
  free(tb_redact_command(cmd));
  char *withkey = malloc(size + 64);
  if (withkey != NULL) {
    memcpy(withkey, "serve --api-key SeCrEtXyZ ", 26);
    memcpy(withkey + 26, cmd, strlen(cmd) + 1);
    char *red = tb_redact_command(withkey);
    if (strncmp(red, "serve --api-key <redacted> ", 27) != 0)
      abort();
    free(red);
    free(withkey);
  }
  free(cmd);
  return 0;
}
