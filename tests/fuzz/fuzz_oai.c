/* libFuzzer target: tb_oai_parse_chunk on arbitrary bytes, differential.
 * The scanner (tb_oai_scan_chunk), when it decides, must give exactly what
 * the jansson reader (tb_oai_parse_chunk_json) gives, and the combined
 * reader (tb_oai_parse_chunk) must always agree with the jansson one. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "net/tb_oai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
same(const struct tb_oai_chunk *a, const struct tb_oai_chunk *b)
{
  return a->has_usage == b->has_usage && a->prompt_tokens == b->prompt_tokens &&
         a->completion_tokens == b->completion_tokens && a->n_choices == b->n_choices &&
         a->text_choices == b->text_choices && a->text_bytes == b->text_bytes &&
         a->reasoning_bytes == b->reasoning_bytes && a->role_only == b->role_only &&
         a->finished == b->finished && a->is_error == b->is_error &&
         strcmp(a->error, b->error) == 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *d = (const char *)data;
  struct tb_oai_chunk c, ref, fast;
  enum tb_oai_status st = tb_oai_parse_chunk(d, size, &c);
  if (st == TB_OAI_OK && c.has_usage && c.completion_tokens < 0)
    __builtin_trap(); /* usage is never negative */
  enum tb_oai_status rst = tb_oai_parse_chunk_json(d, size, &ref);
  if (st != rst || (st != TB_OAI_MALFORMED && !same(&c, &ref)))
    __builtin_trap(); /* the combined reader differs from jansson */
  if (tb_oai_scan_chunk(d, size, &fast) && (rst != TB_OAI_OK || !same(&fast, &ref)))
    __builtin_trap(); /* the scanner decided differently from jansson */
  return 0;
}
