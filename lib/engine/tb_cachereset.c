/*
 * tb_cachereset: the engines' prefix-cache resets (tb_cachereset.h).  Each
 * call is one tb_http_call with an empty POST body, as AIPerf's control
 * hooks send them (docs.nvidia.com/aiperf, "Control Hooks by Inference
 * Server"); the answer's status alone decides.
 */
#include "engine/tb_cachereset.h"

#include <stdio.h>
#include <string.h>

#include "net/tb_http.h"

#define RESET_BODY_CAP (64u << 10)

const char *
tb_cache_reset_name(enum tb_cache_reset r)
{
  switch (r) {
  case TB_CACHE_RESET_DONE: return "done";
  case TB_CACHE_RESET_UNSUPPORTED: return "unsupported";
  default: return "refused";
  }
}

/* One POST to base + path: done, unsupported (404, 405, 501) or refused. */
static enum tb_cache_reset
post(const struct tb_discover *d, const char *api_key, const char *path, char *why, size_t whylen)
{
  char url[2048];
  snprintf(url, sizeof url, "%s%s", d->base_url, path);
  struct tb_http_resp resp;
  int rc =
    tb_http_call("POST", url, api_key, NULL, 0, TB_CACHERESET_TIMEOUT_MS, RESET_BODY_CAP, &resp);
  enum tb_cache_reset out;
  if (rc != 0) {
    snprintf(why, whylen, "POST %s: no answer (%s)", path, resp.err);
    out = TB_CACHE_RESET_REFUSED;
  } else if (resp.status >= 200 && resp.status < 300) {
    snprintf(why, whylen, "POST %s: %ld", path, resp.status);
    out = TB_CACHE_RESET_DONE;
  } else {
    /* the first line of the answer, at most 80 bytes, as the reason */
    size_t n = 0;
    while (resp.body && n < resp.len && n < 80 && resp.body[n] != '\n' && resp.body[n] != '\r')
      n++;
    snprintf(why, whylen, "POST %s: %ld%s%.*s", path, resp.status, n ? " " : "", (int)n,
             resp.body ? resp.body : "");
    out = resp.status == 404 || resp.status == 405 || resp.status == 501
            ? TB_CACHE_RESET_UNSUPPORTED
            : TB_CACHE_RESET_REFUSED;
  }
  tb_http_resp_free(&resp);
  return out;
}

/* tb_cache_reset; *asked: whether the server was called at all. */
static enum tb_cache_reset
reset(const struct tb_discover *d, const char *api_key, char *why, size_t whylen, bool *asked)
{
  *asked = true;
  switch (d->kind) {
  case TB_KIND_VLLM: {
    enum tb_cache_reset r = post(d, api_key, "/reset_prefix_cache", why, whylen);
    if (r == TB_CACHE_RESET_UNSUPPORTED) {
      size_t n = strlen(why);
      snprintf(why + n, whylen - n, " (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)");
    }
    return r;
  }
  case TB_KIND_SGLANG: return post(d, api_key, "/flush_cache", why, whylen);
  case TB_KIND_LLAMACPP: {
    int64_t slots = d->max_running > 0 ? d->max_running : 1;
    if (slots > TB_CACHERESET_MAX_SLOTS)
      slots = TB_CACHERESET_MAX_SLOTS;
    for (int64_t i = 0; i < slots; i++) {
      char path[64];
      snprintf(path, sizeof path, "/slots/%lld?action=erase", (long long)i);
      enum tb_cache_reset r = post(d, api_key, path, why, whylen);
      if (r == TB_CACHE_RESET_UNSUPPORTED) {
        size_t n = strlen(why);
        snprintf(why + n, whylen - n, " (llama.cpp serves it only with --slot-save-path)");
      }
      if (r != TB_CACHE_RESET_DONE)
        return r;
    }
    /* b11669's RAM prompt cache (--cache-ram, on by default) keeps the
     * erased prompts and restores them: measured live; the cell's
     * prefix_hits_unexplained check then judges what was left */
    snprintf(why, whylen,
             "POST /slots/{0..%lld}?action=erase: 200 (a RAM prompt cache, llama-server "
             "--cache-ram, outlives it)",
             (long long)slots - 1);
    return TB_CACHE_RESET_DONE;
  }
  default:
    *asked = false;
    snprintf(why, whylen, "%s offers no prefix-cache reset", tb_discover_kind_name(d->kind));
    return TB_CACHE_RESET_UNSUPPORTED;
  }
}

enum tb_cache_reset
tb_cache_reset(const struct tb_discover *d, const char *api_key, char *why, size_t whylen)
{
  bool asked;
  return reset(d, api_key, why, whylen, &asked);
}

enum tb_cache_reset
tb_cache_reset_once(struct tb_cache_reset_memo *m, const struct tb_discover *d, const char *api_key,
                    char *why, size_t whylen)
{
  if (m != NULL && m->unsupported) {
    /* the reason shortened, if need be, so that the suffix stays whole */
    size_t room = whylen > sizeof TB_CACHERESET_LEARNED ? whylen - sizeof TB_CACHERESET_LEARNED : 0;
    snprintf(why, whylen, "%.*s%s", (int)room, m->why, TB_CACHERESET_LEARNED);
    return TB_CACHE_RESET_UNSUPPORTED;
  }
  bool asked;
  enum tb_cache_reset r = reset(d, api_key, why, whylen, &asked);
  if (m != NULL && r == TB_CACHE_RESET_UNSUPPORTED && asked) {
    m->unsupported = true;
    snprintf(m->why, sizeof m->why, "%s", why);
  }
  return r;
}
