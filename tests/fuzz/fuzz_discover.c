/* libFuzzer target: every discovery parser (models, server info, props,
 * info, version, metrics) on the same arbitrary bytes, as an endpoint could
 * send them.  Corpus seeded from tests/fixtures/servers/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tb_discover.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  struct tb_discover d;
  tb_discover_init(&d, "http://fuzz");
  char *err = NULL;
  if (!tb_discover_parse_models(&d, text, size, NULL, &err))
    free(err);
  (void)tb_discover_parse_server_info(&d, text, size);
  (void)tb_discover_parse_props(&d, text, size);
  (void)tb_discover_parse_info(&d, text, size);
  (void)tb_discover_parse_version(&d, text, size);
  tb_discover_parse_metrics(&d, text, size);
  tb_discover_finish(&d);
  json_t *probe = tb_discover_to_json(&d);
  json_decref(probe);
  tb_discover_free(&d);
  free(text);
  return 0;
}
