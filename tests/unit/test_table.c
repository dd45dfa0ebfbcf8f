/*
 * Unit tests for tb_table: the terminal's decode matrix (written with
 * tb_render_md_matrix) keeps the settings' order of contexts and
 * concurrencies, takes the first decode cell of each, shows a missing cell
 * as "—", a valid one with its interval and TTFT, and a capacity-limited
 * one with the footnote that explains its "*"; and a progress line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_table.h"

static const char doc_text[] =
  "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\","
  "\"settings\":{\"contexts\":[4096,1024],\"concurrency\":[8,1],\"duration_s\":2,"
  "\"max_output\":64},"
  "\"cells\":["
  "{\"phase\":\"decode\",\"context\":1024,\"context_label\":\"1K\",\"concurrency\":1,"
  "\"status\":\"valid\",\"total_tps\":1234.56,\"total_tps_ci95\":[1200,1260],"
  "\"ttft_ms\":{\"p50\":48.4},\"tbt_ms\":{\"p50\":8.1}},"
  "{\"phase\":\"decode\",\"context\":1024,\"context_label\":\"1K\",\"concurrency\":1,"
  "\"status\":\"error\",\"reason\":\"a second cell, ignored\"},"
  "{\"phase\":\"decode\",\"context\":4096,\"context_label\":\"4K\",\"concurrency\":8,"
  "\"status\":\"over_capacity\",\"total_tps_capacity_limited\":99.5},"
  "{\"phase\":\"decode\",\"context\":1024,\"context_label\":\"1K\",\"concurrency\":8,"
  "\"status\":\"skipped\",\"reason\":\"r\"}]}";

static char *
print(const json_t *doc)
{
  char *out = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&out, &n);
  assert_non_null(f);
  tb_table_print(f, doc);
  fclose(f);
  return out;
}

static void
test_decode_matrix(void **state)
{
  json_t *doc = json_loads(doc_text, 0, NULL);
  assert_non_null(doc);
  char *out = print(doc);
  const char *m = strstr(out, "| Context | 8 | 1 |\n|---|---|---|\n");
  assert_non_null(m);
  assert_non_null(strstr(m, "\n| 4K | Over capacity* | \xe2\x80\x94 |\n"
                            "| 1K | Skipped | 1,234.6 \xc2\xb1 25.4 \xc2\xb7 48 ms TTFT |\n"));
  assert_non_null(strstr(out, "Over capacity*: run, but capacity-limited"));
  free(out);
  /* without the capacity-limited cell the footnote does not explain "*" */
  json_array_remove(json_object_get(doc, "cells"), 2);
  out = print(doc);
  assert_non_null(strstr(out, "| 4K | \xe2\x80\x94 | \xe2\x80\x94 |\n"));
  assert_null(strstr(out, "Over capacity*"));
  free(out);
  json_decref(doc);
}

static void
test_cell_line(void **state)
{
  json_t *doc = json_loads(doc_text, 0, NULL);
  char *out = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&out, &n);
  tb_table_cell_line(f, json_array_get(json_object_get(doc, "cells"), 0));
  fclose(f);
  assert_string_equal(out, "\r\033[K  decode   1K    x1    Valid 1234.6 \xc2\xb1 25.4 tok/s, "
                           "TTFT 48 ms\n");
  free(out);
  json_decref(doc);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_decode_matrix),
    cmocka_unit_test(test_cell_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
