/*
 * sim_server: the simulator's HTTP server, protocol and scheduler (one
 * module in several files, see Files below).
 *
 * One thread, one epoll loop, one timerfd (absolute CLOCK_MONOTONIC
 * deadlines, timer slack 1 ns) and a signalfd.  Connections speak HTTP/1.1
 * with keep-alive; streams use chunked transfer encoding (close-delimited for
 * HTTP/1.0 clients).  Every SSE event is preceded, inside the same event, by
 * a comment line ": t=<ns>\n" holding CLOCK_MONOTONIC nanoseconds taken just
 * before the write() that carries it, when asked (--stamps, or the request
 * header X-Tokbench-Stamps: 1).
 *
 * The model (continuous batching), see sim/README.md:
 * requests queue FIFO until they fit (KV reservation prompt + max_tokens,
 * and max running requests), then prefill (cold: one at a time through a
 * prefill lane at the profile's speed; prefix-cache hit: cached TTFT), emit
 * their first token, join the decode batch, and get one token per decode
 * step, the step lasting step_ms(batch size, mean prompt tokens) / scale.
 *
 * Files: sim_server.c the loop and timers, sim_conn.c connections (over
 * TCP, or TLS through sim_tls.c), sim_routes.c the routes and handlers
 * (sim_inspect.c the /sim/ ones), sim_sched.c the scheduler (the model
 * above), sim_stream.c what a generation writes (SSE, chunks, usage),
 * sim_out.c where its bytes go (a buffer, the step's send queue, plain
 * replies; the connection implements its sending); their shared state and
 * its lifetimes in sim_state.h (private).
 */
#ifndef SIM_SERVER_H
#define SIM_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_fault.h"
#include "sim_noise.h"
#include "sim_power.h"
#include "sim_profile.h"

/* The engine family a flavour belongs to (routes, auth, ids). */
enum sim_flavour {
  SIM_FLAVOUR_VLLM,
  SIM_FLAVOUR_SGLANG,
  SIM_FLAVOUR_OPENAI,
  SIM_FLAVOUR_LLAMACPP,
  SIM_FLAVOUR_TGI,
  SIM_FLAVOUR_GATEWAY
};

/* One dialect: a server and version whose interfaces the simulator imitates
 * (--flavour; the table in sim_flavour.c, the shapes in sim/README.md). */
struct sim_dialect {
  const char *name; /* as --flavour takes it */
  enum sim_flavour family;
  int rev;               /* version within the family: vLLM 7, 8, 10, 11,
                                  * 2026; SGLang 3, 4, 5; TGI 22, 33; else 0 */
  const char *version;   /* what it reports; NULL: the profile's */
  const char *reasoning; /* --reasoning auto: "reasoning_content",
                                  * "reasoning" or "both" */
  bool cont_usage;       /* honours continuous_usage_stats */
  bool data_nospace;     /* "data:{" (TGI) */
  bool crlf;             /* CRLF line ends in streams */
  bool pings;            /* ": ping" and bare ":" comment lines */
  bool role_chunk;       /* a role-only first chunk (all but TGI) */
  bool finish_chunk;     /* the finish on an empty-delta chunk of its own */
};

/* What GET /metrics answers (--metrics): the flavour's engine gauges, 404,
 * or a gateway's own families with no engine gauge at all. */
enum sim_metrics {
  SIM_METRICS_ENGINE = 0,
  SIM_METRICS_NONE,
  SIM_METRICS_FOREIGN
};

struct sim_config {
  const char *host;         /* listen address (IPv4 or IPv6), default 127.0.0.1 */
  int port;                 /* 0: any; the chosen port is printed */
  enum sim_flavour flavour; /* = dialect->family */
  const struct sim_dialect *dialect;
  bool profile_version;              /* report the profile's engine version */
  const struct sim_profile *profile; /* borrowed */
  const char *api_key;               /* NULL: none */
  double time_scale;                 /* > 0; modelled durations are divided by it */
  int spec_k;                        /* tokens per chunk (speculative mode), >= 1 */
  const char *reasoning_field;       /* NULL, "reasoning_content" or "reasoning" */
  int64_t reasoning_tokens;          /* first N output tokens are reasoning */
  int64_t eos_after;                 /* 0: never; else natural end after N tokens */
  bool stamps;                       /* ": t=<ns>" comment lines on every stream
                                  * (else only where the request asks with
                                  * X-Tokbench-Stamps: 1) */
  struct sim_fault fault;            /* applied to every generation request */
  struct sim_noise noise;            /* settings: drift, jitter, slowdown */
  struct sim_throttle throttle;      /* --throttle: clock-event reasons (sim_power) */
  /* A server that gives less (gateways, mocks): low-level switches that
   * flavours may combine. */
  enum sim_metrics metrics; /* --metrics engine|none|foreign */
  bool no_usage;            /* --no-usage: no usage anywhere */
  bool no_tokenize;         /* --no-tokenize: POST /tokenize is 404 */
  bool dev_mode;            /* --dev-mode: vLLM's VLLM_SERVER_DEV_MODE=1
                                  * (POST /reset_prefix_cache served) */
  bool slot_save;           /* --slot-save-path: llama.cpp's slot actions
                                  * (POST /slots/{id}?action=erase) served */
  int64_t early_stop;       /* --early-stop N: every request ends ("stop")
                                  * after N tokens, whatever max_tokens and
                                  * ignore_eos say; 0: never */
  int max_conns;
  const char *tls_cert, *tls_key; /* PEM files: HTTPS; NULL: plain HTTP */
  bool realtime;                  /* SCHED_FIFO + mlockall, best effort */
  bool verbose;
};

/* The dialect named s (a flavour or an alias such as "vllm"); NULL when
 * unknown.  *profile_version: the alias reports the profile's version. */
const struct sim_dialect *sim_flavour_find(const char *s, bool *profile_version);

/* Every flavour name, comma-separated (for --help and errors). */
const char *sim_flavour_names(void);

/* Parses "engine", "none", "foreign"; false otherwise. */
bool sim_metrics_parse(const char *s, enum sim_metrics *out) TB_MUST_CHECK;

/* Runs the server until SIGTERM or SIGINT (which it blocks and reads
 * through a signalfd).  Prints "listening on HOST:PORT" to stdout once it
 * accepts connections.  Returns 0 after a clean shutdown, 1 on a setup
 * error (message on stderr). */
int sim_server_run(const struct sim_config *cfg);

#endif
