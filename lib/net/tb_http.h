/*
 * tb_http: small blocking HTTP calls for discovery and housekeeping (models,
 * version, metrics, server info, tokenize, abort), with libcurl's easy
 * interface.  The measuring itself never goes through here: it runs on
 * tb_engine's event loop.
 *
 * Every call sends `Authorization: Bearer <key>` when a key is given, caps
 * the body it accepts (TB_HTTP_BODY_MAX unless a smaller cap is given), and
 * has a total timeout.  The key is never logged; libcurl's copy of the header
 * list is wiped before it is freed.  Every call goes through the process's
 * egress policy (tb_egress: the connected address is checked; redirects
 * are never followed); a refusal is a transport error whose err names the
 * rule.
 */
#ifndef TB_HTTP_H
#define TB_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

#define TB_HTTP_BODY_MAX (8u * 1024u * 1024u)

struct tb_http_resp {
  long status; /* HTTP status, 0 when no answer came */
  char *body;  /* NUL-terminated, owned; NULL when none */
  size_t len;
  char err[256]; /* transport error when status == 0 */
};

/* One call.  method "GET" or "POST"; body (JSON) only for POST, may be NULL.
 * Returns 0 when an HTTP answer came (any status: check resp->status),
 * -1 on a transport error or a body over the cap (resp->err says which).
 * The caller frees with tb_http_resp_free in both cases. */
int tb_http_call(const char *method, const char *url, const char *api_key, const char *body,
                 size_t body_len, long timeout_ms, size_t cap,
                 struct tb_http_resp *resp) TB_MUST_CHECK;
void tb_http_resp_free(struct tb_http_resp *resp);

/* The Authorization header text "Authorization: Bearer <key>" (new string,
 * caller wipes and frees with tb_http_secret_free). NULL when key is NULL/"". */
char *tb_http_auth_header(const char *api_key);
void tb_http_secret_free(char *s);
/* Frees a libcurl header list after wiping every header's text (one may be
 * the Authorization header; curl_slist_free_all alone leaves it in freed
 * memory).  NULL is fine. */
struct curl_slist;
void tb_http_headers_free(struct curl_slist *h);

/* A deadline (CLOCK_MONOTONIC ns; 0: none) for every call this thread makes
 * from now on: each call's timeout is cut to what is left, and a call after
 * it fails at once ("deadline passed").  For a bounded series of calls (a
 * probe's discovery). */
void tb_http_set_deadline(int64_t mono_ns);

/* Process-wide: the PEM file of certificate authorities that every HTTPS
 * connection to an endpoint trusts (discovery, streams, metrics polls),
 * instead of the system's list (NULL or "": the system's).  For an
 * endpoint with a self-signed or private-CA certificate (`tokbench run
 * --cacert FILE`, TOKBENCH_CA_FILE).  path is copied.  false, with *err (a
 * new string, caller frees) and nothing changed, when the file cannot be
 * read.  Call before threads start. */
bool tb_http_set_ca_file(const char *path, char **err) TB_MUST_CHECK;

/* The daemons' configuration key of it (api: probes; worker: jobs). */
#define TB_HTTP_CFG_KEYS                                                          \
  {                                                                               \
    "TOKBENCH_CA_FILE", NULL,                                                     \
      "PEM file of the CAs trusted for https endpoints, instead of the system's " \
      "(a self-signed or private CA)",                                            \
      false                                                                       \
  }

/* Applies the process's TLS trust (tb_http_set_ca_file) to a libcurl easy
 * handle (a CURL *); every handle that talks to an endpoint goes through it. */
void tb_http_tls_setopt(void *easy);

/* Process-wide libcurl setup; idempotent, call before threads start. */
void tb_http_global_init(void);

#endif
