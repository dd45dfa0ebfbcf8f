/*
 * tb_clock: the offset of a local monotonic clock to the database's, NTP
 * style (tb_clock.h).
 */
#include "base/tb_clock.h"

bool
tb_clock_offset(const struct tb_clock_probe *p, size_t n, struct tb_clock_offset *out)
{
  bool any = false;
  unsigned valid = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t rtt = p[i].recv_ns - p[i].sent_ns;
    if (rtt < 0)
      continue;
    valid++;
    if (any && rtt >= out->rtt_ns)
      continue;
    any = true;
    /* the midpoint without overflow: sent + rtt / 2 */
    int64_t mid = p[i].sent_ns + rtt / 2;
    out->offset_ns = p[i].server_us * 1000 - mid;
    out->rtt_ns = rtt;
    out->uncert_ns = (rtt + 1) / 2;
  }
  out->probes = valid;
  out->has_wall = false;
  out->wall_offset_ns = 0;
  return any;
}

int64_t
tb_clock_to_local_ns(const struct tb_clock_offset *o, int64_t server_us)
{
  return server_us * 1000 - o->offset_ns;
}

int64_t
tb_clock_to_server_us(const struct tb_clock_offset *o, int64_t local_ns)
{
  int64_t ns = local_ns + o->offset_ns;
  /* floor division: a negative remainder rounds down */
  return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000);
}

int64_t
tb_clock_skew_limit_us(double window_s)
{
  double pct = window_s * 1e6 / 100.0;
  return pct > 2000.0 ? (int64_t)pct : 2000;
}
