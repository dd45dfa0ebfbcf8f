/*
 * tb_log: JSON-lines logger.  Each line is built in one buffer and written
 * with one write(2), so lines of concurrent threads and processes sharing a
 * file do not interleave.
 */
#include "tb_log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tb_util.h"

static const char *log_component = "tokbench";
static enum tb_log_level log_min = TB_LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };

void
tb_log_init(const char *component, enum tb_log_level min_level)
{
  log_component = component;
  log_min = min_level;
}

int
tb_log_level_parse(const char *s)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(level_names); i++)
    if (s != NULL && strcmp(s, level_names[i]) == 0)
      return (int)i;
  return -1;
}

void
tb_log(enum tb_log_level level, const char *msg, ...)
{
  if (level < log_min)
    return;
  char ts[40];
  tb_time_rfc3339(tb_time_real_us(), ts, sizeof ts);
  json_t *o = json_object();
  json_object_set_new(o, "ts", json_string(ts));
  json_object_set_new(o, "level", json_string(level_names[level]));
  json_object_set_new(o, "component", json_string(log_component));
  json_object_set_new(o, "msg", json_string(msg ? msg : ""));
  va_list ap;
  va_start(ap, msg);
  for (;;) {
    const char *key = va_arg(ap, const char *);
    if (key == NULL)
      break;
    int type = va_arg(ap, int);
    json_t *v = NULL;
    switch (type) {
    case TB_LS: {
      const char *s = va_arg(ap, const char *);
      v = s ? json_string(s) : json_null();
      if (v == NULL) /* not UTF-8: keep the line, mark the value */
        v = json_string("<invalid utf-8>");
      break;
    }
    case TB_LI:
      v = json_integer(va_arg(ap, int64_t));
      break;
    case TB_LD:
      v = json_real(va_arg(ap, double));
      break;
    default:
      abort(); /* a programming error: wrong type tag */
    }
    json_object_set_new(o, key, v);
  }
  va_end(ap);
  char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (line == NULL)
    return;
  size_t len = strlen(line);
  line[len] = '\n'; /* replaces the NUL: we write exactly len + 1 bytes */
  ssize_t w = write(STDERR_FILENO, line, len + 1);
  (void)w;
  free(line);
}
