/*
 * sim_http: request parser.  See sim_http.h for the contract and the caps.
 * Lenient where real servers are (bare \n line ends, case-insensitive header
 * names, optional spaces), strict where a mistake would desynchronise the
 * connection (conflicting Content-Length, Transfer-Encoding, overflow).
 */
#include "sim_http.h"

#include <string.h>
#include <strings.h>

/* Finds the end of the head ("\r\n\r\n" or "\n\n"); returns its length
 * including the blank line, or 0 if not there yet. */
static size_t
head_end(const char *buf, size_t len)
{
  for (size_t i = 0; i < len; i++) {
    if (buf[i] != '\n')
      continue;
    if (i + 1 < len && buf[i + 1] == '\n')
      return i + 2;
    if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
      return i + 3;
  }
  return 0;
}

static void
copy_trim(char *out, size_t cap, const char *v, size_t n)
{
  while (n > 0 && (*v == ' ' || *v == '\t')) {
    v++;
    n--;
  }
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
    n--;
  if (n >= cap)
    n = cap - 1;
  memcpy(out, v, n);
  out[n] = '\0';
}

static bool
token_in_list(const char *v, const char *tok)
{
  size_t tl = strlen(tok);
  const char *p = v;
  while (*p) {
    while (*p == ' ' || *p == ',' || *p == '\t')
      p++;
    const char *s = p;
    while (*p && *p != ',')
      p++;
    size_t n = (size_t)(p - s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
      n--;
    if (n == tl && strncasecmp(s, tok, tl) == 0)
      return true;
  }
  return false;
}

enum sim_http_result
sim_http_parse(const char *buf, size_t len, struct sim_http_req *req, int *status)
{
  size_t hl = head_end(buf, len);
  req->head_len = 0;
  req->expect_continue = false;
  if (hl == 0) {
    if (len > SIM_HTTP_HEAD_CAP) {
      *status = 431;
      return SIM_HTTP_ERROR;
    }
    return SIM_HTTP_NEED_MORE;
  }
  if (hl > SIM_HTTP_HEAD_CAP) {
    *status = 431;
    return SIM_HTTP_ERROR;
  }
  memset(req, 0, sizeof(*req));
  *status = 400;

  /* Request line: METHOD SP target SP HTTP/1.x */
  const char *p = buf, *end = buf + hl;
  const char *eol = memchr(p, '\n', (size_t)(end - p));
  if (eol == NULL)
    return SIM_HTTP_ERROR;
  const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
  if (sp1 == NULL || sp1 == p)
    return SIM_HTTP_ERROR;
  size_t ml = (size_t)(sp1 - p);
  if (ml == 3 && memcmp(p, "GET", 3) == 0)
    req->method = SIM_HTTP_GET;
  else if (ml == 4 && memcmp(p, "POST", 4) == 0)
    req->method = SIM_HTTP_POST;
  else if (ml == 4 && memcmp(p, "HEAD", 4) == 0)
    req->method = SIM_HTTP_HEAD;
  else
    req->method = SIM_HTTP_OTHER;
  const char *t = sp1 + 1;
  const char *sp2 = memchr(t, ' ', (size_t)(eol - t));
  if (sp2 == NULL || sp2 == t)
    return SIM_HTTP_ERROR;
  const char *ver = sp2 + 1;
  size_t vl = (size_t)(eol - ver);
  if (vl > 0 && ver[vl - 1] == '\r')
    vl--;
  if (vl != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1')) {
    *status = 505;
    return SIM_HTTP_ERROR;
  }
  req->minor = ver[7] - '0';
  size_t tl = (size_t)(sp2 - t);
  /* Absolute form: skip scheme://authority. */
  if (tl > 7 && (strncasecmp(t, "http://", 7) == 0)) {
    const char *slash = memchr(t + 7, '/', tl - 7);
    if (slash == NULL)
      return SIM_HTTP_ERROR;
    tl -= (size_t)(slash - t);
    t = slash;
  }
  if (tl == 0 || t[0] != '/' || tl >= SIM_HTTP_PATH_CAP) {
    *status = tl >= SIM_HTTP_PATH_CAP ? 414 : 400;
    return SIM_HTTP_ERROR;
  }
  const char *q = memchr(t, '?', tl);
  size_t pl = q ? (size_t)(q - t) : tl;
  memcpy(req->path, t, pl);
  req->path[pl] = '\0';
  if (memchr(req->path, '\0', pl) != NULL)
    return SIM_HTTP_ERROR;
  if (q) {
    size_t ql = tl - pl - 1;
    memcpy(req->query, q + 1, ql);
    req->query[ql] = '\0';
  }
  req->keep_alive = req->minor == 1;

  /* Header lines. */
  bool have_cl = false;
  size_t cl = 0;
  int nheaders = 0;
  p = eol + 1;
  while (p < end) {
    eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL)
      return SIM_HTTP_ERROR;
    size_t ll = (size_t)(eol - p);
    if (ll > 0 && p[ll - 1] == '\r')
      ll--;
    if (ll == 0)
      break; /* blank line */
    if (++nheaders > SIM_HTTP_MAX_HEADERS) {
      *status = 431;
      return SIM_HTTP_ERROR;
    }
    const char *colon = memchr(p, ':', ll);
    if (colon == NULL || colon == p)
      return SIM_HTTP_ERROR;
    size_t nl = (size_t)(colon - p);
    for (size_t i = 0; i < nl; i++)
      if (p[i] == ' ' || p[i] == '\t')
        return SIM_HTTP_ERROR; /* no space before the colon (RFC 9112) */
    const char *v = colon + 1;
    size_t vlen = ll - nl - 1;
    char val[SIM_HTTP_VALUE_CAP];
#define IS(name) (nl == sizeof(name) - 1 && strncasecmp(p, name, nl) == 0)
    if (IS("content-length")) {
      copy_trim(val, sizeof(val), v, vlen);
      if (val[0] == '\0')
        return SIM_HTTP_ERROR;
      size_t n = 0;
      for (const char *d = val; *d; d++) {
        if (*d < '0' || *d > '9')
          return SIM_HTTP_ERROR;
        if (n > SIM_HTTP_BODY_CAP) {
          *status = 413;
          return SIM_HTTP_ERROR;
        }
        n = n * 10 + (size_t)(*d - '0');
      }
      if (have_cl && n != cl)
        return SIM_HTTP_ERROR;
      have_cl = true;
      cl = n;
    } else if (IS("transfer-encoding")) {
      *status = 411;
      return SIM_HTTP_ERROR;
    } else if (IS("connection")) {
      copy_trim(val, sizeof(val), v, vlen);
      if (token_in_list(val, "close"))
        req->keep_alive = false;
      else if (token_in_list(val, "keep-alive"))
        req->keep_alive = true;
    } else if (IS("authorization")) {
      req->has_auth = true;
      copy_trim(req->auth, sizeof(req->auth), v, vlen);
    } else if (IS("x-sim-fault")) {
      copy_trim(req->fault, sizeof(req->fault), v, vlen);
    } else if (IS("x-tokbench-stamps")) {
      copy_trim(val, sizeof(val), v, vlen);
      req->stamps =
        strcmp(val, "1") == 0 || strcasecmp(val, "true") == 0 || strcasecmp(val, "yes") == 0;
    } else if (IS("expect")) {
      copy_trim(val, sizeof(val), v, vlen);
      if (strcasecmp(val, "100-continue") != 0) {
        *status = 417;
        return SIM_HTTP_ERROR;
      }
      req->expect_continue = true;
    }
#undef IS
    p = eol + 1;
  }
  if (cl > SIM_HTTP_BODY_CAP) {
    *status = 413;
    return SIM_HTTP_ERROR;
  }
  req->head_len = hl;
  if (len - hl < cl)
    return SIM_HTTP_NEED_MORE;
  req->body = buf + hl;
  req->body_len = cl;
  req->total_len = hl + cl;
  *status = 0;
  return SIM_HTTP_DONE;
}

bool
sim_http_query(const char *query, const char *key, char *out, size_t cap)
{
  size_t kl = strlen(key);
  const char *p = query;
  while (p && *p) {
    const char *amp = strchr(p, '&');
    size_t n = amp ? (size_t)(amp - p) : strlen(p);
    if (n > kl && p[kl] == '=' && strncmp(p, key, kl) == 0) {
      size_t vl = n - kl - 1;
      if (vl >= cap)
        vl = cap - 1;
      memcpy(out, p + kl + 1, vl);
      out[vl] = '\0';
      return true;
    }
    p = amp ? amp + 1 : NULL;
  }
  return false;
}
