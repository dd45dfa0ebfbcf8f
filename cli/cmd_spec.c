/*
 * tokbench spec-table: the job spec's field table (lib/spec/tb_spec, dumped
 * by tb_speccli) as JSON, one object per field: name, type, required, min,
 * max, min_items, max_items, default, override (a hook / preset job may set
 * it), engine (an engine setting), cli (the `tokbench run` flag), help.  For
 * people writing job specs, and for tests/integration/test_api_contract.py,
 * which holds api/openapi.yaml's JobSpec to it.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "spec/tb_speccli.h"

int
tb_cli_spec_table(int argc, char **argv)
{
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: tokbench spec-table\n\nPrints the job spec's fields as JSON.\n");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "tokbench spec-table: unexpected argument '%s'\n", argv[1]);
    return 2;
  }
  json_t *t = tb_speccli_table_json();
  int rc = json_dumpf(t, stdout, JSON_INDENT(2)) == 0 ? 0 : 1;
  fputc('\n', stdout);
  json_decref(t);
  return rc;
}
