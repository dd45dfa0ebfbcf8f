/* libFuzzer target: tokbench-sim's HTTP request parser (sim/sim_http.c).
 * Feeds the input whole and then byte by byte growing prefixes (as a
 * connection receives it), consuming pipelined requests; checks that the
 * parser never reads out of bounds and that what it reports is consistent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_fault.h"
#include "sim_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const char *buf, size_t len)
{
  size_t off = 0;
  for (int guard = 0; guard < 64 && off < len; guard++) {
    struct sim_http_req r;
    int status = 0;
    enum sim_http_result res = sim_http_parse(buf + off, len - off, &r, &status);
    if (res != SIM_HTTP_DONE) {
      if (res == SIM_HTTP_ERROR && (status < 400 || status > 599))
        abort();
      return;
    }
    if (r.total_len == 0 || r.total_len > len - off || r.body_len > SIM_HTTP_BODY_CAP ||
        r.head_len + r.body_len != r.total_len || r.path[0] != '/')
      abort();
    if (r.body_len > 0 && (r.body < buf + off || r.body + r.body_len > buf + len))
      abort();
    char v[64];
    (void)sim_http_query(r.query, "context", v, sizeof(v));
    struct sim_fault f;
    char err[128];
    sim_fault_init(&f);
    (void)sim_fault_parse(&f, r.fault, err, sizeof(err));
    off += r.total_len;
  }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size > SIM_HTTP_HEAD_CAP * 2)
    return 0;
  /* A private copy, exactly sized, so ASan sees any over-read. */
  char *buf = malloc(size ? size : 1);
  memcpy(buf, data, size);
  check(buf, size);
  for (size_t n = 0; n < size && n < 512; n++)
    check(buf, n);
  free(buf);
  return 0;
}
