/*
 * tb_uring: the io_uring half of the engine's direct stream transport
 * (tb_direct).  One ring per run, probed at start: where the kernel lets us
 * (io_uring_setup allowed, a provided-buffer ring, multishot recvmsg), each
 * connection's reads are one multishot recvmsg that stays armed for the
 * connection's life and hands its bytes, with the kernel's receive stamp in
 * the control data, into buffers of one provided ring.  Many sockets' reads
 * then arrive in one batch of completions, with no system call per read.
 *
 * The ring's fd sits in the run's epoll set (tag given at init): readable
 * means completions are waiting, and tb_uring_drain hands them over.  Where
 * the probe fails (io_uring_disabled, seccomp, an old kernel, or
 * TOKBENCH_IO_URING=0) tb_uring_init says why and the transport stays epoll.
 * Everything runs on the engine's one thread.
 */
#ifndef TB_URING_H
#define TB_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct io_uring;
struct io_uring_buf_ring;

struct tb_uring {
  struct io_uring *ring;        /* NULL: off */
  struct io_uring_buf_ring *br; /* the provided buffers' ring */
  char *bufs;                   /* n_bufs * buf_size */
  unsigned n_bufs;
  size_t buf_size;
  struct msghdr mh;               /* the shape each multishot recvmsg fills (control space) */
  char why[160];                  /* why it is off ("" when on) */
  uint64_t batches, cqes, rearms; /* completion batches, completions, receives armed */
  uint64_t submits, sends;        /* io_uring_submit calls, sendmsgs queued */
  unsigned pending;               /* SQEs queued but not submitted */
  bool in_drain;                  /* in tb_uring_drain: receives' submits wait for its end */
};

/* What one completion of a connection's recvmsg brought: res > 0 bytes at
 * data (with msg's control data, for tb_rxts_from_msg), 0 end of stream,
 * < 0 -errno.  more: the receive stays armed. */
struct tb_uring_rx {
  uint64_t user_data;
  int res;
  bool more;
  const char *data;
  size_t len;
  struct msghdr *msg; /* NULL unless res > 0 */
};

/* Probes and sets up the ring, its fd in epfd with data tag; false (u->why
 * says why) leaves u off and harmless to free. */
bool tb_uring_init(struct tb_uring *u, int epfd, uint64_t tag, size_t control_len);
void tb_uring_free(struct tb_uring *u);
static inline bool
tb_uring_on(const struct tb_uring *u)
{
  return u->ring != NULL;
}
/* Arms fd's multishot recvmsg, completions carrying user_data, and submits
 * it (once per connection, or again after -ENOBUFS). */
bool tb_uring_recv(struct tb_uring *u, int fd, uint64_t user_data);
/* Queues a sendmsg of m (its iovecs and bytes stay put until the
 * completion, m until the submit) on fd, completions carrying user_data;
 * the next tb_uring_submit hands it over with whatever else is queued.
 * false: no submission slot. */
bool tb_uring_sendmsg(struct tb_uring *u, int fd, const struct msghdr *m, uint64_t user_data);
/* Cancels the receive armed with user_data, at once (before the fd closes). */
void tb_uring_cancel(struct tb_uring *u, uint64_t user_data);
/* Submits what is queued. */
void tb_uring_submit(struct tb_uring *u);
/* How many completions wait. */
unsigned tb_uring_ready(const struct tb_uring *u);
/* Hands every waiting completion to cb (a buffer goes back to the ring when
 * cb returns); returns how many. */
unsigned tb_uring_drain(struct tb_uring *u, void (*cb)(void *cls, const struct tb_uring_rx *rx),
                        void *cls);

#endif
