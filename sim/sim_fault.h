/*
 * sim_fault: fault injection specs, for reliability tests.
 *
 * Syntax (the same for --fault, the X-Sim-Fault request header and the
 * "sim_fault" string member of a request body): items separated by ',' or
 * ';', each "name" or "name=value":
 *   status=N        answer N (400..599, e.g. 500, 429, 503) with an
 *                   OpenAI-style error body instead of generating
 *   cut=N           close the connection abruptly after N output tokens
 *                   (no terminating chunk, no [DONE]); cut=0: before any token
 *   stall=N:MS      after N output tokens, the stream pauses MS ms
 *   malformed=N     after N output tokens, one malformed SSE event
 *                   ("data: {\"malformed" + no closing brace) is sent, then the
 *                   stream goes on normally
 *   first_byte=MS   nothing at all is sent for MS ms after the request
 *   error=N         after N output tokens an in-band error event in the
 *                   flavour's shape, then the end of the stream (no [DONE])
 *   no_usage        the final usage chunk never comes ([DONE] still does)
 *   refuse=MS       the server closes its listening socket for MS ms (new
 *                   connections are refused) and resets this connection
 * MS values are modelled time, divided by --time-scale like everything else.
 * Only the generation endpoints (/v1/chat/completions, /v1/completions) obey
 * faults.  A request's spec is applied over the --fault spec, item by item.
 */
#ifndef SIM_FAULT_H
#define SIM_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define SIM_FAULT_SPEC_CAP 512

struct sim_fault {
  int status;          /* 0: none */
  int64_t cut_after;   /* -1: none */
  int64_t stall_after; /* -1: none */
  double stall_ms;
  int64_t malformed_after; /* -1: none */
  int64_t error_after;     /* -1: none; else an in-band error event, then the end */
  double first_byte_ms;    /* 0: none */
  bool no_usage;
  double refuse_ms; /* 0: none */
};

/* A spec with no fault. */
void sim_fault_init(struct sim_fault *f);
/* Parses spec over *f (items set in spec replace those in *f).  false with a
 * message in err on a syntax error; *f is then unspecified. */
bool sim_fault_parse(struct sim_fault *f, const char *spec, char *err, size_t errlen) TB_MUST_CHECK;

#endif
