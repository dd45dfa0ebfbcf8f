/*
 * Unit tests for tb_telemetry: a dcgm-exporter text (two GPUs, the labels
 * of its README's sample output: gpu, UUID, device, modelName) and an
 * nvidia_gpu_exporter text (uuid labels, a 0-1 ratio, Hz) summed into a
 * sample; texts with no GPU; and the reader against a loopback server
 * whose energy counter grows 400 J a second, summed over a window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/tb_telemetry.h"
#include "net/tb_egress.h"
#include "loopback.h"

static const char dcgm[] =
  "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n"
  "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
  "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\", UUID=\"GPU-a\", device=\"nvidia0\",modelName=\"NVIDIA H200\"} "
  "1980\n"
  "DCGM_FI_DEV_SM_CLOCK{gpu=\"1\", UUID=\"GPU-b\", device=\"nvidia1\",modelName=\"NVIDIA H200\"} "
  "1020\n"
  "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\", UUID=\"GPU-a\"} 61\n"
  "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\", UUID=\"GPU-b\"} 74\n"
  "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\", UUID=\"GPU-a\"} 612.5\n"
  "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\", UUID=\"GPU-b\"} 587.5\n"
  "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\", UUID=\"GPU-a\"} 1000000\n"
  "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\", UUID=\"GPU-b\"} 2000000\n"
  "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\", UUID=\"GPU-a\"} 100\n"
  "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\", UUID=\"GPU-b\"} 80\n"
  "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu=\"0\", UUID=\"GPU-a\"} 0\n"
  "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu=\"1\", UUID=\"GPU-b\"} 4\n"
  "vllm:num_requests_running{model_name=\"m\"} 3\n";

static void
test_parse_dcgm(void **state)
{
  struct tb_cost_sample s = { .t_ns = 42 };
  assert_true(tb_telemetry_parse(dcgm, sizeof dcgm - 1, &s));
  assert_int_equal(s.t_ns, 42);
  assert_int_equal(s.gpus, 2);
  assert_true(s.power_w == 1200);
  assert_true(s.energy_mj == 3000000);
  assert_true(s.util_pct == 90);
  assert_true(s.sm_mhz == 1500);
  assert_true(s.temp_c == 74);
  assert_true(s.has_reasons && s.reasons == 4);
  /* the older name of the reasons field */
  static const char old[] = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\"} 8\n"
                            "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 300\n";
  assert_true(tb_telemetry_parse(old, sizeof old - 1, &s));
  assert_true(s.reasons == 8 && s.power_w == 300 && isnan(s.energy_mj));
  /* a counter on one GPU of two is no counter */
  static const char part[] = "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 300\n"
                             "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 300\n"
                             "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\"} 5\n";
  assert_true(tb_telemetry_parse(part, sizeof part - 1, &s));
  assert_true(isnan(s.energy_mj) && s.power_w == 600);
}

static void
test_parse_nvidia_smi(void **state)
{
  /* utkuozdemir/nvidia_gpu_exporter's names and units */
  static const char smi[] = "nvidia_smi_power_draw_watts{uuid=\"df6e\"} 245.5\n"
                            "nvidia_smi_utilization_gpu_ratio{uuid=\"df6e\"} 0.875\n"
                            "nvidia_smi_clocks_current_sm_clock_hz{uuid=\"df6e\"} 1.695e+09\n"
                            "nvidia_smi_temperature_gpu{uuid=\"df6e\"} 67\n";
  struct tb_cost_sample s = { 0 };
  assert_true(tb_telemetry_parse(smi, sizeof smi - 1, &s));
  assert_int_equal(s.gpus, 1);
  assert_true(s.power_w == 245.5);
  assert_true(s.util_pct == 87.5);
  assert_true(fabs(s.sm_mhz - 1695) < 1e-6);
  assert_false(s.has_reasons);
  static const char none[] = "vllm:num_requests_running 3\nnot a line\n";
  assert_false(tb_telemetry_parse(none, sizeof none - 1, &s));
  assert_false(tb_telemetry_parse(NULL, 0, &s));
}

/* 400 W on one GPU since the server started, as a counter and a gauge. */
static int64_t lb_t0;
static atomic_int lb_reads;

static bool
serve(void *cls, int fd, const struct lb_req *req)
{
  double s = (double)(tb_time_mono_ns() - lb_t0) / 1e9;
  char body[256];
  snprintf(body, sizeof body,
           "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 400\n"
           "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} %.0f\n"
           "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu=\"0\"} 1\n",
           7e9 + s * 4e5);
  atomic_fetch_add(&lb_reads, 1);
  lb_respond(fd, 200, "text/plain", body, false);
  return true;
}

static void
test_reader(void **state)
{
  char *err = NULL;
  struct tb_egress *p = tb_egress_new("loopback", NULL, &err);
  assert_non_null(p);
  tb_egress_install(p);
  struct lb_server lb;
  lb_t0 = tb_time_mono_ns();
  assert_true(lb_start(&lb, serve, NULL));
  char url[128];
  snprintf(url, sizeof url, "%s/metrics", lb.url);
  struct tb_telemetry *t = tb_telemetry_start(url, 200);
  /* the window opens after the first sample, however long a loaded
   * machine takes to make it (a fixed 300 ms missed it once in 5 there) */
  unsigned failed, reads = 0;
  struct timespec ts = { 0, 10000000 };
  for (int i = 0; i < 1000 && reads == 0; i++) {
    nanosleep(&ts, NULL);
    tb_telemetry_counts(t, &failed, &reads);
  }
  assert_true(reads > 0);
  ts.tv_nsec = 50000000;
  nanosleep(&ts, NULL);
  int64_t t0 = tb_time_mono_ns();
  ts.tv_nsec = 900000000;
  nanosleep(&ts, NULL);
  int64_t t1 = tb_time_mono_ns();
  struct tb_cost_energy e;
  tb_telemetry_window(t, t0, t1, &e);
  assert_true(e.ok);
  assert_string_equal(e.source, "energy_counter");
  /* the counter is read to a millijoule: 400 W within a percent */
  assert_true(fabs(e.avg_w - 400) < 4);
  assert_true(e.samples >= 3);
  assert_true(e.reasons_known && e.reasons == 1);
  tb_telemetry_counts(t, &failed, &reads);
  assert_int_equal(failed, 0);
  assert_true(reads >= 5);
  tb_telemetry_stop(t);
  lb_stop(&lb);
  /* a closed port: every read fails, the window is unknown */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", lb_closed_port());
  t = tb_telemetry_start(url, 100);
  ts.tv_nsec = 250000000;
  nanosleep(&ts, NULL);
  tb_telemetry_window(t, tb_time_mono_ns() - 200000000, tb_time_mono_ns(), &e);
  assert_false(e.ok);
  tb_telemetry_counts(t, &failed, &reads);
  assert_true(failed >= 2 && failed == reads);
  tb_telemetry_stop(t);
  tb_egress_install(NULL);
}

/* The GPUs a text names (issue 35's provenance): count, model, driver;
 * "unknown" where no series says; lists when they differ. */
static void
test_parse_gpus(void **state)
{
  (void)state;
  json_t *g = tb_telemetry_parse_gpus(dcgm, sizeof dcgm - 1);
  assert_non_null(g);
  assert_int_equal(json_integer_value(json_object_get(g, "count")), 2);
  assert_string_equal(json_string_value(json_object_get(g, "name")), "NVIDIA H200");
  assert_string_equal(json_string_value(json_object_get(g, "driver")), "unknown");
  json_decref(g);
  static const char drv[] =
    "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",modelName=\"NVIDIA H100 80GB HBM3\","
    "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 300\n"
    "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",modelName=\"NVIDIA A100-SXM4-80GB\","
    "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 300\n"
    "vllm:num_requests_running{gpu=\"7\",modelName=\"not a GPU series\"} 1\n";
  g = tb_telemetry_parse_gpus(drv, sizeof drv - 1);
  assert_int_equal(json_integer_value(json_object_get(g, "count")), 2);
  assert_string_equal(json_string_value(json_object_get(g, "driver")), "550.54.15");
  const json_t *names = json_object_get(g, "name");
  assert_true(json_is_array(names) && json_array_size(names) == 2);
  assert_string_equal(json_string_value(json_array_get(names, 0)), "NVIDIA H100 80GB HBM3");
  json_decref(g);
  /* nvidia_gpu_exporter: nvidia_smi_gpu_info's name and driver_version */
  static const char smi[] =
    "nvidia_smi_gpu_info{uuid=\"GPU-1\",name=\"NVIDIA L4\",driver_version=\"535.104.05\"} 1\n"
    "nvidia_smi_power_draw_watts{uuid=\"GPU-1\"} 70\n";
  g = tb_telemetry_parse_gpus(smi, sizeof smi - 1);
  assert_int_equal(json_integer_value(json_object_get(g, "count")), 1);
  assert_string_equal(json_string_value(json_object_get(g, "name")), "NVIDIA L4");
  assert_string_equal(json_string_value(json_object_get(g, "driver")), "535.104.05");
  json_decref(g);
  static const char none[] = "vllm:num_requests_running 3\n";
  assert_null(tb_telemetry_parse_gpus(none, sizeof none - 1));
  assert_null(tb_telemetry_parse_gpus(NULL, 0));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse_dcgm),
    cmocka_unit_test(test_parse_nvidia_smi),
    cmocka_unit_test(test_reader),
    cmocka_unit_test(test_parse_gpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
