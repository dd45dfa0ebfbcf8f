/*
 * api_auth: see api_auth.h.
 *
 * The cache is an open-addressing table of TB_KEYCACHE_SLOTS entries keyed
 * by the key hash, guarded by one mutex (a lookup is a few hundred
 * nanoseconds; the database round trip it saves is ~100 us).  When the table
 * is full, the oldest entry of the probe window is replaced.  The stored hash
 * is compared with the presented one in constant time.  The lookup's
 * statement: service/q_keys.c.  A request within its key's rate is then
 * charged to its project's (api_quota.h).
 */
#include "api_auth.h"

#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api_quota.h"
#include "q_keys.h"
#include "base/tb_log.h"

#define TB_KEYCACHE_SLOTS 4096 /* power of two */
#define TB_KEYCACHE_PROBE 8
#define TB_AUTH_HEADER_MAX 256

struct entry {
  bool used;
  char hash[65];
  char key_id[TB_API_ID_LEN + 1];
  char project_id[TB_API_ID_LEN + 1];
  unsigned scopes;    /* effective */
  int64_t expires_us; /* 0: never */
  bool revoked;
  int64_t fetched_ns;
  double tokens; /* rate limit bucket */
  int64_t bucket_ns;
};

struct tb_api_keycache {
  pthread_mutex_t lock;
  int64_t ttl_ns;
  struct entry slots[TB_KEYCACHE_SLOTS];
};

struct tb_api_keycache *
tb_api_keycache_new(int64_t ttl_ms)
{
  struct tb_api_keycache *kc = tb_xcalloc(1, sizeof *kc);
  pthread_mutex_init(&kc->lock, NULL);
  kc->ttl_ns = ttl_ms * 1000000;
  return kc;
}

void
tb_api_keycache_free(struct tb_api_keycache *kc)
{
  if (kc == NULL)
    return;
  pthread_mutex_destroy(&kc->lock);
  OPENSSL_cleanse(kc->slots, sizeof kc->slots);
  free(kc);
}

void
tb_api_keycache_flush(struct tb_api_keycache *kc)
{
  pthread_mutex_lock(&kc->lock);
  for (size_t i = 0; i < TB_KEYCACHE_SLOTS; i++)
    kc->slots[i].used = false;
  pthread_mutex_unlock(&kc->lock);
}

static size_t
slot_of(const char *hash)
{
  size_t h = 0;
  for (int i = 0; i < 8; i++) {
    char c = hash[i];
    h = (h << 4) | (size_t)(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return h & (TB_KEYCACHE_SLOTS - 1);
}

/* Under the lock: the entry of hash, or NULL. */
static struct entry *
find(struct tb_api_keycache *kc, const char *hash)
{
  size_t s = slot_of(hash);
  for (size_t i = 0; i < TB_KEYCACHE_PROBE; i++) {
    struct entry *e = &kc->slots[(s + i) & (TB_KEYCACHE_SLOTS - 1)];
    if (e->used && tb_ct_equal(e->hash, hash, 64))
      return e;
  }
  return NULL;
}

/* Under the lock: a slot for hash (free, or the oldest in the window). */
static struct entry *
place(struct tb_api_keycache *kc, const char *hash)
{
  size_t s = slot_of(hash);
  struct entry *oldest = NULL;
  for (size_t i = 0; i < TB_KEYCACHE_PROBE; i++) {
    struct entry *e = &kc->slots[(s + i) & (TB_KEYCACHE_SLOTS - 1)];
    if (!e->used)
      return e;
    if (oldest == NULL || e->fetched_ns < oldest->fetched_ns)
      oldest = e;
  }
  return oldest;
}

/* Fetches the record of hash.  1 found, 0 unknown, < 0 database error. */
static int
fetch(struct tb_api_req *r, const char *hash, struct entry *out)
{
  struct tb_q_keys_record k;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_keys_lookup(db, hash, &k);
  tb_api_db_put(r, db);
  if (rc <= 0)
    return rc;
  memset(out, 0, sizeof *out);
  out->used = true;
  snprintf(out->hash, sizeof out->hash, "%s", k.key_hash);
  snprintf(out->key_id, sizeof out->key_id, "%s", k.id);
  snprintf(out->project_id, sizeof out->project_id, "%s", k.project_id);
  unsigned mask = 0;
  if (!tb_scope_parse(k.scopes, &mask))
    mask = 0;
  out->scopes = tb_scope_effective(mask);
  int64_t exp = 0;
  if (!tb_parse_i64(k.expires_us, INT64_MIN, INT64_MAX, &exp))
    exp = 1; /* unreadable expiry: treat as expired */
  out->expires_us = exp;
  out->revoked = k.revoked;
  return 1;
}

/* The presented key, or NULL: "Authorization: Bearer tkb_...". */
static const char *
bearer(struct tb_api_req *r, size_t *len)
{
  const char *h = tb_api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
  if (h == NULL || strlen(h) > TB_AUTH_HEADER_MAX)
    return NULL;
  if (strncasecmp(h, "Bearer ", 7) != 0)
    return NULL;
  h += 7;
  while (*h == ' ')
    h++;
  size_t n = strlen(h);
  while (n > 0 && h[n - 1] == ' ')
    n--;
  if (!tb_auth_key_wellformed(h, n))
    return NULL;
  *len = n;
  return h;
}

/* The key of this hash, from the cache while fresh, else from the
 * database (cached, its bucket kept across refreshes): 1 found, 0 unknown
 * (*ret the reply), -1 (*ret the reply) when the database failed. */
static int
key_record(struct tb_api_req *r, const char *hash, int64_t now, struct entry *rec,
           enum MHD_Result *ret)
{
  struct tb_api *api = r->api;
  bool have = false;
  pthread_mutex_lock(&api->keys->lock);
  struct entry *e = find(api->keys, hash);
  if (e != NULL && now - e->fetched_ns < api->keys->ttl_ns) {
    *rec = *e;
    have = true;
  }
  pthread_mutex_unlock(&api->keys->lock);
  if (have)
    return 1;
  int rc = fetch(r, hash, rec);
  if (rc < 0) {
    *ret = tb_api_reply_db(r, rc);
    return -1;
  }
  if (rc == 0 || !tb_ct_equal(rec->hash, hash, 64)) {
    *ret = tb_api_reply_error(r, TB_EC_UNAUTHORIZED, "unknown API key", NULL);
    return 0;
  }
  rec->fetched_ns = now;
  rec->tokens = api->rate_burst;
  rec->bucket_ns = now;
  pthread_mutex_lock(&api->keys->lock);
  struct entry *slot = find(api->keys, hash);
  if (slot != NULL) { /* keep the bucket across refreshes */
    rec->tokens = slot->tokens;
    rec->bucket_ns = slot->bucket_ns;
  } else {
    slot = place(api->keys, hash);
  }
  *slot = *rec;
  pthread_mutex_unlock(&api->keys->lock);
  return 1;
}

/* One request from the key's bucket (TOKBENCH_RATE_LIMIT): false, with
 * r->retry_after_s, when it is empty. */
static bool
key_bucket_take(struct tb_api_req *r, const char *hash, int64_t now)
{
  struct tb_api *api = r->api;
  bool ok = true;
  pthread_mutex_lock(&api->keys->lock);
  struct entry *b = find(api->keys, hash);
  if (b != NULL) {
    double dt = (double)(now - b->bucket_ns) / 1e9;
    b->bucket_ns = now;
    b->tokens += dt * api->rate_per_s;
    if (b->tokens > api->rate_burst)
      b->tokens = api->rate_burst;
    if (b->tokens >= 1.0) {
      b->tokens -= 1.0;
    } else {
      ok = false;
      r->retry_after_s = (int)ceil((1.0 - b->tokens) / api->rate_per_s);
      if (r->retry_after_s < 1)
        r->retry_after_s = 1;
    }
  }
  pthread_mutex_unlock(&api->keys->lock);
  return ok;
}

bool
tb_api_authenticate(struct tb_api_req *r, unsigned need, enum MHD_Result *ret)
{
  struct tb_api *api = r->api;
  size_t klen = 0;
  const char *key = bearer(r, &klen);
  if (key == NULL) {
    *ret = tb_api_reply_error(r, TB_EC_UNAUTHORIZED,
                              "send Authorization: Bearer tkb_... with a valid API key", NULL);
    return false;
  }
  char hash[65];
  tb_auth_key_hash(key, klen, hash);
  int64_t now = tb_time_mono_ns();
  struct entry rec;
  if (key_record(r, hash, now, &rec, ret) <= 0)
    return false;
  if (rec.revoked) {
    *ret = tb_api_reply_error(r, TB_EC_KEY_REVOKED, "this API key was revoked", NULL);
    return false;
  }
  if (rec.expires_us != 0 && rec.expires_us <= tb_time_real_us()) {
    *ret = tb_api_reply_error(r, TB_EC_KEY_EXPIRED, "this API key has expired", NULL);
    return false;
  }
  memcpy(r->key_id, rec.key_id, sizeof r->key_id);
  memcpy(r->project_id, rec.project_id, sizeof r->project_id);
  r->scopes = rec.scopes;
  r->authed = true;
  if ((rec.scopes & need) != need) {
    char d[96];
    snprintf(d, sizeof d, "this route needs the %s scope",
             need & TB_SCOPE_ADMIN   ? "admin"
             : need & TB_SCOPE_WRITE ? "write"
                                     : "read");
    *ret = tb_api_reply_error(r, TB_EC_FORBIDDEN, d, NULL);
    return false;
  }
  if (api->rate_per_s > 0 && !key_bucket_take(r, hash, now)) {
    *ret = tb_api_reply_error(r, TB_EC_RATE_LIMITED, "rate limit of this API key reached", NULL);
    return false;
  }
  OPENSSL_cleanse(hash, sizeof hash);
  int retry = 1;
  if (!tb_api_quota_charge(api->quota, r->project_id, now, &retry)) {
    char d[200];
    snprintf(d, sizeof d,
             "rate limit of this project reached: its keys together may send %.0f requests "
             "per second (TOKBENCH_RATE_LIMIT_PROJECT=%.0f)",
             api->project_rate_per_s, api->project_rate_per_s);
    r->retry_after_s = retry;
    *ret = tb_api_reply_error(r, TB_EC_RATE_LIMITED, d,
                              json_pack("{ss}", "limit", "TOKBENCH_RATE_LIMIT_PROJECT"));
    return false;
  }
  return true;
}
