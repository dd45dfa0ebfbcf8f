/* libFuzzer target: tb_h1 over arbitrary bytes in arbitrary splits (the
 * first byte picks the split size), as the engine reads a stream: responses
 * one after another on one connection, bodies fed to tb_sse and each event
 * to tb_oai, then the end of the connection. */
#include <stddef.h>
#include <stdint.h>

#include "net/tb_h1.h"
#include "net/tb_oai.h"
#include "net/tb_sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
on_event(void *cls, const char *d, size_t len)
{
  (void)cls;
  struct tb_oai_chunk c;
  (void)tb_oai_parse_chunk(d, len, &c);
  return true;
}

static bool
on_body(void *cls, const char *d, size_t len)
{
  return tb_sse_feed(cls, d, len) == TB_SSE_OK;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  size_t step = (size_t)data[0] % 64 + 1;
  struct tb_sse sse;
  tb_sse_init(&sse, on_event, NULL, NULL);
  sse.cls = &sse;
  struct tb_h1 p;
  tb_h1_init(&p);
  enum tb_h1_status st = TB_H1_MORE;
  for (size_t i = 1; i < size && st != TB_H1_ERROR && st != TB_H1_STOPPED;) {
    size_t k = size - i < step ? size - i : step;
    size_t used;
    st = tb_h1_feed(&p, (const char *)data + i, k, &used, on_body, &sse);
    if (st == TB_H1_DONE) { /* the next response on the connection */
      (void)tb_h1_keep_alive(&p);
      tb_h1_init(&p);
      st = TB_H1_MORE;
    }
    i += used > 0 ? used : k;
  }
  if (st == TB_H1_MORE)
    (void)tb_h1_eof(&p);
  tb_sse_free(&sse);
  return 0;
}
