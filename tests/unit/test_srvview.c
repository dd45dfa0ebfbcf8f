/* Unit tests for tb_srvview and the report's server-timing columns: a
 * document whose cells carry server_timings shows them in Markdown, HTML,
 * CSV and the terminal line; one without shows nothing new (its bytes are
 * unchanged). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_report.h"
#include "render/tb_srvview.h"

static const char *doc_text =
  "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\",\"engine\":{\"name\":\"llama.cpp\"},"
  "\"cells\":[{\"phase\":\"prefill\",\"context\":1024,\"context_label\":\"1K\",\"concurrency\":1,"
  "\"status\":\"valid\",\"prompt_tokens\":1024,\"prompt_tokens_cached\":25,\"ttft_ms\":2165.5,"
  "\"prompt_tps\":461.3,\"completed\":1,\"server_timings\":{\"source\":\"llama.cpp timings\","
  "\"requests\":1,\"prompt_ms\":{\"p50\":2159.67,\"p90\":2159.67},\"prompt_tps\":{\"p50\":462.57,"
  "\"p90\":462.57},\"predicted_n\":{\"p50\":1,\"p90\":1},\"ttft_minus_prompt_ms\":{\"p50\":5.85,"
  "\"p90\":5.85,\"min\":5.85},\"tokens_equal\":1,\"cache_n\":25,\"prompt_n\":999}},"
  "{\"phase\":\"decode\",\"context\":1024,\"context_label\":\"1K\",\"concurrency\":1,"
  "\"status\":\"valid\",\"total_tps\":120,\"ttft_ms\":{\"p50\":10.6},\"tbt_ms\":{\"p50\":8.4},"
  "\"server_timings\":{\"source\":\"llama.cpp timings\",\"requests\":6,\"tpot_ms\":{\"p50\":8.31,"
  "\"p90\":9.0},\"tokens_equal\":6,\"cache_n\":6138,\"prompt_n\":6}}]}";

static char *
render(const json_t *doc, enum tb_report_format f)
{
  char *err = NULL;
  char *out = tb_report_render(doc, f, NULL, &err);
  assert_non_null(out);
  assert_null(err);
  return out;
}

static void
test_shown(void **state)
{
  (void)state;
  json_t *doc = json_loads(doc_text, 0, NULL);
  assert_non_null(doc);
  assert_true(tb_srvview_any(doc));
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "## The server's own timings"));
  assert_non_null(strstr(md, "| prefill | 1K | 1 | 1 (1 tokens alike) |"));
  assert_non_null(strstr(md, "| decode | 1K | 1 | 6 (6 tokens alike) |"));
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "<h2>The server's own timings</h2>"));
  assert_non_null(strstr(html, "<table class=\"srvtime\">"));
  char *csv = render(doc, TB_REPORT_CSV);
  const char *h = strstr(csv, ",server_timing_requests,server_prompt_p50_ms,");
  assert_non_null(h);
  assert_true(h < strchr(csv, '\n'));
  assert_non_null(strstr(csv, ",1,2159.67,462.57,"));
  free(md);
  free(html);
  free(csv);
  /* without server_timings: no section, no columns */
  size_t i;
  json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c)
    json_object_del(c, "server_timings");
  assert_false(tb_srvview_any(doc));
  md = render(doc, TB_REPORT_MD);
  csv = render(doc, TB_REPORT_CSV);
  assert_null(strstr(md, "server's own timings"));
  assert_null(strstr(csv, "server_timing_requests"));
  free(md);
  free(csv);
  json_decref(doc);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_shown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
