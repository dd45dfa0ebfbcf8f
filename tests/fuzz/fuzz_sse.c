/* libFuzzer target: tb_sse over arbitrary bytes, fed in arbitrary splits
 * (the first byte picks the split size), every event parsed by tb_oai. */
#include <stddef.h>
#include <stdint.h>

#include "net/tb_oai.h"
#include "net/tb_sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
on_event(void *cls, const char *d, size_t len)
{
  struct tb_oai_chunk c;
  (void)tb_oai_parse_chunk(d, len, &c);
  return true;
}

static void
on_comment(void *cls, const char *t, size_t len)
{
  (void)cls;
  (void)t;
  (void)len;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  size_t step = (size_t)data[0] % 64 + 1;
  struct tb_sse p;
  tb_sse_init(&p, on_event, on_comment, NULL);
  for (size_t i = 1; i < size; i += step) {
    size_t k = size - i < step ? size - i : step;
    if (tb_sse_feed(&p, (const char *)data + i, k) != TB_SSE_OK)
      break;
  }
  (void)tb_sse_idle(&p);
  tb_sse_free(&p);
  return 0;
}
