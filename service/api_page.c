/*
 * api_page: see api_page.h.
 */
#include "api_page.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
add(struct tb_api_page *p, const char *s, size_t n)
{
  tb_xgrow(&p->buf, &p->cap, p->len + n + 1, 4096);
  memcpy(p->buf + p->len, s, n);
  p->len += n;
  p->buf[p->len] = '\0';
}

/* cursor: hex of "<created_us>/<id>" */
static bool
cursor_parse(const char *cur, struct tb_api_page *p)
{
  char text[64];
  size_t cl = strlen(cur);
  if (cl % 2 != 0 || cl / 2 >= sizeof text || !tb_hex_decode(cur, text, cl / 2))
    return false;
  text[cl / 2] = '\0';
  char *slash = strchr(text, '/');
  int64_t us;
  if (slash == NULL || (size_t)(slash - text) >= sizeof p->cur_us)
    return false;
  *slash = '\0';
  if (!tb_parse_i64(text, 0, INT64_MAX, &us) || !tb_api_is_uuid(slash + 1))
    return false;
  snprintf(p->cur_us, sizeof p->cur_us, "%lld", (long long)us);
  snprintf(p->cur_id, sizeof p->cur_id, "%s", slash + 1);
  p->after_us = p->cur_us;
  p->after_id = p->cur_id;
  return true;
}

bool
tb_api_page_args(struct tb_api_req *r, struct tb_api_page *p, const char *wrap,
                 enum MHD_Result *ret)
{
  memset(p, 0, sizeof *p);
  const char *lim = tb_api_arg(r, "limit");
  const char *cur = tb_api_arg(r, "cursor");
  int64_t limit = 20;
  if (lim != NULL && !tb_parse_i64(lim, 1, TB_API_PAGE_MAX, &limit)) {
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST, "limit must be 1 to 100", NULL);
    return false;
  }
  if (cur != NULL && !cursor_parse(cur, p)) {
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST, "cursor is not one we gave", NULL);
    return false;
  }
  p->limit = (int)limit;
  char head[64];
  int hl = snprintf(head, sizeof head, "{\"%s\":[", wrap);
  add(p, head, (size_t)hl);
  return true;
}

void
tb_api_page_item(void *cls, const char *created_us, const char *id, const char *doc, size_t len)
{
  struct tb_api_page *p = cls;
  if (p->n >= p->limit)
    return; /* the one past the page: there is a next page */
  if (p->n++ > 0)
    add(p, ",", 1);
  add(p, doc, len);
  snprintf(p->last_us, sizeof p->last_us, "%s", created_us);
  snprintf(p->last_id, sizeof p->last_id, "%s", id);
}

enum MHD_Result
tb_api_page_reply(struct tb_api_req *r, struct tb_api_page *p, int rc)
{
  if (rc < 0) {
    free(p->buf);
    p->buf = NULL;
    return tb_api_reply_db(r, rc);
  }
  if (rc > p->limit) {
    char text[64], hex[130], tail[200];
    snprintf(text, sizeof text, "%s/%s", p->last_us, p->last_id);
    tb_hex_encode(text, strlen(text), hex);
    int tl = snprintf(tail, sizeof tail, "],\"next_cursor\":\"%s\"}", hex);
    add(p, tail, (size_t)tl);
  } else {
    add(p, "],\"next_cursor\":null}", 21);
  }
  enum MHD_Result ret = tb_api_reply(r, MHD_HTTP_OK, "application/json", p->buf, p->len, NULL);
  free(p->buf);
  p->buf = NULL;
  return ret;
}
