/*
 * tb_sharedoc: see tb_sharedoc.h.  One recursive walk over the document,
 * depth-capped, editing it in place: members are dropped by name (a
 * table), strings scrubbed of the hidden ones.  The copies of hidden
 * strings the walk makes are wiped before they are freed.
 */
#include "result/tb_sharedoc.h"

#include <openssl/crypto.h>
#include <string.h>

#include "base/tb_json.h"

/* Members dropped wherever they are. */
static const char *const drop_anywhere[] = {
  "api_key",  "api_key_sealed", "api_key_set", "base_url",         "telemetry_url",
  "secret",   "token",          "token_hash",  "project_id",       "key_id",
  "key_name", "created_by",     "endpoint_id", "project_frontier",
};
/* Members dropped from an "endpoint" object. */
static const char *const drop_in_endpoint[] = { "url" };

static bool
listed(const char *k, const char *const *names, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(k, names[i]) == 0)
      return true;
  return false;
}

static void
free_wiped(char *s)
{
  if (s == NULL)
    return;
  OPENSSL_cleanse(s, strlen(s));
  free(s);
}

void
tb_sharedoc_hide_str(struct tb_sharedoc_hide *h, const char *s)
{
  if (s == NULL || *s == '\0' || h->nhidden >= TB_SHAREDOC_HIDE_MAX)
    return;
  for (size_t i = 0; i < h->nhidden; i++)
    if (strcmp(h->hidden[i], s) == 0)
      return;
  h->hidden[h->nhidden++] = tb_xstrdup(s);
}

void
tb_sharedoc_hide_url(struct tb_sharedoc_hide *h, const char *url)
{
  if (url == NULL)
    return;
  size_t n = strlen(url); /* without its trailing '/': "URL/v1/..." keeps its path's '/' */
  while (n > 0 && url[n - 1] == '/')
    n--;
  char *bare = tb_xstrndup(url, n);
  tb_sharedoc_hide_str(h, bare);
  free_wiped(bare);
  const char *a = strstr(url, "://");
  a = a != NULL ? a + 3 : url;
  const char *at = a + strcspn(a, "/?#");
  for (const char *p = a; p < at; p++) /* user:password@ is not the host */
    if (*p == '@')
      a = p + 1;
  char *auth = tb_xstrndup(a, (size_t)(at - a));
  tb_sharedoc_hide_str(h, auth);
  size_t hl;
  if (auth[0] == '[') { /* [v6]:port */
    char *close = strchr(auth, ']');
    hl = close != NULL ? (size_t)(close - auth) + 1 : strlen(auth);
  } else {
    hl = strcspn(auth, ":");
  }
  char *host = tb_xstrndup(auth, hl);
  tb_sharedoc_hide_str(h, host);
  if (host[0] == '[' && hl > 2) { /* the bare v6 address too */
    char *v6 = tb_xstrndup(host + 1, hl - 2);
    tb_sharedoc_hide_str(h, v6);
    free_wiped(v6);
  }
  free_wiped(host);
  free_wiped(auth);
}

void
tb_sharedoc_keep_job(struct tb_sharedoc_hide *h, const char *id)
{
  if (id != NULL && h->njobs < TB_ARRAY_LEN(h->jobs))
    h->jobs[h->njobs++] = tb_xstrdup(id);
}

void
tb_sharedoc_hide_labels(struct tb_sharedoc_hide *h, const json_t *keys, const json_t *labels)
{
  if (!json_is_array(keys))
    return;
  if (h->private_keys == NULL)
    h->private_keys = json_array();
  size_t i;
  const json_t *k;
  json_array_foreach (keys, i, k) {
    if (!json_is_string(k))
      continue;
    json_array_append_new(h->private_keys, json_string(json_string_value(k)));
    tb_sharedoc_hide_str(h, tb_json_str(labels, json_string_value(k)));
  }
}

void
tb_sharedoc_hide_clear(struct tb_sharedoc_hide *h)
{
  for (size_t i = 0; i < h->nhidden; i++)
    free_wiped(h->hidden[i]);
  for (size_t i = 0; i < h->njobs; i++)
    free(h->jobs[i]);
  json_decref(h->private_keys);
  memset(h, 0, sizeof *h);
}

/* s with every occurrence of needle (n bytes, n > 0) replaced, or NULL
 * when it has none. */
static char *
replace_all(const char *s, const char *needle, size_t n)
{
  const char *hit = strstr(s, needle);
  if (hit == NULL)
    return NULL;
  size_t rl = strlen(TB_SHAREDOC_REDACTED), cap = 0, len = 0;
  char *out = NULL;
  while (hit != NULL) {
    size_t pre = (size_t)(hit - s);
    tb_xgrow(&out, &cap, len + pre + rl + 1, 64);
    memcpy(out + len, s, pre);
    memcpy(out + len + pre, TB_SHAREDOC_REDACTED, rl);
    len += pre + rl;
    s = hit + n;
    hit = strstr(s, needle);
  }
  size_t rest = strlen(s);
  tb_xgrow(&out, &cap, len + rest + 1, 64);
  memcpy(out + len, s, rest + 1);
  return out;
}

char *
tb_sharedoc_scrub(const struct tb_sharedoc_hide *h, const char *s)
{
  char *cur = tb_xstrdup(s != NULL ? s : "");
  for (size_t i = 0; i < h->nhidden; i++) {
    const char *x = h->hidden[i];
    size_t n = strlen(x);
    char *next = NULL;
    if (n < TB_SHAREDOC_SUBSTR_MIN)
      next = strcmp(cur, x) == 0 ? tb_xstrdup(TB_SHAREDOC_REDACTED) : NULL;
    else
      next = replace_all(cur, x, n);
    if (next != NULL) {
      free_wiped(cur);
      cur = next;
    }
  }
  return cur;
}

/* True when s holds a hidden string (as tb_sharedoc_scrub would change it). */
static bool
holds_hidden(const struct tb_sharedoc_hide *h, const char *s)
{
  for (size_t i = 0; i < h->nhidden; i++) {
    const char *x = h->hidden[i];
    if (strlen(x) < TB_SHAREDOC_SUBSTR_MIN ? strcmp(s, x) == 0 : strstr(s, x) != NULL)
      return true;
  }
  return false;
}

static void scrub_value(json_t *v, const struct tb_sharedoc_hide *h, int depth);

static void
scrub_string(json_t *v, const struct tb_sharedoc_hide *h)
{
  const char *s = json_string_value(v);
  if (s == NULL || !holds_hidden(h, s))
    return;
  char *clean = tb_sharedoc_scrub(h, s);
  (void)json_string_set(v, clean);
  free(clean);
}

static bool
private_key(const struct tb_sharedoc_hide *h, const char *k)
{
  size_t i;
  const json_t *p;
  json_array_foreach (h->private_keys, i, p)
    if (json_is_string(p) && strcmp(json_string_value(p), k) == 0)
      return true;
  return false;
}

static bool
kept_job(const struct tb_sharedoc_hide *h, const json_t *v)
{
  const char *id = json_string_value(v);
  for (size_t i = 0; id != NULL && i < h->njobs; i++)
    if (strcmp(h->jobs[i], id) == 0)
      return true;
  return false;
}

/* One object member: false when it is to be dropped (else it was
 * edited as it needs). */
static bool
scrub_member(const char *k, json_t *v, bool endpoint, const struct tb_sharedoc_hide *h, int depth)
{
  if (listed(k, drop_anywhere, TB_ARRAY_LEN(drop_anywhere)) ||
      (endpoint && listed(k, drop_in_endpoint, TB_ARRAY_LEN(drop_in_endpoint))) ||
      holds_hidden(h, k))
    return false;
  if (strcmp(k, "job_id") == 0)
    return kept_job(h, v);
  if (strcmp(k, "base_job_id") == 0 && json_is_string(v)) {
    (void)json_string_set(v, "not shared");
    return true;
  }
  if (strcmp(k, "labels") == 0 && json_is_object(v)) {
    const char *lk;
    json_t *lv, *tmp;
    json_object_foreach_safe (v, tmp, lk, lv)
      if (private_key(h, lk))
        (void)json_object_del(v, lk);
  }
  if (strcmp(k, "endpoint") == 0 && json_is_object(v)) {
    const char *ek;
    json_t *ev, *tmp;
    json_object_foreach_safe (v, tmp, ek, ev)
      if (!scrub_member(ek, ev, true, h, depth + 1))
        (void)json_object_del(v, ek);
    return true;
  }
  scrub_value(v, h, depth + 1);
  return true;
}

static void
scrub_value(json_t *v, const struct tb_sharedoc_hide *h, int depth)
{
  if (json_is_string(v)) {
    scrub_string(v, h);
  } else if (json_is_object(v)) {
    if (depth > TB_SHAREDOC_DEPTH_MAX) {
      (void)json_object_clear(v);
      return;
    }
    const char *k;
    json_t *x, *tmp;
    json_object_foreach_safe (v, tmp, k, x)
      if (!scrub_member(k, x, false, h, depth))
        (void)json_object_del(v, k);
  } else if (json_is_array(v)) {
    if (depth > TB_SHAREDOC_DEPTH_MAX) {
      (void)json_array_clear(v);
      return;
    }
    size_t i;
    json_t *x;
    json_array_foreach (v, i, x)
      scrub_value(x, h, depth + 1);
  }
}

void
tb_sharedoc_strip(json_t *doc, const struct tb_sharedoc_hide *h)
{
  if (!json_is_object(doc)) {
    scrub_value(doc, h, 0);
    return;
  }
  json_t *sig = json_object_get(doc, "signature");
  if (sig != NULL)
    json_incref(sig);
  (void)json_object_del(doc, "signature");
  (void)json_object_del(doc, "shared");
  scrub_value(doc, h, 0);
  json_t *shared = json_pack("{s:b, s:s}", "read_only", 1, "note",
                             "a copy for a share link: the endpoint's address and secrets, the "
                             "project's ids, other jobs and private labels are left out");
  if (json_is_object(sig)) {
    scrub_value(sig, h, 1);
    json_object_set_new(shared, "original_signature", sig);
    json_object_set_new(shared, "signature_note",
                        json_string("the signature covers the document as it was signed, "
                                    "not this copy"));
  } else {
    json_decref(sig);
  }
  json_object_set_new(doc, "shared", shared);
}

bool
tb_sharedoc_signature(const json_t *doc, const char **kid, const char **signed_at)
{
  const json_t *sig = json_object_get(doc, "signature");
  if (!json_is_object(sig))
    sig = json_object_get(json_object_get(doc, "shared"), "original_signature");
  const json_t *k = json_object_get(sig, "kid"), *v = json_object_get(sig, "value");
  if (!json_is_string(k) || !json_is_string(v) || json_string_length(k) == 0)
    return false;
  *kid = json_string_value(k);
  const json_t *at = json_object_get(sig, "signed_at");
  *signed_at = json_is_string(at) ? json_string_value(at) : NULL;
  return true;
}
