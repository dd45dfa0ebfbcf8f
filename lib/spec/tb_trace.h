/*
 * tb_trace: production traces read into one internal schema (docs/traces.md).
 *
 * A trace is a list of requests: when each arrived, its input and output
 * tokens, the ids of its prompt's blocks (equal ids = equal token blocks, so
 * a prefix cache hits), and, for multi-turn sessions, the request it follows
 * (its parent) and the delay after the parent's end.  Five formats are read,
 * each as its own repository or the peers' readers define it (the sources are
 * named in docs/traces.md and beside each reader in tb_trace.c):
 *
 *  - "mooncake": JSON lines, timestamp (ms), input_length, output_length,
 *    hash_ids (512-token blocks); AIPerf's session_id and delay (ms), and the
 *    aliases input_tokens, output_tokens, created_time, delay_ms;
 *  - "azure": CSV with TIMESTAMP (date-time text or seconds), ContextTokens,
 *    GeneratedTokens (Azure LLM inference traces 2023 and 2024; no blocks);
 *  - "burstgpt": CSV with Timestamp (s), Model, Request tokens, Response
 *    tokens, Total tokens, Log Type (no blocks);
 *  - "bailian": JSON lines, chat_id, parent_chat_id (-1 for a root),
 *    timestamp (s), input_length, output_length, type, turn, hash_ids
 *    (16-token blocks); each turn already holds its whole context;
 *  - "weka": one JSON object per conversation (a file of one, an array, or
 *    JSON lines): block_size (64), requests[] of t (s from the conversation's
 *    start), in, out, hash_ids, think_time; "subagent" entries nest requests
 *    of their own, with a cache of their own.
 *
 * The reader is pure: bytes in (gzip is inflated first, by zlib), a
 * struct tb_trace or an error naming the line and the field out.  Every
 * count a file sets is held to a named cap before anything is allocated
 * for it.  Block ids are renumbered densely (0 .. nuniq - 1) in the order
 * first seen; ids a format scopes to one conversation (WEKA) or subagent
 * never meet another's.
 */
#ifndef TB_TRACE_H
#define TB_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/tb_util.h"

#define TB_TRACE_MAX_BYTES (256u << 20) /* inflated size of one trace */
#define TB_TRACE_MAX_LINE (4u << 20)    /* one JSON line or CSV row */
#define TB_TRACE_MAX_REQUESTS 1000000u  /* requests in one trace */
#define TB_TRACE_MAX_REQ_BLOCKS 65536u  /* hash_ids of one request */
#define TB_TRACE_MAX_BLOCKS 16000000u   /* hash_ids of the whole trace */
#define TB_TRACE_MAX_TOKENS 10000000    /* input or output of one request */
#define TB_TRACE_MAX_DEPTH 4            /* WEKA subagents within subagents */
/* Memory one trace's reading may take beside its bytes as given: the text
 * gzip inflates to, the tables the reader builds (requests, block ids and
 * their index) and the JSON tree of one line or conversation at a time,
 * estimated before it is built (base/tb_jsonscan.h).  Past it the trace is
 * refused, naming this cap (issue 34, item 1). */
#define TB_TRACE_MAX_MEMORY (512u << 20)
/* The JSON tree of one line or conversation, estimated before it is built:
 * 4 MiB of "{}," would be a gigabyte of tree; an honest line (65,536
 * hash_ids) is under 4 MiB of it. */
#define TB_TRACE_MAX_TREE (128u << 20)
#define TB_TRACE_ERR_MAX 256

enum tb_trace_format {
  TB_TRACE_MOONCAKE,
  TB_TRACE_AZURE,
  TB_TRACE_BURSTGPT,
  TB_TRACE_BAILIAN,
  TB_TRACE_WEKA,
};

struct tb_trace_req {
  double t_s; /* arrival, s from the trace's first (recorded, or
                      * estimated as the parent's for a turn with a delay
                      * only) */
  int64_t in_tokens, out_tokens;
  size_t blk_off; /* its block ids: trace->blocks[blk_off .. + nblk) */
  uint32_t nblk;
  int64_t session; /* dense session index, -1 for none */
  int64_t parent;  /* index of the request it follows, -1 for a root */
  double delay_s;  /* after the parent's end; -1 when the trace has none
                      * (then: at t_s, and never before the parent ends) */
};

struct tb_trace {
  enum tb_trace_format format;
  int64_t block_tokens; /* tokens a block id stands for; 0: no blocks */
  size_t n;
  struct tb_trace_req *req;
  uint32_t *blocks; /* dense ids, all requests' together */
  size_t nblocks;
  size_t nuniq; /* distinct block ids */
  size_t nsessions;
  bool gzipped;    /* the input was gzip */
  char sha256[65]; /* of the bytes as given (gzip or not), lower-case hex */
  char id[40];     /* the uploaded trace's id (POST /v1/traces), set by
                    * whoever loaded it; "" for a file */
};

/* "mooncake", "azure", "burstgpt", "bailian", "weka" -> *out; false for
 * any other name. */
bool tb_trace_format_parse(const char *name, enum tb_trace_format *out) TB_MUST_CHECK;
const char *tb_trace_format_name(enum tb_trace_format f);
/* The block size a format's ids stand for by default (0: no blocks). */
int64_t tb_trace_format_block_tokens(enum tb_trace_format f);

/* Reads len bytes of a trace in format f (gzip or not) into *out, with the
 * SHA-256 of those bytes in out->sha256.  0 on success; -1 with a one-line
 * reason in err ("line 12: field \"input_length\": ...") and *out empty.
 * Free with tb_trace_free.  `tokbench run --trace` (a file) and the worker
 * (an uploaded trace, from PostgreSQL) both hand the engine what this
 * reads (tb_engine_target.trace). */
int tb_trace_parse(const void *data, size_t len, enum tb_trace_format f, struct tb_trace *out,
                   char *err, size_t errlen) TB_MUST_CHECK;
/* tb_trace_parse with its reading held to max_memory bytes (at most
 * TB_TRACE_MAX_MEMORY): the api's TOKBENCH_TRACE_MAX_MEMORY. */
int tb_trace_parse_within(const void *data, size_t len, enum tb_trace_format f, size_t max_memory,
                          struct tb_trace *out, char *err, size_t errlen) TB_MUST_CHECK;
void tb_trace_free(struct tb_trace *t);

#endif
