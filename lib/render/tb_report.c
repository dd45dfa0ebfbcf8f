/*
 * tb_report: renderers from a result document to HTML, Markdown, CSV and
 * JSON.  See tb_report.h for the contract.
 *
 * Shape of the code: this file names the formats and picks one.  The
 * document is redacted, its view is built once (tb_repview: the sorted axes
 * of the matrix and a grid of borrowed cell pointers, every member
 * type-checked, the header's texts), and one module per format writes it:
 * tb_rephtml, tb_repmd, tb_repcsv.  The capped buffer, escapers, number
 * formats and page scaffolding come from tb_render (shared with
 * tb_cmpreport and tb_table).
 */
#include "render/tb_report.h"

#include <stdlib.h>
#include <strings.h>

#include "base/tb_redact.h"
#include "render/tb_repcsv.h"
#include "render/tb_rephtml.h"
#include "render/tb_repmd.h"
#include "render/tb_repview.h"

static const struct {
  const char *name, *alias, *mime;
  enum tb_report_format f;
} formats[] = {
  { "html", "text/html", "text/html; charset=utf-8", TB_REPORT_HTML },
  { "md", "markdown", "text/markdown; charset=utf-8", TB_REPORT_MD },
  { "csv", "text/csv", "text/csv; charset=utf-8", TB_REPORT_CSV },
  { "json", "application/json", "application/json", TB_REPORT_JSON },
};

bool
tb_report_format_parse(const char *s, enum tb_report_format *out)
{
  if (s == NULL)
    return false;
  for (size_t i = 0; i < TB_ARRAY_LEN(formats); i++)
    if (strcasecmp(s, formats[i].name) == 0 || strcasecmp(s, formats[i].alias) == 0) {
      *out = formats[i].f;
      return true;
    }
  if (strcasecmp(s, "text/markdown") == 0) {
    *out = TB_REPORT_MD;
    return true;
  }
  return false;
}

const char *
tb_report_format_name(enum tb_report_format f)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(formats); i++)
    if (formats[i].f == f)
      return formats[i].name;
  return "json";
}

const char *
tb_report_content_type(enum tb_report_format f)
{
  for (size_t i = 0; i < TB_ARRAY_LEN(formats); i++)
    if (formats[i].f == f)
      return formats[i].mime;
  return "application/json";
}

char *
tb_report_render(const json_t *doc, enum tb_report_format f, size_t *len, char **err)
{
  *err = NULL;
  if (!json_is_object(doc)) {
    *err = tb_xstrdup("not a result document (not a JSON object)");
    return NULL;
  }
  struct tb_render_buf b = { 0 };
  /* any document, however old or wherever it came from, is shown redacted */
  json_t *safe = tb_redact_document(doc);
  if (f == TB_REPORT_JSON) {
    tb_render_json(&b, safe);
    json_decref(safe);
    return tb_render_finish(&b, len, err);
  }
  struct tb_repview v;
  tb_repview_build(&v, safe);
  switch (f) {
  case TB_REPORT_HTML: tb_rephtml_render(&b, &v); break;
  case TB_REPORT_MD: tb_repmd_render(&b, &v); break;
  case TB_REPORT_CSV: tb_repcsv_render(&b, &v); break;
  default: tb_render_json(&b, safe); break;
  }
  tb_repview_free(&v);
  json_decref(safe);
  return tb_render_finish(&b, len, err);
}
