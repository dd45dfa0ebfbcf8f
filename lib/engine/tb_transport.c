/*
 * tb_transport: the run's event loop and its two stream transports.  See
 * tb_transport.h; the design is tb_engine.c's ("Design", "Timing",
 * "Stream transport").
 */
#include "engine/tb_transport.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "net/tb_http.h"
#include "net/tb_rxts.h"

#define MAX_CONCURRENCY 65536
#define CONNECT_TIMEOUT_MS TB_DIRECT_CONNECT_TIMEOUT_MS /* either transport */

/* ----------------------------------------------------------- epoll glue */

static int
sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
  struct tb_transport *t = userp;
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(t->epfd, EPOLL_CTL_DEL, s, NULL);
    return 0;
  }
  struct epoll_event ev = { 0 };
  ev.data.fd = s;
  if (what & CURL_POLL_IN)
    ev.events |= EPOLLIN;
  if (what & CURL_POLL_OUT)
    ev.events |= EPOLLOUT;
  if (epoll_ctl(t->epfd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT)
    epoll_ctl(t->epfd, EPOLL_CTL_ADD, s, &ev);
  return 0;
}

static int
timer_cb(CURLM *m, long timeout_ms, void *userp)
{
  struct tb_transport *t = userp;
  t->curl_deadline = timeout_ms < 0 ? -1 : tb_time_mono_ns() + (int64_t)timeout_ms * 1000000;
  return 0;
}

/* A new connection to the endpoint: the kernel stamps what it receives
 * (tb_rxts). */
static int
rxts_sockopt(void *cls, curl_socket_t fd, curlsocktype purpose)
{
  const struct tb_transport *t = cls;
  if (purpose == CURLSOCKTYPE_IPCXN && t->kernel_stamps)
    (void)tb_rxts_enable(fd); /* without: stamps fall back to the clock */
  return CURL_SOCKOPT_OK;
}

/* ---------------------------------------------------------------- setup */

void
tb_transport_init(struct tb_transport *t, bool kernel_stamps, bool curl_streams)
{
  t->epfd = -1;
  t->curl_deadline = -1;
  t->kernel_stamps = kernel_stamps;
  t->curl_streams = curl_streams;
  t->stamp_hold = kernel_stamps ? tb_rxts_hold() : -1;
}

int
tb_transport_open(struct tb_transport *t, const char *base_url, const char *api_key, char **err)
{
  t->epfd = epoll_create1(EPOLL_CLOEXEC);
  t->multi = curl_multi_init();
  if (t->epfd < 0 || t->multi == NULL) {
    *err = tb_xstrdup("cannot set up the event loop");
    return -1;
  }
  curl_multi_setopt(t->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(t->multi, CURLMOPT_SOCKETDATA, t);
  curl_multi_setopt(t->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(t->multi, CURLMOPT_TIMERDATA, t);
  curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, (long)MAX_CONCURRENCY);
  t->auth = tb_http_auth_header(api_key);
  if (t->auth != NULL)
    t->hdrs = curl_slist_append(t->hdrs, t->auth);
  t->hdrs = curl_slist_append(t->hdrs, "Content-Type: application/json");
  t->hdrs = curl_slist_append(t->hdrs, "Accept: text/event-stream");
  t->hdrs = curl_slist_append(t->hdrs, "Expect:");
  t->chat_url = tb_xasprintf("%s/v1/chat/completions", base_url);
  t->metrics_url = tb_xasprintf("%s/metrics", base_url);
  t->direct = tb_direct_setup(&t->dt, t->chat_url, t->kernel_stamps, t->curl_streams, t->epfd);
  return 0;
}

void
tb_transport_free(struct tb_transport *t)
{
  if (t->multi != NULL)
    curl_multi_cleanup(t->multi);
  if (t->epfd >= 0)
    close(t->epfd);
  if (t->stamp_hold >= 0)
    close(t->stamp_hold);
  tb_http_headers_free(t->hdrs);
  tb_http_secret_free(t->auth);
  free(t->chat_url);
  free(t->metrics_url);
  tb_direct_free(&t->dt);
}

/* ---------------------------------------------------------- easy handles */

/* An easy handle to url on the run's headers, egress guard and stamping
 * socket option, write(ptr, size, n, ud) taking its body; NULL with *why
 * when libcurl or the guard refuses it. */
static CURL *
easy_new(struct tb_transport *t, const char *url, curl_write_callback write, void *ud,
         const char **why)
{
  CURL *e = curl_easy_init();
  if (e == NULL) {
    *why = "curl_easy_init failed";
    return NULL;
  }
  if (!tb_egress_guard_easy(&t->egress, tb_egress_current(), e, url)) {
    *why = t->egress.why;
    curl_easy_cleanup(e);
    return NULL;
  }
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->hdrs);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, ud);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  tb_http_tls_setopt(e);
  curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, rxts_sockopt);
  curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, t);
  return e;
}

/* e on the multi, or NULL (e freed) with *why. */
static CURL *
easy_add(struct tb_transport *t, CURL *e, const char **why)
{
  if (curl_multi_add_handle(t->multi, e) != CURLM_OK) {
    *why = "curl_multi_add_handle failed";
    curl_easy_cleanup(e);
    return NULL;
  }
  return e;
}

CURL *
tb_transport_post(struct tb_transport *t, const char *body, size_t len, curl_write_callback write,
                  void *ud, char *errbuf, const char **why)
{
  CURL *e = easy_new(t, t->chat_url, write, ud, why);
  if (e == NULL)
    return NULL;
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  curl_easy_setopt(e, CURLOPT_PRIVATE, ud);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  return easy_add(t, e, why);
}

CURL *
tb_transport_metrics(struct tb_transport *t, curl_write_callback write, void *ud)
{
  const char *why;
  CURL *e = easy_new(t, t->metrics_url, write, ud, &why);
  if (e == NULL)
    return NULL;
  curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
  return easy_add(t, e, &why);
}

void
tb_transport_drop(struct tb_transport *t, CURL *e)
{
  curl_multi_remove_handle(t->multi, e);
  curl_easy_cleanup(e);
}

/* ------------------------------------------------------------ the loop */

void
tb_transport_kick(struct tb_transport *t)
{
  int running = 0;
  curl_multi_socket_action(t->multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

/* A libcurl socket ready: stamped (the peek before libcurl reads), then
 * libcurl's. */
static void
curl_ready(struct tb_transport *t, const struct epoll_event *ev, uint64_t *rx_kernel,
           uint64_t *rx_user)
{
  int flags = 0, running = 0;
  if (ev->events & (EPOLLIN | EPOLLHUP))
    flags |= CURL_CSELECT_IN;
  if (ev->events & EPOLLOUT)
    flags |= CURL_CSELECT_OUT;
  if (ev->events & EPOLLERR)
    flags |= CURL_CSELECT_ERR;
  t->io_now = tb_time_mono_ns();
  if ((ev->events & EPOLLIN) && t->kernel_stamps) {
    enum tb_rxts_src src;
    t->io_now = tb_rxts_peek(ev->data.fd, t->io_now, t->rt_off, &src);
    if (src == TB_RXTS_KERNEL)
      (*rx_kernel)++;
    else if (src == TB_RXTS_CLOCK)
      (*rx_user)++;
  }
  curl_multi_socket_action(t->multi, ev->data.fd, flags, &running);
  t->io_now = 0;
}

void
tb_transport_turn(struct tb_transport *t, struct tb_direct_set *ds, int64_t now, int64_t next,
                  uint64_t *rx_kernel, uint64_t *rx_user)
{
  struct epoll_event evs[256];
  int running = 0;
  if (t->curl_deadline >= 0 && t->curl_deadline < next)
    next = t->curl_deadline;
  int64_t wait_ns = next - now;
  int wait_ms = wait_ns <= 0 ? 0 : (int)((wait_ns + 999999) / 1000000);
  tb_direct_flush(ds); /* the requests started since the last wait */
  int n = epoll_wait(t->epfd, evs, (int)TB_ARRAY_LEN(evs), wait_ms);
  if (n > 0)
    t->rt_off = tb_rxts_offset();
  for (int i = 0; i < n; i++) {
    if (evs[i].data.u64 & TB_DIRECT_TAG)
      tb_direct_event(ds, evs[i].data.u64, evs[i].events, t->rt_off);
    else
      curl_ready(t, &evs[i], rx_kernel, rx_user);
  }
  if (t->curl_deadline >= 0 && tb_time_mono_ns() >= t->curl_deadline) {
    t->curl_deadline = -1;
    curl_multi_socket_action(t->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  }
}

CURL *
tb_transport_done(struct tb_transport *t, CURLcode *rc)
{
  CURLMsg *msg;
  int q;
  while ((msg = curl_multi_info_read(t->multi, &q)) != NULL) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    *rc = msg->data.result;
    return msg->easy_handle;
  }
  return NULL;
}
