/*
 * tokbench-api: the REST service.
 *
 * Start-up: configuration (environment, optional --config file), logs, the
 * master key, the database pool (waiting for PostgreSQL up to
 * TOKBENCH_DB_WAIT_MS), the migrations, the notification listener, then
 * libmicrohttpd with a pool of threads (epoll), each request served from the
 * routing table (api_routes.c).  SIGTERM/SIGINT stop it cleanly.
 *
 * A request's life (handle): on the first call its context (struct
 * tb_api_req) is made; a request that carries a body is routed and its key
 * checked at once (admit), so that only TOKBENCH_PREAUTH_BODY bytes are ever
 * read for a caller without a valid key, and a Content-Length over the cap
 * that applies is refused before any byte of the body (413); upload calls
 * append to the body up to that cap; the last call routes it (404, 405,
 * OPTIONS preflight), checks the media type (415), the key (401/403/429)
 * when not done yet, and runs the handler.  A suspended handler (long-poll,
 * SSE) is called again on resume.  The context is freed in completed(),
 * which also writes the request's log line.
 *
 * Connection limits (issue 13, finding 7; docs/deploy.md "Connection
 * limits"): TOKBENCH_MAX_CONNECTIONS in all and TOKBENCH_MAX_CONNECTIONS_PER_IP
 * from one address (libmicrohttpd refuses the connection over either); a
 * connection silent for TOKBENCH_HEADER_TIMEOUT_S before a request's head
 * has come (a new connection, or a kept-alive one between requests) is
 * closed, and TOKBENCH_IDLE_TIMEOUT_S applies inside a request (suspended
 * long-polls and SSE streams are not timed out by libmicrohttpd; the streams
 * send a ping every TOKBENCH_SSE_PING_S).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api.h"
#include "api_auth.h"
#include "api_deliveries.h"
#include "api_handlers.h"
#include "api_jobcache.h"
#include "api_notify.h"
#include "api_probe.h"
#include "api_quota.h"
#include "api_schedules.h"
#include "api_shares.h"
#include "api_signkeys.h"
#include "api_streams.h"
#include "api_traces.h"
#include "api_web.h"
#include "net/tb_egress.h"
#include "net/tb_http.h"
#include "base/tb_jsonscan.h"
#include "base/tb_log.h"
#include "net/tb_masterkey.h"
#include "tb_metrics.h"
#include "db/tb_migrate.h"

static const struct tb_cfg_key api_keys[] = {
  { "TOKBENCH_DATABASE_URL", NULL, "PostgreSQL URL (libpq)", true },
  { "TOKBENCH_LISTEN_HOST", "127.0.0.1", "address to listen on", false },
  { "TOKBENCH_LISTEN_PORT", "8080", "TCP port to listen on", false },
  { "TOKBENCH_THREADS", "8", "request threads (block on the database: more than cores)", false },
  { "TOKBENCH_DB_POOL", "16", "database connections", false },
  { "TOKBENCH_DB_WAIT_MS", "10000", "how long to wait for the database at start", false },
  { "TOKBENCH_LOG_LEVEL", "info", "debug, info, warn or error", false },
  { "TOKBENCH_MASTER_KEY", NULL, "master key sealing endpoint API keys (64 hex)", true },
  { "TOKBENCH_MASTER_KEY_FILE", NULL, "file holding the master key (mode 0600)", false },
  { "TOKBENCH_SIGNING_KEY_FILE", NULL,
    "Ed25519 private key (PEM, mode 0600) finished results are signed with (unset: unsigned)",
    false },
  { "TOKBENCH_MAX_BODY", "1048576", "largest request body in bytes", false },
  { "TOKBENCH_RATE_LIMIT", "100", "requests per second per API key (0: no limit)", false },
  { "TOKBENCH_RATE_BURST", "200", "requests a key may send at once above the rate", false },
  { "TOKBENCH_CORS_ORIGINS", "", "origins allowed by CORS: comma list, or *", false },
  { "TOKBENCH_KEY_CACHE_MS", "5000", "how long a checked API key is cached", false },
  { "TOKBENCH_JOB_CACHE_MS", "2000",
    "longest life of a cached GET /v1/jobs/{id} document (changes drop it at once; 0: off)",
    false },
  { "TOKBENCH_RESULT_CACHE_MS", "60000",
    "longest life of a finished job's rendered GET /v1/jobs/{id}/result (changes drop it at once; "
    "0: off)",
    false },
  { "TOKBENCH_SSE_PING_S", "15", "seconds between SSE heartbeats", false },
  { "TOKBENCH_MAX_CONNECTIONS", "4096", "simultaneous connections", false },
  /* issue 13, finding 7: connection limits (docs/deploy.md) */
  { "TOKBENCH_MAX_CONNECTIONS_PER_IP", "256",
    "simultaneous connections from one client address (0: no cap)", false },
  { "TOKBENCH_HEADER_TIMEOUT_S", "10",
    "seconds a connection may stay silent before its request's head is in", false },
  { "TOKBENCH_IDLE_TIMEOUT_S", "120", "seconds a request may stay silent once it has begun",
    false },
  { "TOKBENCH_PREAUTH_BODY", "4096",
    "request body bytes read before the API key is checked (TOKBENCH_MAX_BODY after)", false },
  { "TOKBENCH_SSE_PER_KEY", "16", "event streams one API key may hold open (0: no cap)", false },
  { "TOKBENCH_WAIT_PER_KEY", "64", "long-polls (?wait=) one API key may hold open (0: no cap)",
    false },
  { "TOKBENCH_WEB_DIR", NULL,
    "static files of the web page (unset: web/ beside the binary, else ./web)", false },
  /* CI integration (issue 7; api_deliveries.h) */
  { "TOKBENCH_PUBLIC_URL", NULL, "base URL of links in hooks and webhook payloads", false },
  { "TOKBENCH_METRICS_TOKEN", NULL, "bearer token for GET /metrics (unset: /metrics off)", true },
  { "TOKBENCH_DELIVERIES", "1", "1: send outbound webhooks from this process, 0: not", false },
  { "TOKBENCH_DELIVERY_BACKOFF_MS", "30000", "first webhook retry delay (doubles)", false },
  { "TOKBENCH_DELIVERY_TIMEOUT_MS", "10000", "timeout of one webhook POST", false },
  /* issue 13: egress policy and the probe pool (api_probe.c) */
  TB_EGRESS_CFG_KEYS,
  TB_HTTP_CFG_KEYS,
  { "TOKBENCH_PROBE_THREADS", "4", "threads running endpoint probes (never the request threads)",
    false },
  { "TOKBENCH_PROBE_PER_PROJECT", "2", "probes of one project queued or running (429 above)",
    false },
  { "TOKBENCH_PROBE_QUEUE", "64", "probes queued or running in all (429 above)", false },
  { "TOKBENCH_PROBE_DEADLINE_MS", "10000", "total time of one probe (all its calls)", false },
  /* issue 13: per-project limits, shared exclusive groups, replay retention */
  TB_TENANCY_CFG_KEYS,
  /* issue 27: the per-key limits again per project (a project makes keys) */
  { "TOKBENCH_RATE_LIMIT_PROJECT", NULL,
    "requests per second of one project, all its keys together (unset: 4 x "
    "TOKBENCH_RATE_LIMIT; 0: no limit)",
    false },
  { "TOKBENCH_RATE_BURST_PROJECT", NULL,
    "requests a project may send at once above its rate (unset: 2 x its rate)", false },
  { "TOKBENCH_SSE_PER_PROJECT", "64", "event streams one project may hold open (0: no cap)",
    false },
  { "TOKBENCH_WAIT_PER_PROJECT", "256", "long-polls (?wait=) one project may hold open (0: no cap)",
    false },
  { "TOKBENCH_LIMIT_KEYS", "100",
    "live API keys per project (POST /v1/keys: 429 above; "
    "0: no cap)",
    false },
  { "TOKBENCH_HEADER_TIMEOUT_BUSY_S", "2",
    "TOKBENCH_HEADER_TIMEOUT_S while more than 3/4 of TOKBENCH_MAX_CONNECTIONS are open "
    "(0: off)",
    false },
  { "TOKBENCH_CONNECTIONS_RESERVE", "64",
    "connections kept free for new clients: at TOKBENCH_MAX_CONNECTIONS less this (at most "
    "1/8 of it), the oldest connection without a request head is shut down (0: off)",
    false },
  /* issue 25: uploaded traces (api_traces.h, db/tb_tracestore.h) */
  TB_TRACESTORE_CFG_KEYS,
  /* issue 35: schedules (api_schedules.h) */
  TB_API_SCHEDULE_CFG_KEYS,
  /* issue 35: share links (api_shares.h) */
  TB_API_SHARES_CFG_KEYS,
};

/* libmicrohttpd's per-connection pool (request line, headers, read buffer;
 * bodies are copied out into the request context).  MHD zeroes the whole
 * pool between the requests of a keep-alive connection: 64 KiB cost a
 * memset of 64 KiB per request (5% of a GET); 32 KiB, MHD's own default,
 * still holds far more headers than any client sends. */
#define TB_API_CONN_MEMORY (32 * 1024)

/* Threads: every handler blocks on its database round trip (libpq,
 * synchronous), so the pool size bounds the requests in flight, and
 * PostgreSQL can only group the commits (one WAL flush for many POST
 * /v1/jobs) of transactions that are in flight together.  8 threads on 2
 * cores: GET (cached, CPU only) loses nothing measurable, POST /v1/jobs
 * gains about 2x over 4 (bench/bench_api.sh). */

static bool
request_id_ok(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > TB_API_REQUEST_ID_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      return false;
  }
  return true;
}

static struct tb_api_req *
req_new(struct tb_api *api, struct MHD_Connection *c, const char *url, const char *method)
{
  struct tb_api_req *r = tb_xcalloc(1, sizeof *r);
  r->api = api;
  r->conn = c;
  r->url = url;
  r->method = method;
  r->t0_ns = tb_time_mono_ns();
  const char *rid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
  if (rid != NULL && request_id_ok(rid)) {
    snprintf(r->request_id, sizeof r->request_id, "%s", rid);
  } else {
    unsigned char b[12];
    if (!tb_crypto_random(b, sizeof b))
      memset(b, 0, sizeof b);
    tb_hex_encode(b, sizeof b, r->request_id);
  }
  return r;
}

static bool
is_json_type(const char *ct)
{
  if (ct == NULL)
    return false;
  while (*ct == ' ')
    ct++;
  size_t n = strlen("application/json");
  if (strncasecmp(ct, "application/json", n) != 0)
    return false;
  return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

static enum MHD_Result
preflight(struct tb_api_req *r)
{
  char methods[80];
  snprintf(methods, sizeof methods, "%s%s", r->allow,
           strstr(r->allow, "OPTIONS") ? "" : ", OPTIONS");
  const char *h[] = {
    "Allow",
    methods,
    "Access-Control-Allow-Methods",
    methods,
    "Access-Control-Allow-Headers",
    "Authorization, Content-Type, Idempotency-Key, If-None-Match, Last-Event-ID, X-Request-Id",
    "Access-Control-Max-Age",
    "600",
    NULL,
  };
  return tb_api_reply(r, MHD_HTTP_NO_CONTENT, NULL, "", 0, h);
}

/* A JSON body's tree may take at most this many times TOKBENCH_MAX_BODY:
 * 1 MiB of "[]," would be 80 MiB of jansson's tree, in every request at
 * once (issue 34, item 1, for job specs); honest bodies (objects of
 * strings and numbers) take 1 to 4 times their bytes. */
#define TB_API_TREE_PER_BODY_BYTE 32

static bool
json_too_costly(const struct tb_api_req *r)
{
  return r->body_len > 0 &&
         tb_jsonscan_cost(r->body, r->body_len) > TB_API_TREE_PER_BODY_BYTE * r->api->body_max;
}

/* 413 naming the tree cap. */
static enum MHD_Result
reply_too_costly(struct tb_api_req *r)
{
  char d[200];
  snprintf(d, sizeof d,
           "the body's JSON would take about %zu MiB of memory to parse, more than %d times "
           "TOKBENCH_MAX_BODY (%zu bytes)",
           (tb_jsonscan_cost(r->body, r->body_len) + (1u << 20) - 1) >> 20,
           TB_API_TREE_PER_BODY_BYTE, r->api->body_max);
  return tb_api_reply_error(r, TB_EC_TOO_LARGE, d, NULL);
}

/* 413 naming the cap that applied to r. */
static enum MHD_Result
reply_too_big(struct tb_api_req *r)
{
  char d[120];
  if (r->authed && r->route != NULL && r->route->upload)
    snprintf(d, sizeof d, "the trace is larger than %zu bytes (TOKBENCH_TRACE_MAX_BYTES)",
             r->body_limit);
  else if (r->body_limit < r->api->body_max)
    snprintf(d, sizeof d,
             "the body is larger than %zu bytes, the most read before a valid API key "
             "(TOKBENCH_PREAUTH_BODY)",
             r->body_limit);
  else
    snprintf(d, sizeof d, "the body is larger than %zu bytes (TOKBENCH_MAX_BODY)", r->body_limit);
  return tb_api_reply_error(r, TB_EC_TOO_LARGE, d, NULL);
}

/* The first call, on the request's head.  A request with a body is routed
 * and its key checked now, before any byte of the body is read: the full
 * body cap is for authenticated callers (and for public routes whose admit
 * says so), TOKBENCH_PREAUTH_BODY for everyone else.  MHD_YES to go on
 * (upload calls follow), or the result of an error reply queued now
 * (r->early: the body is then discarded unread). */
static enum MHD_Result
admit(struct tb_api_req *r)
{
  struct tb_api *api = r->api;
  struct MHD_Connection *c = r->conn;
  r->body_limit = api->preauth_body_max;
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const char *te =
    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  int64_t len = 0;
  if (cl != NULL && !tb_parse_i64(cl, 0, INT64_MAX, &len))
    len = INT64_MAX;
  if ((cl == NULL || len == 0) && te == NULL)
    return MHD_YES; /* no body: everything is checked in dispatch */
  if (!api->stopping && tb_api_route_find(r, r->method, r->url) == TB_API_MATCH_OK) {
    const struct tb_api_route *route = r->route;
    if (route->scope != TB_SCOPE_NONE) {
      enum MHD_Result ret;
      if (!tb_api_authenticate(r, route->scope, &ret)) {
        r->early = true;
        return ret;
      }
      r->body_limit = route->upload ? api->trace_body_max : api->body_max;
    } else if (route->admit != NULL && route->admit(r)) {
      r->body_limit = api->body_max;
    }
  }
  if ((uint64_t)len > r->body_limit) {
    r->early = true;
    return reply_too_big(r);
  }
  enum MHD_Result ret; /* issue 25: a project's trace uploads at once */
  if (r->authed && r->route->upload && !tb_api_streams_take(r, TB_API_STREAM_UPLOAD, &ret)) {
    r->early = true;
    return ret;
  }
  return MHD_YES;
}

static enum MHD_Result
dispatch(struct tb_api_req *r)
{
  if (r->too_big)
    return reply_too_big(r);
  enum tb_api_match m = tb_api_route_find(r, r->method, r->url);
  if (strcmp(r->method, "OPTIONS") == 0 && m != TB_API_MATCH_NO_PATH) {
    if (m == TB_API_MATCH_OK) /* allow holds every method of the path */
      (void)tb_api_route_find(r, "\n", r->url);
    return preflight(r);
  }
  if (m == TB_API_MATCH_NO_PATH)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such route", NULL);
  if (m == TB_API_MATCH_NO_METHOD)
    return tb_api_reply_error(r, TB_EC_METHOD_NOT_ALLOWED, NULL, NULL);
  if (r->api->stopping)
    return tb_api_reply_error(r, TB_EC_SHUTTING_DOWN, NULL, NULL);
  const struct tb_api_route *route = r->route;
  if (route->json_body && !is_json_type(tb_api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE)))
    return tb_api_reply_error(r, TB_EC_UNSUPPORTED_MEDIA,
                              "send the body with Content-Type: application/json", NULL);
  if (route->json_body && json_too_costly(r))
    return reply_too_costly(r);
  if (route->scope != TB_SCOPE_NONE && !r->authed) {
    enum MHD_Result ret;
    if (!tb_api_authenticate(r, route->scope, &ret))
      return ret;
  }
  return route->fn(r);
}

/* The silence allowed before a request's head: TOKBENCH_HEADER_TIMEOUT_S, or
 * the busy one while open connections are above the high-water mark, so
 * that connections that send nothing cannot keep new clients out for long
 * (issue 27, finding 2). */
static unsigned
head_timeout(struct tb_api *api)
{
  if (api->busy_header_timeout_s == 0 ||
      atomic_load_explicit(&api->conns_open, memory_order_relaxed) <= api->conns_high_water)
    return api->header_timeout_s;
  return api->busy_header_timeout_s < api->header_timeout_s ? api->busy_header_timeout_s
                                                            : api->header_timeout_s;
}

/* MHD_OPTION_NOTIFY_CONNECTION: counts open connections and lists them
 * (api_conns: at the reserve, the oldest without a head is shut down); a
 * new one above the mark gets the busy head timeout.  Called in the thread that owns the
 * connection, after libmicrohttpd listed it for timeouts, so its timeout
 * may be set here. */
static void
conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
            enum MHD_ConnectionNotificationCode toe)
{
  struct tb_api *api = cls;
  if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    /* before libmicrohttpd closes the socket (api_conns.h) */
    tb_api_conns_close(&api->conns, *socket_context);
    *socket_context = NULL;
    atomic_fetch_sub_explicit(&api->conns_open, 1, memory_order_relaxed);
    return;
  }
  const union MHD_ConnectionInfo *fd =
    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  *socket_context = fd != NULL ? tb_api_conns_open(&api->conns, fd->connect_fd) : NULL;
  atomic_fetch_add_explicit(&api->conns_open, 1, memory_order_relaxed);
  unsigned t = head_timeout(api);
  if (t != api->header_timeout_s)
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, t);
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
       const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
  struct tb_api *api = cls;
  struct tb_api_req *r = *req_cls;
  (void)version;
  if (r == NULL) {
    r = req_new(api, c, url, method);
    *req_cls = r;
    const union MHD_ConnectionInfo *sc =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->conn_entry = sc != NULL ? sc->socket_context : NULL;
    tb_api_conns_headed(&api->conns, r->conn_entry, true);
    /* the head is in: from now on the request's own silence limit */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, api->idle_timeout_s);
    return admit(r);
  }
  if (*upload_size != 0) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->early || r->too_big)
      return MHD_YES;
    if (n > r->body_limit - r->body_len) {
      r->too_big = true;
      free(r->body);
      r->body = NULL;
      r->body_len = 0;
      r->body_cap = 0;
      return MHD_YES;
    }
    tb_xgrow(&r->body, &r->body_cap, r->body_len + n + 1, 4096);
    memcpy(r->body + r->body_len, upload, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return MHD_YES;
  }
  if (r->early || r->replied)
    return MHD_YES;
  return dispatch(r);
}

/* The path a request's log line shows: a share link's token is a secret
 * (issue 35), so /s/{token} is logged without it. */
static const char *
log_path(const char *url)
{
  return url != NULL && strncmp(url, "/s/", 3) == 0 ? "/s/(token)" : url;
}

static void
completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
  (void)cls;
  struct tb_api_req *r = *req_cls;
  if (r == NULL)
    return;
  *req_cls = NULL;
  tb_api_conns_headed(&r->api->conns, r->conn_entry, false);
  tb_api_notify_disarm(r);
  tb_api_streams_release(r);
  /* a kept-alive connection waits for its next request's head: the short
   * limit again (not on the other ends: libmicrohttpd is closing it) */
  if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, head_timeout(r->api));
  int64_t us = (tb_time_mono_ns() - r->t0_ns) / 1000;
  tb_metrics_request(r->route != NULL ? r->route->path : "unmatched", r->method, r->status,
                     (double)us / 1e6);
  tb_log(TB_LOG_INFO, "request", "request_id", TB_LS, r->request_id, "method", TB_LS, r->method,
         "path", TB_LS, log_path(r->url), "status", TB_LI, (int64_t)r->status, "us", TB_LI, us,
         "key", TB_LS, r->authed ? r->key_id : NULL, "completed", TB_LI,
         (int64_t)(toe == MHD_REQUEST_TERMINATED_COMPLETED_OK), NULL);
  if (r->state_free != NULL)
    r->state_free(r->state);
  free(r->body);
  free(r);
}

/* The probe pool (api_probe.h), and endpoint keys sealed before they were
 * bound to their origin re-sealed (api_endpoints.c). */
static bool
start_probes(struct tb_api *api, struct tb_db *db, char **err)
{
  int64_t threads, per_project, queue, deadline_ms;
  if (!tb_cfg_get_int(api->cfg, "TOKBENCH_PROBE_THREADS", 1, 64, &threads, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_PROBE_PER_PROJECT", 1, 1000, &per_project, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_PROBE_QUEUE", 1, 100000, &queue, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_PROBE_DEADLINE_MS", 100, 600000, &deadline_ms, err))
    return false;
  if (tb_api_endpoints_reseal(api, db) < 0)
    tb_log(TB_LOG_WARN, "could not re-seal the endpoint keys (retried at the next start)", NULL);
  struct tb_api_probe_opts o = {
    .threads = (unsigned)threads,
    .per_project = (unsigned)per_project,
    .queue_max = (unsigned)queue,
    .deadline_ms = (long)deadline_ms,
  };
  api->probes = tb_api_probes_start(&o, err);
  return api->probes != NULL;
}

/* TOKBENCH_CORS_ORIGINS into api->cors_origins / cors_any. */
static void
parse_cors(struct tb_api *api, const char *v)
{
  if (v == NULL || v[0] == '\0')
    return;
  if (strcmp(v, "*") == 0) {
    api->cors_any = true;
    return;
  }
  size_t n = 1;
  for (const char *p = v; *p; p++)
    n += *p == ',';
  api->cors_origins = tb_xcalloc(n + 1, sizeof(char *));
  size_t k = 0, len;
  const char *p = v, *s;
  while (k < n && tb_list_next(&p, &s, &len))
    if (len > 0)
      api->cors_origins[k++] = tb_xstrndup(s, len);
}

/* The connection reserve (api_conns.h): TOKBENCH_CONNECTIONS_RESERVE, at
 * most 1/8 of max_conn, kept free below it. */
static bool
conn_limits(struct tb_api *api, int64_t max_conn, char **err)
{
  int64_t reserve;
  if (!tb_cfg_get_int(api->cfg, "TOKBENCH_CONNECTIONS_RESERVE", 0, 1000000, &reserve, err))
    return false;
  if (reserve > max_conn / 8)
    reserve = max_conn / 8;
  tb_api_conns_init(&api->conns, reserve > 0 ? (unsigned)(max_conn - reserve) : 0);
  return true;
}

/* The limits of issue 27 into api: the request rate of a project (unset: 4
 * x the key's; burst unset: 2 x the rate), the keys cap, the busy head
 * timeout; the stream caps into *sse and *wait.  False with *err on a bad
 * value. */
static bool
project_limits(struct tb_api *api, unsigned *sse, unsigned *wait, char **err)
{
  int64_t rate = 4 * (int64_t)api->rate_per_s, burst, s, w, busy;
  if (tb_cfg_get(api->cfg, "TOKBENCH_RATE_LIMIT_PROJECT") != NULL &&
      !tb_cfg_get_int(api->cfg, "TOKBENCH_RATE_LIMIT_PROJECT", 0, 100000000, &rate, err))
    return false;
  burst = 2 * rate;
  if (tb_cfg_get(api->cfg, "TOKBENCH_RATE_BURST_PROJECT") != NULL &&
      !tb_cfg_get_int(api->cfg, "TOKBENCH_RATE_BURST_PROJECT", 1, 1000000000, &burst, err))
    return false;
  if (!tb_cfg_get_int(api->cfg, "TOKBENCH_SSE_PER_PROJECT", 0, 1000000, &s, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_WAIT_PER_PROJECT", 0, 1000000, &w, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_LIMIT_KEYS", 0, 100000000, &api->limit_keys, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_HEADER_TIMEOUT_BUSY_S", 0, 3600, &busy, err))
    return false;
  api->busy_header_timeout_s = (unsigned)busy;
  api->project_rate_per_s = (double)rate;
  api->quota = tb_api_quota_new((double)rate, (double)burst);
  *sse = (unsigned)s;
  *wait = (unsigned)w;
  return true;
}

/* What start-up reads besides api's own fields. */
struct api_start {
  int64_t port, threads, pool, wait_ms, max_conn, per_ip;
  const char *url; /* TOKBENCH_DATABASE_URL */
  int applied;     /* migrations applied at start */
};

/* The numeric settings and the limits into api and st; false with a
 * message on stderr. */
static bool
read_limits(struct tb_api *api, struct api_start *st)
{
  char *err = NULL;
  struct tb_cfg *cfg = api->cfg;
  int64_t body_max, rate, burst, cache_ms, ping_s, jc_ms, rc_ms;
  int64_t header_s, idle_s, preauth, sse_per_key, wait_per_key;
  if (!tb_cfg_get_int(cfg, "TOKBENCH_LISTEN_PORT", 0, 65535, &st->port, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_THREADS", 1, 256, &st->threads, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_DB_POOL", 1, 256, &st->pool, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_DB_WAIT_MS", 0, 3600000, &st->wait_ms, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_MAX_BODY", 1024, 64 * 1024 * 1024, &body_max, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_RATE_LIMIT", 0, 10000000, &rate, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_RATE_BURST", 1, 100000000, &burst, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_KEY_CACHE_MS", 0, 3600000, &cache_ms, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_JOB_CACHE_MS", 0, 3600000, &jc_ms, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_RESULT_CACHE_MS", 0, 3600000, &rc_ms, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SSE_PING_S", 1, 3600, &ping_s, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_MAX_CONNECTIONS", 16, 1000000, &st->max_conn, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_MAX_CONNECTIONS_PER_IP", 0, 1000000, &st->per_ip, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_HEADER_TIMEOUT_S", 1, 3600, &header_s, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_IDLE_TIMEOUT_S", 1, 86400, &idle_s, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_PREAUTH_BODY", 0, 64 * 1024 * 1024, &preauth, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_SSE_PER_KEY", 0, 1000000, &sse_per_key, &err) ||
      !tb_cfg_get_int(cfg, "TOKBENCH_WAIT_PER_KEY", 0, 1000000, &wait_per_key, &err)) {
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    return false;
  }
  api->body_max = (size_t)body_max;
  api->preauth_body_max = (size_t)(preauth < body_max ? preauth : body_max);
  api->header_timeout_s = (unsigned)header_s;
  api->conns_high_water = (unsigned)(st->max_conn / 4 * 3);
  api->idle_timeout_s = (unsigned)idle_s;
  api->rate_per_s = (double)rate;
  api->rate_burst = (double)(burst < rate ? rate : burst);
  unsigned sse_pp = 0, wait_pp = 0;
  if (!project_limits(api, &sse_pp, &wait_pp, &err) || !conn_limits(api, st->max_conn, &err)) {
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    return false;
  }
  api->streams = tb_api_streams_new((unsigned)sse_per_key, (unsigned)wait_per_key, sse_pp, wait_pp);
  api->sse_ping_s = (int)ping_s;
  api->wait_max_s = 60;
  parse_cors(api, tb_cfg_get(cfg, "TOKBENCH_CORS_ORIGINS"));
  api->web_dir = tb_api_web_dir_resolve(tb_cfg_get(cfg, "TOKBENCH_WEB_DIR"));
  api->keys = tb_api_keycache_new(cache_ms);
  api->jobs_cache = tb_api_jobcache_new(jc_ms);
  api->results_cache = tb_api_jobcache_new(rc_ms);
  return true;
}

/* The database URL, the egress policy, the CAs, the tenancy limits, the
 * trace caps and the master key; false with a message on stderr. */
static bool
read_others(struct tb_api *api, struct api_start *st)
{
  char *err = NULL;
  st->url = tb_cfg_get(api->cfg, "TOKBENCH_DATABASE_URL");
  if (st->url == NULL) {
    fprintf(stderr, "tokbench-api: TOKBENCH_DATABASE_URL is not set\n");
    return false;
  }
  if (!tb_egress_install_cfg(api->cfg, &err) ||
      !tb_http_set_ca_file(tb_cfg_get(api->cfg, "TOKBENCH_CA_FILE"), &err) ||
      !tb_tenancy_from_cfg(&api->tenancy, api->cfg, &err) || !tb_api_traces_config(api, &err) ||
      !tb_api_schedules_config(api, &err) || !tb_api_shares_config(api, &err)) {
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    return false;
  }
  switch (tb_masterkey_load(tb_cfg_get(api->cfg, "TOKBENCH_MASTER_KEY"),
                            tb_cfg_get(api->cfg, "TOKBENCH_MASTER_KEY_FILE"), api->master_key,
                            &err)) {
  case TB_MASTERKEY_OK: api->has_master_key = true; break;
  case TB_MASTERKEY_NONE:
    tb_log(TB_LOG_WARN, "no master key: endpoints cannot be given an API key", NULL);
    break;
  case TB_MASTERKEY_ERROR:
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    return false;
  }
  if (!tb_api_signkeys_load(api, &err)) { /* issue 35 */
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    return false;
  }
  return true;
}

/* The database pool, the migrations, the probe pool and the notification
 * listener; false, logged, on a failure. */
static bool
open_database(struct tb_api *api, struct api_start *st)
{
  char *err = NULL;
  api->pool = tb_db_pool_new(st->url, (unsigned)st->pool, (int)st->wait_ms, &err);
  if (api->pool == NULL) {
    tb_log(TB_LOG_ERROR, "cannot connect to the database", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  struct tb_db *db = tb_db_pool_get(api->pool);
  st->applied = tb_migrate_run(db, &err);
  bool recorded = st->applied >= 0 && tb_api_signkeys_record(api, db);
  tb_db_pool_put(api->pool, db);
  if (st->applied < 0) {
    tb_log(TB_LOG_ERROR, "migrations failed", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  if (!recorded)
    return false;
  db = tb_db_pool_get(api->pool);
  bool probes_ok = start_probes(api, db, &err);
  tb_db_pool_put(api->pool, db);
  if (!probes_ok) {
    tb_log(TB_LOG_ERROR, "cannot start the probe pool", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  api->notify = tb_api_notify_start(api, st->url, &err);
  if (api->notify == NULL) {
    tb_log(TB_LOG_ERROR, "cannot start the notification listener", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  return true;
}

/* libmicrohttpd listening on TOKBENCH_LISTEN_HOST:PORT, the webhook
 * deliveries and the schedule ticker; false on a failure. */
static bool
start_daemon(struct tb_api *api, const struct api_start *st)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)st->port) };
  if (inet_pton(AF_INET, tb_cfg_get(api->cfg, "TOKBENCH_LISTEN_HOST"), &sa.sin_addr) != 1) {
    fprintf(stderr, "tokbench-api: TOKBENCH_LISTEN_HOST must be an IPv4 address\n");
    return false;
  }
  signal(SIGPIPE, SIG_IGN);
  api->daemon = MHD_start_daemon(
    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
    0, NULL, NULL, handle, api, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
    MHD_OPTION_THREAD_POOL_SIZE, (unsigned)st->threads, MHD_OPTION_CONNECTION_TIMEOUT,
    api->header_timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)st->max_conn,
    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)st->per_ip, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)TB_API_CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
    completed, api, MHD_OPTION_NOTIFY_CONNECTION, conn_notify, api, MHD_OPTION_END);
  if (api->daemon == NULL) {
    tb_log(TB_LOG_ERROR, "cannot listen", "port", TB_LI, st->port, NULL);
    return false;
  }
  return tb_api_deliveries_start(api) && tb_api_schedtick_start(api);
}

/* Start-up, then serving until SIGTERM or SIGINT (in stop_set): the exit
 * status (2 bad settings, 1 a start-up failure, 0 stopped). */
static int
api_run(struct tb_api *api, const sigset_t *stop_set)
{
  struct api_start st = { 0 };
  if (!read_limits(api, &st) || !read_others(api, &st))
    return 2;
  if (!open_database(api, &st) || !start_daemon(api, &st))
    return 1;
  tb_log(TB_LOG_INFO, "listening", "host", TB_LS, tb_cfg_get(api->cfg, "TOKBENCH_LISTEN_HOST"),
         "port", TB_LI, st.port, "migrations_applied", TB_LI, (int64_t)st.applied, NULL);
  int sig = 0;
  if (sigwait(stop_set, &sig) != 0)
    sig = 0;
  tb_log(TB_LOG_INFO, "stopping", "signal", TB_LI, (int64_t)sig, NULL);
  return 0;
}

static void
shut_down(struct tb_api *api)
{
  api->stopping = true;
  /* every suspended connection must be resumed before MHD_stop_daemon */
  tb_api_notify_stop(api->notify);
  tb_api_probes_stop(api->probes);
  if (api->daemon != NULL)
    MHD_stop_daemon(api->daemon);
  tb_api_probes_free(api->probes);
  tb_api_deliveries_stop();
  tb_api_schedtick_stop(api);
  tb_api_notify_free(api->notify);
  tb_db_pool_free(api->pool);
  tb_api_keycache_free(api->keys);
  tb_api_jobcache_free(api->jobs_cache);
  tb_api_jobcache_free(api->results_cache);
  tb_api_streams_free(api->streams);
  tb_api_quota_free(api->quota);
  tb_api_shares_free(api->shares);
  tb_api_conns_free(&api->conns);
  for (char **p = api->cors_origins; p != NULL && *p != NULL; p++)
    free(*p);
  free(api->cors_origins);
  free(api->web_dir);
  OPENSSL_cleanse(api->master_key, sizeof api->master_key);
  tb_api_signkeys_free(api);
  tb_cfg_free(api->cfg);
  tb_tenancy_clear(&api->tenancy);
  tb_egress_install(NULL);
}

int
main(int argc, char **argv)
{
  const char *config = NULL;
  int arc = tb_cfg_daemon_args(argc, argv, "tokbench-api", "The tokbench REST API.", api_keys,
                               TB_ARRAY_LEN(api_keys), &config);
  if (arc >= 0)
    return arc;
  /* SIGTERM and SIGINT are blocked in every thread (the threads started
   * below inherit the mask) and taken by the main thread alone, with
   * sigwait at the end of start-up: a signal that comes early, or lands on
   * another thread, is never lost. */
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGTERM);
  sigaddset(&stop_set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
  char *err = NULL;
  struct tb_api api = { 0 };
  api.cfg = tb_cfg_load(api_keys, TB_ARRAY_LEN(api_keys), config, &err);
  if (api.cfg == NULL) {
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    return 2;
  }
  int level = tb_log_level_parse(tb_cfg_get(api.cfg, "TOKBENCH_LOG_LEVEL"));
  tb_log_init("api", level < 0 ? TB_LOG_INFO : (enum tb_log_level)level);
  int rc = api_run(&api, &stop_set);
  shut_down(&api);
  return rc;
}
