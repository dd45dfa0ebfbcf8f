/*
 * tb_cron: five-field cron expressions and when they fire in a time zone
 * (issue 35, the schedules of service/api_schedules.c).  Pure: no clock,
 * no files (the zone is a struct tb_tz the caller loaded, lib/base/tb_tz).
 *
 * The syntax is Vixie cron's (crontab(5)):
 *   minute hour day-of-month month day-of-week
 *   0-59   0-23 1-31         1-12  0-7 (0 and 7 are Sunday)
 * each field a comma list of items, an item "*", "N" or "N-M", any of them
 * with a step "/S" ("*" + "/7" is every seventh minute from 0: 0, 7, ..., 56);
 * "N/S" is N-max/S.  Months and days may be named by their first three
 * letters in any case (jan-dec, sun-sat), in ranges too (mon-fri).  A range
 * runs upward (fri-mon is an error); a step is 1 to the field's span.  The
 * macros @yearly (@annually), @monthly, @weekly, @daily (@midnight) and
 * @hourly stand for their five fields; @reboot is refused (no such time).
 *
 * Days, Vixie's rule: when both day fields are restricted (neither starts
 * with "*"), a day matches if EITHER matches ("0 0 13 * 5": every 13th and
 * every Friday); when one of them starts with "*" (a star with a step
 * too, as in Vixie cron and cronie), both must match, the starred one
 * matching its own steps only.
 *
 * Fires are whole minutes of local time, turned into instants by
 * tb_tz_from_local: a local time the clock skips fires once at the end of
 * the gap, one it shows twice fires once, at the first; two local times
 * that land on one instant fire once.  tb_cron_next gives the first fire
 * strictly after an instant; tb_cron_iter walks them in order.
 *
 * A cron that never fires (30 February) has no fire within
 * TB_CRON_HORIZON_DAYS: a date that exists fires within 8 years (29
 * February of 2096, then of 2104), so the horizon of 12 years tells "never"
 * from "rarely".
 */
#ifndef TB_CRON_H
#define TB_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_tz.h"
#include "base/tb_util.h"

#define TB_CRON_TEXT_MAX 256
#define TB_CRON_WHY_MAX 160
#define TB_CRON_HORIZON_DAYS (366 * 12)
/* tb_cron_next's answer when the cron does not fire within the horizon. */
#define TB_CRON_NEVER INT64_MIN

struct tb_cron {
  uint64_t minutes; /* bit m: minute m, 0..59 */
  uint32_t hours;   /* bit h: hour h, 0..23 */
  uint32_t days;    /* bit d: day of the month d, 1..31 */
  uint16_t months;  /* bit m: month m, 1..12 */
  uint8_t weekdays; /* bit w: weekday w, 0 (Sunday) .. 6; 7 folded onto 0 */
  bool days_star;   /* the day-of-month field starts with '*' */
  bool weekdays_star;
};

/* Parses text (at most TB_CRON_TEXT_MAX bytes) into *out.  False with why
 * (a sentence naming the field and what is wrong, at most
 * TB_CRON_WHY_MAX bytes with its NUL) when it is not a cron expression. */
bool tb_cron_parse(const char *text, struct tb_cron *out, char why[TB_CRON_WHY_MAX]) TB_MUST_CHECK;

/* True when c fires on the local date y-m-d (Vixie's day rule above). */
bool tb_cron_day_matches(const struct tb_cron *c, int64_t y, unsigned m, unsigned d);

/* Fires in order, from an instant on.  Fill with tb_cron_iter_init; the
 * struct holds no resource (c and tz are borrowed for its life). */
struct tb_cron_iter {
  const struct tb_cron *c;
  const struct tb_tz *tz;
  int64_t local;          /* the next local minute to look at */
  int64_t last;           /* the last instant given (fires are strictly after) */
  int64_t end_local;      /* the horizon: no local minute from here on */
  struct tb_tz_span span; /* the span of the last fire (a cache) */
};

/* Fires strictly after instant after (seconds since the epoch). */
void tb_cron_iter_init(struct tb_cron_iter *it, const struct tb_cron *c, const struct tb_tz *tz,
                       int64_t after);
/* The next fire (an instant), or TB_CRON_NEVER past the horizon
 * (TB_CRON_HORIZON_DAYS after the instant given to tb_cron_iter_init). */
int64_t tb_cron_iter_next(struct tb_cron_iter *it);

/* The first fire of c in tz strictly after instant after, or
 * TB_CRON_NEVER. */
int64_t tb_cron_next(const struct tb_cron *c, const struct tb_tz *tz, int64_t after);

/*
 * The shortest time between two consecutive fires of c in tz strictly after
 * from, over the horizon_s seconds after the first of them (DST transitions included: one that falls
 * inside can bring two fires closer than the cron reads), stopping at the
 * first gap below stop_below.  INT64_MAX when fewer than two fires fall in
 * the horizon.
 */
int64_t tb_cron_min_gap(const struct tb_cron *c, const struct tb_tz *tz, int64_t from,
                        int64_t horizon_s, int64_t stop_below);

#endif
