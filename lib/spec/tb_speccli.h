/*
 * tb_speccli: the job spec on the command line.  `tokbench run`'s flags
 * are the job table's rows that name one (struct tb_spec_field's cli):
 * tb_speccli_arg turns a flag's text into the row's JSON value, and the
 * spec they build is read by tb_spec_parse as a stored one is.
 * `tokbench spec-table` prints the table (tb_speccli_table_json), which the
 * contract test compares with api/openapi.yaml's JobSpec schema.
 */
#ifndef TB_SPECCLI_H
#define TB_SPECCLI_H

#include <jansson.h>
#include <stdbool.h>

#include "base/tb_util.h"
#include "spec/tb_spec.h"

/*
 * A command-line value for field f into obj[f->name]: lists as "8k,16k"
 * ("none": empty, for EMPTY_OK lists), tokens as "8k", numbers, integers.
 * Only the syntax is checked here; ranges by tb_spec_parse.  False when
 * text is not of the field's type.
 */
bool tb_speccli_arg(const struct tb_spec_field *f, const char *text, json_t *obj) TB_MUST_CHECK;

/* The job table as JSON: [{name, type, required, min, max, max_items,
 * default, override, cli, engine, help}], for `tokbench spec-table` and the
 * contract test against api/openapi.yaml.  New reference. */
json_t *tb_speccli_table_json(void);

#endif
