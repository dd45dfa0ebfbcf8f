/*
 * Fuzz target: tb_webhook's parsers of peer input.  The input is split at
 * the first two newlines into a signature header, a timestamp header and a
 * body; every verifier runs on them (GitHub, generic, Standard Webhooks),
 * and the body, when it is JSON, goes through the GitHub label extraction
 * for each event kind.  Nothing may crash, leak or read out of bounds, and
 * a random signature must never verify.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tb_webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *buf = malloc(size + 1);
  if (buf == NULL)
    return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  char *sig = buf, *ts = "", *body = "";
  char *nl = strchr(buf, '\n');
  if (nl != NULL) {
    *nl = '\0';
    ts = nl + 1;
    char *nl2 = strchr(ts, '\n');
    if (nl2 != NULL) {
      *nl2 = '\0';
      body = nl2 + 1;
    }
  }
  size_t blen = strlen(body);
  static const char key[] = "tbh_fuzz-key";
  if (tb_webhook_verify_github(key, sizeof key - 1, sig, body, blen) == TB_WEBHOOK_OK)
    abort();
  if (tb_webhook_verify_generic(key, sizeof key - 1, sig, ts, body, blen, 1700000000) ==
      TB_WEBHOOK_OK)
    abort();
  bool signed_id;
  if (tb_webhook_verify_generic_id(key, sizeof key - 1, sig, ts, ts, body, blen, 1700000000,
                                   &signed_id) == TB_WEBHOOK_OK)
    abort();
  char digest[65];
  (void)tb_webhook_signature_digest(sig, digest);
  if (tb_webhook_verify_standard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_1", ts, sig, body,
                                 blen, 1700000000) == TB_WEBHOOK_OK)
    abort();
  unsigned char k[TB_WEBHOOK_SECRET_MAX];
  size_t kl;
  (void)tb_webhook_secret_key(sig, k, &kl);
  json_error_t e;
  json_t *payload = json_loadb(body, blen, 0, &e);
  if (payload != NULL) {
    static const char *const events[] = { "push",         "workflow_run", "workflow_job",
                                          "pull_request", "check_suite",  "check_run",
                                          "release",      "create",       "other" };
    for (size_t i = 0; i < sizeof events / sizeof *events; i++) {
      json_t *labels = json_object();
      tb_webhook_github_labels(payload, events[i], ts, labels);
      json_decref(labels);
    }
    (void)tb_webhook_event_accepted(payload, ts);
    json_decref(payload);
  }
  free(buf);
  return 0;
}
