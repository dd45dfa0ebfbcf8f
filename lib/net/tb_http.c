/*
 * tb_http: blocking helper calls.  See tb_http.h.
 */
#include "net/tb_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tb_egress.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void
global_init_once(void)
{
  curl_global_init(CURL_GLOBAL_DEFAULT);
}

static _Thread_local int64_t thread_deadline_ns; /* 0: none */

void
tb_http_set_deadline(int64_t mono_ns)
{
  thread_deadline_ns = mono_ns;
}

static char *ca_file; /* NULL: the system's CAs */

bool
tb_http_set_ca_file(const char *path, char **err)
{
  if (path != NULL && path[0] != '\0') {
    /* said once here, not as a TLS error on every connection */
    FILE *f = fopen(path, "r");
    if (f == NULL) {
      *err = tb_xasprintf("CA file %s: %s", path, strerror(errno));
      return false;
    }
    fclose(f);
  }
  free(ca_file);
  ca_file = path != NULL && path[0] != '\0' ? tb_xstrdup(path) : NULL;
  return true;
}

void
tb_http_tls_setopt(void *easy)
{
  CURL *e = easy;
  if (ca_file != NULL) {
    curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
    curl_easy_setopt(e, CURLOPT_CAPATH, NULL); /* the file alone */
  }
}

void
tb_http_global_init(void)
{
  pthread_once(&global_once, global_init_once);
}

char *
tb_http_auth_header(const char *api_key)
{
  if (api_key == NULL || api_key[0] == '\0')
    return NULL;
  return tb_xasprintf("Authorization: Bearer %s", api_key);
}

void
tb_http_secret_free(char *s)
{
  if (s == NULL)
    return;
  OPENSSL_cleanse(s, strlen(s));
  free(s);
}

void
tb_http_headers_free(struct curl_slist *h)
{
  for (struct curl_slist *i = h; i != NULL; i = i->next)
    if (i->data != NULL)
      OPENSSL_cleanse(i->data, strlen(i->data));
  curl_slist_free_all(h);
}

struct sink {
  char *buf;
  size_t len, cap, max;
  bool over;
};

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
  struct sink *s = userdata;
  size_t n = size * nmemb;
  if (n > s->max || s->len > s->max - n) {
    s->over = true;
    return 0; /* aborts the transfer */
  }
  tb_xgrow(&s->buf, &s->cap, s->len + n + 1, 4096);
  memcpy(s->buf + s->len, ptr, n);
  s->len += n;
  s->buf[s->len] = '\0';
  return n;
}

int
tb_http_call(const char *method, const char *url, const char *api_key, const char *body,
             size_t body_len, long timeout_ms, size_t cap, struct tb_http_resp *resp)
{
  memset(resp, 0, sizeof *resp);
  tb_http_global_init();
  int rc = -1;
  struct sink s = { .max = cap ? cap : TB_HTTP_BODY_MAX };
  struct curl_slist *hdrs = NULL;
  char *auth = tb_http_auth_header(api_key);
  struct tb_egress_guard guard;
  if (thread_deadline_ns > 0) {
    int64_t left_ms = (thread_deadline_ns - tb_time_mono_ns()) / 1000000;
    if (left_ms <= 0) {
      snprintf(resp->err, sizeof resp->err, "deadline passed");
      return -1;
    }
    if (left_ms < timeout_ms)
      timeout_ms = (long)left_ms;
  }
  CURL *e = curl_easy_init();
  if (e == NULL) {
    snprintf(resp->err, sizeof resp->err, "curl_easy_init failed");
    goto out;
  }
  if (!tb_egress_guard_easy(&guard, tb_egress_current(), e, url)) {
    snprintf(resp->err, sizeof resp->err, "%s", guard.why);
    goto out;
  }
  if (auth != NULL)
    hdrs = curl_slist_append(hdrs, auth);
  hdrs = curl_slist_append(hdrs, "Accept: application/json");
  if (strcmp(method, "POST") == 0) {
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue wait */
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
  }
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  tb_http_tls_setopt(e);
  char ebuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
  CURLcode cc = curl_easy_perform(e);
  if (s.over) {
    snprintf(resp->err, sizeof resp->err, "response body over %zu bytes", s.max);
    goto out;
  }
  if (cc != CURLE_OK && guard.refused) {
    snprintf(resp->err, sizeof resp->err, "%s", guard.why);
    goto out;
  }
  if (cc != CURLE_OK) {
    snprintf(resp->err, sizeof resp->err, "%s", ebuf[0] ? ebuf : curl_easy_strerror(cc));
    goto out;
  }
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &resp->status);
  resp->body = s.buf;
  resp->len = s.len;
  s.buf = NULL;
  if (resp->body == NULL)
    resp->body = tb_xstrdup("");
  rc = 0;
out:
  free(s.buf);
  if (e != NULL)
    curl_easy_cleanup(e);
  tb_http_headers_free(hdrs); /* holds a copy of the key */
  tb_http_secret_free(auth);
  return rc;
}

void
tb_http_resp_free(struct tb_http_resp *resp)
{
  free(resp->body);
  resp->body = NULL;
  resp->len = 0;
}
