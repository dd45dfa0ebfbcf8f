/*
 * api_page: the one shape of a paginated list (GET /v1/jobs, GET
 * /v1/traces): ?limit= (1 to 100, 20 by default) and ?cursor= (opaque:
 * hex of "<created_us>/<id>" of the last row of the page before), rows
 * newest first, the reply {"<wrap>": [...], "next_cursor": "..." or null}.
 * The query asks for limit + 1 rows; the one past the page says there is a
 * next page.
 */
#ifndef TB_API_PAGE_H
#define TB_API_PAGE_H

#include "api.h"

#define TB_API_PAGE_MAX 100

struct tb_api_page {
  int limit;            /* rows on the page */
  const char *after_us; /* the cursor's, NULL: from the newest */
  const char *after_id;
  char cur_us[24], cur_id[TB_API_ID_LEN + 1];
  /* the body, row by row */
  char *buf;
  size_t len, cap;
  int n;
  char last_us[24], last_id[TB_API_ID_LEN + 1];
};

/* Reads ?limit= and ?cursor= into *p and opens the body with {"<wrap>":[.
 * False with a 400 queued into *ret. */
bool tb_api_page_args(struct tb_api_req *r, struct tb_api_page *p, const char *wrap,
                      enum MHD_Result *ret) TB_MUST_CHECK;
/* A row of the query (the q_<family> list callbacks' shape): cls is the
 * struct tb_api_page. */
void tb_api_page_item(void *cls, const char *created_us, const char *id, const char *doc,
                      size_t len);
/* Replies 200 with the page (rc: the query's rows, limit + 1 at most), or
 * the database error of rc < 0; frees the body either way. */
enum MHD_Result tb_api_page_reply(struct tb_api_req *r, struct tb_api_page *p, int rc);

#endif
