/*
 * tb_jsonscan: a JSON text's tree cost and a value's end, from its bytes.
 */
#include "base/tb_jsonscan.h"

#include <stdbool.h>

/* Bytes of tree per token (tb_jsonscan.h: measured, rounded up). */
enum {
  COST_OBJECT = 256,
  COST_ARRAY = 160,
  COST_STRING = 112, /* and one a byte of it */
  COST_MEMBER = 96,  /* a ':' */
  COST_ELEMENT = 16, /* a ',' (an array's slot, a table's growth) */
  COST_NUMBER = 56,
  COST_LITERAL = 16,
};

/* The offset just past the string whose opening quote is at s[i]. */
static size_t
string_end(const char *s, size_t n, size_t i)
{
  for (i++; i < n; i++) {
    if (s[i] == '\\')
      i++;
    else if (s[i] == '"')
      return i + 1;
  }
  return n;
}

static bool
starts_number(char c)
{
  return c == '-' || (c >= '0' && c <= '9');
}

static bool
in_number(char c)
{
  return starts_number(c) || c == '.' || c == 'e' || c == 'E' || c == '+';
}

size_t
tb_jsonscan_cost(const char *s, size_t n)
{
  size_t cost = 0;
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (c == '"') {
      size_t e = string_end(s, n, i);
      cost += COST_STRING + (e - i);
      i = e;
      continue;
    }
    if (starts_number(c)) {
      cost += COST_NUMBER;
      while (i < n && in_number(s[i]))
        i++;
      continue;
    }
    switch (c) {
    case '{': cost += COST_OBJECT; break;
    case '[': cost += COST_ARRAY; break;
    case ':': cost += COST_MEMBER; break;
    case ',': cost += COST_ELEMENT; break;
    case 't':
    case 'f':
    case 'n': cost += COST_LITERAL; break;
    default: break;
    }
    i++;
  }
  return cost;
}

size_t
tb_jsonscan_value_end(const char *s, size_t n)
{
  if (n == 0)
    return 0;
  if (s[0] == '"')
    return string_end(s, n, 0);
  if (s[0] != '{' && s[0] != '[') {
    size_t i = 0;
    while (i < n && s[i] != ',' && s[i] != ']' && s[i] != '}' && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\n' && s[i] != '\r')
      i++;
    return i;
  }
  size_t depth = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"') {
      i = string_end(s, n, i) - 1;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (--depth == 0)
        return i + 1;
    }
  }
  return n;
}
