/*
 * q_events: see q_events.h.
 */
#include "q_events.h"

#include <stdio.h>

#define STR_(x) #x
#define STR(x) STR_(x)

static const struct tb_db_stmt ev_owner = {
  "api_ev_owner",
  "SELECT 1 FROM jobs WHERE id = $1 AND project_id = $2",
};

int
tb_q_events_job_exists(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &ev_owner, 2, p, NULL);
}

/* One row even when there is no new event (e.id NULL): the job's state. */
static const struct tb_db_stmt ev_next = {
  "api_ev_next",
  "SELECT e.id, e.kind, e.data::text AS data, j.state FROM jobs j LEFT JOIN LATERAL "
  "  (SELECT id, kind, data FROM job_events WHERE job_id = j.id AND id > $2::bigint "
  "   ORDER BY id LIMIT " STR(TB_Q_EVENTS_BATCH) ") e ON true WHERE j.id = $1 ORDER BY e.id",
};

int
tb_q_events_next(struct tb_db *db, const char *job_id, int64_t after, char state[16],
                 tb_q_events_fn fn, void *cls)
{
  char last[24];
  snprintf(last, sizeof last, "%lld", (long long)after);
  const char *p[] = { job_id, last };
  PGresult *res = NULL;
  state[0] = '\0';
  int rc = tb_db_exec(db, &ev_next, 2, p, &res);
  if (rc > 0) {
    int ci = PQfnumber(res, "id"), ck = PQfnumber(res, "kind"), cd = PQfnumber(res, "data");
    snprintf(state, 16, "%s", PQgetvalue(res, 0, PQfnumber(res, "state")));
    for (int i = 0; i < rc; i++) {
      int64_t id = 0;
      if (PQgetisnull(res, i, ci) || !tb_parse_i64(PQgetvalue(res, i, ci), 0, INT64_MAX, &id))
        continue;
      if (!fn(cls, id, PQgetvalue(res, i, ck), PQgetvalue(res, i, cd),
              (size_t)PQgetlength(res, i, cd)))
        break;
    }
  }
  PQclear(res);
  return rc;
}
