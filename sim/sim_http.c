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

/* The method from the request line's first word (ml bytes at p). */
static enum sim_http_method
parse_method(const char *p, size_t ml)
{
  if (ml == 3 && memcmp(p, "GET", 3) == 0)
    return SIM_HTTP_GET;
  if (ml == 4 && memcmp(p, "POST", 4) == 0)
    return SIM_HTTP_POST;
  if (ml == 4 && memcmp(p, "HEAD", 4) == 0)
    return SIM_HTTP_HEAD;
  return SIM_HTTP_OTHER;
}

/* The request target (tl bytes at t) into req's path and query; false on
 * a bad one (*status 414 when too long, else left). */
static bool
parse_target(const char *t, size_t tl, struct sim_http_req *req, int *status)
{
  /* Absolute form: skip scheme://authority. */
  if (tl > 7 && (strncasecmp(t, "http://", 7) == 0)) {
    const char *slash = memchr(t + 7, '/', tl - 7);
    if (slash == NULL)
      return false;
    tl -= (size_t)(slash - t);
    t = slash;
  }
  if (tl == 0 || t[0] != '/' || tl >= SIM_HTTP_PATH_CAP) {
    *status = tl >= SIM_HTTP_PATH_CAP ? 414 : 400;
    return false;
  }
  const char *q = memchr(t, '?', tl);
  size_t pl = q ? (size_t)(q - t) : tl;
  memcpy(req->path, t, pl);
  req->path[pl] = '\0';
  if (memchr(req->path, '\0', pl) != NULL)
    return false;
  if (q) {
    size_t ql = tl - pl - 1;
    memcpy(req->query, q + 1, ql);
    req->query[ql] = '\0';
  }
  return true;
}

/* The request line (METHOD SP target SP HTTP/1.x) of the head [p, end):
 * the end of its line, or NULL when bad (*status 505 for the version). */
static const char *
parse_request_line(const char *p, const char *end, struct sim_http_req *req, int *status)
{
  const char *eol = memchr(p, '\n', (size_t)(end - p));
  if (eol == NULL)
    return NULL;
  const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
  if (sp1 == NULL || sp1 == p)
    return NULL;
  req->method = parse_method(p, (size_t)(sp1 - p));
  const char *t = sp1 + 1;
  const char *sp2 = memchr(t, ' ', (size_t)(eol - t));
  if (sp2 == NULL || sp2 == t)
    return NULL;
  const char *ver = sp2 + 1;
  size_t vl = (size_t)(eol - ver);
  if (vl > 0 && ver[vl - 1] == '\r')
    vl--;
  if (vl != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1')) {
    *status = 505;
    return NULL;
  }
  req->minor = ver[7] - '0';
  if (!parse_target(t, (size_t)(sp2 - t), req, status))
    return NULL;
  req->keep_alive = req->minor == 1;
  return eol;
}

/* What the header lines tell about the body. */
struct body_len {
  bool have_cl; /* a Content-Length was seen */
  size_t cl;    /* its value */
};

/* A Content-Length value (trimmed, in val) into *bl; false when bad or
 * conflicting (*status 413 when too large). */
static bool
content_length(const char *val, struct body_len *bl, int *status)
{
  if (val[0] == '\0')
    return false;
  size_t n = 0;
  for (const char *d = val; *d; d++) {
    if (*d < '0' || *d > '9')
      return false;
    if (n > SIM_HTTP_BODY_CAP) {
      *status = 413;
      return false;
    }
    n = n * 10 + (size_t)(*d - '0');
  }
  if (bl->have_cl && n != bl->cl)
    return false;
  bl->have_cl = true;
  bl->cl = n;
  return true;
}

/* One header line (ll bytes at p, without its line end) into req or *bl;
 * false when bad (*status set, or left at 400). */
static bool
parse_header(const char *p, size_t ll, struct sim_http_req *req, struct body_len *bl, int *status)
{
  const char *colon = memchr(p, ':', ll);
  if (colon == NULL || colon == p)
    return false;
  size_t nl = (size_t)(colon - p);
  for (size_t i = 0; i < nl; i++)
    if (p[i] == ' ' || p[i] == '\t')
      return false; /* no space before the colon (RFC 9112) */
  const char *v = colon + 1;
  size_t vlen = ll - nl - 1;
  char val[SIM_HTTP_VALUE_CAP];
#define IS(name) (nl == sizeof(name) - 1 && strncasecmp(p, name, nl) == 0)
  if (IS("content-length")) {
    copy_trim(val, sizeof(val), v, vlen);
    return content_length(val, bl, status);
  } else if (IS("transfer-encoding")) {
    *status = 411;
    return false;
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
      return false;
    }
    req->expect_continue = true;
  }
#undef IS
  return true;
}

/* The header lines [p, end) up to the blank line into req and *bl; false
 * when bad (*status set, or left at 400). */
static bool
parse_headers(const char *p, const char *end, struct sim_http_req *req, struct body_len *bl,
              int *status)
{
  int nheaders = 0;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL)
      return false;
    size_t ll = (size_t)(eol - p);
    if (ll > 0 && p[ll - 1] == '\r')
      ll--;
    if (ll == 0)
      break; /* blank line */
    if (++nheaders > SIM_HTTP_MAX_HEADERS) {
      *status = 431;
      return false;
    }
    if (!parse_header(p, ll, req, bl, status))
      return false;
    p = eol + 1;
  }
  return true;
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

  const char *end = buf + hl;
  const char *eol = parse_request_line(buf, end, req, status);
  if (eol == NULL)
    return SIM_HTTP_ERROR;
  struct body_len bl = { false, 0 };
  if (!parse_headers(eol + 1, end, req, &bl, status))
    return SIM_HTTP_ERROR;
  size_t cl = bl.cl;
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
