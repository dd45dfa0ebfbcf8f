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

/* One submission: its flags and what it holds; the owned parts are freed
 * by submit_free. */
struct submit {
  const char *preset, *key_file;
  const char *api; /* the API's base URL: its first al bytes, no trailing / */
  size_t al;
  bool wait, quiet;
  int64_t timeout_s;
  json_t *labels, *job, *result;
  char *key, *body, *url;
  struct tb_http_resp resp;
  char id[64];    /* the job's */
  char state[32]; /* the job's last state seen */
};

/* --label KEY=VALUE into s->labels; false with a message on stderr. */
static bool
add_label(struct submit *s, const char *arg)
{
  const char *eq = strchr(arg, '=');
  if (eq == NULL || eq == arg || json_object_size(s->labels) >= SUBMIT_LABELS_MAX) {
    fprintf(stderr, "tokbench submit: --label wants KEY=VALUE (at most %d)\n", SUBMIT_LABELS_MAX);
    return false;
  }
  char *k = tb_xstrndup(arg, (size_t)(eq - arg));
  json_t *v = json_string(eq + 1);
  if (v == NULL) {
    fprintf(stderr, "tokbench submit: --label %s: the value is not UTF-8\n", k);
    free(k);
    return false;
  }
  json_object_set_new(s->labels, k, v);
  free(k);
  return true;
}

/* The command line into s: -1 to go on, else the exit status (EXIT_OK
 * after --help). */
static int
submit_parse(struct submit *s, int argc, char **argv)
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
  optind = 1;
  int o;
  while ((o = getopt_long(argc, argv, "p:a:k:l:wt:qh", opts, NULL)) != -1) {
    switch (o) {
    case 'p': s->preset = optarg; break;
    case 'a': s->api = optarg; break;
    case 'k': s->key_file = optarg; break;
    case 'l':
      if (!add_label(s, optarg))
        return EXIT_ERROR;
      break;
    case 'w': s->wait = true; break;
    case 't':
      if (!tb_parse_i64(optarg, 1, 7 * 86400, &s->timeout_s)) {
        fprintf(stderr, "tokbench submit: --timeout: 1 to 604800 seconds\n");
        return EXIT_ERROR;
      }
      break;
    case 'q': s->quiet = true; break;
    case 'h': usage(stdout); return EXIT_OK;
    default: usage(stderr); return EXIT_ERROR;
    }
  }
  if (s->preset == NULL || optind != argc) {
    usage(stderr);
    return EXIT_ERROR;
  }
  return -1;
}

/* The API's URL (default: loopback) and the key, with the warning for a
 * key sent in clear; false with a message on stderr when there is no key. */
static bool
submit_key(struct submit *s)
{
  if (s->api == NULL || s->api[0] == '\0')
    s->api = "http://127.0.0.1:8080";
  s->al = strlen(s->api);
  while (s->al > 0 && s->api[s->al - 1] == '/')
    s->al--;
  char *kerr = NULL;
  s->key = read_key(s->key_file, &kerr);
  if (s->key == NULL) {
    if (kerr != NULL)
      fprintf(stderr, "tokbench submit: --api-key-file: %s\n", kerr);
    else
      fprintf(stderr, "tokbench submit: no API key (--api-key-file FILE or TOKBENCH_API_KEY)\n");
    free(kerr);
    return false;
  }
  if (strncasecmp(s->api, "http://", 7) == 0 && !host_is_loopback(s->api))
    fprintf(stderr,
            "tokbench submit: warning: the API key goes over plain http:// to %.*s, "
            "readable on the way; use https://\n",
            (int)s->al, s->api);
  return true;
}

/* POST /v1/presets/NAME/jobs: the job's id into s->id; false with a
 * message on stderr. */
static bool
submit_post(struct submit *s)
{
  json_t *req = json_pack("{s:O}", "labels", s->labels);
  s->body = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  s->url = tb_xasprintf("%.*s/v1/presets/%s/jobs", (int)s->al, s->api, s->preset);
  if (tb_http_call("POST", s->url, s->key, s->body, strlen(s->body), 30000, TB_HTTP_BODY_MAX,
                   &s->resp) != 0 ||
      s->resp.status != 202) {
    print_problem("submit", &s->resp);
    return false;
  }
  json_error_t jerr;
  s->job = json_loads(s->resp.body, 0, &jerr);
  const char *id_c = json_string_value(json_object_get(s->job, "id"));
  if (id_c == NULL) {
    fprintf(stderr, "tokbench submit: the API answered without a job id\n");
    return false;
  }
  snprintf(s->id, sizeof s->id, "%s", id_c);
  tb_http_resp_free(&s->resp);
  return true;
}

/* Long-polls the job until it ends (its state in s->state), telling its
 * progress on stderr; false with a message on a timeout or an error. */
static bool
submit_follow(struct submit *s)
{
  int64_t deadline = tb_time_mono_ns() + s->timeout_s * 1000000000LL;
  int64_t since = -1;
  json_error_t jerr;
  for (;;) {
    if (tb_time_mono_ns() > deadline) {
      fprintf(stderr, "tokbench submit: timed out after %lld s; job %s is %s\n",
              (long long)s->timeout_s, s->id, s->state);
      return false;
    }
    free(s->url);
    s->url = since < 0 ? tb_xasprintf("%.*s/v1/jobs/%s", (int)s->al, s->api, s->id)
                       : tb_xasprintf("%.*s/v1/jobs/%s?wait=%d&since=%lld", (int)s->al, s->api,
                                      s->id, SUBMIT_WAIT_S, (long long)since);
    if (get_retrying(s->url, s->key, (SUBMIT_WAIT_S + 15) * 1000L, TB_HTTP_BODY_MAX, &s->resp) !=
          0 ||
        s->resp.status != 200) {
      print_problem("following the job", &s->resp);
      return false;
    }
    json_decref(s->job);
    s->job = json_loads(s->resp.body, 0, &jerr);
    tb_http_resp_free(&s->resp);
    const char *st = json_string_value(json_object_get(s->job, "state"));
    json_t *prog = json_object_get(s->job, "progress");
    int64_t done = json_integer_value(json_object_get(prog, "cells_done"));
    json_t *total = json_object_get(prog, "cells_total");
    if (st == NULL) {
      fprintf(stderr, "tokbench submit: the API answered without a state\n");
      return false;
    }
    if (!s->quiet && (strcmp(st, s->state) != 0 || done != since)) {
      if (json_is_integer(total))
        fprintf(stderr, "tokbench submit: %s, %lld/%lld cells\n", st, (long long)done,
                (long long)json_integer_value(total));
      else
        fprintf(stderr, "tokbench submit: %s, %lld cells\n", st, (long long)done);
    }
    snprintf(s->state, sizeof s->state, "%s", st);
    since = done;
    if (tb_jobdoc_terminal(st))
      return true;
  }
}

/* The ended job's result into s->result and its report on stdout: the
 * API's Markdown, else the result's tables, else its state. */
static void
submit_report(struct submit *s)
{
  json_error_t jerr;
  free(s->url);
  s->url = tb_xasprintf("%.*s/v1/jobs/%s/result", (int)s->al, s->api, s->id);
  if (get_retrying(s->url, s->key, 60000, SUBMIT_REPORT_MAX, &s->resp) == 0 &&
      s->resp.status == 200)
    s->result = json_loads(s->resp.body, 0, &jerr);
  tb_http_resp_free(&s->resp);
  free(s->url);
  s->url = tb_xasprintf("%.*s/v1/jobs/%s/report?format=md", (int)s->al, s->api, s->id);
  if (get_retrying(s->url, s->key, 60000, SUBMIT_REPORT_MAX, &s->resp) == 0 &&
      s->resp.status == 200 && s->resp.body != NULL) {
    fwrite(s->resp.body, 1, s->resp.len, stdout);
    if (s->resp.len > 0 && s->resp.body[s->resp.len - 1] != '\n')
      putchar('\n');
  } else if (json_is_object(s->result) && json_is_array(json_object_get(s->result, "cells"))) {
    tb_table_print(stdout, s->result);
  } else {
    printf("job %s: %s\n", s->id, s->state);
  }
  tb_http_resp_free(&s->resp);
}

/* The exit status of the ended job, its failure or regressions told on
 * stderr. */
static int
submit_verdict(const struct submit *s)
{
  const json_t *rcells = NULL;
  bool regressed = tb_regdoc_regressed(json_object_get(s->result, "regressions"), &rcells);
  size_t nregs = json_array_size(rcells);
  const char *err = json_string_value(json_object_get(s->job, "error"));
  if (strcmp(s->state, "succeeded") != 0) {
    fprintf(stderr, "tokbench submit: job %s %s%s%s\n", s->id, s->state, err ? ": " : "",
            err ? err : "");
    return EXIT_ERROR;
  }
  if (regressed) {
    fprintf(stderr, "tokbench submit: job %s: %zu regression%s\n", s->id, nregs,
            nregs == 1 ? "" : "s");
    for (size_t i = 0; i < nregs && i < SUBMIT_WHY_MAX; i++) {
      char *why = tb_regdoc_why(json_array_get(rcells, i));
      fprintf(stderr, "  %s\n", why);
      free(why);
    }
    if (nregs == 0)
      fprintf(stderr, "  the matrix as a whole (geometric mean) is significantly worse\n");
    return EXIT_REGRESSION;
  }
  if (!s->quiet)
    fprintf(stderr, "tokbench submit: job %s succeeded, no regression\n", s->id);
  return EXIT_OK;
}

/* Submits the job and, with --wait, follows it to its end: the exit
 * status. */
static int
submit_run(struct submit *s, int argc, char **argv)
{
  int rc = submit_parse(s, argc, argv);
  if (rc >= 0)
    return rc;
  if (!submit_key(s))
    return EXIT_ERROR;
  tb_http_global_init();
  if (!submit_post(s))
    return EXIT_ERROR;
  if (!s->wait) {
    printf("%s\n", s->id);
    return EXIT_OK;
  }
  if (!s->quiet)
    fprintf(stderr, "tokbench submit: job %s queued (%.*s/v1/jobs/%s)\n", s->id, (int)s->al, s->api,
            s->id);
  if (!submit_follow(s))
    return EXIT_ERROR;
  submit_report(s);
  return submit_verdict(s);
}

int
tb_cli_submit(int argc, char **argv)
{
  struct submit s = { .api = getenv("TOKBENCH_API_URL"),
                      .timeout_s = 21600,
                      .labels = json_object() };
  int rc = submit_run(&s, argc, argv);
  fflush(stdout);
  tb_http_resp_free(&s.resp);
  if (s.key != NULL) {
    OPENSSL_cleanse(s.key, strlen(s.key));
    free(s.key);
  }
  free(s.body);
  free(s.url);
  json_decref(s.labels);
  json_decref(s.job);
  json_decref(s.result);
  return rc;
}
