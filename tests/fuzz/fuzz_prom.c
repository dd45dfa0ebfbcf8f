/* libFuzzer target: tb_prom (sum, label lookup) and the engine's
 * running/waiting parse on arbitrary metrics text. */
#include <stddef.h>
#include <stdint.h>

#include "engine/tb_discover.h"
#include "net/tb_prom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *t = (const char *)data;
  double v, w;
  char buf[32];
  (void)tb_prom_sum(t, size, "vllm:num_requests_running", &v);
  (void)tb_prom_label(t, size, "vllm:cache_config_info", "kv_cache_size_tokens", buf, sizeof buf);
  (void)tb_prom_label(t, size, "vllm:cache_config_info", "block_size", buf, 1);
  (void)tb_discover_parse_load(TB_KIND_SGLANG, t, size, &v, &w);
  (void)tb_discover_parse_load(TB_KIND_VLLM, t, size, &v, &w);
  (void)tb_discover_parse_load(TB_KIND_LLAMACPP, t, size, &v, &w);
  (void)tb_discover_parse_load(TB_KIND_TGI, t, size, &v, &w);
  return 0;
}
