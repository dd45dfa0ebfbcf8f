/* libFuzzer target: tb_trace over arbitrary bytes.  The first byte picks the
 * format (mod 5), the rest is the trace (gzip or not).  Checked on success:
 * every request's blocks lie inside the block array and name a dense id
 * below nuniq, a parent comes before its child and shares its session,
 * token counts and times are in range, and the summary's rate and hit rate
 * are finite, the hit rate in [0, 1].  On failure: an error text and an
 * empty trace. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "spec/tb_trace.h"
#include "spec/tb_tracesum.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  struct tb_trace t;
  char err[TB_TRACE_ERR_MAX];
  err[0] = '\0';
  if (tb_trace_parse(data + 1, size - 1, (enum tb_trace_format)(data[0] % 5), &t, err,
                     sizeof err) != 0) {
    if (err[0] == '\0' || t.n != 0 || t.req != NULL || t.blocks != NULL)
      abort();
    return 0;
  }
  if (t.n == 0)
    abort();
  for (size_t i = 0; i < t.n; i++) {
    const struct tb_trace_req *r = &t.req[i];
    if (r->blk_off + r->nblk > t.nblocks || r->in_tokens < 0 ||
        r->in_tokens > TB_TRACE_MAX_TOKENS || r->out_tokens < 0 || !(r->t_s >= 0) ||
        !isfinite(r->t_s))
      abort();
    for (uint32_t k = 0; k < r->nblk; k++)
      if (t.blocks[r->blk_off + k] >= t.nuniq)
        abort();
    if (r->parent >= (int64_t)i || (r->parent >= 0 && t.req[r->parent].session != r->session))
      abort();
    if (r->session >= (int64_t)t.nsessions)
      abort();
  }
  struct tb_tracesum s;
  tb_tracesum_of(&t, &s);
  if (!isfinite(s.rate) || !(s.implied_hit_rate >= 0 && s.implied_hit_rate <= 1))
    abort();
  tb_trace_free(&t);
  return 0;
}
