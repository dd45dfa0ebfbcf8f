/*
 * tb_traceplay: a trace's replay window and its prompts.
 */
#include "spec/tb_traceplay.h"

#include "base/tb_arrival.h"

#include <math.h>
#include <string.h>

size_t
tb_traceplay_window(const struct tb_trace *in, const struct tb_traceplay_opts *o,
                    struct tb_trace *out)
{
  memset(out, 0, sizeof *out);
  out->format = in->format;
  out->block_tokens = in->block_tokens;
  out->nuniq = in->nuniq;
  out->nsessions = in->nsessions;
  out->gzipped = in->gzipped;
  memcpy(out->sha256, in->sha256, sizeof out->sha256);
  memcpy(out->id, in->id, sizeof out->id);
  double speed = o->speedup > 0 ? o->speedup : 1;
  double scale = o->rate_scale > 0 ? o->rate_scale : 1;
  double end = o->duration_s > 0 ? o->start_s + o->duration_s : INFINITY;
  int64_t *map = tb_xmalloc((in->n ? in->n : 1) * sizeof *map); /* in index -> out, -1 */
  out->req = tb_xmalloc((in->n ? in->n : 1) * sizeof *out->req);
  out->blocks = tb_xmalloc((in->nblocks ? in->nblocks : 1) * sizeof *out->blocks);
  for (size_t i = 0; i < in->n; i++) {
    const struct tb_trace_req *r = &in->req[i];
    map[i] = -1;
    if (o->max_requests > 0 && out->n >= o->max_requests)
      continue;
    if (r->parent < 0 ? (r->t_s < o->start_s || r->t_s >= end) : map[r->parent] < 0)
      continue;
    struct tb_trace_req *w = &out->req[out->n];
    *w = *r;
    if (r->parent < 0) {
      w->t_s = (r->t_s - o->start_s) / speed / scale;
    } else {
      w->parent = map[r->parent];
      w->t_s = out->req[w->parent].t_s + (r->t_s - in->req[r->parent].t_s) / speed;
      if (w->t_s < out->req[w->parent].t_s)
        w->t_s = out->req[w->parent].t_s;
    }
    if (w->delay_s >= 0)
      w->delay_s /= speed;
    if (o->max_output > 0 && w->out_tokens > o->max_output)
      w->out_tokens = o->max_output;
    if (o->max_input > 0 && w->in_tokens > o->max_input)
      w->in_tokens = o->max_input;
    if (in->block_tokens > 0) {
      int64_t fit = (w->in_tokens + in->block_tokens - 1) / in->block_tokens;
      if ((int64_t)w->nblk > fit)
        w->nblk = (uint32_t)fit;
    }
    w->blk_off = out->nblocks;
    if (w->nblk > 0)
      memcpy(out->blocks + out->nblocks, in->blocks + r->blk_off, w->nblk * sizeof *out->blocks);
    out->nblocks += w->nblk;
    map[i] = (int64_t)out->n++;
  }
  free(map);
  return out->n;
}

/* ---- prompts ---- */

/* 64 common words of at most four bytes (one token each with its leading
 * space on usual BPE vocabularies; one on tokbench-sim's, sim/sim_tok.h). */
static const char *const WORDS[64] = {
  "the",  "fox",  "dog",  "and",  "runs", "far",  "into", "sky",  "blue", "old",  "tree",
  "near", "sun",  "day",  "long", "soft", "bird", "sing", "all",  "red",  "over", "lazy",
  "hill", "when", "then", "lake", "wind", "rain", "snow", "moon", "star", "road", "book",
  "door", "fish", "gold", "hand", "home", "king", "leaf", "milk", "name", "park", "ring",
  "salt", "ship", "song", "time", "town", "wall", "wave", "west", "wood", "year", "zero",
  "cold", "dark", "east", "fire", "game", "iron", "open", "rock", "seed",
};

static void
put_words(char **buf, size_t *len, size_t *cap, struct tb_rng *r, int64_t n)
{
  for (int64_t k = 0; k < n; k++) {
    const char *w = WORDS[tb_rng_next(r) >> 58];
    size_t wl = strlen(w);
    tb_xgrow(buf, cap, *len + wl + 2, 4096);
    if (*len > 0)
      (*buf)[(*len)++] = ' ';
    memcpy(*buf + *len, w, wl);
    *len += wl;
  }
}

char *
tb_traceplay_text(const struct tb_trace *t, size_t i, uint64_t seed, int64_t max_words,
                  int64_t *words)
{
  const struct tb_trace_req *r = &t->req[i];
  int64_t want = r->in_tokens < max_words ? r->in_tokens : max_words;
  if (want < 0)
    want = 0;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  tb_xgrow(&buf, &cap, 1, 4096);
  int64_t done = 0;
  struct tb_rng g;
  for (uint32_t k = 0; k < r->nblk && done < want && t->block_tokens > 0; k++) {
    uint32_t d = t->blocks[r->blk_off + k];
    tb_rng_seed(&g, tb_rng_mix64(seed ^ tb_rng_mix64((uint64_t)d + 1)));
    int64_t n = want - done < t->block_tokens ? want - done : t->block_tokens;
    put_words(&buf, &len, &cap, &g, n);
    done += n;
  }
  /* the request's own words: a generator no block id can have */
  tb_rng_seed(&g, tb_rng_mix64(seed ^ tb_rng_mix64(~(uint64_t)i)) ^ 0x5bd1e9955bd1e995ULL);
  put_words(&buf, &len, &cap, &g, want - done);
  buf[len] = '\0';
  *words = want;
  return buf;
}
