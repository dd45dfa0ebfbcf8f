/*
 * tokbench-api: shared state of the HTTP service and the per-request context.
 *
 * One struct tb_api holds what every handler needs: the database pool, the
 * configuration, the master key, the key cache, the notification listener.
 * Handlers live one endpoint family per file (api_<family>.c) and are found
 * through the static routing table in api_routes.c.
 *
 * Every request gets one struct tb_api_req, made on MHD's first call, holding
 * the route, the path parameter, the body (capped), the authenticated key and
 * what a suspended handler needs to carry on; it is freed in one place, the
 * request-completed callback (tb_api_req_free).
 *
 * Handlers return an enum MHD_Result like MHD's own callbacks: the result of
 * queuing a reply (tb_api_reply_*), or MHD_YES after suspending the
 * connection (long-poll), in which case they are called again on resume.
 */
#ifndef TB_API_H
#define TB_API_H

#include <stdatomic.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_conns.h"

#include "api_error.h"
#include "db/tb_auth.h"
#include "base/tb_cfg.h"
#include "base/tb_crypto.h"
#include "db/tb_db.h"
#include "db/tb_tenancy.h"

/* Caps on what a client fills. */
#define TB_API_BODY_MAX_DEFAULT (1024 * 1024)
#define TB_API_ID_LEN 36         /* a UUID in text */
#define TB_API_PARAM_MAX 128     /* a {name} path segment */
#define TB_API_REQUEST_ID_MAX 64 /* X-Request-Id we echo */
#define TB_API_IDEM_KEY_MAX 255  /* Idempotency-Key */

struct tb_api_keycache;
struct tb_api_jobcache;
struct tb_api_notify;
struct tb_api_probes;
struct tb_api_streams;
struct tb_api_quota;
struct tb_api_shares;
struct tb_api_req;
struct tb_sign_key;

struct tb_api {
  struct tb_cfg *cfg;
  struct tb_db_pool *pool;
  struct MHD_Daemon *daemon;
  volatile bool stopping;
  /* The master key (when has_master_key) sealing endpoint keys. */
  unsigned char master_key[TB_CRYPTO_KEY_LEN];
  bool has_master_key;
  size_t body_max;           /* TOKBENCH_MAX_BODY */
  size_t preauth_body_max;   /* TOKBENCH_PREAUTH_BODY: body read before the key is checked */
  unsigned header_timeout_s; /* TOKBENCH_HEADER_TIMEOUT_S: silence before a request's head */
  unsigned idle_timeout_s;   /* TOKBENCH_IDLE_TIMEOUT_S: silence inside a request */
  /* issue 27: above the high-water mark of open connections (3/4 of
   * TOKBENCH_MAX_CONNECTIONS), a connection without a request head gets
   * TOKBENCH_HEADER_TIMEOUT_BUSY_S instead (0: off) */
  atomic_uint conns_open;
  unsigned conns_high_water;
  unsigned busy_header_timeout_s;
  /* and at TOKBENCH_MAX_CONNECTIONS less TOKBENCH_CONNECTIONS_RESERVE, the
   * oldest connection without a request head is shut down (api_conns.h) */
  struct tb_api_conns conns;
  double rate_per_s;          /* TOKBENCH_RATE_LIMIT, 0 = off */
  double rate_burst;          /* TOKBENCH_RATE_BURST */
  struct tb_api_quota *quota; /* per-project request rate (api_quota.h) */
  double project_rate_per_s;  /* TOKBENCH_RATE_LIMIT_PROJECT, 0 = off */
  int64_t limit_keys;         /* TOKBENCH_LIMIT_KEYS: live keys per project, 0 = no cap */
  int sse_ping_s;             /* TOKBENCH_SSE_PING_S */
  int wait_max_s;             /* longest ?wait= */
  char **cors_origins;        /* NULL-terminated; NULL: CORS off */
  bool cors_any;
  char *web_dir; /* TOKBENCH_WEB_DIR resolved (api_web.h) */
  struct tb_api_keycache *keys;
  struct tb_api_jobcache *jobs_cache;    /* GET /v1/jobs/{id} (api_jobcache.h) */
  struct tb_api_jobcache *results_cache; /* a finished job's GET .../result (api_result.c) */
  struct tb_api_notify *notify;
  struct tb_api_probes *probes;   /* the probe pool (api_probe.h) */
  struct tb_api_streams *streams; /* SSE streams and long-polls per key (api_streams.h) */
  struct tb_tenancy tenancy;      /* per-project limits, shared groups (tb_tenancy.h) */
  /* issue 25: uploaded traces (api_traces.h) */
  size_t trace_body_max;     /* TOKBENCH_TRACE_MAX_BYTES: a POST /v1/traces body */
  size_t trace_max_memory;   /* TOKBENCH_TRACE_MAX_MEMORY: one trace's reading */
  int64_t limit_traces;      /* TOKBENCH_LIMIT_TRACES: per project, 0 = no cap */
  int64_t limit_trace_bytes; /* TOKBENCH_LIMIT_TRACE_BYTES: per project, 0 = no cap */
  /* issue 35: schedules (api_schedules.h) */
  int64_t limit_schedules;         /* TOKBENCH_LIMIT_SCHEDULES: per project, 0 = no cap */
  int64_t schedule_min_interval_s; /* TOKBENCH_SCHEDULE_MIN_INTERVAL_S */
  int64_t schedule_tick_ms;        /* TOKBENCH_SCHEDULE_TICK_MS, 0 = no ticker here */
  int64_t schedule_clock_offset_s; /* TOKBENCH_SCHEDULE_CLOCK_OFFSET_S (tests) */
  const char *zoneinfo_dir;        /* TOKBENCH_ZONEINFO_DIR (borrowed from cfg) */
  struct tb_api_schedtick *schedtick;
  /* issue 35: share links (api_shares.h) */
  struct tb_api_shares *shares;
  /* issue 35: the key finished results are signed with (api_signkeys.h), or NULL */
  struct tb_sign_key *sign_key;
};

/* A handler: see the file comment for what it returns. */
typedef enum MHD_Result (*tb_api_handler)(struct tb_api_req *r);

/* Routes (api_routes.c).  path: literal segments, "{id}" (a UUID, into
 * r->id) and "{name}" (one segment of [A-Za-z0-9._~-], into r->param). */
struct tb_api_route {
  const char *method;
  const char *path;
  /* Scope the key needs; TB_SCOPE_NONE: no key asked (public route). */
  unsigned scope;
  /* A public route whose body is authenticated otherwise (a signature over
   * it): when admit(r) says so on the request's head, the body may be read
   * up to TOKBENCH_MAX_BODY instead of TOKBENCH_PREAUTH_BODY.  May be NULL. */
  bool (*admit)(struct tb_api_req *r);
  /* The body must be application/json (415 otherwise). */
  bool json_body;
  /* The body is an upload (a trace file): read up to
   * TOKBENCH_TRACE_MAX_BYTES instead of TOKBENCH_MAX_BODY, once the key is
   * checked. */
  bool upload;
  tb_api_handler fn;
};

/* Waiting for a NOTIFY (api_notify.c): embedded in the request. */
struct tb_api_waiter {
  struct tb_api_waiter *prev, *next;
  struct MHD_Connection *conn;
  char job_id[TB_API_ID_LEN + 1];
  int64_t deadline_ns; /* monotonic; resumed then even without a NOTIFY */
  bool listed;         /* in the notify list */
  bool suspended;      /* the connection is suspended */
  bool fired;          /* a NOTIFY, the deadline or shutdown came */
};

struct tb_api_req {
  struct tb_api *api;
  struct MHD_Connection *conn;
  struct tb_api_conn *conn_entry; /* the connection's in api->conns, or NULL */
  const char *method;             /* borrowed from MHD, valid until completed */
  const char *url;
  const struct tb_api_route *route;
  char id[TB_API_ID_LEN + 1];
  char param[TB_API_PARAM_MAX + 1];
  char request_id[TB_API_REQUEST_ID_MAX + 1];
  char allow[64]; /* for 405: the methods the path allows */
  /* Body, at most body_limit bytes (api->preauth_body_max until the key is
   * checked on the request's head, then api->body_max); over that too_big
   * is set and the rest is discarded. */
  char *body;
  size_t body_len;
  size_t body_cap;
  size_t body_limit;
  bool too_big;
  bool replied;
  bool early;      /* a reply was queued on the first call */
  unsigned status; /* status of the queued reply (for the log) */
  int64_t t0_ns;
  int retry_after_s; /* for 429 */
  /* The authenticated key. */
  bool authed;
  char key_id[TB_API_ID_LEN + 1];
  char project_id[TB_API_ID_LEN + 1];
  unsigned scopes; /* effective (implications applied) */
  /* Long-poll and SSE. */
  struct tb_api_waiter waiter;
  int64_t wait_deadline_ns;
  int stream_held; /* a per-key slot held (api_streams.h), 0: none */
  void *state;     /* a handler's own state */
  void (*state_free)(void *state);
};

/* Request helpers (main.c / api_reply.c). */
/* A request header (borrowed) or NULL. */
const char *tb_api_header(struct tb_api_req *r, const char *name);
/* A query argument (borrowed) or NULL. */
const char *tb_api_arg(struct tb_api_req *r, const char *name);
/* Parses the body as a JSON object.  Returns a new reference, or NULL after
 * queuing a 400 reply into *ret. */
json_t *tb_api_body_json(struct tb_api_req *r, enum MHD_Result *ret) TB_MUST_CHECK;
/* A database connection from the pool; give it back with tb_api_db_put. */
struct tb_db *tb_api_db_get(struct tb_api_req *r);
void tb_api_db_put(struct tb_api_req *r, struct tb_db *db);

/*
 * Replies: every reply goes through tb_api_reply, so the common headers
 * (request id, CORS, Cache-Control, nosniff) are set in one place.
 * headers: NULL or a NULL-terminated list of name, value pairs.
 */
enum MHD_Result tb_api_reply(struct tb_api_req *r, unsigned status, const char *ctype,
                             const char *body, size_t len, const char *const *headers);
/* A JSON text. */
enum MHD_Result tb_api_reply_text(struct tb_api_req *r, unsigned status, const char *json,
                                  const char *const *headers);
/* A JSON text with the Location of what it made: prefix then id
 * ("/v1/jobs/" and the job's id). */
enum MHD_Result tb_api_reply_at(struct tb_api_req *r, unsigned status, const char *json,
                                const char *prefix, const char *id);
/* 201 with o (stolen), which holds secrets (a new key, a share's token and
 * url) in its members named by secret (NULL-terminated), and the Location
 * prefix then o's "id".  The secrets are wiped from every copy made here:
 * o's strings and the dumped text. */
enum MHD_Result tb_api_reply_secret(struct tb_api_req *r, json_t *o, const char *prefix,
                                    const char *const *secret);
/* A JSON value (stolen). */
enum MHD_Result tb_api_reply_json(struct tb_api_req *r, unsigned status, json_t *v,
                                  const char *const *headers);
/* The one error reply: the problem document of code (api_error.c) with
 * detail (may be NULL) and, when extra is not NULL, its members merged in
 * (stolen; e.g. "errors": [...]). */
enum MHD_Result tb_api_reply_error(struct tb_api_req *r, enum tb_api_ec code, const char *detail,
                                   json_t *extra);
/* 422 naming one field: detail "<field>: <detail>", errors [{field, detail}]. */
enum MHD_Result tb_api_reply_invalid(struct tb_api_req *r, const char *field, const char *detail);
/* True when the object body has no member but those of allowed
 * (NULL-terminated); else false with a 422 naming the first other member
 * queued into *ret. */
bool tb_api_only_members(struct tb_api_req *r, json_t *body, const char *const *allowed,
                         enum MHD_Result *ret) TB_MUST_CHECK;
/* The errors of an api_spec validator: rc 1 (bad JSON) -> 400, else 422 with
 * "errors" (stolen) and a detail naming the first field. */
enum MHD_Result tb_api_reply_spec_errors(struct tb_api_req *r, int rc, json_t *errors);
/* Adds the common headers to a response made elsewhere (SSE). */
void tb_api_add_common_headers(struct tb_api_req *r, struct MHD_Response *resp);
/* Replies 503 for TB_DB_SOFT and 500 for TB_DB_HARD. */
enum MHD_Result tb_api_reply_db(struct tb_api_req *r, int db_rc);

/*
 * The shapes most read and delete routes share, after the query function
 * (service/q_<family>.h) has run:
 * tb_api_found: true when rc > 0; else false with a reply queued into *ret:
 * 404 (not_found as detail) for rc 0, 503/500 for a database error.
 * tb_api_reply_doc: replies status with doc (stolen: a JSON text), wrapped
 * as {"<wrap>": ...} when wrap is not NULL; as tb_api_found when rc <= 0 or
 * doc is NULL (no row).
 * tb_api_reply_deleted: 204, or as tb_api_found when rc <= 0 (no row
 * touched).
 */
bool tb_api_found(struct tb_api_req *r, int rc, const char *not_found,
                  enum MHD_Result *ret) TB_MUST_CHECK;
enum MHD_Result tb_api_reply_doc(struct tb_api_req *r, int rc, char *doc, unsigned status,
                                 const char *wrap, const char *not_found);
enum MHD_Result tb_api_reply_deleted(struct tb_api_req *r, int rc, const char *not_found);
/* The three routes of most families, query function included (on a pooled
 * connection): a list of the project's rows (200 {"<wrap>": [...]}), one
 * row by r->id (200, or 404 not_found), a delete by r->id (204, or 404). */
typedef int (*tb_api_list_fn)(struct tb_db *db, const char *project_id, char **doc);
typedef int (*tb_api_get_fn)(struct tb_db *db, const char *id, const char *project_id, char **doc);
typedef int (*tb_api_delete_fn)(struct tb_db *db, const char *id, const char *project_id);
enum MHD_Result tb_api_reply_list(struct tb_api_req *r, tb_api_list_fn q, const char *wrap);
enum MHD_Result tb_api_reply_get(struct tb_api_req *r, tb_api_get_fn q, const char *not_found);
enum MHD_Result tb_api_reply_delete(struct tb_api_req *r, tb_api_delete_fn q,
                                    const char *not_found);
/* 201 with doc (stolen), which holds a new secret under "secret" shown this
 * once: jansson's copy and the encoded text are wiped before they are freed.
 * loc: the Location header. */
enum MHD_Result tb_api_reply_secret_created(struct tb_api_req *r, json_t *doc, const char *loc);

/* True when s is a UUID in text (8-4-4-4-12 hex). */
bool tb_api_is_uuid(const char *s);

/* Routing (api_routes.c). */
/* True when s[0..n) is 1 to max characters of [A-Za-z0-9._~-] (a "{name}"
 * path segment; also the rule for the names such segments carry). */
bool tb_api_segment_ok(const char *s, size_t n, size_t max);
enum tb_api_match {
  TB_API_MATCH_OK,
  TB_API_MATCH_NO_PATH,
  TB_API_MATCH_NO_METHOD
};
/* Finds the route of (method, path); fills r->route, r->id, r->param, and
 * r->allow (on NO_METHOD, and for OPTIONS). */
enum tb_api_match tb_api_route_find(struct tb_api_req *r, const char *method, const char *path);

#endif
