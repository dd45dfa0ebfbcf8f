/*
 * tb_uring: see tb_uring.h.
 *
 * The buffers: N_BUFS of BUF_SIZE in one provided ring (group BGID); each
 * completion of a multishot recvmsg names the buffer it filled, laid out as
 * io_uring_recvmsg_out, the control data (mh.msg_controllen of it) and the
 * payload.  The buffer goes back to the ring right after its completion is
 * handled.  When the ring runs dry the kernel ends that receive with
 * -ENOBUFS (no bytes lost); the connection's owner arms it again.
 */
#include "net/tb_uring.h"

#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/tb_util.h"

#define RING_ENTRIES 1024u
/* Room for a completion of every stream the engine holds (8,192 and
 * more) between two drains: an overflowing CQ makes the kernel park
 * completions on a list it walks, and the loop crawled at 8,192. */
#define CQ_ENTRIES 16384u
/* A buffer per stream rather than few large ones (the same 16 MiB): a
 * token's SSE event is a few hundred bytes, and a ring that runs dry ends
 * each stream's receive (-ENOBUFS) to be armed again.  Larger reads take
 * more completions, no bytes lost. */
#define N_BUFS 8192u /* a power of two */
#define BUF_SIZE (2u * 1024u)
#define BGID 7
#define PROBE_UD 1u

static bool
off(struct tb_uring *u, const char *what, int err)
{
  snprintf(u->why, sizeof u->why, "%s: %s", what, strerror(err));
  tb_uring_free(u);
  return false;
}

static void
buf_put(struct tb_uring *u, unsigned bid)
{
  io_uring_buf_ring_add(u->br, u->bufs + (size_t)bid * u->buf_size, (unsigned)u->buf_size,
                        (unsigned short)bid, io_uring_buf_ring_mask(u->n_bufs), 0);
  io_uring_buf_ring_advance(u->br, 1);
}

static int
bufs_setup(struct tb_uring *u)
{
  size_t ring_bytes = sizeof(struct io_uring_buf) * N_BUFS;
  void *mem = NULL;
  if (posix_memalign(&mem, (size_t)sysconf(_SC_PAGESIZE), ring_bytes) != 0)
    return -ENOMEM;
  memset(mem, 0, ring_bytes);
  u->br = mem;
  u->n_bufs = N_BUFS;
  u->buf_size = BUF_SIZE;
  /* zeroed: the kernel fills them, which valgrind cannot see */
  u->bufs = tb_xcalloc(N_BUFS, BUF_SIZE);
  io_uring_buf_ring_init(u->br);
  struct io_uring_buf_reg reg = { .ring_addr = (unsigned long)(uintptr_t)u->br,
                                  .ring_entries = N_BUFS,
                                  .bgid = BGID };
  int rc = io_uring_register_buf_ring(u->ring, &reg, 0);
  if (rc != 0)
    return rc;
  for (unsigned i = 0; i < N_BUFS; i++)
    buf_put(u, i);
  return 0;
}

/* Multishot recvmsg on a socket pair: armed, fed one byte, completes with
 * it and stays armed.  An older kernel says -EINVAL. */
static int
probe_recv(struct tb_uring *u)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return -errno;
  int rc = tb_uring_recv(u, sv[0], PROBE_UD) ? 0 : -EBUSY;
  if (rc == 0 && write(sv[1], "x", 1) != 1)
    rc = -errno;
  struct io_uring_cqe *cqe = NULL;
  /* a second at most: a kernel that takes the receive and never answers
   * must not hang the run */
  struct __kernel_timespec ts = { .tv_sec = 1 };
  if (rc == 0)
    rc = io_uring_wait_cqe_timeout(u->ring, &cqe, &ts);
  if (rc == 0) {
    rc = cqe->res > 0 ? 0 : (cqe->res < 0 ? cqe->res : -EPROTO);
    if (rc == 0 && !(cqe->flags & IORING_CQE_F_MORE))
      rc = -EOPNOTSUPP; /* single shot only */
    if (cqe->flags & IORING_CQE_F_BUFFER)
      buf_put(u, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
    io_uring_cqe_seen(u->ring, cqe);
  }
  tb_uring_cancel(u, PROBE_UD);
  close(sv[0]);
  close(sv[1]);
  /* the cancel's completion and the receive's last one */
  while (io_uring_peek_cqe(u->ring, &cqe) == 0) {
    if (cqe->flags & IORING_CQE_F_BUFFER)
      buf_put(u, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
    io_uring_cqe_seen(u->ring, cqe);
  }
  return rc;
}

bool
tb_uring_init(struct tb_uring *u, int epfd, uint64_t tag, size_t control_len)
{
  memset(u, 0, sizeof *u);
  const char *env = getenv("TOKBENCH_IO_URING");
  if (env != NULL && strcmp(env, "0") == 0) {
    snprintf(u->why, sizeof u->why, "off by TOKBENCH_IO_URING=0");
    return false;
  }
  u->ring = tb_xmalloc(sizeof *u->ring);
  /* The receives' work runs when the loop next enters the kernel, without
   * an interrupt of it.  (DEFER_TASKRUN would batch further, but its
   * ring fd does not wake the engine's epoll_wait: the loop hung.) */
  static const unsigned flags[] = { IORING_SETUP_COOP_TASKRUN | IORING_SETUP_CQSIZE,
                                    IORING_SETUP_CQSIZE, 0 };
  int rc = -EINVAL;
  for (size_t i = 0; i < sizeof flags / sizeof flags[0] && rc == -EINVAL; i++) {
    struct io_uring_params p = { .flags = flags[i], .cq_entries = CQ_ENTRIES };
    rc = io_uring_queue_init_params(RING_ENTRIES, u->ring, &p);
  }
  if (rc != 0) {
    free(u->ring);
    u->ring = NULL;
    return off(u, "io_uring_setup", -rc);
  }
  u->mh.msg_controllen = control_len;
  if ((rc = bufs_setup(u)) != 0)
    return off(u, "provided buffer ring", -rc);
  if ((rc = probe_recv(u)) != 0)
    return off(u, "multishot recvmsg", -rc);
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, u->ring->ring_fd, &ev) != 0)
    return off(u, "epoll of the ring", errno);
  u->why[0] = '\0';
  u->rearms = u->submits = 0;
  return true;
}

void
tb_uring_free(struct tb_uring *u)
{
  if (u->ring != NULL) {
    io_uring_queue_exit(u->ring); /* cancels what is armed; closes its fd */
    free(u->ring);
    u->ring = NULL;
  }
  free(u->br);
  free(u->bufs);
  u->br = NULL;
  u->bufs = NULL;
}

static struct io_uring_sqe *
sqe_get(struct tb_uring *u)
{
  if (u->ring == NULL) /* freed (or never on): nothing to queue on */
    return NULL;
  struct io_uring_sqe *sqe = io_uring_get_sqe(u->ring);
  if (sqe == NULL) { /* the queue is full: hand it over and take one */
    tb_uring_submit(u);
    sqe = io_uring_get_sqe(u->ring);
  }
  return sqe;
}

bool
tb_uring_recv(struct tb_uring *u, int fd, uint64_t user_data)
{
  struct io_uring_sqe *sqe = sqe_get(u);
  if (sqe == NULL)
    return false;
  io_uring_prep_recvmsg_multishot(sqe, fd, &u->mh, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = BGID;
  io_uring_sqe_set_data64(sqe, user_data);
  u->pending++;
  u->rearms++;
  /* once per connection, or after -ENOBUFS: in a drain, with the others
   * of that drain at its end */
  if (!u->in_drain)
    tb_uring_submit(u);
  return true;
}

bool
tb_uring_sendmsg(struct tb_uring *u, int fd, const struct msghdr *m, uint64_t user_data)
{
  struct io_uring_sqe *sqe = sqe_get(u);
  if (sqe == NULL)
    return false;
  /* MSG_WAITALL: a stream socket's send is retried to its end in the
   * kernel, so a short completion is an error's, not a full buffer's */
  io_uring_prep_sendmsg(sqe, fd, m, MSG_NOSIGNAL | MSG_WAITALL);
  io_uring_sqe_set_data64(sqe, user_data);
  u->pending++;
  u->sends++;
  return true;
}

void
tb_uring_cancel(struct tb_uring *u, uint64_t user_data)
{
  struct io_uring_sqe *sqe = sqe_get(u);
  if (sqe == NULL)
    return;
  io_uring_prep_cancel64(sqe, user_data, 0);
  io_uring_sqe_set_data64(sqe, 0); /* its own completion is nobody's */
  u->pending++;
  tb_uring_submit(u);
}

void
tb_uring_submit(struct tb_uring *u)
{
  if (u->ring == NULL || u->pending == 0)
    return;
  int rc;
  do
    rc = io_uring_submit(u->ring);
  while (rc == -EINTR);
  u->pending = 0;
  u->submits++;
}

static void
rx_of(struct tb_uring *u, const struct io_uring_cqe *cqe, struct tb_uring_rx *rx,
      struct msghdr *msg)
{
  *rx = (struct tb_uring_rx){ .user_data = cqe->user_data,
                              .res = cqe->res,
                              .more = (cqe->flags & IORING_CQE_F_MORE) != 0 };
  if (cqe->res <= 0 || !(cqe->flags & IORING_CQE_F_BUFFER))
    return;
  char *buf = u->bufs + (size_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT) * u->buf_size;
  struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(buf, cqe->res, &u->mh);
  if (o == NULL) {
    rx->res = -EPROTO;
    return;
  }
  rx->data = io_uring_recvmsg_payload(o, &u->mh);
  rx->len = io_uring_recvmsg_payload_length(o, cqe->res, &u->mh);
  *msg = (struct msghdr){ .msg_control = io_uring_recvmsg_cmsg_firsthdr(o, &u->mh),
                          .msg_controllen = o->controllen,
                          .msg_flags = (int)o->flags };
  rx->msg = msg->msg_control != NULL ? msg : NULL;
  if (rx->len == 0) /* the peer's end: the kernel writes a header, no bytes */
    rx->res = 0;
}

unsigned
tb_uring_ready(const struct tb_uring *u)
{
  return u->ring != NULL ? io_uring_cq_ready(u->ring) : 0;
}

unsigned
tb_uring_drain(struct tb_uring *u, void (*cb)(void *cls, const struct tb_uring_rx *rx), void *cls)
{
  if (u->ring == NULL)
    return 0;
  unsigned n = 0;
  struct io_uring_cqe *cqe;
  u->in_drain = true;
  while (io_uring_peek_cqe(u->ring, &cqe) == 0) {
    struct tb_uring_rx rx;
    struct msghdr msg;
    rx_of(u, cqe, &rx, &msg);
    unsigned flags = cqe->flags;
    io_uring_cqe_seen(u->ring, cqe);
    if (rx.user_data != 0 && rx.user_data != PROBE_UD)
      cb(cls, &rx);
    if (flags & IORING_CQE_F_BUFFER)
      buf_put(u, flags >> IORING_CQE_BUFFER_SHIFT);
    n++;
  }
  u->in_drain = false;
  tb_uring_submit(u); /* the receives armed again in it */
  u->cqes += n;
  u->batches += n > 0;
  return n;
}
