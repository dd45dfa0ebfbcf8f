/*
 * tb_clock: one start time for the shards of a cell (issue 24).
 *
 * The shards of a cell run on several machines, whose monotonic clocks
 * share no origin.  The one clock they all reach is the database's
 * clock_timestamp(); each worker measures its offset to it as NTP does from
 * round trips (RFC 5905, section 8: offset = server time - midpoint of the
 * local send and receive, error bound = half the round trip): for a probe
 * sent at local s, answered with server time S and received at local r,
 *   offset = S - (s + r) / 2,  uncertainty = (r - s) / 2.
 * Of several probes the one with the smallest round trip wins (its bound is
 * the tightest; NTP's clock filter picks the same).  The true offset lies
 * within offset +- uncertainty whatever the asymmetry of the path.
 *
 * The cell's start T0 (server time) is then a local monotonic instant
 * T0 - offset, and a shard's start skew (its actual start on the server's
 * timeline minus T0) is known to within its uncertainty.
 *
 * Units: local monotonic nanoseconds (tb_time_mono_ns), server microseconds
 * since the Unix epoch.
 */
#ifndef TB_CLOCK_H
#define TB_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tb_clock_probe {
  int64_t sent_ns, recv_ns; /* local monotonic */
  int64_t server_us;        /* server time, epoch us */
};

struct tb_clock_offset {
  int64_t offset_ns; /* server time (ns) - local monotonic (ns) */
  int64_t uncert_ns; /* half the chosen probe's round trip */
  int64_t rtt_ns;    /* that round trip */
  unsigned probes;   /* probes considered (valid ones) */
  /* The same offset against the wall clock (server time - CLOCK_REALTIME,
   * ns), for a result's provenance: set by whoever measured it and knows
   * both clocks at one instant (tb_shards_clock); has_wall false until. */
  int64_t wall_offset_ns;
  bool has_wall;
};

/* The offset from n probes (those with recv < sent are skipped).  false
 * when none is valid. */
bool tb_clock_offset(const struct tb_clock_probe *p, size_t n, struct tb_clock_offset *out);
/* Server time (epoch us) as a local monotonic instant (ns), and back. */
int64_t tb_clock_to_local_ns(const struct tb_clock_offset *o, int64_t server_us);
int64_t tb_clock_to_server_us(const struct tb_clock_offset *o, int64_t local_ns);
/* The start skew a cell tolerates: max(2 ms, 1% of its window), in us. */
int64_t tb_clock_skew_limit_us(double window_s);

#endif
