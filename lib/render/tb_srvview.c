/*
 * tb_srvview: see tb_srvview.h.
 */
#include "render/tb_srvview.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "base/tb_util.h"
#include "render/tb_celltable.h"

#define NCOLS 11

static const char *const heads[NCOLS] = {
  "Phase",
  "Context",
  "Load",
  "Requests",
  "Server prompt",
  "Server prompt tok/s",
  "tokbench prompt tok/s",
  "Server time per token",
  "tokbench time per token",
  "tokbench vs server span",
  "TTFT − server prompt",
};

static const json_t *
timings(const json_t *c)
{
  const json_t *t = json_object_get(c, "server_timings");
  return json_is_object(t) ? t : NULL;
}

/* tokbench's time per output token of the cell: a rate cell's TPOT, else
 * the decode cell's time between tokens. */
static double
our_tpot(const json_t *c)
{
  double v = tb_json_pct(c, "tpot_ms", "p50");
  return isfinite(v) ? v : tb_json_pct(c, "tbt_ms", "p50");
}

/* The texts of one row. */
static bool
row_texts(const json_t *c, char (*col)[TB_CELLTABLE_COLW])
{
  const json_t *t = timings(c);
  int64_t ctx = 0, conc = 0, reqs = 0, eq = 0;
  (void)tb_json_int(c, "context", &ctx);
  (void)tb_json_int(c, "concurrency", &conc);
  (void)tb_json_int(t, "requests", &reqs);
  (void)tb_json_int(t, "tokens_equal", &eq);
  snprintf(col[0], TB_CELLTABLE_COLW, "%s", tb_json_str(c, "phase") ? tb_json_str(c, "phase") : "");
  tb_format_tokens(ctx, col[1], TB_CELLTABLE_COLW);
  double rate = tb_json_num(c, "rate_rps");
  if (isfinite(rate))
    snprintf(col[2], TB_CELLTABLE_COLW, "%.2f req/s", rate);
  else
    snprintf(col[2], TB_CELLTABLE_COLW, "%" PRId64, conc);
  snprintf(col[3], TB_CELLTABLE_COLW, "%" PRId64 " (%" PRId64 " tokens alike)", reqs, eq);
  tb_render_fmt_ms(tb_json_pct(t, "prompt_ms", "p50"), col[4], TB_CELLTABLE_COLW);
  tb_render_fmt_tps(tb_json_pct(t, "prompt_tps", "p50"), col[5], TB_CELLTABLE_COLW);
  tb_render_fmt_tps(tb_json_num(c, "prompt_tps"), col[6], TB_CELLTABLE_COLW);
  tb_render_fmt_ms(tb_json_pct(t, "tpot_ms", "p50"), col[7], TB_CELLTABLE_COLW);
  tb_render_fmt_ms(strcmp(col[0], "prefill") == 0 ? NAN : our_tpot(c), col[8], TB_CELLTABLE_COLW);
  double diff = tb_json_pct(t, "tpot_vs_server_pct", "p50");
  if (isfinite(diff))
    snprintf(col[9], TB_CELLTABLE_COLW, "%+.1f%%", diff);
  else
    snprintf(col[9], TB_CELLTABLE_COLW, "–");
  tb_render_fmt_ms(tb_json_pct(t, "ttft_minus_prompt_ms", "p50"), col[10], TB_CELLTABLE_COLW);
  return true;
}

static const struct tb_celltable table = {
  .member = "server_timings",
  .ncols = NCOLS,
  .heads = heads,
  .align = "llrrrrrrrrr",
  .row = row_texts,
  .md_title = "## The server's own timings",
  .intro = "Where the server times each request itself (llama.cpp's `timings`), its figures "
           "beside tokbench's for the same requests (medians).  llama.cpp's time per token "
           "divides its n − 1 token intervals by n tokens; tokbench's divides by n − 1, so "
           "tokbench against the server compares its time per token with the server's span "
           "per interval, request by request.",
  .html_open = "<h2>The server's own timings</h2>\n<p>",
  .html_table = "</p>\n<table class=\"srvtime\"><thead><tr>",
  .html_body = "</tr></thead><tbody>\n",
  .html_close = "</tbody></table>\n",
  .html_escape_intro = true,
};

bool
tb_srvview_any(const json_t *doc)
{
  return tb_celltable_any(&table, doc);
}

void
tb_srvview_md(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_md(b, &table, doc);
}

void
tb_srvview_html(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_html(b, &table, doc);
}

void
tb_srvview_cell_line(FILE *f, const json_t *c)
{
  const json_t *t = timings(c);
  if (t == NULL)
    return;
  char tpot[48], prompt[48];
  tb_render_fmt_ms(tb_json_pct(t, "tpot_ms", "p50"), tpot, sizeof tpot);
  tb_render_fmt_ms(tb_json_pct(t, "prompt_ms", "p50"), prompt, sizeof prompt);
  fprintf(f, ", server: time per token %s, prompt %s", tpot, prompt);
  double diff = tb_json_pct(t, "tpot_vs_server_pct", "p50");
  if (isfinite(diff))
    fprintf(f, ", ours vs its span %+.1f%%", diff);
}
