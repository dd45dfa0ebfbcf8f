/* libFuzzer target: tb_tz's TZif parser and tb_cron's parser on arbitrary
 * bytes; a zone or a cron that parses is walked (next fires, the span of
 * instants around them), so the lookups of a damaged zone are fuzzed too.
 * The input's first byte picks the half. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_cron.h"
#include "base/tb_tz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  struct tb_cron every;
  char why[TB_CRON_WHY_MAX];
  if (!tb_cron_parse("*/7 1-3 * * *", &every, why))
    abort();
  if (data[0] & 1) { /* a TZif file */
    const char *w;
    struct tb_tz *tz = tb_tz_parse(data + 1, size - 1, &w);
    if (tz != NULL) {
      int64_t t = tb_cron_next(&every, tz, 1772928000);
      if (t != TB_CRON_NEVER && t <= 1772928000)
        abort();
      (void)tb_tz_from_local(tz, INT64_MAX / 2);
      (void)tb_tz_from_local(tz, -INT64_MAX / 2);
      tb_tz_free(tz);
    }
    return 0;
  }
  char text[TB_CRON_TEXT_MAX + 2];
  size_t n = size - 1 < sizeof text - 1 ? size - 1 : sizeof text - 1;
  memcpy(text, data + 1, n);
  text[n] = '\0';
  struct tb_cron c;
  if (tb_cron_parse(text, &c, why)) {
    struct tb_tz *utc = tb_tz_fixed(0);
    int64_t t = tb_cron_next(&c, utc, 0);
    if (t != TB_CRON_NEVER && t <= 0)
      abort();
    (void)tb_cron_min_gap(&c, utc, 0, 7 * 86400, 0);
    tb_tz_free(utc);
  } else if (why[0] == '\0') {
    abort(); /* a refusal always says why */
  }
  return 0;
}
