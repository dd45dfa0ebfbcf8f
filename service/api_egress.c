/*
 * api_egress: see api_egress.h.
 */
#include "api_egress.h"

#include <string.h>

#include "net/tb_egress.h"

bool
tb_api_egress_check(struct tb_api_req *r, const char *field, const char *url, enum MHD_Result *ret)
{
  char why[TB_EGRESS_WHY_MAX];
  if (url == NULL || tb_egress_url_ok(tb_egress_current(), url, why, sizeof why))
    return true;
  const char *rule = strstr(why, TB_EGRESS_RULE_SEP);
  rule = rule != NULL ? rule + strlen(TB_EGRESS_RULE_SEP) : why;
  char *detail = tb_xasprintf("%s: %s", field, why);
  json_t *err = json_pack("{s:s, s:s}", "field", field, "detail", why);
  json_t *extra = json_pack("{s:s, s:[o]}", "rule", rule, "errors", err);
  *ret = tb_api_reply_error(r, TB_EC_EGRESS_REFUSED, detail, extra);
  free(detail);
  return false;
}
