/*
 * sim_flavour: the dialects tokbench-sim speaks (--flavour): vLLM V0 0.7,
 * V1 0.8, 0.10, 0.11 and the 2026 shape, SGLang 0.3, 0.4 and 0.5,
 * llama.cpp's llama-server b6915 and b11669, TGI 2.2 and 3.3, a bare
 * gateway and a plain OpenAI-compatible server; the table of them (and the
 * aliases vllm, sglang, tgi, llamacpp), and the documents whose shape
 * differs from one to the next: the model card of /v1/models, the /metrics
 * text, SGLang's server info, llama.cpp's /props and /slots, TGI's /info.  Each shape follows the
 * conformance fixture tests/fixtures/servers/<engine>-<version>/ (sources
 * in its SOURCES.md); sim/README.md lists them.  What a stream looks like
 * per flavour is sim_stream.c's, driven by the flags of struct sim_dialect.
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_FLAVOUR_H
#define SIM_FLAVOUR_H

#include "sim_state.h"

/* The model object of GET /v1/models (new reference). */
json_t *sim_flavour_model_card(const struct server *s);

/* Appends the flavour's /metrics text to out (a scratch output
 * buffer), or with --metrics foreign (the gateway flavour's default) a
 * gateway's own families; false when there is no /metrics. */
bool sim_flavour_metrics(const struct server *s, struct sim_out *out);

/* GET /v1/models: the model card in a list; llama.cpp b11669 lists it a
 * second time under "models" (new reference). */
json_t *sim_flavour_models(const struct server *s);

/* After a GET /metrics: empties what llama.cpp b11669 reports per read
 * (its throughput gauges and busy slots per decode). */
void sim_flavour_metrics_read(struct server *s);

/* llama.cpp b11669's GET /slots: one object per slot (total_slots of
 * them), the admitted requests first with their progress (new
 * reference). */
json_t *sim_flavour_slots(const struct server *s);

/* SGLang's GET /get_server_info (new reference). */
json_t *sim_flavour_server_info(const struct server *s);

/* llama.cpp's GET /props (new reference). */
json_t *sim_flavour_props(const struct server *s);

/* TGI's GET /info (new reference). */
json_t *sim_flavour_info(const struct server *s);

/* SGLang 0.5's data-parallel ranks: 2 when max running requests splits
 * evenly over them, else 1. */
int sim_flavour_dp(const struct server *s);

#endif
