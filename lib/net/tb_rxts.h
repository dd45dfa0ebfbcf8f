/*
 * tb_rxts: kernel receive timestamps of a TCP socket.
 *
 * A benchmark client that stamps a token when its own loop gets round to
 * reading it measures its own wake-up and queueing with the token: on a
 * virtual machine a sleeping thread wakes 0.1 to several ms late, and a loop
 * busy with other streams reads a socket later than the bytes came.  The
 * kernel stamps each packet when it receives it (SO_TIMESTAMPNS, software
 * stamp, taken in the network stack whatever the reader is doing), and a
 * recvmsg(MSG_PEEK) of one byte returns the stamp of the oldest unread data
 * without consuming anything, so the reader (libcurl) reads as before.
 *
 * Stamps come on CLOCK_REALTIME; tb_rxts_peek converts them to
 * CLOCK_MONOTONIC with an offset the caller samples (tb_rxts_offset) near the
 * time of the read, and falls back to the caller's "now" when the socket has
 * no stamp (stamping off, nothing queued, an error) or the stamp is not
 * plausible (more than TB_RXTS_SLACK_NS after now, which the bytes can
 * only be by arriving during the call, or more than TB_RXTS_MAX_AGE_NS
 * before it: the wall clock was stepped).  The first socket to ask for stamps
 * turns stamping on for the whole system from a kernel work queue, so its
 * first few packets may come without: they fall back too.
 */
#ifndef TB_RXTS_H
#define TB_RXTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

/* A stamp older than this (relative to now) is not trusted. */
#define TB_RXTS_MAX_AGE_NS (10 * 1000000000LL)
/* A stamp later than now by more than this is not trusted. */
#define TB_RXTS_SLACK_NS (1000000LL)

/* Turns on receive stamps for fd; false (errno set) if the kernel refuses. */
bool tb_rxts_enable(int fd);

/* A socket that only asks for stamps, to hold open for as long as stamps
 * are wanted (close it then); -1 if the kernel refuses.  The kernel switches
 * stamping on when the first socket of the system asks for it and off when
 * the last one closes, by patching its code on every CPU from a work queue:
 * a stall of milliseconds on a VM, which a client that opens and closes its
 * connections between measurements would otherwise meet inside them (and
 * its first packets would come unstamped). */
int tb_rxts_hold(void);

/* CLOCK_REALTIME - CLOCK_MONOTONIC, in ns, sampled now. */
int64_t tb_rxts_offset(void);

/* Where a tb_rxts_peek result came from. */
enum tb_rxts_src {
  TB_RXTS_NONE,   /* nothing to read (end of stream, error): `now` */
  TB_RXTS_CLOCK,  /* bytes without a plausible stamp: `now` */
  TB_RXTS_KERNEL, /* the kernel's receive stamp */
};

/* Arrival of the oldest unread byte of fd on CLOCK_MONOTONIC (ns), or
 * `now` (a CLOCK_MONOTONIC reading) when there is no plausible stamp;
 * *src (may be NULL) tells which. */
int64_t tb_rxts_peek(int fd, int64_t now, int64_t offset, enum tb_rxts_src *src);

/* Room for the control data of a stamped recvmsg (msg_control). */
#define TB_RXTS_CMSG_SPACE (CMSG_SPACE(sizeof(struct timespec)) * 2)

/* The same from a recvmsg the caller made (with msg_control of at least
 * TB_RXTS_CMSG_SPACE bytes) that returned bytes. */
int64_t tb_rxts_from_msg(struct msghdr *msg, int64_t now, int64_t offset, enum tb_rxts_src *src);

#endif
