/*
 * tokbench submit: a CI step.  Starts a job from a saved preset through the
 * REST API, optionally waits for it to end, prints its Markdown report, and
 * exits with a status a pipeline can fail on:
 *   0  the job succeeded and the result names no regression (or no --wait:
 *      the job was queued)
 *   1  the job succeeded and its verdict (lib/db/tb_regress: judged against
 *      its history, lib/result/tb_verdict) is a significant regression; each one
 *      is told on stderr with its effect, CI and p-value
 *   2  anything else: usage, the API unreachable or refusing, the job failed
 *      or was cancelled, the wait timed out
 *
 * Following: GET /v1/jobs/{id}?wait=30&since=<cells_done> long-polls, so a
 * change is seen at once and an idle job costs one request per 30 s.
 * Progress goes to stderr, the report to stdout.  The report comes from
 * GET /v1/jobs/{id}/report?format=md; when the API has none, the result's
 * tables are printed (tb_table_print).
 *
 * The API key: --api-key-file F (first line; refused when group or others
 * may read F) or TOKBENCH_API_KEY; never a command-line value (it would
 * show in ps and CI logs); wiped after use.  Sending it over plain http://
 * to a host that is not loopback prints a warning on stderr.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "base/tb_cfg.h"
#include "net/tb_http.h"
#include "result/tb_jobdoc.h"
#include "result/tb_regdoc.h"
#include "render/tb_table.h"
#include "base/tb_util.h"

#define SUBMIT_KEY_MAX 4096
#define SUBMIT_LABELS_MAX 32
#define SUBMIT_WAIT_S 30
#define SUBMIT_DOWN_MAX_S 120 /* consecutive seconds the API may be unreachable */
#define SUBMIT_REPORT_MAX (32u * 1024u * 1024u)
#define SUBMIT_WHY_MAX 20 /* regressions told on stderr, at most */

enum {
  EXIT_OK = 0,
  EXIT_REGRESSION = 1,
  EXIT_ERROR = 2
};

static void
usage(FILE *out)
{
  fprintf(out, "usage: tokbench submit --preset NAME [--api URL] [--api-key-file FILE]\n"
               "                       [--label KEY=VALUE ...] [--wait] [--timeout SECONDS]\n"
               "                       [--quiet]\n\n"
               "Starts a job from the preset NAME of the key's project (POST\n"
               "/v1/presets/NAME/jobs), with the labels given added to the preset's.\n"
               "With --wait, follows it to its end, prints its Markdown report on\n"
               "stdout and exits 0 (succeeded), 1 (succeeded with regressions) or\n"
               "2 (failed, cancelled, timed out, or any error).  Without --wait,\n"
               "prints the job id and exits 0 once it is queued.\n\n"
               "  --api URL            the API (default: $TOKBENCH_API_URL, else\n"
               "                       http://127.0.0.1:8080)\n"
               "  --api-key-file FILE  file holding the API key (default:\n"
               "                       $TOKBENCH_API_KEY)\n"
               "  --label KEY=VALUE    a label for the job (repeat; e.g. sha=$GITHUB_SHA)\n"
               "  --timeout SECONDS    give up waiting after this long (default 21600)\n"
               "  --quiet              no progress lines on stderr\n");
}

/* The key from a file's first line (refused when group or others may read
 * the file), or from the environment; new string, or NULL with *err (a new
 * string) when a file was given and refused. */
static char *
read_key(const char *file, char **err)
{
  if (file == NULL) {
    const char *env = getenv("TOKBENCH_API_KEY");
    return env != NULL && env[0] != '\0' ? tb_xstrdup(env) : NULL;
  }
  return tb_cfg_read_key_file(file, SUBMIT_KEY_MAX, err);
}

/* True when the URL's host is a loopback name or address (the key never
 * leaves the machine). */
static bool
host_is_loopback(const char *url)
{
  const char *h = strstr(url, "://");
  h = h != NULL ? h + 3 : url;
  const char *at = h + strcspn(h, "/?#");
  for (const char *p = h; p < at; p++) /* user:pass@host */
    if (*p == '@')
      h = p + 1;
  char host[256];
  size_t n;
  if (*h == '[') {
    n = strcspn(h + 1, "]");
    h++;
  } else {
    n = strcspn(h, ":/?#");
  }
  if (n == 0 || n >= sizeof host)
    return false;
  memcpy(host, h, n);
  host[n] = '\0';
  for (char *p = host; *p; p++)
    if (*p >= 'A' && *p <= 'Z')
      *p = (char)(*p + 32);
  size_t hl = strlen(host);
  if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 ||
      (hl > 10 && strcmp(host + hl - 10, ".localhost") == 0))
    return true;
  struct in_addr a4;
  return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* The "detail" (or "title") of a problem document, or the body's start. */
static void
print_problem(const char *what, const struct tb_http_resp *r)
{
  json_error_t e;
  json_t *p = r->body ? json_loads(r->body, 0, &e) : NULL;
  const char *d = json_string_value(json_object_get(p, "detail"));
  if (d == NULL)
    d = json_string_value(json_object_get(p, "title"));
  if (r->status == 0)
    fprintf(stderr, "tokbench submit: %s: %s\n", what, r->err);
  else
    fprintf(stderr, "tokbench submit: %s: HTTP %ld%s%s\n", what, r->status, d ? ": " : "",
            d ? d : "");
  json_t *errs = json_object_get(p, "errors");
  size_t i;
  json_t *x;
  json_array_foreach (errs, i, x) {
    fprintf(stderr, "  %s: %s\n", json_string_value(json_object_get(x, "field")),
            json_string_value(json_object_get(x, "detail")));
  }
  json_decref(p);
}

/* A GET that survives the API restarting: retries transport errors and 503
 * for up to SUBMIT_DOWN_MAX_S.  Returns 0 with an HTTP answer in *resp. */
static int
get_retrying(const char *url, const char *key, long timeout_ms, size_t cap,
             struct tb_http_resp *resp)
{
  int64_t first_fail = 0;
  for (;;) {
    memset(resp, 0, sizeof *resp);
    int rc = tb_http_call("GET", url, key, NULL, 0, timeout_ms, cap, resp);
    if (rc == 0 && resp->status != 503)
      return 0;
    int64_t now = tb_time_mono_ns();
    if (first_fail == 0)
      first_fail = now;
    if (now - first_fail > (int64_t)SUBMIT_DOWN_MAX_S * 1000000000LL)
      return -1;
    tb_http_resp_free(resp);
    nanosleep(&(struct timespec){ .tv_sec = 1 }, NULL);
  }
}

int
tb_cli_submit(int argc, char **argv)
{
  static const struct option opts[] = {
    { "preset", required_argument, NULL, 'p' },
    { "api", required_argument, NULL, 'a' },
    { "api-key-file", required_argument, NULL, 'k' },
    { "label", required_argument, NULL, 'l' },
    { "wait", no_argument, NULL, 'w' },
    { "timeout", required_argument, NULL, 't' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *preset = NULL, *key_file = NULL;
  const char *api = getenv("TOKBENCH_API_URL");
  bool wait = false, quiet = false;
  int64_t timeout_s = 21600;
  int rc = EXIT_ERROR;
  json_t *labels = json_object(), *job = NULL, *result = NULL;
  char *key = NULL, *body = NULL, *url = NULL;
  struct tb_http_resp resp = { 0 };
  optind = 1;
  int o;
  while ((o = getopt_long(argc, argv, "p:a:k:l:wt:qh", opts, NULL)) != -1) {
    switch (o) {
    case 'p': preset = optarg; break;
    case 'a': api = optarg; break;
    case 'k': key_file = optarg; break;
    case 'l': {
      const char *eq = strchr(optarg, '=');
      if (eq == NULL || eq == optarg || json_object_size(labels) >= SUBMIT_LABELS_MAX) {
        fprintf(stderr, "tokbench submit: --label wants KEY=VALUE (at most %d)\n",
                SUBMIT_LABELS_MAX);
        goto out;
      }
      char *k = tb_xstrndup(optarg, (size_t)(eq - optarg));
      json_t *v = json_string(eq + 1);
      if (v == NULL) {
        fprintf(stderr, "tokbench submit: --label %s: the value is not UTF-8\n", k);
        free(k);
        goto out;
      }
      json_object_set_new(labels, k, v);
      free(k);
      break;
    }
    case 'w': wait = true; break;
    case 't':
      if (!tb_parse_i64(optarg, 1, 7 * 86400, &timeout_s)) {
        fprintf(stderr, "tokbench submit: --timeout: 1 to 604800 seconds\n");
        goto out;
      }
      break;
    case 'q': quiet = true; break;
    case 'h':
      usage(stdout);
      rc = EXIT_OK;
      goto out;
    default: usage(stderr); goto out;
    }
  }
  if (preset == NULL || optind != argc) {
    usage(stderr);
    goto out;
  }
  if (api == NULL || api[0] == '\0')
    api = "http://127.0.0.1:8080";
  size_t al = strlen(api);
  while (al > 0 && api[al - 1] == '/')
    al--;
  char *kerr = NULL;
  key = read_key(key_file, &kerr);
  if (key == NULL) {
    if (kerr != NULL)
      fprintf(stderr, "tokbench submit: --api-key-file: %s\n", kerr);
    else
      fprintf(stderr, "tokbench submit: no API key (--api-key-file FILE or TOKBENCH_API_KEY)\n");
    free(kerr);
    goto out;
  }
  if (strncasecmp(api, "http://", 7) == 0 && !host_is_loopback(api))
    fprintf(stderr,
            "tokbench submit: warning: the API key goes over plain http:// to %.*s, "
            "readable on the way; use https://\n",
            (int)al, api);
  tb_http_global_init();

  /* 1. submit */
  json_t *req = json_pack("{s:O}", "labels", labels);
  body = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  url = tb_xasprintf("%.*s/v1/presets/%s/jobs", (int)al, api, preset);
  if (tb_http_call("POST", url, key, body, strlen(body), 30000, TB_HTTP_BODY_MAX, &resp) != 0 ||
      resp.status != 202) {
    print_problem("submit", &resp);
    goto out;
  }
  json_error_t jerr;
  job = json_loads(resp.body, 0, &jerr);
  const char *id_c = json_string_value(json_object_get(job, "id"));
  if (id_c == NULL) {
    fprintf(stderr, "tokbench submit: the API answered without a job id\n");
    goto out;
  }
  char id[64];
  snprintf(id, sizeof id, "%s", id_c);
  tb_http_resp_free(&resp);
  if (!wait) {
    printf("%s\n", id);
    rc = EXIT_OK;
    goto out;
  }
  if (!quiet)
    fprintf(stderr, "tokbench submit: job %s queued (%.*s/v1/jobs/%s)\n", id, (int)al, api, id);

  /* 2. follow */
  int64_t deadline = tb_time_mono_ns() + timeout_s * 1000000000LL;
  int64_t since = -1;
  char state[32] = "";
  for (;;) {
    if (tb_time_mono_ns() > deadline) {
      fprintf(stderr, "tokbench submit: timed out after %lld s; job %s is %s\n",
              (long long)timeout_s, id, state);
      goto out;
    }
    free(url);
    url = since < 0 ? tb_xasprintf("%.*s/v1/jobs/%s", (int)al, api, id)
                    : tb_xasprintf("%.*s/v1/jobs/%s?wait=%d&since=%lld", (int)al, api, id,
                                   SUBMIT_WAIT_S, (long long)since);
    if (get_retrying(url, key, (SUBMIT_WAIT_S + 15) * 1000L, TB_HTTP_BODY_MAX, &resp) != 0 ||
        resp.status != 200) {
      print_problem("following the job", &resp);
      goto out;
    }
    json_decref(job);
    job = json_loads(resp.body, 0, &jerr);
    tb_http_resp_free(&resp);
    const char *st = json_string_value(json_object_get(job, "state"));
    json_t *prog = json_object_get(job, "progress");
    int64_t done = json_integer_value(json_object_get(prog, "cells_done"));
    json_t *total = json_object_get(prog, "cells_total");
    if (st == NULL) {
      fprintf(stderr, "tokbench submit: the API answered without a state\n");
      goto out;
    }
    if (!quiet && (strcmp(st, state) != 0 || done != since)) {
      if (json_is_integer(total))
        fprintf(stderr, "tokbench submit: %s, %lld/%lld cells\n", st, (long long)done,
                (long long)json_integer_value(total));
      else
        fprintf(stderr, "tokbench submit: %s, %lld cells\n", st, (long long)done);
    }
    snprintf(state, sizeof state, "%s", st);
    since = done;
    if (tb_jobdoc_terminal(st))
      break;
  }

  /* 3. verdict and report */
  free(url);
  url = tb_xasprintf("%.*s/v1/jobs/%s/result", (int)al, api, id);
  if (get_retrying(url, key, 60000, SUBMIT_REPORT_MAX, &resp) == 0 && resp.status == 200)
    result = json_loads(resp.body, 0, &jerr);
  tb_http_resp_free(&resp);
  free(url);
  url = tb_xasprintf("%.*s/v1/jobs/%s/report?format=md", (int)al, api, id);
  if (get_retrying(url, key, 60000, SUBMIT_REPORT_MAX, &resp) == 0 && resp.status == 200 &&
      resp.body != NULL) {
    fwrite(resp.body, 1, resp.len, stdout);
    if (resp.len > 0 && resp.body[resp.len - 1] != '\n')
      putchar('\n');
  } else if (json_is_object(result) && json_is_array(json_object_get(result, "cells"))) {
    tb_table_print(stdout, result);
  } else {
    printf("job %s: %s\n", id, state);
  }
  tb_http_resp_free(&resp);
  const json_t *rcells = NULL;
  bool regressed = tb_regdoc_regressed(json_object_get(result, "regressions"), &rcells);
  size_t nregs = json_array_size(rcells);
  const char *err = json_string_value(json_object_get(job, "error"));
  if (strcmp(state, "succeeded") != 0) {
    fprintf(stderr, "tokbench submit: job %s %s%s%s\n", id, state, err ? ": " : "", err ? err : "");
    rc = EXIT_ERROR;
  } else if (regressed) {
    fprintf(stderr, "tokbench submit: job %s: %zu regression%s\n", id, nregs,
            nregs == 1 ? "" : "s");
    for (size_t i = 0; i < nregs && i < SUBMIT_WHY_MAX; i++) {
      char *why = tb_regdoc_why(json_array_get(rcells, i));
      fprintf(stderr, "  %s\n", why);
      free(why);
    }
    if (nregs == 0)
      fprintf(stderr, "  the matrix as a whole (geometric mean) is significantly worse\n");
    rc = EXIT_REGRESSION;
  } else {
    if (!quiet)
      fprintf(stderr, "tokbench submit: job %s succeeded, no regression\n", id);
    rc = EXIT_OK;
  }
out:
  fflush(stdout);
  tb_http_resp_free(&resp);
  if (key != NULL) {
    OPENSSL_cleanse(key, strlen(key));
    free(key);
  }
  free(body);
  free(url);
  json_decref(labels);
  json_decref(job);
  json_decref(result);
  return rc;
}
