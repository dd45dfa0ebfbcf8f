/*
 * api_reply: the one place where replies are built.  JSON bodies and RFC 9457
 * problem documents; common headers.
 */
#include <jansson.h>
#include <string.h>

#include "api.h"

static enum MHD_Result
queue(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body)
{
  struct MHD_Response *r =
    MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (r == NULL)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

enum MHD_Result
tb_api_reply_json(struct MHD_Connection *c, unsigned status, const char *body)
{
  return queue(c, status, "application/json", body);
}

enum MHD_Result
tb_api_reply_problem(struct MHD_Connection *c, unsigned status, const char *type,
                     const char *title, const char *detail)
{
  json_t *o = json_object();
  char *t = tb_xasprintf("https://tokbench.dev/problems/%s", type);
  json_object_set_new(o, "type", json_string(t));
  free(t);
  json_object_set_new(o, "title", json_string(title));
  json_object_set_new(o, "status", json_integer(status));
  if (detail != NULL) {
    json_t *d = json_string(detail);
    json_object_set_new(o, "detail", d ? d : json_string("(detail not UTF-8)"));
  }
  char *body = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  enum MHD_Result ret = queue(c, status, "application/problem+json", body);
  free(body);
  return ret;
}
