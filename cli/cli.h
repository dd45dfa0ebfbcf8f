/*
 * tokbench (command-line tool): one function per subcommand, found through
 * the static table in main.c.  Each gets argc/argv starting at its own name
 * and returns the process exit status (0 ok, 1 failure/regression, 2 usage
 * or run error, as each command documents).
 */
#ifndef TB_CLI_H
#define TB_CLI_H

struct tb_cli_cmd {
  const char *name;
  const char *summary;
  int (*fn)(int argc, char **argv);
};

int tb_cli_migrate(int argc, char **argv);
int tb_cli_run(int argc, char **argv);
int tb_cli_report(int argc, char **argv);  /* cmd_report.c */
int tb_cli_compare(int argc, char **argv); /* cmd_report.c */
int tb_cli_keys(int argc, char **argv);
int tb_cli_submit(int argc, char **argv);       /* cmd_submit.c */
int tb_cli_spec_table(int argc, char **argv);   /* cmd_spec.c: tb_spec's table as JSON */
int tb_cli_verify(int argc, char **argv);       /* cmd_verify.c: a signed result */
int tb_cli_signing_keys(int argc, char **argv); /* cmd_signkeys.c: list, revoke */

#endif
