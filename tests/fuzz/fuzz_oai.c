/* libFuzzer target: tb_oai_parse_chunk on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>

#include "tb_oai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct tb_oai_chunk c;
  enum tb_oai_status st = tb_oai_parse_chunk((const char *)data, size, &c);
  if (st == TB_OAI_OK && c.has_usage && c.completion_tokens < 0)
    __builtin_trap(); /* usage is never negative */
  return 0;
}
