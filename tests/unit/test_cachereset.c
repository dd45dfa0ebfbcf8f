/* Unit tests: tb_cachereset over real HTTP on loopback (loopback.h).  The
 * server answers as each engine does (vLLM: 200 with no body, or 404 when
 * started without VLLM_SERVER_DEV_MODE; SGLang: 200 "Cache flushed.", 400
 * while busy; llama.cpp: {"id_slot", "n_erased"} per slot; a 503 stands
 * for any refusal), and the test checks the routes called, in order, and the
 * done / unsupported / refused verdict with its reason.  The same resets
 * against tokbench-sim's flavours: test_sim.test_prefix_cache_reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopback.h"
#include "engine/tb_cachereset.h"
#include "engine/tb_discover.h"

struct fake {
  int status; /* what every call answers */
  const char *body;
  char paths[512]; /* "POST /x;POST /y;" */
  pthread_mutex_t mu;
};

static bool
handler(void *cls, int fd, const struct lb_req *req)
{
  struct fake *f = cls;
  const char *sp = strchr(req->head, ' ');
  const char *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
  pthread_mutex_lock(&f->mu);
  size_t n = strlen(f->paths);
  snprintf(f->paths + n, sizeof f->paths - n, "%.*s;", (int)(sp2 - req->head), req->head);
  pthread_mutex_unlock(&f->mu);
  lb_respond(fd, f->status, "application/json", f->body, false);
  return true;
}

/* One reset against a server answering status and body: through memo m
 * (tb_cache_reset_once) or, m NULL, tb_cache_reset. */
static enum tb_cache_reset
run_memo(enum tb_engine_kind kind, int64_t slots, int status, const char *body,
         struct tb_cache_reset_memo *m, char *paths, char *why)
{
  struct fake f = { .status = status, .body = body };
  pthread_mutex_init(&f.mu, NULL);
  struct lb_server s;
  assert_true(lb_start(&s, handler, &f));
  struct tb_discover d;
  tb_discover_init(&d, s.url);
  d.kind = kind;
  d.max_running = slots;
  enum tb_cache_reset r = m != NULL
                            ? tb_cache_reset_once(m, &d, "sk-secret", why, TB_CACHERESET_WHY_MAX)
                            : tb_cache_reset(&d, "sk-secret", why, TB_CACHERESET_WHY_MAX);
  lb_stop(&s);
  tb_discover_free(&d);
  pthread_mutex_destroy(&f.mu);
  memcpy(paths, f.paths, sizeof f.paths);
  assert_null(strstr(why, "sk-secret"));
  return r;
}

static enum tb_cache_reset
run(enum tb_engine_kind kind, int64_t slots, int status, const char *body, char *paths, char *why)
{
  return run_memo(kind, slots, status, body, NULL, paths, why);
}

static void
test_vllm(void **state)
{
  (void)state;
  char paths[512], why[TB_CACHERESET_WHY_MAX];
  assert_int_equal(run(TB_KIND_VLLM, 8, 200, "", paths, why), TB_CACHE_RESET_DONE);
  assert_string_equal(paths, "POST /reset_prefix_cache;");
  assert_string_equal(tb_cache_reset_name(TB_CACHE_RESET_DONE), "done");
  assert_int_equal(run(TB_KIND_VLLM, 8, 404, "{\"detail\":\"Not Found\"}", paths, why),
                   TB_CACHE_RESET_UNSUPPORTED);
  assert_non_null(strstr(why, "404 {\"detail\":\"Not Found\"}"));
  assert_non_null(strstr(why, "VLLM_SERVER_DEV_MODE=1"));
  assert_int_equal(run(TB_KIND_VLLM, 8, 500, "boom\nmore", paths, why), TB_CACHE_RESET_REFUSED);
  assert_string_equal(why, "POST /reset_prefix_cache: 500 boom");
}

static void
test_sglang(void **state)
{
  (void)state;
  char paths[512], why[TB_CACHERESET_WHY_MAX];
  assert_int_equal(run(TB_KIND_SGLANG, 8, 200, "Cache flushed.\n", paths, why),
                   TB_CACHE_RESET_DONE);
  assert_string_equal(paths, "POST /flush_cache;");
  assert_int_equal(run(TB_KIND_SGLANG, 8, 400, "Cache flushed.\nPlease check", paths, why),
                   TB_CACHE_RESET_REFUSED);
  assert_string_equal(why, "POST /flush_cache: 400 Cache flushed.");
  assert_string_equal(tb_cache_reset_name(TB_CACHE_RESET_REFUSED), "refused");
}

static void
test_llamacpp(void **state)
{
  (void)state;
  char paths[512], why[TB_CACHERESET_WHY_MAX];
  assert_int_equal(run(TB_KIND_LLAMACPP, 3, 200, "{\"id_slot\":0,\"n_erased\":5}", paths, why),
                   TB_CACHE_RESET_DONE);
  assert_string_equal(paths, "POST /slots/0?action=erase;POST /slots/1?action=erase;"
                             "POST /slots/2?action=erase;");
  /* the first refusal stops the round */
  assert_int_equal(
    run(TB_KIND_LLAMACPP, 3, 503, "{\"error\":{\"message\":\"Slot is busy\"}}", paths, why),
    TB_CACHE_RESET_REFUSED);
  assert_string_equal(paths, "POST /slots/0?action=erase;");
  /* slots unknown: slot 0 */
  assert_int_equal(run(TB_KIND_LLAMACPP, -1, 200, "{}", paths, why), TB_CACHE_RESET_DONE);
  assert_string_equal(paths, "POST /slots/0?action=erase;");
  /* b6915 without the slots API */
  assert_int_equal(run(TB_KIND_LLAMACPP, 2, 501, "{}", paths, why), TB_CACHE_RESET_UNSUPPORTED);
}

static void
test_others(void **state)
{
  (void)state;
  char paths[512], why[TB_CACHERESET_WHY_MAX];
  assert_int_equal(run(TB_KIND_TGI, 8, 200, "", paths, why), TB_CACHE_RESET_UNSUPPORTED);
  assert_string_equal(paths, ""); /* no call at all */
  assert_int_equal(run(TB_KIND_OPENAI, 8, 200, "", paths, why), TB_CACHE_RESET_UNSUPPORTED);
  assert_non_null(strstr(why, "offers no prefix-cache reset"));
  assert_string_equal(tb_cache_reset_name(TB_CACHE_RESET_UNSUPPORTED), "unsupported");
  /* nobody listening */
  struct tb_discover d;
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", lb_closed_port());
  tb_discover_init(&d, url);
  d.kind = TB_KIND_SGLANG;
  assert_int_equal(tb_cache_reset(&d, NULL, why, sizeof why), TB_CACHE_RESET_REFUSED);
  assert_non_null(strstr(why, "POST /flush_cache: no answer"));
  tb_discover_free(&d);
}

/* A run asks once: an unsupported answer is remembered (no call after it,
 * the same reason marked as learned); a refusal is asked again; an engine
 * without a reset route leaves nothing to remember. */
static void
test_memo(void **state)
{
  (void)state;
  char paths[512], why[TB_CACHERESET_WHY_MAX], first[TB_CACHERESET_WHY_MAX];
  static const char no_slots[] =
    "{\"error\":{\"code\":501,\"message\":\"This server does not support slots action. "
    "Start it with `--slot-save-path`\",\"type\":\"not_supported_error\"}}";
  struct tb_cache_reset_memo m;
  memset(&m, 0, sizeof m);
  assert_int_equal(run_memo(TB_KIND_LLAMACPP, 4, 501, no_slots, &m, paths, first),
                   TB_CACHE_RESET_UNSUPPORTED);
  assert_string_equal(paths, "POST /slots/0?action=erase;");
  assert_true(m.unsupported);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(run_memo(TB_KIND_LLAMACPP, 4, 200, "{}", &m, paths, why),
                     TB_CACHE_RESET_UNSUPPORTED);
    assert_string_equal(paths, ""); /* not asked again, though it would say yes now */
    char want[2 * TB_CACHERESET_WHY_MAX];
    snprintf(want, sizeof want, "%s%s", first, TB_CACHERESET_LEARNED);
    assert_string_equal(why, want);
  }
  /* a reason as long as a reason gets: cut, the suffix kept whole */
  memset(m.why, 'x', sizeof m.why - 1);
  m.why[sizeof m.why - 1] = '\0';
  assert_int_equal(run_memo(TB_KIND_VLLM, 1, 200, "", &m, paths, why), TB_CACHE_RESET_UNSUPPORTED);
  assert_int_equal(strlen(why), TB_CACHERESET_WHY_MAX - 1);
  assert_non_null(strstr(why, TB_CACHERESET_LEARNED));
  /* refused (busy): asked every time, nothing remembered */
  memset(&m, 0, sizeof m);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(run_memo(TB_KIND_SGLANG, 1, 400, "Cache flushed.", &m, paths, why),
                     TB_CACHE_RESET_REFUSED);
    assert_string_equal(paths, "POST /flush_cache;");
    assert_false(m.unsupported);
  }
  /* done: asked every time */
  assert_int_equal(run_memo(TB_KIND_VLLM, 1, 200, "", &m, paths, why), TB_CACHE_RESET_DONE);
  assert_string_equal(paths, "POST /reset_prefix_cache;");
  assert_false(m.unsupported);
  /* no reset route: no call, nothing learned, the reason as without memo */
  assert_int_equal(run_memo(TB_KIND_TGI, 8, 200, "", &m, paths, why), TB_CACHE_RESET_UNSUPPORTED);
  assert_string_equal(paths, "");
  assert_false(m.unsupported);
  assert_null(strstr(why, "learned"));
  /* vLLM without dev mode: remembered with its hint */
  assert_int_equal(run_memo(TB_KIND_VLLM, 1, 404, "{\"detail\":\"Not Found\"}", &m, paths, why),
                   TB_CACHE_RESET_UNSUPPORTED);
  assert_int_equal(run_memo(TB_KIND_VLLM, 1, 404, "", &m, paths, why), TB_CACHE_RESET_UNSUPPORTED);
  assert_string_equal(paths, "");
  assert_non_null(strstr(why, "VLLM_SERVER_DEV_MODE=1) (learned earlier"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_vllm),   cmocka_unit_test(test_sglang), cmocka_unit_test(test_llamacpp),
    cmocka_unit_test(test_others), cmocka_unit_test(test_memo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
