/*
 * tb_shards: the statements of a sharded cell (tb_shards.h), each beside
 * the one function that binds it, columns read by name.
 */
#include "db/tb_shards.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_PARAMS(k, att, p)                      \
  do {                                             \
    snprintf(att, sizeof att, "%d", (k)->attempt); \
    (p)[0] = (k)->job_id;                          \
    (p)[1] = (k)->cell_key;                        \
    (p)[2] = att;                                  \
  } while (0)

/* The key's parameters, then the job's lease (its owner $4, its attempt $5)
 * for the statements fenced by it (LEASE_CTE). */
#define KEY_LEASE_PARAMS(k, l, att, latt, p)         \
  do {                                               \
    KEY_PARAMS(k, att, p);                           \
    snprintf(latt, sizeof latt, "%d", (l)->attempt); \
    (p)[3] = (l)->owner;                             \
    (p)[4] = latt;                                   \
  } while (0)

/* The job, while the lease of KEY_LEASE_PARAMS holds (open's takes a lock). */
#define LEASE_CTE                                                            \
  "WITH lease AS ("                                                          \
  "  SELECT id FROM jobs WHERE id = $1::uuid AND lease_owner = $4::text AND" \
  "    attempts = $5::int AND state = 'running'"

#define KEY_WHERE "job_id = $1::uuid AND cell_key = $2::text AND attempt = $3::int"
#define KEY_WHERE_Q(a) \
  a ".job_id = $1::uuid AND " a ".cell_key = $2::text AND " a ".attempt = $3::int"

void
tb_shard_clear(struct tb_shard *s)
{
  json_decref(s->spec);
  s->spec = NULL;
}

/* ------------------------------------------------------------------- open */

static const struct tb_db_stmt open_stmt = {
  "tb_shards_open",
  LEASE_CTE
  " FOR UPDATE"
  "), b AS ("
  "  INSERT INTO cell_barriers (job_id, cell_key, attempt, nshards, spec, deadline)"
  "  SELECT id, $2::text, $3::int, $6::int, $7::jsonb,"
  "         clock_timestamp() + make_interval(secs => $8::float8) FROM lease"
  "  RETURNING job_id, cell_key, attempt, nshards"
  "), s AS ("
  "  INSERT INTO cell_shards (job_id, cell_key, attempt, shard)"
  "  SELECT b.job_id, b.cell_key, b.attempt, g FROM b, generate_series(0, b.nshards - 1) g"
  "  RETURNING shard"
  ")"
  "SELECT (SELECT count(*) FROM lease) AS leased,"
  "       (SELECT count(*) FROM s) AS shards,"
  "       (SELECT count(*) FROM (SELECT pg_notify('tb_shards_open', job_id::text) FROM b) n)"
  "         AS notified",
};

int
tb_shards_open(struct tb_db *db, const struct tb_queue_lease *l, const struct tb_shards_key *key,
               int nshards, const json_t *spec, double timeout_s)
{
  if (nshards < 1 || nshards > 64 || strlen(key->cell_key) == 0)
    return TB_DB_HARD;
  char *text = json_dumps(spec, JSON_COMPACT);
  if (text == NULL)
    return TB_DB_HARD;
  char att[16], latt[16], n[16], to[32];
  const char *p[8];
  KEY_LEASE_PARAMS(key, l, att, latt, p);
  snprintf(n, sizeof n, "%d", nshards);
  snprintf(to, sizeof to, "%.3f", timeout_s);
  p[5] = n;
  p[6] = text;
  p[7] = to;
  int rc = tb_db_exec_counted(db, &open_stmt, 8, p, "leased");
  free(text);
  return rc;
}

/* ------------------------------------------------------------------ claim */

static const struct tb_db_stmt claim_stmt = {
  "tb_shards_claim",
  "WITH pick AS ("
  "  SELECT s.job_id, s.cell_key, s.attempt, s.shard FROM cell_shards s"
  "    JOIN cell_barriers b USING (job_id, cell_key, attempt)"
  "   WHERE s.state = 'open' AND b.state = 'waiting' AND b.deadline > clock_timestamp()"
  "     AND NOT EXISTS (SELECT 1 FROM cell_shards o WHERE o.job_id = s.job_id AND"
  "                     o.cell_key = s.cell_key AND o.attempt = s.attempt AND"
  "                     o.worker = $1::text)"
  "   ORDER BY b.created_at, s.shard"
  "   LIMIT 1 FOR UPDATE OF s SKIP LOCKED"
  ")"
  "UPDATE cell_shards c SET state = 'claimed', worker = $1::text, host = $2::text,"
  "       lease_until = clock_timestamp() + make_interval(secs => $3::int)"
  "  FROM pick, cell_barriers b"
  " WHERE c.job_id = pick.job_id AND c.cell_key = pick.cell_key AND"
  "       c.attempt = pick.attempt AND c.shard = pick.shard AND"
  "       b.job_id = c.job_id AND b.cell_key = c.cell_key AND b.attempt = c.attempt"
  " RETURNING c.job_id, c.cell_key, c.attempt, c.shard, b.nshards, b.spec",
};

int
tb_shards_claim(struct tb_db *db, const char *worker, const char *host, int lease_s,
                struct tb_shard *out)
{
  if (strlen(worker) == 0 || strlen(worker) > TB_QUEUE_OWNER_MAX ||
      strlen(host) > TB_SHARDS_HOST_MAX)
    return TB_DB_HARD;
  char ls[16];
  snprintf(ls, sizeof ls, "%d", lease_s);
  const char *p[3] = { worker, host, ls };
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &claim_stmt, 3, p, &r);
  if (rc == 1) {
    memset(out, 0, sizeof *out);
    tb_db_copy(r, 0, "job_id", out->key.job_id, sizeof out->key.job_id);
    tb_db_copy(r, 0, "cell_key", out->key.cell_key, sizeof out->key.cell_key);
    out->key.attempt = (int)tb_db_i64(r, 0, "attempt");
    out->shard = (int)tb_db_i64(r, 0, "shard");
    out->nshards = (int)tb_db_i64(r, 0, "nshards");
    snprintf(out->worker, sizeof out->worker, "%s", worker);
    const char *spec = tb_db_str(r, 0, "spec");
    out->spec = spec ? json_loads(spec, 0, NULL) : NULL;
    if (out->spec == NULL)
      rc = TB_DB_HARD;
  }
  PQclear(r);
  return rc;
}

/* ------------------------------------------------------------------ clock */

static const struct tb_db_stmt clock_stmt = {
  "tb_shards_clock",
  "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us",
};

int
tb_shards_clock(struct tb_db *db, unsigned probes, struct tb_clock_offset *out)
{
  if (probes == 0 || probes > 64)
    return TB_DB_HARD;
  struct tb_clock_probe pr[64];
  for (unsigned i = 0; i < probes; i++) {
    PGresult *r = NULL;
    pr[i].sent_ns = tb_time_mono_ns();
    int rc = tb_db_exec(db, &clock_stmt, 0, NULL, &r);
    pr[i].recv_ns = tb_time_mono_ns();
    if (rc != 1) {
      PQclear(r);
      return rc < 0 ? rc : TB_DB_HARD;
    }
    pr[i].server_us = tb_db_i64(r, 0, "us");
    PQclear(r);
  }
  if (!tb_clock_offset(pr, probes, out))
    return TB_DB_HARD;
  /* the wall clock minus the monotonic one, at one instant (issue 35) */
  out->wall_offset_ns = out->offset_ns - (tb_time_real_us() * 1000 - tb_time_mono_ns());
  out->has_wall = true;
  return 1;
}

/* ------------------------------------------------------------------ ready */

static const struct tb_db_stmt ready_stmt = {
  "tb_shards_ready",
  "UPDATE cell_shards s SET state = 'ready', clock_offset_ns = $6::bigint,"
  "       clock_uncert_ns = $7::bigint, clock_wall_offset_us = $8::bigint"
  "  FROM cell_barriers b"
  " WHERE " KEY_WHERE_Q(
    "s") " AND s.shard = $4::int AND s.worker = $5::text AND"
         "       s.state = 'claimed' AND b.job_id = s.job_id AND b.cell_key = s.cell_key AND"
         "       b.attempt = s.attempt AND b.state = 'waiting'"
         " RETURNING s.shard",
};

/* Run after the shard's ready has committed: of the shards that call it,
 * the last to commit sees them all (its statement's snapshot is later than
 * every ready), and the state guard starts the barrier once. */
static const struct tb_db_stmt start_stmt = {
  "tb_shards_start",
  "WITH st AS ("
  "  UPDATE cell_barriers SET state = 'started',"
  "         t0 = clock_timestamp() + make_interval(secs => $4::float8)"
  "   WHERE " KEY_WHERE " AND state = 'waiting' AND"
  "         nshards = (SELECT count(*) FROM cell_shards WHERE " KEY_WHERE " AND"
  "                    state = 'ready')"
  "  RETURNING job_id, cell_key, attempt"
  ")"
  "SELECT count(*) AS started FROM"
  "  (SELECT pg_notify('tb_shards_start', job_id::text || '/' || attempt || '/' || cell_key)"
  "     FROM st) n",
};

int
tb_shards_ready(struct tb_db *db, const struct tb_shard *s, const struct tb_clock_offset *off,
                double lead_s)
{
  char att[16], sh[16], o[32], u[32], w[32], lead[32];
  const char *p[8];
  KEY_PARAMS(&s->key, att, p);
  snprintf(sh, sizeof sh, "%d", s->shard);
  snprintf(o, sizeof o, "%lld", (long long)off->offset_ns);
  snprintf(u, sizeof u, "%lld", (long long)off->uncert_ns);
  p[3] = sh;
  p[4] = s->worker;
  p[5] = o;
  p[6] = u;
  snprintf(w, sizeof w, "%lld", (long long)(off->wall_offset_ns / 1000));
  p[7] = off->has_wall ? w : NULL;
  int rc = tb_db_exec(db, &ready_stmt, 8, p, NULL);
  if (rc != 1)
    return rc < 0 ? rc : 0;
  snprintf(lead, sizeof lead, "%.6f", lead_s);
  p[3] = lead;
  rc = tb_db_exec(db, &start_stmt, 4, p, NULL);
  return rc < 0 ? rc : 1;
}

/* ---------------------------------------------------------------- barrier */

static const struct tb_db_stmt barrier_stmt = {
  "tb_shards_barrier",
  "SELECT state, reason, (extract(epoch FROM t0) * 1000000)::bigint AS t0_us"
  "  FROM cell_barriers WHERE " KEY_WHERE,
};

int
tb_shards_barrier(struct tb_db *db, const struct tb_shards_key *key, char state[16], int64_t *t0_us,
                  char *why, size_t why_len)
{
  char att[16];
  const char *p[3];
  KEY_PARAMS(key, att, p);
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &barrier_stmt, 3, p, &r);
  if (rc == 1) {
    tb_db_copy(r, 0, "state", state, 16);
    *t0_us = tb_db_i64(r, 0, "t0_us");
    if (why != NULL && why_len > 0)
      tb_db_copy(r, 0, "reason", why, why_len);
  }
  PQclear(r);
  return rc;
}

/* ------------------------------------------------------------ beat, store */

static const struct tb_db_stmt beat_stmt = {
  "tb_shards_beat",
  "UPDATE cell_shards s SET lease_until = clock_timestamp() + make_interval(secs => $6::int)"
  "  FROM cell_barriers b"
  " WHERE " KEY_WHERE_Q("s") " AND s.shard = $4::int AND s.worker = $5::text AND"
                             "       s.state IN ('claimed', 'ready') AND b.job_id = s.job_id AND"
                             "       b.cell_key = s.cell_key AND b.attempt = s.attempt AND"
                             "       b.state IN ('waiting', 'started')"
                             " RETURNING s.shard",
};

int
tb_shards_beat(struct tb_db *db, const struct tb_shard *s, int lease_s)
{
  char att[16], sh[16], ls[16];
  const char *p[6];
  KEY_PARAMS(&s->key, att, p);
  snprintf(sh, sizeof sh, "%d", s->shard);
  snprintf(ls, sizeof ls, "%d", lease_s);
  p[3] = sh;
  p[4] = s->worker;
  p[5] = ls;
  int rc = tb_db_exec(db, &beat_stmt, 6, p, NULL);
  return rc < 0 ? rc : (rc == 1 ? 1 : 0);
}

/* A string cut by snprintf may end inside a UTF-8 sequence, which the
 * database refuses: the cut sequence goes. */
static void
trim_utf8(char *t)
{
  size_t n = strlen(t), i = n;
  while (i > 0 && ((unsigned char)t[i - 1] & 0xC0) == 0x80)
    i--;
  if (i == 0)
    return;
  unsigned char lead = (unsigned char)t[i - 1];
  size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if ((i - 1) + want > n)
    t[i - 1] = '\0';
}

static const struct tb_db_stmt fail_stmt = {
  "tb_shards_fail",
  "WITH me AS ("
  "  SELECT 1 FROM cell_shards s WHERE " KEY_WHERE_Q(
    "s") " AND s.shard = $4::int AND"
         "         s.worker = $5::text AND s.state IN ('claimed', 'ready')"
         "), fb AS ("
         "  UPDATE cell_barriers b SET state = 'failed',"
         "         reason = format('shard %s (worker %s): %s', $4::int, $5::text, $6::text)"
         "   WHERE " KEY_WHERE_Q(
           "b") " AND b.state IN ('waiting', 'started') AND EXISTS (SELECT 1 FROM me)"
                "  RETURNING b.job_id, b.cell_key, b.attempt"
                "), fs AS ("
                "  UPDATE cell_shards s SET state = 'failed', lease_until = NULL FROM fb"
                "   WHERE s.job_id = fb.job_id AND s.cell_key = fb.cell_key AND s.attempt = "
                "fb.attempt"
                "     AND s.state <> 'done'"
                "  RETURNING s.shard"
                ")"
                "SELECT (SELECT count(*) FROM fb) AS failed, (SELECT count(*) FROM fs) AS released",
};

int
tb_shards_fail(struct tb_db *db, const struct tb_shard *s, const char *why)
{
  char att[16], sh[16], reason[TB_SHARDS_REASON_MAX + 1];
  const char *p[6];
  KEY_PARAMS(&s->key, att, p);
  snprintf(sh, sizeof sh, "%d", s->shard);
  snprintf(reason, sizeof reason, "%s", why ? why : "failed");
  trim_utf8(reason);
  p[3] = sh;
  p[4] = s->worker;
  p[5] = reason;
  return tb_db_exec_counted(db, &fail_stmt, 6, p, "failed");
}

static const struct tb_db_stmt store_stmt = {
  "tb_shards_store",
  "UPDATE cell_shards s SET state = 'done', samples = $6::bytea, skew_us = $7::bigint,"
  "       lease_until = NULL"
  "  FROM cell_barriers b"
  " WHERE " KEY_WHERE_Q(
    "s") " AND s.shard = $4::int AND s.worker = $5::text AND"
         "       s.state = 'ready' AND b.job_id = s.job_id AND b.cell_key = s.cell_key AND"
         "       b.attempt = s.attempt AND b.state = 'started'"
         " RETURNING s.shard",
};

int
tb_shards_store(struct tb_db *db, const struct tb_shard *s, const unsigned char *samples,
                size_t len, int64_t skew_us)
{
  char *hex = tb_db_bytea_hex(samples, len);
  char att[16], sh[16], sk[32];
  const char *p[7];
  KEY_PARAMS(&s->key, att, p);
  snprintf(sh, sizeof sh, "%d", s->shard);
  snprintf(sk, sizeof sk, "%lld", (long long)skew_us);
  p[3] = sh;
  p[4] = s->worker;
  p[5] = hex;
  p[6] = sk;
  int rc = tb_db_exec(db, &store_stmt, 7, p, NULL);
  free(hex);
  return rc < 0 ? rc : (rc == 1 ? 1 : 0);
}

/* ----------------------------------------------------------------- expire */

static const struct tb_db_stmt expire_stmt = {
  "tb_shards_expire",
  "WITH lapsed AS ("
  "  SELECT DISTINCT ON (b.cell_key, b.attempt) b.job_id, b.cell_key, b.attempt,"
  "         CASE WHEN b.state = 'waiting' AND b.deadline <= clock_timestamp() THEN"
  "           format('barrier timeout: %s of %s shards ready after %s s',"
  "                  (SELECT count(*) FROM cell_shards r WHERE r.job_id = b.job_id AND"
  "                   r.cell_key = b.cell_key AND r.attempt = b.attempt AND"
  "                   r.state = 'ready'), b.nshards,"
  "                  round(extract(epoch FROM b.deadline - b.created_at)::numeric, 1))"
  "         ELSE format('shard %s''s worker %s lost its lease', s.shard, s.worker) END"
  "           AS reason"
  "    FROM cell_barriers b LEFT JOIN cell_shards s ON s.job_id = b.job_id AND"
  "         s.cell_key = b.cell_key AND s.attempt = b.attempt AND"
  "         s.state IN ('claimed', 'ready') AND s.lease_until <= clock_timestamp()"
  "   WHERE b.job_id = $1::uuid AND b.state IN ('waiting', 'started') AND"
  "         ((b.state = 'waiting' AND b.deadline <= clock_timestamp()) OR s.shard IS NOT NULL)"
  "   ORDER BY b.cell_key, b.attempt, s.shard"
  "), fb AS ("
  "  UPDATE cell_barriers b SET state = 'failed', reason = lapsed.reason FROM lapsed"
  "   WHERE b.job_id = lapsed.job_id AND b.cell_key = lapsed.cell_key AND"
  "         b.attempt = lapsed.attempt"
  "  RETURNING b.job_id, b.cell_key, b.attempt"
  "), fs AS ("
  "  UPDATE cell_shards s SET state = 'failed', lease_until = NULL FROM fb"
  "   WHERE s.job_id = fb.job_id AND s.cell_key = fb.cell_key AND s.attempt = fb.attempt"
  "     AND s.state <> 'done'"
  "  RETURNING s.shard"
  ")"
  "SELECT (SELECT count(*) FROM fb) AS failed, (SELECT count(*) FROM fs) AS released",
};

int
tb_shards_expire(struct tb_db *db, const char *job_id)
{
  const char *p[1] = { job_id };
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &expire_stmt, 1, p, &r);
  if (rc == 1)
    rc = (int)tb_db_i64(r, 0, "failed");
  else if (rc >= 0)
    rc = TB_DB_HARD;
  PQclear(r);
  return rc;
}

/* ---------------------------------------------------------------- collect */

static const struct tb_db_stmt collect_stmt = {
  "tb_shards_collect",
  "SELECT s.shard, s.worker, s.host, s.skew_us, s.clock_uncert_ns, s.clock_wall_offset_us,"
  "       s.samples"
  "  FROM cell_shards s JOIN cell_barriers b USING (job_id, cell_key, attempt)"
  " WHERE " KEY_WHERE_Q("s") " AND b.state = 'started' AND"
                             "       (SELECT count(*) FROM cell_shards d WHERE " KEY_WHERE_Q(
                               "d") " AND d.state = 'done')"
                                    "         = b.nshards"
                                    " ORDER BY s.shard",
};

int
tb_shards_collect(struct tb_db *db, const struct tb_shards_key *key, struct tb_shard_row **rows)
{
  char att[16];
  const char *p[3];
  KEY_PARAMS(key, att, p);
  PGresult *r = NULL;
  *rows = NULL;
  int rc = tb_db_exec(db, &collect_stmt, 3, p, &r);
  if (rc > 0) {
    struct tb_shard_row *a = tb_xcalloc((size_t)rc, sizeof *a);
    for (int i = 0; i < rc; i++) {
      a[i].shard = (int)tb_db_i64(r, i, "shard");
      a[i].worker = tb_db_dup(r, i, "worker");
      a[i].host = tb_db_dup(r, i, "host");
      a[i].skew_us = tb_db_i64(r, i, "skew_us");
      a[i].uncert_ns = tb_db_i64(r, i, "clock_uncert_ns");
      a[i].has_wall = tb_db_str(r, i, "clock_wall_offset_us") != NULL;
      a[i].wall_offset_us = tb_db_i64(r, i, "clock_wall_offset_us");
      const char *hex = tb_db_str(r, i, "samples");
      size_t n = 0;
      unsigned char *raw = hex ? PQunescapeBytea((const unsigned char *)hex, &n) : NULL;
      if (raw == NULL) {
        tb_shards_rows_free(a, i + 1);
        PQclear(r);
        return TB_DB_HARD;
      }
      a[i].samples = tb_xmalloc(n ? n : 1);
      memcpy(a[i].samples, raw, n);
      a[i].len = n;
      PQfreemem(raw);
    }
    *rows = a;
  }
  PQclear(r);
  return rc;
}

void
tb_shards_rows_free(struct tb_shard_row *rows, int n)
{
  for (int i = 0; rows != NULL && i < n; i++) {
    free(rows[i].worker);
    free(rows[i].host);
    free(rows[i].samples);
  }
  free(rows);
}

/* ------------------------------------------------------------------ close */

static const struct tb_db_stmt close_stmt = {
  "tb_shards_close",
  LEASE_CTE "), b AS ("
            "  UPDATE cell_barriers SET state = $6::text, reason = $7::text FROM lease"
            "   WHERE job_id = lease.id AND cell_key = $2::text AND attempt = $3::int"
            "  RETURNING job_id"
            "), s AS ("
            "  UPDATE cell_shards SET state = 'failed', lease_until = NULL FROM b"
            "   WHERE $6::text = 'failed' AND cell_shards.job_id = b.job_id AND"
            "         cell_key = $2::text AND attempt = $3::int AND state <> 'done'"
            "  RETURNING shard"
            ")"
            "SELECT (SELECT count(*) FROM b) AS closed, (SELECT count(*) FROM s) AS released",
};

int
tb_shards_close(struct tb_db *db, const struct tb_queue_lease *l, const struct tb_shards_key *key,
                const char *state, const char *reason)
{
  if (strcmp(state, "merged") != 0 && strcmp(state, "failed") != 0)
    return TB_DB_HARD;
  char att[16], latt[16];
  const char *p[7];
  KEY_LEASE_PARAMS(key, l, att, latt, p);
  p[5] = state;
  p[6] = reason;
  return tb_db_exec_counted(db, &close_stmt, 7, p, "closed");
}
