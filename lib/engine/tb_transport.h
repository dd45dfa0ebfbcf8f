/*
 * tb_transport: the loop a run's decode cells turn (tb_cell), and the two
 * transports of their streams behind it (tb_engine.c, "Stream transport").
 *
 * One epoll set drives libcurl's multi handle (its socket and timer
 * callbacks) and the engine's own connections (tb_direct) side by side.
 * A turn waits for the first of the cell's deadlines and libcurl's, hands
 * each ready socket to its owner with the stamp of its read (tb_rxts: the
 * kernel's receive stamp, by a one-byte peek before libcurl reads), then
 * runs libcurl's timeouts; the cell collects the finished easy handles
 * after it (tb_transport_done).  Everything over libcurl (a stream on the
 * libcurl path, a /metrics sample) is an easy handle made here, with the
 * run's headers, egress guard and stamping socket option.
 *
 * Below tb_run (which holds one) and tb_cell: it knows no cell, only the
 * direct set it is given and the easy handles' own callbacks.
 */
#ifndef TB_TRANSPORT_H
#define TB_TRANSPORT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/tb_direct.h"
#include "net/tb_egress.h"
#include "base/tb_util.h"

struct tb_transport {
  /* the egress guard of every libcurl handle of the run (one host: the
   * endpoint's), tb_egress.h */
  struct tb_egress_guard egress;
  CURLM *multi;
  int epfd;
  int64_t curl_deadline;
  int64_t io_now;     /* stamp of the socket being read; 0 outside */
  int64_t rt_off;     /* CLOCK_REALTIME - CLOCK_MONOTONIC (tb_rxts) */
  bool kernel_stamps; /* tb_rxts; off with TB_ENGINE_CLIENT_STAMPS=1 */
  bool curl_streams;  /* no tb_direct: TB_ENGINE_CURL_STREAMS=1 */
  int stamp_hold;     /* tb_rxts_hold: stamping stays on for the run */
  /* direct transport (tb_engine.c, "Stream transport") */
  bool direct;
  struct tb_direct dt;
  struct curl_slist *hdrs;
  char *auth;
  char *chat_url, *metrics_url;
};

/* A transport not yet open (t zeroed by the caller): with kernel_stamps
 * the kernel is asked now to keep stamping on for the run (tb_rxts_hold),
 * so that it never switches on in the middle of a measurement. */
void tb_transport_init(struct tb_transport *t, bool kernel_stamps, bool curl_streams);

/* The event loop, the streams' headers and their transport for the
 * endpoint at base_url: 0, or -1 with *err (new string). */
int tb_transport_open(struct tb_transport *t, const char *base_url, const char *api_key,
                      char **err) TB_MUST_CHECK;

void tb_transport_free(struct tb_transport *t);

/* A streaming POST of body to the chat route as an easy handle on the
 * multi: write(ptr, size, n, ud) takes its bytes, ud is its
 * CURLINFO_PRIVATE, errbuf (CURL_ERROR_SIZE) its error.  NULL with *why
 * (static or the egress guard's) when libcurl or the guard refuses it. */
CURL *tb_transport_post(struct tb_transport *t, const char *body, size_t len,
                        curl_write_callback write, void *ud, char *errbuf, const char **why);

/* A GET of the endpoint's /metrics as an easy handle on the multi (its
 * CURLINFO_PRIVATE NULL): write(ptr, size, n, ud) takes the body.  NULL
 * when libcurl or the egress guard refuses it. */
CURL *tb_transport_metrics(struct tb_transport *t, curl_write_callback write, void *ud);

/* An easy handle off the multi, freed. */
void tb_transport_drop(struct tb_transport *t, CURL *e);

/* libcurl's timeouts run once (the first requests of a cell go out). */
void tb_transport_kick(struct tb_transport *t);

/* One turn of the loop: waits until next (monotonic ns; sooner for
 * libcurl's own deadline) from now, hands each ready socket to ds (a
 * direct connection) or to libcurl stamped (counting the reads the kernel
 * stamped into *rx_kernel, those stamped by the clock into *rx_user), then
 * runs libcurl's due timeouts. */
void tb_transport_turn(struct tb_transport *t, struct tb_direct_set *ds, int64_t now, int64_t next,
                       uint64_t *rx_kernel, uint64_t *rx_user);

/* The next easy handle libcurl finished since the last turn and its
 * result into *rc, or NULL: none left. */
CURL *tb_transport_done(struct tb_transport *t, CURLcode *rc);

#endif
