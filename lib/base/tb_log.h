/*
 * tb_log: structured logs, one JSON object a line on stderr.
 *
 *   {"ts":"2026-11-29T14:00:00.000Z","level":"info","component":"api",
 *    "msg":"listening","port":8080}
 *
 * Fields are given as key/value pairs of a small typed vocabulary, so that no
 * caller formats JSON by hand.  Never pass a secret: there is no redaction
 * here by design, secrets must not reach the logger at all.
 */
#ifndef TB_LOG_H
#define TB_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum tb_log_level {
  TB_LOG_DEBUG = 0,
  TB_LOG_INFO,
  TB_LOG_WARN,
  TB_LOG_ERROR
};

/* Sets the component name ("api", "worker", ...) and the minimum level. */
void tb_log_init(const char *component, enum tb_log_level min_level);
/* Parses "debug|info|warn|error"; returns -1 on junk. */
int tb_log_level_parse(const char *s);

/*
 * Logs msg with fields.  The variadic list is a sequence of
 * (const char *key, int type, value) triples ended by NULL, where type is one
 * of TB_LS (const char *), TB_LI (int64_t), TB_LD (double).
 *   tb_log(TB_LOG_INFO, "job claimed", "job", TB_LS, id, "attempt", TB_LI,
 *          (int64_t)n, NULL);
 */
enum {
  TB_LS = 1,
  TB_LI = 2,
  TB_LD = 3
};
void tb_log(enum tb_log_level level, const char *msg, ...);

#endif
