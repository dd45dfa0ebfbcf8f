/*
 * tb_scope: see tb_scope.h.
 */
#include "base/tb_scope.h"

#include <stdio.h>
#include <string.h>

static const char *const scope_names[] = { "read", "write", "admin" };

bool
tb_scope_parse(const char *csv, unsigned *mask)
{
  *mask = 0;
  const char *p = csv;
  if (p == NULL || *p == '\0')
    return false;
  while (*p != '\0') {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    bool found = false;
    for (size_t i = 0; i < TB_ARRAY_LEN(scope_names); i++) {
      if (strlen(scope_names[i]) == n && strncmp(p, scope_names[i], n) == 0) {
        *mask |= 1u << i;
        found = true;
      }
    }
    if (!found)
      return false;
    if (e == NULL)
      break;
    p = e + 1;
    if (*p == '\0')
      return false;
  }
  return *mask != 0;
}

unsigned
tb_scope_effective(unsigned mask)
{
  if (mask & TB_SCOPE_ADMIN)
    mask |= TB_SCOPE_WRITE;
  if (mask & TB_SCOPE_WRITE)
    mask |= TB_SCOPE_READ;
  return mask;
}

void
tb_scope_csv(unsigned mask, char *buf, size_t len)
{
  size_t o = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < TB_ARRAY_LEN(scope_names); i++) {
    if (!(mask & (1u << i)))
      continue;
    int n = snprintf(buf + o, len - o, "%s%s", o ? "," : "", scope_names[i]);
    if (n < 0 || (size_t)n >= len - o)
      return;
    o += (size_t)n;
  }
}

bool
tb_scope_parse_duration(const char *s, int64_t *seconds)
{
  if (s == NULL)
    return false;
  size_t n = strlen(s);
  if (n == 0 || n > 20)
    return false;
  int64_t mult = 1;
  char unit = s[n - 1];
  char num[24];
  memcpy(num, s, n + 1);
  if (unit < '0' || unit > '9') {
    switch (unit) {
    case 's': mult = 1; break;
    case 'm': mult = 60; break;
    case 'h': mult = 3600; break;
    case 'd': mult = 86400; break;
    case 'w': mult = 7 * 86400; break;
    default: return false;
    }
    num[n - 1] = '\0';
  }
  int64_t v;
  if (!tb_parse_i64(num, 1, TB_SCOPE_MAX_EXPIRY_S, &v) || v > TB_SCOPE_MAX_EXPIRY_S / mult)
    return false;
  *seconds = v * mult;
  return true;
}
