/* libFuzzer target: tb_stream, the engine's one consumer of a streamed
 * completion, over whatever an endpoint may send.  The first bytes pick the
 * HTTP status, the split size, the stamps' step, the cell's kind, its
 * memory budget and window, and what the end expects; the rest is the
 * body, fed in those splits with rising stamps.  Every call the engine
 * makes on a stream is made: the body, the deadlines, the end (cleanly or
 * by a transport error), the tokens got, the window's time between tokens
 * and the request's figures. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/tb_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
on_event(void *cls, struct tb_stream *s, const char *d, size_t len, int64_t delta)
{
  unsigned *refuse = cls;
  if (*refuse && len > *refuse) { /* as the engine fails an answer over its cap */
    tb_stream_fail(s, "answer over %u bytes (%lld tokens)", *refuse, (long long)delta);
    return false;
  }
  (void)d;
  return true;
}

static void
on_tokens(void *cls, struct tb_stream *s, int64_t delta, unsigned flags)
{
  (void)cls;
  (void)s;
  (void)delta;
  (void)flags;
}

static void
on_comment(void *cls, struct tb_stream *s, const char *t, size_t len)
{
  (void)cls;
  (void)s;
  (void)t;
  (void)len;
}

static const long statuses[] = { 200, 200, 200, 200, 400, 429, 500, 503 };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 6)
    return 0;
  long status = statuses[data[0] % 8];
  size_t step = (size_t)data[1] % 64 + 1;
  int64_t tick = ((int64_t)data[2] + 1) * 100000; /* 0.1 to 25.6 ms a read */
  unsigned flags = data[3], refuse = data[4] & 1 ? 64u : 0u;
  static const struct tb_stream_ops ops = { on_event, on_tokens, on_comment };
  static const struct tb_stream_ops bare = { NULL, NULL, NULL };
  struct tb_stats gaps = { 0 };
  struct tb_stream_cell cell = { .kind = flags & 1 ? TB_STREAM_RATE : TB_STREAM_MATRIX,
                                 .w0 = (int64_t)(data[5] % 8) * tick,
                                 .w1 = (int64_t)(data[5] % 8 + data[5] / 8) * tick,
                                 .gaps = flags & 2 ? &gaps : NULL,
                                 .error_bodies = flags & 4,
                                 .ops = flags & 8 ? &bare : &ops };
  cell.mem.max = flags & 16 ? 512 : 1u << 20; /* a small budget hits its cap */
  struct tb_stream s;
  tb_stream_init(&s, &cell, &refuse, 0);
  int64_t now = 0;
  for (size_t i = 6; i < size; i += step) {
    size_t k = size - i < step ? size - i : step;
    now += tick;
    char why[200];
    if (tb_stream_overdue(&s, now, 0.5, 0.05, why, sizeof why)) {
      tb_stream_fail(&s, "%s", why);
      break;
    }
    if (!tb_stream_body(&s, status, now, (const char *)data + i, k))
      break;
  }
  const struct tb_stream_expect x = { .usage = flags & 32,
                                      .max_tokens = flags & 64 ? 16 : 0,
                                      .token = flags & 128 };
  (void)tb_stream_end(&s, status, data[4] & 2 ? "Connection reset by peer" : NULL, &x);
  (void)tb_stream_got(&s);
  int64_t tbt;
  (void)tb_stream_window_tbt(&s, &tbt);
  struct tb_stream_figures f;
  tb_stream_figures(&s, tick / 2, now + tick, &f);
  if (strlen(s.reason) >= sizeof s.reason) /* the reason is always a string */
    __builtin_trap();
  tb_stream_free(&s);
  tb_stats_free(&gaps);
  return 0;
}
