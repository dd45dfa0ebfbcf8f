/*
 * tb_rxts: kernel receive timestamps of a TCP socket.  See tb_rxts.h.
 */
#include "net/tb_rxts.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

bool
tb_rxts_enable(int fd)
{
  int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0;
}

int
tb_rxts_hold(void)
{
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (!tb_rxts_enable(fd)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int64_t
tb_rxts_offset(void)
{
  struct timespec m0, rt, m1;
  clock_gettime(CLOCK_MONOTONIC, &m0);
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &m1);
  int64_t mono = ((int64_t)m0.tv_sec * 1000000000LL + m0.tv_nsec +
                  (int64_t)m1.tv_sec * 1000000000LL + m1.tv_nsec) /
                 2;
  return (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec - mono;
}

int64_t
tb_rxts_from_msg(struct msghdr *msg, int64_t now, int64_t offset, enum tb_rxts_src *src)
{
  if (src != NULL)
    *src = TB_RXTS_CLOCK;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm != NULL; cm = CMSG_NXTHDR(msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SO_TIMESTAMPNS ||
        cm->cmsg_len < CMSG_LEN(sizeof(struct timespec)))
      continue;
    struct timespec ts;
    memcpy(&ts, CMSG_DATA(cm), sizeof ts);
    int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - offset;
    if (t > now + TB_RXTS_SLACK_NS || t < now - TB_RXTS_MAX_AGE_NS)
      return now;
    if (src != NULL)
      *src = TB_RXTS_KERNEL;
    return t;
  }
  return now;
}

int64_t
tb_rxts_peek(int fd, int64_t now, int64_t offset, enum tb_rxts_src *src)
{
  if (src != NULL)
    *src = TB_RXTS_NONE;
  char byte;
  union {
    char buf[TB_RXTS_CMSG_SPACE];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
  struct msghdr msg = {
    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf
  };
  ssize_t n;
  do
    n = recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return now;
  return tb_rxts_from_msg(&msg, now, offset, src);
}
