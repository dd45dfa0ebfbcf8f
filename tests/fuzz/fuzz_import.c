/* libFuzzer target: tb_import on arbitrary bytes (JSON or not), then every
 * renderer and the comparison on whatever it accepted: documents come from
 * users through POST /v1/results and `tokbench report`. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "render/tb_cmpreport.h"
#include "result/tb_compare.h"
#include "result/tb_import.h"
#include "render/tb_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *err = NULL;
  json_t *doc = tb_import_load_buffer((const char *)data, size, NULL, &err);
  free(err);
  err = NULL;
  /* The renderers also take documents that skipped the importer (the API's
   * partial documents): feed them the raw JSON too. */
  json_t *raw = json_loadb((const char *)data, size, 0, NULL);
  const json_t *docs[2] = { doc, raw };
  for (size_t d = 0; d < 2; d++) {
    if (docs[d] == NULL)
      continue;
    for (int f = TB_REPORT_HTML; f <= TB_REPORT_JSON; f++) {
      char *s = tb_report_render(docs[d], (enum tb_report_format)f, NULL, &err);
      free(s);
      free(err);
      err = NULL;
    }
  }
  if (doc != NULL) {
    json_t *cmp = tb_compare(doc, doc, 0.05, &err);
    free(err);
    err = NULL;
    if (cmp != NULL) {
      for (int f = TB_REPORT_HTML; f <= TB_REPORT_CSV; f++) {
        char *s = tb_cmpreport_render(cmp, (enum tb_report_format)f, NULL, &err);
        free(s);
        free(err);
        err = NULL;
      }
      json_decref(cmp);
    }
  }
  json_decref(raw);
  json_decref(doc);
  return 0;
}
