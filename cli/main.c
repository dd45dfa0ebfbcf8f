/*
 * tokbench: the command-line tool.  Dispatches to cli/cmd_<name>.c through a
 * static table; `tokbench --help` lists the commands.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "base/tb_util.h"

static const struct tb_cli_cmd commands[] = {
  { "run", "run the speed test matrix against an endpoint", tb_cli_run },
  { "migrate", "apply the database migrations (TOKBENCH_DATABASE_URL)", tb_cli_migrate },
  { "report", "render a result as html, md, csv or json", tb_cli_report },
  { "compare", "compare two results cell by cell; exit 1 on regressions", tb_cli_compare },
  { "keys", "create, list and revoke API keys (TOKBENCH_DATABASE_URL)", tb_cli_keys },
  { "submit", "start a job from a preset via the API; exit 1 on regressions", tb_cli_submit },
  { "spec-table", "print the job spec's fields (ranges, defaults, flags) as JSON",
    tb_cli_spec_table },
  { "verify", "check a result's signature; exit 1 when bad, 2 when unreadable", tb_cli_verify },
  { "signing-keys", "list and revoke the keys results are signed with (TOKBENCH_DATABASE_URL)",
    tb_cli_signing_keys },
};

static void
usage(FILE *out)
{
  fprintf(out, "usage: tokbench COMMAND [ARGS...]\n\nCommands:\n");
  for (size_t i = 0; i < TB_ARRAY_LEN(commands); i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\n`tokbench COMMAND --help` describes each.\n");
}

int
main(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("tokbench %s\n", TB_VERSION);
    return 0;
  }
  for (size_t i = 0; i < TB_ARRAY_LEN(commands); i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "tokbench: unknown command '%s' (see tokbench --help)\n", argv[1]);
  return 2;
}
