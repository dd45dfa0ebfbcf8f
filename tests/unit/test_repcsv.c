/*
 * Unit tests for tb_repcsv's column table: one name per column, every row
 * as wide as the header, and the columns that read elsewhere than the cell
 * itself: the self-checks, the server series' summary, and the rate cells'
 * columns (empty for a decode cell).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_report.h"

#define FIELDS_MAX 128
#define FIELD_LEN 160

static const char doc_text[] =
  "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\","
  "\"settings\":{\"contexts\":[1024],\"concurrency\":[2]},"
  "\"cells\":["
  "{\"phase\":\"decode\",\"context\":1024,\"concurrency\":2,\"status\":\"valid\","
  "\"total_tps\":100.5,\"total_tps_ci95\":[99,102],"
  "\"checks\":{\"ok\":false,\"failed\":[\"drained late, twice\"],\"drained_before\":true,"
  "\"achieved_concurrency\":1.5},"
  "\"server_series\":{\"summary\":{\"samples\":7,\"peak_kv_pct\":42.5}}},"
  "{\"phase\":\"rate\",\"context\":0,\"concurrency\":3,\"status\":\"valid\","
  "\"rate_rps\":2.5,\"arrival\":\"poisson\",\"users\":4,"
  "\"schedule_lag_ms\":{\"p50\":0.25,\"p99\":1.5},\"tpot_ms\":{\"p90\":9}}]}";

/* One CSV record at *p into f (quotes undone); the number of fields. */
static size_t
record(const char **p, char f[][FIELD_LEN])
{
  size_t n = 0, k = 0;
  bool quoted = false;
  for (; **p; (*p)++) {
    char c = **p;
    if (quoted && c == '"' && (*p)[1] == '"') {
      (*p)++;
    } else if (c == '"') {
      quoted = !quoted;
      continue;
    } else if (!quoted && (c == ',' || c == '\r')) {
      f[n++][k] = '\0';
      k = 0;
      assert_true(n < FIELDS_MAX);
      if (c == '\r') {
        *p += 2; /* \r\n */
        return n;
      }
      continue;
    }
    assert_true(k + 1 < FIELD_LEN);
    f[n][k++] = c;
  }
  fail_msg("a record without its line end");
  return 0;
}

static size_t
col(char hdr[][FIELD_LEN], size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(hdr[i], name) == 0)
      return i;
  fail_msg("no column %s", name);
  return 0;
}

static void
test_columns(void **state)
{
  json_t *doc = json_loads(doc_text, 0, NULL);
  assert_non_null(doc);
  char *err = NULL;
  char *csv = tb_report_render(doc, TB_REPORT_CSV, NULL, &err);
  assert_non_null(csv);
  static char hdr[FIELDS_MAX][FIELD_LEN], dec[FIELDS_MAX][FIELD_LEN], rate[FIELDS_MAX][FIELD_LEN];
  const char *p = csv;
  size_t nh = record(&p, hdr);
  for (size_t i = 0; i < nh; i++) /* one name per column */
    for (size_t j = i + 1; j < nh; j++)
      assert_string_not_equal(hdr[i], hdr[j]);
  assert_int_equal(record(&p, dec), nh);
  assert_int_equal(record(&p, rate), nh);
  assert_string_equal(p, "");
  /* the self-checks and the server series' summary */
  assert_string_equal(dec[col(hdr, nh, "checks_ok")], "false");
  assert_string_equal(dec[col(hdr, nh, "checks_failed")], "drained late, twice");
  assert_string_equal(dec[col(hdr, nh, "drained_before")], "true");
  assert_string_equal(dec[col(hdr, nh, "drained_after")], "");
  assert_string_equal(dec[col(hdr, nh, "achieved_concurrency")], "1.5");
  assert_string_equal(dec[col(hdr, nh, "server_samples")], "7");
  assert_string_equal(dec[col(hdr, nh, "peak_kv_pct")], "42.5");
  assert_string_equal(dec[col(hdr, nh, "total_tps_ci95_lo")], "99");
  assert_string_equal(dec[col(hdr, nh, "total_tps_ci95_hi")], "102");
  /* a rate cell's columns: empty for the decode cell, the rate cell's own */
  static const char *const rate_cols[] = {
    "rate_rps", "arrival", "users", "schedule_lag_p50_ms", "schedule_lag_p99_ms", "tpot_p90_ms"
  };
  static const char *const want[] = { "2.5", "poisson", "4", "0.25", "1.5", "9" };
  for (size_t i = 0; i < 6; i++) {
    assert_string_equal(dec[col(hdr, nh, rate_cols[i])], "");
    assert_string_equal(rate[col(hdr, nh, rate_cols[i])], want[i]);
  }
  assert_string_equal(rate[col(hdr, nh, "phase")], "rate");
  assert_string_equal(rate[col(hdr, nh, "concurrency")], "3");
  assert_string_equal(rate[col(hdr, nh, "checks_ok")], "");
  free(csv);
  json_decref(doc);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_columns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
