/* Unit tests for tb_redact: the one redactor of launch commands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_redact.h"

static void
check(const char *in, const char *want)
{
  char *got = tb_redact_command(in);
  if (strcmp(got, want) != 0)
    fail_msg("redact(%s)\n  got  %s\n  want %s", in, got, want);
  /* redacting twice changes nothing */
  char *again = tb_redact_command(got);
  assert_string_equal(again, got);
  free(again);
  free(got);
}

static void
test_flags(void **state)
{
  (void)state;
  check("vllm serve m --api-key sk-123 --port 8000",
        "vllm serve m --api-key <redacted> --port 8000");
  check("x --api-key=abc y --hf-token 'q w'", "x --api-key=<redacted> y --hf-token <redacted>");
  check("serve --api_key X --port 8", "serve --api_key <redacted> --port 8");
  check("serve --api_key='a b c' --x", "serve --api_key=<redacted> --x");
  check("serve --api-key \"a b\" --x", "serve --api-key <redacted> --x");
  check("s --apikey a --token b --password c --secret-key d --auth-token e",
        "s --apikey <redacted> --token <redacted> --password <redacted> "
        "--secret-key <redacted> --auth-token <redacted>");
  check("s --OPENAI-API-KEY=a -token b", "s --OPENAI-API-KEY=<redacted> -token <redacted>");
  check("s --db-passwd p --gcp-credentials c",
        "s --db-passwd <redacted> --gcp-credentials <redacted>");
  /* settings and paths a report must show */
  check("vllm serve m --max-num-batched-tokens 8192 --tokenizer t --api-keys-file f "
        "--ssl-keyfile k.pem",
        "vllm serve m --max-num-batched-tokens 8192 --tokenizer t --api-keys-file f "
        "--ssl-keyfile k.pem");
  check("", "");
  check("--api-key", "--api-key");
  check("--api-key   ", "--api-key   ");
}

static void
test_environment(void **state)
{
  (void)state;
  check("HF_TOKEN=hf_abc OPENAI_API_KEY=sk-x vllm serve m --api-key sk-y",
        "HF_TOKEN=<redacted> OPENAI_API_KEY=<redacted> vllm serve m --api-key <redacted>");
  check("hf_token=a my_secret_thing=b DB_Password='x y' z",
        "hf_token=<redacted> my_secret_thing=<redacted> DB_Password=<redacted> z");
  check("AWS_SECRET_ACCESS_KEY=\"a b\" cmd", "AWS_SECRET_ACCESS_KEY=<redacted> cmd");
  check("docker run -e HF_TOKEN=x --env=API_KEY=y img", "docker run -e HF_TOKEN=<redacted> "
                                                        "--env=API_KEY=<redacted> img");
  /* not secrets */
  check("CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO vllm serve m --port=8000",
        "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO vllm serve m --port=8000");
  check("a=b=c x==y =z", "a=b=c x==y =z");
}

static void
test_names(void **state)
{
  (void)state;
  assert_true(tb_redact_secret_flag("--hf-token", 10));
  assert_false(tb_redact_secret_flag("hf-token", 8));
  assert_false(tb_redact_secret_flag("--", 2));
  assert_true(tb_redact_secret_env("OPENAI_API_KEY", 14));
  assert_false(tb_redact_secret_env("1TOKEN", 6));
  assert_false(tb_redact_secret_env("HF-TOKEN", 8));
  assert_false(tb_redact_secret_env("", 0));
}

static void
test_document(void **state)
{
  (void)state;
  json_t *doc = json_pack("{s:s,s:i}", "launch_command", "HF_TOKEN=hf_abc vllm serve m", "x", 1);
  json_t *safe = tb_redact_document(doc);
  assert_ptr_not_equal(safe, doc);
  assert_string_equal(json_string_value(json_object_get(safe, "launch_command")),
                      "HF_TOKEN=<redacted> vllm serve m");
  /* the original is borrowed and left as it was */
  assert_string_equal(json_string_value(json_object_get(doc, "launch_command")),
                      "HF_TOKEN=hf_abc vllm serve m");
  json_decref(safe);
  json_object_set_new(doc, "launch_command", json_string("vllm serve m"));
  safe = tb_redact_document(doc);
  assert_ptr_equal(safe, doc);
  json_decref(safe);
  json_decref(doc);
  assert_null(tb_redact_document(NULL));
  assert_null(tb_redact_command(NULL));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_flags),
    cmocka_unit_test(test_environment),
    cmocka_unit_test(test_names),
    cmocka_unit_test(test_document),
  };
  return cmocka_run_group_tests_name("redact", tests, NULL, NULL);
}
