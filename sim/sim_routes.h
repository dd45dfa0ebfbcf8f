/*
 * sim_routes: the simulator's HTTP routes: the route table per flavour
 * family (vLLM, SGLang, llama.cpp, TGI, gateway, OpenAI), authentication,
 * request validation, and one handler per endpoint (generation, tokenize,
 * models, metrics, server info, props, info, abort, the /sim/ introspection
 * endpoints); the documents whose shape depends on the flavour's version are
 * sim_flavour.c's.
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_ROUTES_H
#define SIM_ROUTES_H

#include "sim_state.h"

/* Serves one parsed request of c (struct sim_conn_handlers' dispatch). */
void sim_routes_dispatch(struct server *s, struct conn *c, const struct sim_http_req *r);

/* A job back from sim_prep's worker (owned; freed here): its request is
 * served, unless its connection is gone, and the connection resumes. */
void sim_routes_prepared(struct server *s, struct sim_prep_job *j);

/* Once no request runs or waits: does the erases hung up on while held,
 * then answers the held llama.cpp slot erases (handle_slot_action), oldest
 * first, and their connections resume.  true when it answered any. */
bool sim_routes_held_release(struct server *s);

/* c is being freed (struct sim_conn_handlers' closed): its request is
 * aborted and freed, its prompt's job comes back to nobody, and its held
 * erase, if any, is not answered (it is still done when the server is
 * idle). */
void sim_routes_closed(struct server *s, struct conn *c);

#endif
