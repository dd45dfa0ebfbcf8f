/*
 * api_web: the static web frontend, GET / (web/index.html) and GET
 * /web/{name}, with no key.
 *
 * Static files: one path segment (the router already limits it to
 * [A-Za-z0-9._~-]), no leading dot, an extension from a fixed table, opened
 * with O_NOFOLLOW relative to the web directory's descriptor, a regular file
 * of at most TB_API_WEB_FILE_MAX bytes.  No path is ever built from the
 * request, so there is nothing to traverse.
 */
#include "api_web.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_handlers.h"

static const struct {
  const char *ext, *ctype;
} web_types[] = {
  { ".html", "text/html; charset=utf-8" },
  { ".js", "text/javascript; charset=utf-8" },
  { ".css", "text/css; charset=utf-8" },
  { ".svg", "image/svg+xml" },
  { ".png", "image/png" },
  { ".ico", "image/x-icon" },
  { ".json", "application/json" },
  { ".txt", "text/plain; charset=utf-8" },
};

/* The web app may run its own scripts and talk to this origin, nothing else;
 * the reports it shows in sandboxed srcdoc frames need inline styles. */
static const char web_csp[] =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
  "img-src 'self' data:; connect-src 'self'; frame-src 'self'; object-src 'none'; "
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static bool
has_index(const char *dir)
{
  char p[PATH_MAX];
  int n = snprintf(p, sizeof p, "%s/index.html", dir);
  return n > 0 && (size_t)n < sizeof p && access(p, R_OK) == 0;
}

char *
tb_api_web_dir_resolve(const char *configured)
{
  if (configured != NULL && configured[0] != '\0')
    return tb_xstrdup(configured);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
      *slash = '\0';
      static const char *const rel[] = { "/../web", "/../../web", "/../share/tokbench/web" };
      for (size_t i = 0; i < TB_ARRAY_LEN(rel); i++) {
        char cand[PATH_MAX];
        int m = snprintf(cand, sizeof cand, "%s%s", exe, rel[i]);
        if (m > 0 && (size_t)m < sizeof cand && has_index(cand))
          return tb_xstrdup(cand);
      }
    }
  }
  return tb_xstrdup("web");
}

static enum MHD_Result
serve(struct tb_api_req *r, const char *name)
{
  const char *ctype = NULL;
  size_t nl = strlen(name);
  if (nl == 0 || name[0] == '.' || strchr(name, '/') != NULL)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such file", NULL);
  for (size_t i = 0; i < TB_ARRAY_LEN(web_types) && ctype == NULL; i++) {
    size_t el = strlen(web_types[i].ext);
    if (nl > el && strcmp(name + nl - el, web_types[i].ext) == 0)
      ctype = web_types[i].ctype;
  }
  if (ctype == NULL)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such file", NULL);
  int dfd =
    open(r->api->web_dir != NULL ? r->api->web_dir : "web", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = dfd < 0 ? -1 : openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (dfd >= 0)
    close(dfd);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > TB_API_WEB_FILE_MAX) {
    if (fd >= 0)
      close(fd);
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such file", NULL);
  }
  size_t size = (size_t)st.st_size, got = 0;
  char *buf = tb_xmalloc(size + 1);
  while (got < size) {
    ssize_t k = read(fd, buf + got, size - got);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    got += (size_t)k;
  }
  close(fd);
  const char *html_headers[] = { "Content-Security-Policy",
                                 web_csp,
                                 "X-Frame-Options",
                                 "DENY",
                                 "Referrer-Policy",
                                 "no-referrer",
                                 NULL };
  enum MHD_Result ret = tb_api_reply(r, MHD_HTTP_OK, ctype, buf, got,
                                     strncmp(ctype, "text/html", 9) == 0 ? html_headers : NULL);
  free(buf);
  return ret;
}

enum MHD_Result
tb_api_web_index(struct tb_api_req *r)
{
  return serve(r, "index.html");
}

enum MHD_Result
tb_api_web_file(struct tb_api_req *r)
{
  return serve(r, r->param);
}
