/*
 * api_report: GET /v1/jobs/{id}/report, a job's document (api_result.c,
 * lib/result/tb_jobdoc) rendered by lib/render/tb_report: the stored result of a finished
 * job, or, while it runs, its header and the cells measured so far (status
 * "running", so the report says it is partial).  The format comes from
 * ?format=, else the first media type of Accept we know (text/html,
 * text/markdown, text/csv, application/json), else HTML.  HTML replies carry
 * a Content-Security-Policy that allows no script at all: the report is
 * static, and every string in it came from users or endpoints.
 * tb_api_report_format / tb_api_report_reply are shared with /v1/compare.
 */
#include "api_report.h"

#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "api_result.h"

bool
tb_api_report_format(struct tb_api_req *r, enum tb_report_format dflt, enum tb_report_format *f,
                     enum MHD_Result *ret)
{
  const char *q = tb_api_arg(r, "format");
  if (q != NULL) {
    if (tb_report_format_parse(q, f))
      return true;
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST, "format must be html, md, csv or json", NULL);
    return false;
  }
  *f = dflt;
  const char *acc = tb_api_header(r, MHD_HTTP_HEADER_ACCEPT);
  while (acc != NULL && *acc) {
    size_t n = strcspn(acc, ",");
    size_t m = strcspn(acc, ";,");
    const char *a = acc;
    while (m > 0 && (*a == ' ' || *a == '\t')) {
      a++;
      m--;
    }
    while (m > 0 && (a[m - 1] == ' ' || a[m - 1] == '\t'))
      m--;
    char item[64];
    if (m > 0 && m < sizeof item) {
      memcpy(item, a, m);
      item[m] = '\0';
      if (strcmp(item, "*/*") == 0 || strcmp(item, "text/*") == 0)
        return true;
      if (strchr(item, '/') != NULL && tb_report_format_parse(item, f))
        return true;
    }
    acc += n;
    if (*acc == ',')
      acc++;
  }
  *f = dflt;
  return true;
}

enum MHD_Result
tb_api_report_reply(struct tb_api_req *r, enum tb_report_format f, char *body, size_t len,
                    const char *err)
{
  if (body == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, err ? err : "cannot render", NULL);
  const char *html_headers[] = { "Content-Security-Policy", TB_API_REPORT_CSP, NULL };
  enum MHD_Result ret = tb_api_reply(r, MHD_HTTP_OK, tb_report_content_type(f), body, len,
                                     f == TB_REPORT_HTML ? html_headers : NULL);
  return ret;
}

/* ---------------------------------------------------------------- report */

enum MHD_Result
tb_api_jobs_report(struct tb_api_req *r)
{
  enum tb_report_format f;
  enum MHD_Result ret;
  if (!tb_api_report_format(r, TB_REPORT_HTML, &f, &ret))
    return ret;
  json_t *doc = NULL;
  if (!tb_api_result_get(r, &doc, &ret))
    return ret;
  char *err = NULL;
  size_t len = 0;
  if (f == TB_REPORT_HTML) /* issue 26: where its cells sit against the frontier */
    tb_api_pareto_report(r, doc);
  char *body = tb_report_render(doc, f, &len, &err);
  json_decref(doc);
  ret = tb_api_report_reply(r, f, body, len, err);
  free(body);
  free(err);
  return ret;
}
