/*
 * tb_tz: IANA time zones read from their TZif files (RFC 8536), for the
 * schedules' cron (tb_cron, issue 35).
 *
 * Why not the C library: localtime_r and mktime read the zone of the
 * process (the TZ variable, set with setenv: process-global, racing every
 * other thread), and the api serves the zones of many schedules at once.
 * So the zone is read here, into a value each caller owns.
 *
 * A TZif file holds a zone's past and planned transitions (the instant,
 * the UT offset after it) and, from version 2 on, a footer: a POSIX TZ
 * rule ("EST5EDT,M3.2.0,M11.1.0") for the instants after the last
 * transition.  Both are read: the 64-bit data block of version 2 and later
 * (a version 1 file's 32-bit block when it is all there is), and the
 * footer, rules with Jn, n and Mm.w.d dates and the transition times of
 * RFC 8536 section 3.3.1 (from -167 to 167 hours).  A file with leap
 * second records (the "right/" zones) is refused: their instants are not
 * POSIX time.
 *
 * Times are seconds since the Unix epoch; a "local" time is the wall
 * clock's reading written in the same units, as though the zone were UTC
 * (local = utc + offset).
 *
 * Local to UTC (tb_tz_from_local), the rule of the schedules (docs/ci.md):
 *   - a local time the clock skips (spring forward: 02:30 in New York on
 *     the second Sunday of March) maps to the first instant after the
 *     gap, the transition itself (03:00 EDT);
 *   - a local time the clock shows twice (fall back: 01:30 on the first
 *     Sunday of November) maps to its first occurrence (01:30 EDT).
 * Both are "the first instant at which the clock reads that time or
 * later", min { t : t + offset(t) >= local }, which is also what makes
 * the map monotonic (tb_cron relies on it).
 *
 * Caps: the file is read to TB_TZ_FILE_MAX bytes, its counts held to
 * TB_TZ_TRANS_MAX transitions and RFC 8536's 256 types; a name is checked
 * before a path is made of it (tb_tz_name_ok).
 */
#ifndef TB_TZ_H
#define TB_TZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define TB_TZ_NAME_MAX 64           /* the longest IANA name is 32 bytes */
#define TB_TZ_FILE_MAX (256 * 1024) /* the largest tzdata file is under 8 KiB */
#define TB_TZ_TRANS_MAX 4096
#define TB_TZ_DIR_DEFAULT "/usr/share/zoneinfo"

struct tb_tz;

enum tb_tz_status {
  TB_TZ_OK = 0,
  TB_TZ_BAD_NAME, /* not the shape of an IANA name ("../x", "", "a//b") */
  TB_TZ_UNKNOWN,  /* no such zone file */
  TB_TZ_BAD_FILE, /* a file that is not a usable TZif zone */
};

/* True when name has the shape of an IANA zone name: 1 to
 * TB_TZ_NAME_MAX bytes, '/'-separated parts of [A-Za-z0-9._+-], none
 * empty, none "." or "..", not starting with '.' or '-'. */
bool tb_tz_name_ok(const char *name);

/*
 * The zone name read from dir (the zoneinfo directory: TB_TZ_DIR_DEFAULT,
 * or the binary's setting) into *out (free with tb_tz_free).  The name
 * is checked first (TB_TZ_BAD_NAME); then the file is opened
 * (TB_TZ_UNKNOWN when there is none, or it is a directory) and parsed
 * (TB_TZ_BAD_FILE, with the reason in *why, static, when why is not
 * NULL).  "UTC" and "Etc/UTC" are files like any other zone.
 */
enum tb_tz_status tb_tz_load(const char *dir, const char *name, struct tb_tz **out,
                             const char **why) TB_MUST_CHECK;

/* The zone in the TZif bytes b[0..n) (borrowed), or NULL with the reason in
 * *why (static) when they are not a valid zone. */
struct tb_tz *tb_tz_parse(const unsigned char *b, size_t n, const char **why) TB_MUST_CHECK;

/* A zone of a fixed offset (seconds east of UTC), for tests and UTC
 * without a file. */
struct tb_tz *tb_tz_fixed(int32_t utoff);

void tb_tz_free(struct tb_tz *tz);

/* The UT offset (seconds east of UTC) at instant t. */
int32_t tb_tz_offset(const struct tb_tz *tz, int64_t t);

/* The stretch of constant offset that holds instant t: [start, end),
 * INT64_MIN / INT64_MAX where no transition bounds it. */
struct tb_tz_span {
  int64_t start, end;
  int32_t utoff;
};
void tb_tz_span_at(const struct tb_tz *tz, int64_t t, struct tb_tz_span *out);

/* The instant of local time local: min { t : t + offset(t) >= local }
 * (see the file comment: gaps map to their end, repeats to the first). */
int64_t tb_tz_from_local(const struct tb_tz *tz, int64_t local);

/* Calendar arithmetic, proleptic Gregorian (H. Hinnant's algorithms):
 * days since 1970-01-01 of y-m-d, and back; the weekday (0 = Sunday) of a
 * day number. */
int64_t tb_tz_days_from_civil(int64_t y, unsigned m, unsigned d);
void tb_tz_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d);
unsigned tb_tz_weekday(int64_t days);
/* Days in month m (1..12) of year y. */
unsigned tb_tz_month_days(int64_t y, unsigned m);

/* An RFC 3339 date-time ("2026-07-01T12:00:00Z"; a fraction, which is
 * dropped, and a "+hh:mm" offset allowed) as seconds since the epoch into
 * *secs; false on anything else, an impossible date (Feb 30) included. */
bool tb_tz_parse_rfc3339(const char *s, int64_t *secs);

#endif
