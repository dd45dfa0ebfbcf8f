/*
 * sim_inspect: the simulator's own endpoints under /sim/, served in every
 * flavour and without a key (sim/README.md, "Ground truth"): the model's
 * expected figures for a cell (/sim/expected), the server's counters
 * (/sim/stats), the log of the requests that ended (/sim/requests), what
 * the noise model applies (/sim/noise) and the GPUs' telemetry as
 * dcgm-exporter serves it (/sim/dcgm/metrics).  Each is a route handler of
 * sim_routes' table; none changes what the server does.
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_INSPECT_H
#define SIM_INSPECT_H

#include "sim_state.h"

/* GET /sim/expected?context=C[&concurrency=N][&max_tokens=M]
 * [&cached_tokens=K]: the profile's truth for that cell (400 on a bad
 * parameter). */
void sim_inspect_expected(struct server *s, struct conn *c, const struct sim_http_req *r);

/* GET /sim/stats: the server's counters. */
void sim_inspect_stats(struct server *s, struct conn *c, const struct sim_http_req *r);

/* GET /sim/requests[?since=SEQ]: the requests that ended, oldest first (at
 * most the last SIM_REQLOG); "next" is the since of the following call. */
void sim_inspect_requests(struct server *s, struct conn *c, const struct sim_http_req *r);

/* GET /sim/noise: what the noise model applies (sim_noise.h). */
void sim_inspect_noise(struct server *s, struct conn *c, const struct sim_http_req *r);

/* GET /sim/dcgm/metrics: the GPUs' telemetry (sim_power.h). */
void sim_inspect_dcgm(struct server *s, struct conn *c, const struct sim_http_req *r);

#endif
