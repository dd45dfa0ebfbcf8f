/*
 * tb_direct: the engine's own stream transport (see "Stream transport" in
 * tb_engine.c).  On a plain-HTTP endpoint without a proxy each slot of a
 * cell keeps one kept-alive connection, writes its request with one sendmsg
 * (by io_uring: many slots' sendmsgs in one submit) and reads the response with one recvmsg per readiness, which returns the
 * kernel's receive stamp with the bytes (tb_rxts); tb_h1 frames the response
 * and hands its body to the engine.
 *
 * Two levels:
 *   struct tb_direct      per run: the endpoint's address (as libcurl
 *                         resolves and picks it), Host, request target, the
 *                         read buffer and the run's epoll set;
 *   struct tb_direct_set  per cell: one connection per slot and the one
 *                         request every slot sends (head + body).
 * A slot's connection is registered in the epoll set with tb_direct_tag()
 * data (TB_DIRECT_TAG set); the engine's loop hands such events to
 * tb_direct_event.  Everything runs on the engine's one thread.
 */
#ifndef TB_DIRECT_H
#define TB_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net/tb_h1.h"
#include "net/tb_uring.h"
#include "base/tb_util.h"

/* epoll data of a slot's connection has this bit; libcurl's sockets never
 * do (their data is the fd). */
#define TB_DIRECT_TAG (1ULL << 62)
/* ... and the run's io_uring fd has this bit too, the low bits its struct
 * tb_direct's address (user space pointers fit in 47 bits). */
#define TB_DIRECT_RING (1ULL << 61)
/* One recvmsg reads at most this much. */
#define TB_DIRECT_RBUF_SIZE (64u * 1024u)
/* A stream's connection must be up within this (either transport). */
#define TB_DIRECT_CONNECT_TIMEOUT_MS 10000L

struct tb_direct {
  struct sockaddr_storage addr;
  socklen_t addrlen;
  char *host;            /* Host header: host[:port] as in the URL */
  char *path;            /* request target: path[?query] */
  char *rbuf;            /* TB_DIRECT_RBUF_SIZE */
  bool kernel_stamps;    /* enable tb_rxts on each connection */
  int epfd;              /* the run's epoll set (borrowed) */
  struct tb_uring uring; /* on: reads are multishot recvmsg (tb_uring) */
  uint32_t gen_seq;      /* connections opened in the run: each one's gen */
};

/* What a cell's set reports to the engine (on the engine's thread, from
 * inside tb_direct_event). */
struct tb_direct_ops {
  void *cls;
  /* Body bytes of slot's response as they come; status is the response's
   * HTTP status, stamp the arrival time of the read (CLOCK_MONOTONIC ns).
   * false stops the response (the engine records why); end follows. */
  bool (*body)(void *cls, unsigned slot, int status, int64_t stamp, const char *data, size_t n);
  /* Slot's response ended: cleanly (err NULL) or with a transport or
   * framing error (err, borrowed for the call).  The engine releases the
   * slot (tb_direct_release) and may start the next request on it. */
  void (*end)(void *cls, unsigned slot, const char *err);
};

/* A slot's connection and the state of its request. */
struct tb_direct_conn {
  int fd;                        /* -1: none */
  uint32_t gen;                  /* tells a closed fd's stale events from the next one's */
  bool connecting;               /* non-blocking connect in progress */
  bool idle;                     /* kept alive after a complete response, free to reuse */
  bool busy;                     /* a request is on it (start .. release) */
  bool armed;                    /* io_uring: its multishot receive is armed */
  bool in_epoll;                 /* io_uring: in the epoll set (connecting, send blocked) */
  bool reused;                   /* this request went out on a kept-alive connection */
  int64_t t_ready;               /* a new connection: when it was up (monotonic ns) */
  bool got_bytes;                /* the response has begun */
  bool keep;                     /* ended cleanly: the connection may be reused */
  size_t wr_off;                 /* request bytes written */
  int send_errno;                /* the server stopped taking the request (EPIPE...) */
  char err[160];                 /* why the last start or send failed */
  const char *rq_head, *rq_body; /* this request's (borrowed until release) */
  size_t rq_head_len, rq_body_len;
  struct tb_h1 h1;
  /* io_uring: the request's sendmsg, queued until the set's next flush */
  bool sending;     /* a sendmsg is queued or in flight */
  int64_t t_sent;   /* when the request's first bytes were submitted (0: not yet) */
  struct msghdr sm; /* its header and iovecs, which stay put while it is in flight */
  struct iovec siov[2];
};

struct tb_direct_set {
  struct tb_direct *d;      /* borrowed */
  struct tb_direct_conn *c; /* n */
  unsigned n;
  char *head; /* request head; holds the endpoint's key */
  size_t head_len;
  const char *body; /* borrowed */
  size_t body_len;
  struct tb_direct_ops ops;
  uint64_t rx_kernel, rx_user; /* reads stamped by the kernel, by our clock */
  unsigned *sendq;             /* io_uring: slots whose sendmsg waits for the flush */
  unsigned n_sendq;
};

/*
 * Chooses the direct transport for chat_url: true (d set up) for a
 * plain-HTTP URL without user info when no proxy is in the environment and
 * curl_streams is false (tb_engine_target: TB_ENGINE_CURL_STREAMS=1), and
 * libcurl could connect to it once (a CONNECT_ONLY probe gives the address
 * it picks).  false: use libcurl streams (d holds nothing to free then, but
 * tb_direct_free is harmless).  epfd is borrowed for the run.
 */
bool tb_direct_setup(struct tb_direct *d, const char *chat_url, bool kernel_stamps,
                     bool curl_streams, int epfd);
/* "io_uring" or "epoll": how a set's reads are made (tb_direct_setup
 * probes io_uring; TOKBENCH_IO_URING=0 keeps epoll). */
const char *tb_direct_transport(const struct tb_direct *d);
/* Why io_uring is not used ("" when it is). */
const char *tb_direct_uring_why(const struct tb_direct *d);
/* Frees what tb_direct_setup allocated.  d may be zeroed. */
void tb_direct_free(struct tb_direct *d);

/* A cell's set of n slots sending body (borrowed until tb_direct_set_free)
 * with the auth header line auth (may be NULL; copied into the head). */
void tb_direct_set_init(struct tb_direct_set *set, struct tb_direct *d, unsigned n,
                        const char *auth, const char *body, size_t body_len,
                        const struct tb_direct_ops *ops);
/* Closes every connection and wipes the head (it holds the key). */
void tb_direct_set_free(struct tb_direct_set *set);
/* Closes every connection (a cut: closing aborts what runs on them). */
void tb_direct_close_all(struct tb_direct_set *set);

/* Starts slot's request: on its kept-alive connection if it has one, else
 * on a new one.  false after an error, with the reason in set->c[slot].err
 * (no callback is made then). */
bool tb_direct_start(struct tb_direct_set *set, unsigned slot);
/* tb_direct_start with a request of its own: head (from tb_direct_head_new,
 * for body_len) and body, both borrowed until tb_direct_release (rate
 * cells: every request a prompt of its own). */
bool tb_direct_start_req(struct tb_direct_set *set, unsigned slot, const char *head,
                         size_t head_len, const char *body, size_t body_len);
/* A new request head for d with the auth header line auth (may be NULL)
 * and a body of body_len bytes.  It holds the key: free with
 * tb_http_secret_free. */
char *tb_direct_head_new(const struct tb_direct *d, const char *auth, size_t body_len);
/* The engine is done with slot's request: a connection that ended cleanly
 * stays for the next request, any other is closed (mid-response, closing
 * aborts the request). */
void tb_direct_release(struct tb_direct_set *set, unsigned slot);
/* When slot's request could go out: t_start (its start), or when the new
 * connection it waited for was up, or (io_uring) when its send was
 * submitted, if later.  The TCP handshake is the
 * network's time, not the server's: TTFT counts from here (a remote
 * endpoint's new connection would add a round trip to a prefill). */
int64_t tb_direct_sent_at(const struct tb_direct_set *set, unsigned slot, int64_t t_start);
/* True while slot's connection is being set up. */
bool tb_direct_connecting(const struct tb_direct_set *set, unsigned slot);
/* HTTP status of slot's response, 0 before its head is read. */
int tb_direct_status(const struct tb_direct_set *set, unsigned slot);

/* io_uring: hands every request queued since the last flush to the kernel
 * in one submit, stamps each as sent then (tb_direct_sent_at) and takes
 * the completions that are ready (the sends that went at once).  The
 * engine's loop calls it before it waits and after it starts requests,
 * never from inside a callback of the set.  Nothing to do on epoll, where
 * each request goes out in its own sendmsg. */
void tb_direct_flush(struct tb_direct_set *set);

/* An epoll event whose data has TB_DIRECT_TAG (a connection's, or with
 * TB_DIRECT_RING the ring's: its completions go to set's connections).  rt_off is
 * CLOCK_REALTIME - CLOCK_MONOTONIC (tb_rxts_offset) for the kernel stamps. */
void tb_direct_event(struct tb_direct_set *set, uint64_t tag, uint32_t events, int64_t rt_off);

#endif
