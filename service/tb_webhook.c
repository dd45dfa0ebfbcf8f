/*
 * tb_webhook: signatures for webhooks in (GitHub, generic) and out (Standard
 * Webhooks), the retry schedule, and the GitHub payload fields a job keeps
 * as labels.  See tb_webhook.h for the formats.
 *
 * Every header is parsed strictly before anything is compared: a fixed
 * prefix, a fixed number of hex or base64 characters, nothing after.  The
 * comparison itself is on the decoded MAC bytes with tb_ct_equal, so its
 * time does not depend on where the first differing byte is.
 */
#include "tb_webhook.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_crypto.h"

const char *
tb_webhook_verdict_str(enum tb_webhook_verdict v)
{
  switch (v) {
  case TB_WEBHOOK_OK: return "ok";
  case TB_WEBHOOK_MISSING: return "signature header missing";
  case TB_WEBHOOK_MALFORMED: return "signature header malformed";
  case TB_WEBHOOK_BAD_SIGNATURE: return "signature does not match";
  case TB_WEBHOOK_STALE: return "timestamp outside the replay window";
  }
  return "unknown";
}

/* "sha256=<64 hex>" -> 32 bytes; false on anything else. */
static bool
parse_sha256_header(const char *h, unsigned char mac[TB_SHA256_LEN])
{
  static const char prefix[] = "sha256=";
  if (strncmp(h, prefix, sizeof prefix - 1) != 0)
    return false;
  h += sizeof prefix - 1;
  if (strlen(h) != 2 * TB_SHA256_LEN)
    return false;
  return tb_hex_decode(h, mac, TB_SHA256_LEN);
}

enum tb_webhook_verdict
tb_webhook_verify_github(const void *key, size_t key_len, const char *header, const void *body,
                         size_t body_len)
{
  unsigned char want[TB_SHA256_LEN], got[TB_SHA256_LEN];
  if (header == NULL || header[0] == '\0')
    return TB_WEBHOOK_MISSING;
  if (!parse_sha256_header(header, got))
    return TB_WEBHOOK_MALFORMED;
  tb_crypto_hmac_sha256(key, key_len, body, body_len, want);
  bool ok = tb_ct_equal(want, got, sizeof want);
  OPENSSL_cleanse(want, sizeof want);
  return ok ? TB_WEBHOOK_OK : TB_WEBHOOK_BAD_SIGNATURE;
}

/* HMAC-SHA256 over "<prefix>.<body>" without copying the body twice. */
static void
hmac_prefixed(const void *key, size_t key_len, const char *prefix, const void *body,
              size_t body_len, unsigned char out[TB_SHA256_LEN])
{
  size_t plen = strlen(prefix);
  char *msg = tb_xmalloc(plen + 1 + body_len + 1);
  memcpy(msg, prefix, plen);
  msg[plen] = '.';
  if (body_len > 0)
    memcpy(msg + plen + 1, body, body_len);
  tb_crypto_hmac_sha256(key, key_len, msg, plen + 1 + body_len, out);
  free(msg);
}

/* A unix timestamp in seconds: 1 to 12 digits, nothing else. */
static bool
parse_ts(const char *s, int64_t *out)
{
  size_t n = strlen(s);
  if (n == 0 || n > 12)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return tb_parse_i64(s, 0, INT64_C(999999999999), out);
}

void
tb_webhook_sign_generic(const void *key, size_t key_len, int64_t ts, const void *body,
                        size_t body_len, char out[72])
{
  char tsbuf[24];
  unsigned char mac[TB_SHA256_LEN];
  snprintf(tsbuf, sizeof tsbuf, "%lld", (long long)ts);
  hmac_prefixed(key, key_len, tsbuf, body, body_len, mac);
  memcpy(out, "sha256=", 7);
  tb_hex_encode(mac, sizeof mac, out + 7);
}

enum tb_webhook_verdict
tb_webhook_verify_generic(const void *key, size_t key_len, const char *sig_header,
                          const char *ts_header, const void *body, size_t body_len, int64_t now_s)
{
  unsigned char want[TB_SHA256_LEN], got[TB_SHA256_LEN];
  int64_t ts;
  if (sig_header == NULL || sig_header[0] == '\0' || ts_header == NULL || ts_header[0] == '\0')
    return TB_WEBHOOK_MISSING;
  if (!parse_sha256_header(sig_header, got) || !parse_ts(ts_header, &ts))
    return TB_WEBHOOK_MALFORMED;
  /* The signed text uses the header exactly as sent. */
  hmac_prefixed(key, key_len, ts_header, body, body_len, want);
  bool ok = tb_ct_equal(want, got, sizeof want);
  OPENSSL_cleanse(want, sizeof want);
  if (!ok)
    return TB_WEBHOOK_BAD_SIGNATURE;
  int64_t d = now_s - ts;
  if (d > TB_WEBHOOK_WINDOW_S || d < -TB_WEBHOOK_WINDOW_S)
    return TB_WEBHOOK_STALE;
  return TB_WEBHOOK_OK;
}

enum tb_webhook_verdict
tb_webhook_verify_generic_id(const void *key, size_t key_len, const char *sig_header,
                             const char *ts_header, const char *delivery, const void *body,
                             size_t body_len, int64_t now_s, bool *delivery_signed)
{
  *delivery_signed = false;
  if (delivery != NULL && sig_header != NULL && ts_header != NULL) {
    unsigned char want[TB_SHA256_LEN], got[TB_SHA256_LEN];
    int64_t ts;
    if (parse_sha256_header(sig_header, got) && parse_ts(ts_header, &ts)) {
      /* the signed text uses the headers exactly as sent */
      char *prefix = tb_xasprintf("%s.%s", ts_header, delivery);
      hmac_prefixed(key, key_len, prefix, body, body_len, want);
      free(prefix);
      bool ok = tb_ct_equal(want, got, sizeof want);
      OPENSSL_cleanse(want, sizeof want);
      if (ok) {
        *delivery_signed = true;
        int64_t d = now_s - ts;
        return d > TB_WEBHOOK_WINDOW_S || d < -TB_WEBHOOK_WINDOW_S ? TB_WEBHOOK_STALE
                                                                   : TB_WEBHOOK_OK;
      }
    }
  }
  return tb_webhook_verify_generic(key, key_len, sig_header, ts_header, body, body_len, now_s);
}

void
tb_webhook_sign_generic_id(const void *key, size_t key_len, int64_t ts, const char *delivery,
                           const void *body, size_t body_len, char out[72])
{
  unsigned char mac[TB_SHA256_LEN];
  char *prefix = tb_xasprintf("%lld.%s", (long long)ts, delivery);
  hmac_prefixed(key, key_len, prefix, body, body_len, mac);
  free(prefix);
  memcpy(out, "sha256=", 7);
  tb_hex_encode(mac, sizeof mac, out + 7);
}

bool
tb_webhook_signature_digest(const char *sig_header, char out[65])
{
  unsigned char mac[TB_SHA256_LEN];
  if (sig_header == NULL || !parse_sha256_header(sig_header, mac))
    return false;
  tb_crypto_sha256_hex(mac, sizeof mac, out);
  return true;
}

bool
tb_webhook_secret_key(const char *secret, unsigned char key[TB_WEBHOOK_SECRET_MAX], size_t *key_len)
{
  static const char prefix[] = "whsec_";
  size_t n = secret != NULL ? strlen(secret) : 0;
  if (n == 0)
    return false;
  if (strncmp(secret, prefix, sizeof prefix - 1) != 0) {
    if (n > TB_WEBHOOK_SECRET_MAX)
      return false;
    memcpy(key, secret, n);
    *key_len = n;
    return true;
  }
  /* base64 of at most TB_WEBHOOK_SECRET_MAX bytes */
  if (n - (sizeof prefix - 1) > 4 * ((TB_WEBHOOK_SECRET_MAX + 2) / 3))
    return false;
  size_t dlen = 0;
  unsigned char *d = tb_base64_decode(secret + sizeof prefix - 1, &dlen);
  if (d == NULL)
    return false;
  bool ok = dlen > 0 && dlen <= TB_WEBHOOK_SECRET_MAX;
  if (ok) {
    memcpy(key, d, dlen);
    *key_len = dlen;
  }
  OPENSSL_cleanse(d, dlen);
  free(d);
  return ok;
}

/* HMAC over "<id>.<ts>.<body>" with the secret's key. */
static bool
standard_mac(const char *secret, const char *msg_id, const char *ts, const void *body,
             size_t body_len, unsigned char mac[TB_SHA256_LEN])
{
  unsigned char key[TB_WEBHOOK_SECRET_MAX];
  size_t key_len = 0;
  if (!tb_webhook_secret_key(secret, key, &key_len))
    return false;
  char *prefix = tb_xasprintf("%s.%s", msg_id, ts);
  hmac_prefixed(key, key_len, prefix, body, body_len, mac);
  free(prefix);
  OPENSSL_cleanse(key, sizeof key);
  return true;
}

bool
tb_webhook_sign_standard(const char *secret, const char *msg_id, int64_t ts, const void *body,
                         size_t body_len, char out[TB_WEBHOOK_SIG_MAX])
{
  char tsbuf[24];
  unsigned char mac[TB_SHA256_LEN];
  snprintf(tsbuf, sizeof tsbuf, "%lld", (long long)ts);
  if (!standard_mac(secret, msg_id, tsbuf, body, body_len, mac))
    return false;
  char *b64 = tb_base64_encode(mac, sizeof mac);
  snprintf(out, TB_WEBHOOK_SIG_MAX, "v1,%s", b64);
  free(b64);
  return true;
}

enum tb_webhook_verdict
tb_webhook_verify_standard(const char *secret, const char *msg_id, const char *ts_header,
                           const char *sig_header, const void *body, size_t body_len, int64_t now_s)
{
  unsigned char want[TB_SHA256_LEN];
  int64_t ts;
  if (msg_id == NULL || ts_header == NULL || sig_header == NULL || sig_header[0] == '\0')
    return TB_WEBHOOK_MISSING;
  if (!parse_ts(ts_header, &ts))
    return TB_WEBHOOK_MALFORMED;
  if (!standard_mac(secret, msg_id, ts_header, body, body_len, want))
    return TB_WEBHOOK_MALFORMED;
  enum tb_webhook_verdict v = TB_WEBHOOK_MALFORMED;
  /* space-separated entries "<version>,<base64>"; only v1 is ours */
  const char *p = sig_header;
  while (*p != '\0') {
    while (*p == ' ')
      p++;
    const char *end = strchr(p, ' ');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len > 3 && len < TB_WEBHOOK_SIG_MAX && strncmp(p, "v1,", 3) == 0) {
      char b64[TB_WEBHOOK_SIG_MAX];
      memcpy(b64, p + 3, len - 3);
      b64[len - 3] = '\0';
      size_t dlen = 0;
      unsigned char *d = tb_base64_decode(b64, &dlen);
      if (d != NULL) {
        if (v == TB_WEBHOOK_MALFORMED)
          v = TB_WEBHOOK_BAD_SIGNATURE;
        if (dlen == sizeof want && tb_ct_equal(d, want, sizeof want))
          v = TB_WEBHOOK_OK;
        free(d);
      }
    }
    p += len;
  }
  OPENSSL_cleanse(want, sizeof want);
  if (v != TB_WEBHOOK_OK)
    return v;
  int64_t d = now_s - ts;
  if (d > TB_WEBHOOK_WINDOW_S || d < -TB_WEBHOOK_WINDOW_S)
    return TB_WEBHOOK_STALE;
  return TB_WEBHOOK_OK;
}

char *
tb_webhook_secret_new_inbound(void)
{
  return tb_crypto_token("tbh_", 40);
}

char *
tb_webhook_secret_new_outbound(void)
{
  unsigned char raw[32];
  if (!tb_crypto_random(raw, sizeof raw))
    return NULL;
  char *b64 = tb_base64_encode(raw, sizeof raw);
  OPENSSL_cleanse(raw, sizeof raw);
  char *s = tb_xasprintf("whsec_%s", b64);
  OPENSSL_cleanse(b64, strlen(b64));
  free(b64);
  return s;
}

int64_t
tb_webhook_backoff_ms(unsigned attempts_done, int64_t base_ms)
{
  if (base_ms <= 0 || attempts_done >= TB_WEBHOOK_MAX_ATTEMPTS)
    return -1;
  int64_t cap = base_ms > INT64_MAX / 480 ? INT64_MAX : base_ms * 480;
  int64_t d = base_ms;
  for (unsigned i = 1; i < attempts_done && d < cap; i++)
    d = d > cap / 2 ? cap : d * 2;
  return d < cap ? d : cap;
}

bool
tb_webhook_event_accepted(const json_t *events, const char *event)
{
  size_t i;
  const json_t *e;
  if (!json_is_array(events) || event == NULL)
    return false;
  json_array_foreach (events, i, e) {
    const char *s = json_string_value(e);
    if (s != NULL && (strcmp(s, "*") == 0 || strcmp(s, event) == 0))
      return true;
  }
  return false;
}

/* Follows a path of object members; NULL when any step is missing. */
static const json_t *
dig(const json_t *o, const char *const *path)
{
  for (; *path != NULL && o != NULL; path++)
    o = json_is_object(o) ? json_object_get(o, *path) : NULL;
  return o;
}

static void
put_label(json_t *labels, const char *name, const char *value)
{
  if (value == NULL || value[0] == '\0' || strlen(value) > TB_WEBHOOK_LABEL_MAX)
    return;
  json_t *s = json_string(value); /* NULL when not UTF-8: left out */
  if (s != NULL)
    json_object_set_new(labels, name, s);
}

static void
put_path(json_t *labels, const char *name, const json_t *payload, const char *const *path)
{
  put_label(labels, name, json_string_value(dig(payload, path)));
}

/* Where each event keeps its ref and sha; branch-only refs get refs/heads/. */
struct gh_event_fields {
  const char *event;
  const char *ref[4];
  const char *sha[4];
  bool ref_is_branch;
};

static const struct gh_event_fields gh_events[] = {
  { .event = "push", .ref = { "ref" }, .sha = { "after" } },
  { .event = "workflow_run",
    .ref = { "workflow_run", "head_branch" },
    .sha = { "workflow_run", "head_sha" },
    .ref_is_branch = true },
  { .event = "workflow_job",
    .ref = { "workflow_job", "head_branch" },
    .sha = { "workflow_job", "head_sha" },
    .ref_is_branch = true },
  { .event = "pull_request",
    .ref = { "pull_request", "head", "ref" },
    .sha = { "pull_request", "head", "sha" },
    .ref_is_branch = true },
  { .event = "check_suite",
    .ref = { "check_suite", "head_branch" },
    .sha = { "check_suite", "head_sha" },
    .ref_is_branch = true },
  { .event = "check_run",
    .ref = { "check_run", "check_suite", "head_branch" },
    .sha = { "check_run", "head_sha" },
    .ref_is_branch = true },
  { .event = "release", .ref = { "release", "tag_name" } },
  { .event = "create", .ref = { "ref" } },
};

void
tb_webhook_github_labels(const json_t *payload, const char *event, const char *delivery,
                         json_t *labels)
{
  static const char *const repo_path[] = { "repository", "full_name", NULL };
  if (!json_is_object(labels))
    return;
  if (event != NULL)
    put_label(labels, "event", event);
  if (delivery != NULL)
    put_label(labels, "delivery", delivery);
  if (!json_is_object(payload))
    return;
  put_path(labels, "repository", payload, repo_path);
  for (size_t i = 0; event != NULL && i < TB_ARRAY_LEN(gh_events); i++) {
    const struct gh_event_fields *f = &gh_events[i];
    if (strcmp(f->event, event) != 0)
      continue;
    const char *ref = json_string_value(dig(payload, f->ref));
    if (ref != NULL && f->ref_is_branch && strncmp(ref, "refs/", 5) != 0) {
      char *full = tb_xasprintf("refs/heads/%s", ref);
      put_label(labels, "ref", full);
      free(full);
    } else if (strcmp(event, "release") == 0 && ref != NULL) {
      char *full = tb_xasprintf("refs/tags/%s", ref);
      put_label(labels, "ref", full);
      free(full);
    } else {
      put_label(labels, "ref", ref);
    }
    if (f->sha[0] != NULL)
      put_path(labels, "sha", payload, f->sha);
    return;
  }
}
