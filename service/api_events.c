/*
 * api_events: GET /v1/jobs/{id}/events, the job's progress as Server-Sent
 * Events, from the rows of job_events (written by the worker, and by the api
 * on cancel):
 *
 *   id: <job_events.id>
 *   event: <kind>            state | cell | progress
 *   data: <data, JSON>
 *
 * Last-Event-ID (header, or ?last_event_id=) resumes after that event.  The
 * stream ends after the event that puts the job in a terminal state (or at
 * once when the job has ended and nothing is left to send).  ": ping" comes
 * every TOKBENCH_SSE_PING_S seconds of silence.
 *
 * A key holds at most TOKBENCH_SSE_PER_KEY streams at once (api_streams.h).
 *
 * The response is a content-reader callback.  With nothing to send it arms a
 * waiter on the job (api_notify.c) with the next ping as deadline, looks once
 * more, and suspends the connection: no thread is held while waiting.  The
 * statements: service/q_events.c.
 */
#include <string.h>

#include "api_handlers.h"
#include "api_notify.h"
#include "api_streams.h"
#include "q_events.h"
#include "result/tb_jobdoc.h"

#define TB_SSE_BLOCK 16384

struct sse {
  int64_t last_id;
  char *buf;
  size_t len, pos, cap;
  bool done;
  bool got; /* fill added an event */
  int64_t last_send_ns;
};

static void
sse_free(void *p)
{
  struct sse *s = p;
  if (s == NULL)
    return;
  free(s->buf);
  free(s);
}

static void
append(struct sse *s, const char *data, size_t n)
{
  tb_xgrow(&s->buf, &s->cap, s->len + n, 4096);
  memcpy(s->buf + s->len, data, n);
  s->len += n;
}

/* One event into s (tb_q_events_fn); false once the job's last came. */
static bool
add_event(void *cls, int64_t id, const char *kind, const char *data, size_t len)
{
  struct sse *s = cls;
  char head[96];
  int hl = snprintf(head, sizeof head, "id: %lld\nevent: %s\ndata: ", (long long)id, kind);
  append(s, head, (size_t)hl);
  append(s, data, len); /* jsonb text: no newlines */
  append(s, "\n\n", 2);
  s->last_id = id;
  s->got = true;
  if (strcmp(kind, "state") == 0) {
    json_t *d = json_loads(data, 0, NULL);
    if (tb_jobdoc_terminal(json_string_value(json_object_get(d, "state"))))
      s->done = true;
    json_decref(d);
  }
  return !s->done;
}

/* Reads the next events into s.  1: something to send, 0: nothing, -1 error. */
static int
fill(struct tb_api_req *r, struct sse *s, bool *job_ended)
{
  char state[16];
  s->got = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_events_next(db, r->id, s->last_id, state, add_event, s);
  tb_api_db_put(r, db);
  if (rc <= 0)
    return -1;
  *job_ended = tb_jobdoc_terminal(state);
  return s->got ? 1 : 0;
}

static ssize_t
reader(void *cls, uint64_t pos, char *out, size_t max)
{
  struct tb_api_req *r = cls;
  struct sse *s = r->state;
  (void)pos;
  for (;;) {
    if (s->pos < s->len) {
      size_t n = s->len - s->pos < max ? s->len - s->pos : max;
      memcpy(out, s->buf + s->pos, n);
      s->pos += n;
      return (ssize_t)n;
    }
    s->len = s->pos = 0;
    if (s->done || r->api->stopping)
      return MHD_CONTENT_READER_END_OF_STREAM;
    int64_t now = tb_time_mono_ns();
    int64_t ping_at = s->last_send_ns + (int64_t)r->api->sse_ping_s * 1000000000LL;
    if (now >= ping_at) {
      append(s, ": ping\n\n", 8);
      s->last_send_ns = now;
      continue;
    }
    tb_api_notify_arm(r, r->id, ping_at);
    bool ended = false;
    int got = fill(r, s, &ended);
    if (got != 0 || ended)
      tb_api_notify_disarm(r);
    if (got < 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    if (got > 0) {
      s->last_send_ns = now;
      continue;
    }
    if (ended) {
      s->done = true;
      continue;
    }
    if (tb_api_notify_suspend(r))
      return 0; /* resumed by a NOTIFY, the ping deadline or shutdown */
  }
}

enum MHD_Result
tb_api_jobs_events(struct tb_api_req *r)
{
  const char *lei = tb_api_header(r, "Last-Event-ID");
  if (lei == NULL)
    lei = tb_api_arg(r, "last_event_id");
  int64_t last = 0;
  if (lei != NULL && lei[0] != '\0' && !tb_parse_i64(lei, 0, INT64_MAX, &last))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "Last-Event-ID must be an event id", NULL);
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_events_job_exists(db, r->id, r->project_id);
  tb_api_db_put(r, db);
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  if (rc == 0)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such job", NULL);
  enum MHD_Result busy;
  if (!tb_api_streams_take(r, TB_API_STREAM_SSE, &busy)) /* TOKBENCH_SSE_PER_KEY */
    return busy;
  struct sse *s = tb_xcalloc(1, sizeof *s);
  s->last_id = last;
  s->last_send_ns = tb_time_mono_ns();
  append(s, "retry: 2000\n\n", 13);
  r->state = s;
  r->state_free = sse_free;
  struct MHD_Response *resp =
    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, TB_SSE_BLOCK, reader, r, NULL);
  if (resp == NULL)
    return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, "X-Accel-Buffering", "no");
  tb_api_add_common_headers(r, resp);
  r->status = MHD_HTTP_OK;
  r->replied = true;
  enum MHD_Result ret = MHD_queue_response(r->conn, MHD_HTTP_OK, resp);
  MHD_destroy_response(resp);
  return ret;
}
