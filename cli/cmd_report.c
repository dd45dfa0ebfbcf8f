/*
 * tokbench report / tokbench compare: the renderers of tb_report over result
 * files, without the service.
 *
 *   tokbench report RESULT.json [--format html|md|csv|json] [--output F]
 *   tokbench compare [EARLIER.json ...] BASE.json HEAD.json [--format ...]
 *                    [--tolerance PCT] [--output F]
 *
 * Inputs go through tb_import, so a file of `tokbench run --output`, a job's
 * result from the API, or llm-inference-bench's benchmark_results.json are
 * all accepted.  Output goes to standard output, or to F (written to F.tmp,
 * then renamed, so a reader never sees half a report).
 *
 * compare renders BASE against HEAD cell by cell; the verdict (exit status,
 * and the reasons on stderr) judges HEAD against every earlier file, oldest
 * first (lib/db/tb_regress, lib/result/tb_verdict): with TB_VERDICT_MIN_HISTORY
 * earlier files or more, statistically; with fewer, by the two-run
 * comparison at the tolerance, flagged.
 *
 * Exit status: report 0 ok, 2 usage or unreadable input; compare 0 no
 * regression, 1 a regression (significant, or beyond the tolerance with too
 * little history; CI acts on it), 2 usage or unreadable input.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "result/tb_compare.h"
#include "result/tb_import.h"
#include "render/tb_cmpreport.h"
#include "db/tb_regress.h"
#include "result/tb_regdoc.h"
#include "render/tb_report.h"
#include "base/tb_util.h"
#include "result/tb_verdict.h"

/* Files `tokbench compare` reads, at most (the history and the head). */
#define COMPARE_FILES_MAX 200

static const char report_usage[] =
  "usage: tokbench report RESULT.json [--format html|md|csv|json] [--output FILE]\n"
  "\n"
  "Renders a result document (from `tokbench run --output`, the API, or the\n"
  "benchmark_results.json of llm-inference-bench) as:\n"
  "  html  one self-contained page: header, prefill, decode matrix as a heat\n"
  "        map, charts, all measurements (default)\n"
  "  md    Markdown tables, for a pull-request comment\n"
  "  csv   all measurements, one row per cell\n"
  "  json  the result document (llm-inference-bench files come out converted)\n"
  "RESULT.json may be - for standard input.\n"
  "\n"
  "  -f, --format F   output format (default html)\n"
  "  -o, --output F   write to F instead of standard output\n"
  "  -h, --help       this text\n";

static const char compare_usage[] =
  "usage: tokbench compare [EARLIER.json ...] BASE.json HEAD.json\n"
  "                        [--format html|md|csv|json] [--tolerance PCT]\n"
  "                        [--output FILE]\n"
  "\n"
  "Compares two result documents cell by cell: base and head figures and the\n"
  "ratio head/base for total tok/s, TTFT and time between tokens (prefill:\n"
  "prompt tok/s and TTFT), cells valid in only one of them, the geometric mean\n"
  "of the ratios per metric.  The verdict judges HEAD against all earlier\n"
  "files (oldest first, BASE the newest): with 3 or more, a t-test against\n"
  "their spread, the tolerance being the smallest change that matters (default\n"
  "2%); with fewer, cells whose throughput fell or latency rose by more than\n"
  "the tolerance (default 5%).  Each regression is told on stderr.\n"
  "\n"
  "  -f, --format F      output format (default md)\n"
  "  -t, --tolerance P   the tolerance in percent (defaults above)\n"
  "  -o, --output F      write to F instead of standard output\n"
  "  -h, --help          this text\n"
  "\n"
  "Exit status: 0 no regression, 1 regressions, 2 usage or input error.\n";

/* Writes the report to path (via path.tmp + rename) or standard output. */
static int
write_out(const char *path, const char *s, size_t len)
{
  if (path == NULL) {
    if (fwrite(s, 1, len, stdout) != len || fflush(stdout) != 0) {
      fprintf(stderr, "tokbench: writing the report: %s\n", strerror(errno));
      return 2;
    }
    return 0;
  }
  char *tmp = tb_xasprintf("%s.tmp", path);
  int rc = 2;
  FILE *f = fopen(tmp, "wb");
  if (f == NULL) {
    fprintf(stderr, "tokbench: %s: %s\n", tmp, strerror(errno));
    goto out;
  }
  bool ok = fwrite(s, 1, len, f) == len;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "tokbench: %s: %s\n", path, strerror(errno));
    remove(tmp);
    goto out;
  }
  rc = 0;
out:
  free(tmp);
  return rc;
}

static json_t *
load(const char *path)
{
  char *err = NULL;
  json_t *doc = tb_import_load_file(path, NULL, &err);
  if (doc == NULL) {
    fprintf(stderr, "tokbench: %s\n", err ? err : "cannot read the result");
    free(err);
  }
  return doc;
}

static const struct option report_opts[] = {
  { "format", required_argument, NULL, 'f' },
  { "output", required_argument, NULL, 'o' },
  { "tolerance", required_argument, NULL, 't' },
  { "help", no_argument, NULL, 'h' },
  { NULL, 0, NULL, 0 },
};

struct args {
  enum tb_report_format fmt;
  const char *output;
  double tolerance;
  bool tolerance_set;
  int nfiles;
  char **files;
};

/* Parses the shared options; returns -1 to go on, else an exit status. */
static int
parse(int argc, char **argv, bool compare, struct args *a)
{
  const char *usage = compare ? compare_usage : report_usage;
  a->fmt = compare ? TB_REPORT_MD : TB_REPORT_HTML;
  a->output = NULL;
  a->tolerance = TB_COMPARE_DEFAULT_TOLERANCE;
  a->tolerance_set = false;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, compare ? "f:o:t:h" : "f:o:h", report_opts, NULL)) != -1) {
    switch (c) {
    case 'f':
      if (!tb_report_format_parse(optarg, &a->fmt)) {
        fprintf(stderr, "tokbench: unknown format '%s' (html, md, csv, json)\n", optarg);
        return 2;
      }
      break;
    case 'o': a->output = optarg; break;
    case 't': {
      char *end = NULL;
      errno = 0;
      double p = strtod(optarg, &end);
      if (errno != 0 || end == optarg || *end != '\0' || !(p >= 0 && p < 100)) {
        fprintf(stderr, "tokbench: --tolerance wants a percentage in [0, 100)\n");
        return 2;
      }
      a->tolerance = p / 100.0;
      a->tolerance_set = true;
      break;
    }
    case 'h': fputs(usage, stdout); return 0;
    default: fputs(usage, stderr); return 2;
    }
  }
  a->nfiles = argc - optind;
  a->files = argv + optind;
  if (compare ? (a->nfiles < 2 || a->nfiles > COMPARE_FILES_MAX) : a->nfiles != 1) {
    fputs(usage, stderr);
    return 2;
  }
  return -1;
}

int
tb_cli_report(int argc, char **argv)
{
  struct args a;
  int rc = parse(argc, argv, false, &a);
  if (rc >= 0)
    return rc;
  json_t *doc = load(a.files[0]);
  if (doc == NULL)
    return 2;
  char *err = NULL;
  size_t len = 0;
  char *out = tb_report_render(doc, a.fmt, &len, &err);
  json_decref(doc);
  if (out == NULL) {
    fprintf(stderr, "tokbench: %s\n", err ? err : "cannot render");
    free(err);
    return 2;
  }
  rc = write_out(a.output, out, len);
  free(out);
  return rc;
}

int
tb_cli_compare(int argc, char **argv)
{
  struct args a;
  int rc = parse(argc, argv, true, &a);
  if (rc >= 0)
    return rc;
  json_t *docs[COMPARE_FILES_MAX] = { 0 };
  json_t *cmp = NULL, *verdict = NULL;
  char *err = NULL, *out = NULL;
  size_t len = 0, nd = (size_t)a.nfiles;
  rc = 2;
  for (size_t i = 0; i < nd; i++)
    if ((docs[i] = load(a.files[i])) == NULL)
      goto out;
  json_t *base = docs[nd - 2], *head = docs[nd - 1];
  cmp = tb_compare(base, head, a.tolerance, &err);
  if (cmp == NULL) {
    fprintf(stderr, "tokbench: %s\n", err ? err : "cannot compare");
    goto out;
  }
  verdict = tb_regress_judge_docs((const json_t *const *)docs, nd - 1, head, cmp, a.tolerance,
                                  a.tolerance_set ? a.tolerance : TB_VERDICT_DEFAULT_MIN_EFFECT);
  json_object_set(cmp, "verdict", verdict);
  out = tb_cmpreport_render(cmp, a.fmt, &len, &err);
  if (out == NULL) {
    fprintf(stderr, "tokbench: %s\n", err ? err : "cannot render");
    goto out;
  }
  rc = write_out(a.output, out, len);
  const json_t *cells = NULL;
  if (rc == 0 && tb_regdoc_regressed(verdict, &cells)) {
    rc = 1;
    for (size_t i = 0; i < json_array_size(cells); i++) {
      char *why = tb_regdoc_why(json_array_get(cells, i));
      fprintf(stderr, "tokbench: regression: %s\n", why);
      free(why);
    }
    if (json_array_size(cells) == 0)
      fprintf(stderr, "tokbench: regression: the matrix as a whole (geometric mean)\n");
  }
out:
  free(out);
  free(err);
  json_decref(verdict);
  json_decref(cmp);
  for (size_t i = 0; i < nd; i++)
    json_decref(docs[i]);
  return rc;
}
