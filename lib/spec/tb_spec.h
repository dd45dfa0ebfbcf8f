/*
 * tb_spec: the one job-spec contract.  A static table of fields (tb_spec.c,
 * job_fields[]) says, for each member of a job spec (the body of POST
 * /v1/jobs), its JSON type, range, default, normalisation ("8K" -> 8192),
 * whether a hook or a preset's job may set it over the preset, the
 * `tokbench run` flag that sets it and where the engine finds it in
 * struct tb_spec.  Everyone reads the spec through it:
 *
 *   api     tb_spec_job: validates a body, 422 naming every bad field
 *   presets tb_spec_job again, after tb_spec_override merged a hook's extras
 *   worker  tb_spec_parse of the stored (already normalised) spec
 *   engine  receives the struct tb_spec; never reads JSON settings
 *   cli     `tokbench run` flags: tb_speccli_arg turns a flag's text into the
 *           member's JSON value, then tb_spec_parse as for a job
 *   tests   tb_speccli_table_json (`tokbench spec-table`) is compared with
 *           api/openapi.yaml's JobSpec schema
 *
 * Ranges are those the engine runs: a spec the api accepts never fails at
 * run time for its settings.  To add a field: one row in job_fields[] and,
 * for an engine setting, its member in struct tb_spec (and its use).
 *
 * This header is the contract, open to every file of lib/spec: the
 * vocabulary of a table's rows (struct tb_spec_field, its types and flags),
 * the caps, struct tb_spec and the job table's entry points (tb_spec.c).
 * Beside it, each of one job:
 *
 *   tb_specwalk  the walker: any JSON object checked against any table
 *                (tb_specwalk_check, tb_specwalk_run), so the api's other
 *                bodies (endpoints, keys: service/api_spec.c) use it with
 *                tables of their own
 *   tb_speccli   the command line: a flag's text into its field's value,
 *                the table as JSON (`tokbench spec-table`)
 *
 * Errors are a JSON array of {"field": "contexts[2]", "detail": "..."};
 * every problem is reported, not only the first.  Unknown fields are errors.
 */
#ifndef TB_SPEC_H
#define TB_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

/* Caps. */
#define TB_SPEC_MAX_LIST 64 /* contexts, concurrency, prefill_contexts */
#define TB_SPEC_MAX_CONTEXT (4LL * 1024 * 1024)
#define TB_SPEC_MAX_CONCURRENCY 4096
#define TB_SPEC_MAX_KV_BUDGET 1000000000000LL /* the engine's bound (1e12 tokens) */
#define TB_SPEC_MAX_SHARDS \
  64                           /* workers driving one cell together (issue 24; the
                                * worker's setting, not the engine's: no member,
                                * worker_shard.h reads it from the job's spec) */
#define TB_SPEC_MAX_REPEATS 10 /* measurements per cell: each one costs a whole matrix pass */
#define TB_SPEC_MAX_OUTPUT 1048576
#define TB_SPEC_MAX_LABELS 32
#define TB_SPEC_MAX_LABEL_KEY 64
#define TB_SPEC_MAX_LABEL_VALUE 256
#define TB_SPEC_MAX_CALLBACKS 8
#define TB_SPEC_MAX_URL 2048
#define TB_SPEC_MAX_RATE 100000.0 /* requests per second */
#define TB_SPEC_MAX_RATE_REQUESTS 1000000
#define TB_SPEC_MAX_TURNS 64   /* turns of a conversation */
#define TB_SPEC_MAX_USERS 2048 /* users of a closed-loop cell (a connection each) */

enum tb_spec_type {
  TB_SPEC_UUID,     /* string, a UUID (lower-cased) */
  TB_SPEC_STRING,   /* string of [min, max] bytes */
  TB_SPEC_IDENT,    /* string of [A-Za-z0-9._-], [min, max] bytes */
  TB_SPEC_URL,      /* http(s) URL (tb_specwalk_url_ok) */
  TB_SPEC_INT,      /* integer in [min, max] */
  TB_SPEC_NUMBER,   /* number in [min, max] */
  TB_SPEC_TOKENS,   /* array of ints or "8k" strings, each in [min, max], no repeats */
  TB_SPEC_INTS,     /* array of ints in [min, max], no repeats */
  TB_SPEC_LABELS,   /* object of string -> string */
  TB_SPEC_URLS,     /* array of URLs */
  TB_SPEC_OBJECT,   /* object checked against sub[] (every member optional) */
  TB_SPEC_SCOPES,   /* array of scope names -> mask (tb_auth) */
  TB_SPEC_DURATION, /* "30d" or seconds (tb_auth) */
  TB_SPEC_NUMBERS,  /* array of numbers in [min, max], no repeats */
};

enum {
  TB_SPEC_REQUIRED = 1u << 0, /* must be given (on create) */
  TB_SPEC_NULLABLE = 1u << 1, /* null allowed on patch (clears) */
  TB_SPEC_OVERRIDE = 1u << 2, /* a hook / a preset's job may set it over the preset */
  TB_SPEC_EMPTY_OK = 1u << 3, /* a list may be empty */
  TB_SPEC_INLINE = 1u << 4,   /* a string stored in a char[TB_SPEC_INLINE_MAX]
                               * member (nothing to free; max below it) */
  TB_SPEC_AUTO = 1u << 5,     /* TB_SPEC_INT: the string "auto" too (kept as
                               * "auto" in the spec, 0 in a member) */
};

#define TB_SPEC_INLINE_MAX 32

#define TB_SPEC_NO_MEMBER ((size_t)-1)

struct tb_spec_field {
  const char *name;
  enum tb_spec_type type;
  unsigned flags;
  double min, max;                 /* value range; for strings their length */
  size_t max_items;                /* lists, labels */
  const struct tb_spec_field *sub; /* TB_SPEC_OBJECT */
  size_t nsub;
  /* job spec only */
  const char *def;  /* default the engine applies, as JSON text; NULL: none
                           * (or derived at run time, e.g. contexts) */
  const char *cli;  /* `tokbench run --<cli>`; NULL: no flag */
  size_t member;    /* offsetof in struct tb_spec; TB_SPEC_NO_MEMBER: not an
                           * engine setting (the service's own) */
  const char *help; /* one line: --help and the table dump */
  /* TB_SPEC_STRING only, may be NULL: NULL when the text is good, else why
   * not (a static one-liner), e.g. tb_arrival_check */
  const char *(*check)(const char *text);
};

/* A list setting.  given: the spec named it (an empty prefill list is
 * given and means "no prefill rows"). */
struct tb_spec_list {
  int64_t v[TB_SPEC_MAX_LIST];
  size_t n;
  bool given;
};

/* A list of numbers (rates), as struct tb_spec_list. */
struct tb_spec_dlist {
  double v[TB_SPEC_MAX_LIST];
  size_t n;
  bool given;
};

/* Service-level objectives of rate cells, each 0 when not set (the spec's
 * "slo" object; docs/engine.md, "Goodput"). */
struct tb_spec_slo {
  double ttft_ms, tpot_ms, tbt_ms, e2e_ms;
};

/* A shared-prefix workload of rate cells (the spec's "prefix" object): on
 * when tokens > 0.  Every request's chat starts with the same system prompt
 * of about `tokens` tokens; its user message is one of `suffixes` distinct
 * ones (request k takes suffix k mod suffixes; 0: each its own). */
struct tb_spec_prefix {
  int64_t tokens;
  int64_t suffixes;
};

/* Multi-turn conversations of rate cells (the spec's "conversation"
 * object): on when turns > 0.  Each arrival starts a conversation of
 * `turns` requests; turn t carries the earlier turns (the user's messages
 * and the server's answers) and a new user message, and is sent a think
 * time after turn t - 1 ended (think: "exponential" with mean think_time_s,
 * or "constant"). */
struct tb_spec_convo {
  int64_t turns;
  double think_time_s;
  char think[TB_SPEC_INLINE_MAX];
};

/* A sweep (the spec's "sweep" object): on when attainment_pct > 0.  Over
 * "rate" its probes are rate cells (open loop); over "concurrency" they are
 * closed-loop cells of N users, each sending its next request when the last
 * one ended (plus the think time of a conversation). */
struct tb_spec_sweep {
  double attainment_pct;         /* share of requests that must meet the SLOs */
  char over[TB_SPEC_INLINE_MAX]; /* "rate" or "concurrency" */
  double min_rps, max_rps;       /* the search's bounds (over rate) */
  double step_rps;               /* its resolution */
  int64_t min_concurrency, max_concurrency, step_concurrency; /* (over concurrency) */
  int64_t max_probes;                                         /* cells it may run */
};

/* A trace replayed as a rate cell (the spec's "trace" object; docs/traces.md):
 * on when format is set.  The trace itself is a file (`tokbench run --trace
 * FILE`, format given) or an uploaded trace (id, POST /v1/traces; format
 * may be left out of the spec: the api writes the stored trace's into the
 * job's spec when it queues it, and the worker takes it from the store
 * too); these say how it is replayed (lib/spec/tb_traceplay.h, struct
 * tb_traceplay_opts). */
struct tb_spec_trace {
  char format[TB_SPEC_INLINE_MAX]; /* tb_trace_format_parse's names; "": off */
  double start_s, duration_s;      /* the window of the roots' arrivals (0: all) */
  double speedup, rate_scale;
  int64_t max_output, max_requests; /* 0: as recorded, all */
};

/* The engine's settings, parsed.  Lists are sorted, without repeats. */
struct tb_spec {
  char *model;                  /* NULL: the first of /v1/models */
  struct tb_spec_list contexts; /* not given: from max_model_len */
  struct tb_spec_list concurrency;
  struct tb_spec_list prefill_contexts; /* not given: contexts + full length */
  double duration_s;
  int64_t max_output;
  int64_t kv_budget; /* 0: the server's */
  int64_t repeats;   /* measurements per cell, 1..TB_SPEC_MAX_REPEATS */
  double settle_s, stall_timeout_s, first_token_timeout_s, ready_timeout_s, drain_timeout_s,
    metrics_interval_s;
  /* rate cells (lib/engine/tb_rate.h): no rates and no sweep, none run */
  struct tb_spec_dlist rates;       /* requests per second */
  double rate_duration_s;           /* arrivals for this long ... */
  int64_t rate_requests;            /* ... or this many (0: the window) */
  char arrival[TB_SPEC_INLINE_MAX]; /* tb_arrival_check's syntax */
  int64_t seed;
  char input_tokens[TB_SPEC_INLINE_MAX]; /* tb_length_parse's syntax */
  char output_tokens[TB_SPEC_INLINE_MAX];
  struct tb_spec_slo slo;
  struct tb_spec_sweep sweep;
  struct tb_spec_prefix prefix;
  struct tb_spec_convo conversation;
  struct tb_spec_trace trace;
  /* "reset": the server's prefix cache emptied before every prefill scout,
   * rate and trace cell where the engine offers it (tb_cachereset);
   * "keep": never */
  char cache[TB_SPEC_INLINE_MAX];
};

enum tb_spec_rc {
  TB_SPEC_OK = 0,       /* *out holds the normalized object */
  TB_SPEC_BAD_JSON = 1, /* not a JSON object: *errors holds one entry (400) */
  TB_SPEC_INVALID = 2,  /* *errors lists the problems (422) */
};

/* The job spec's table (static) and its length. */
const struct tb_spec_field *tb_spec_fields(size_t *n);

/* The job field called name, or NULL. */
const struct tb_spec_field *tb_spec_field(const char *name);

/* A job spec (POST /v1/jobs): tb_specwalk_run with the job table, then what
 * no one field says alone (a trace object with neither id nor format:
 * refused naming trace.id; shards other than 1 beside a trace: refused
 * naming shards, issue 24). */
enum tb_spec_rc tb_spec_job(const char *text, size_t len, json_t **out,
                            json_t **errors) TB_MUST_CHECK;

/*
 * A preset's spec (borrowed) with the members of extra (borrowed, may be
 * NULL) that the table lets override it: objects (labels) are merged, the
 * rest replaced; other members of extra are ignored.  New object, not yet
 * validated (run tb_spec_job on it).
 */
json_t *tb_spec_override(const json_t *preset_spec, const json_t *extra) TB_MUST_CHECK;

/* s with every default of the table (lists not given, model NULL). */
void tb_spec_init(struct tb_spec *s);

/*
 * A job spec (borrowed JSON object: a stored spec, or what `tokbench run`
 * built) into *s: validated against the table as tb_spec_job does, then the
 * engine settings stored over the defaults.  Members that are not engine
 * settings (endpoint_id, labels, ...) are checked and skipped.  Returns
 * true, or false with *err (new string naming the fields; *s then holds
 * the defaults).  Free with tb_spec_free.
 */
bool tb_spec_parse(struct tb_spec *s, const json_t *spec, char **err) TB_MUST_CHECK;

/* Frees what *s holds (not s). */
void tb_spec_free(struct tb_spec *s);

/* The service's own members of a job spec (not engine settings): what the
 * job row holds beside the spec. */
struct tb_spec_job_row {
  int64_t priority;
  const char *exclusive_group; /* NULL: the endpoint's */
  const json_t *labels;        /* NULL: none */
  int64_t max_attempts;
  bool max_attempts_given; /* false: the table's default */
};

/* Those members of spec (borrowed: tb_spec_job's normalised object; the
 * strings and labels point into it), each not given taking the table's
 * default. */
void tb_spec_job_row(const json_t *spec, struct tb_spec_job_row *row);

#endif
