/*
 * sim_tls: HTTPS for tokbench-sim (--tls-cert, --tls-key), with OpenSSL on
 * the server's one epoll loop.
 *
 * Design: OpenSSL never touches a socket.  Each connection's SSL reads from
 * and writes to memory BIOs; this module fills the input BIO from the
 * non-blocking socket and keeps what the SSL writes in a ciphertext buffer,
 * which the connection (sim_conn.c) sends as it sends plain output.  So:
 * - SSL_write never blocks and never writes part of its input (the output
 *   BIO grows), and the plaintext moves to ciphertext at once: a decode
 *   step's stamps (sim_state.h) are written into plaintext that has not yet
 *   been given to SSL_write, exactly as without TLS, and one send() per
 *   connection and step still carries them.  What the socket does not take
 *   waits in the connection's ciphertext buffer (capped like plain output:
 *   SIM_OUT_CAP) and goes out on EPOLLOUT.
 * - SSL_ERROR_WANT_READ from SSL_read (or the handshake, which SSL_read
 *   drives) means "the input BIO is empty": one recv() of at most
 *   SIM_TLS_RECV bytes refills it, so the input BIO never holds more than
 *   that.  SSL_ERROR_WANT_WRITE cannot happen with a memory BIO; what the
 *   SSL wants to send (handshake messages, session tickets, a key update's
 *   answer, alerts) is taken from the output BIO after every call.
 * - SSL_pending: plaintext decrypted but not yet read stays in the SSL
 *   object, where epoll cannot see it; sim_tls_buffered says so, and the
 *   connection reads it before it waits for the socket again.
 * - A handshake that fails (not TLS, no common cipher, an untrusted or
 *   garbled peer) kills its connection and nothing else; one that does not
 *   finish within SIM_TLS_HANDSHAKE_NS is killed by the housekeeping.
 *
 * Private to sim/; one thread (the loop's) uses all of it.
 */
#ifndef SIM_TLS_H
#define SIM_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/tb_util.h"

#define SIM_TLS_RECV 16384                       /* ciphertext bytes read per recv() */
#define SIM_TLS_HANDSHAKE_NS (10 * 1000000000LL) /* from accept to done */

struct sim_tls_ctx; /* the server's: certificate, key, settings */
struct sim_tls;     /* one connection's */

/* Loads a PEM certificate chain and its private key.  Returns a new context
 * (free with sim_tls_ctx_free), or NULL with err set (the file and
 * OpenSSL's reason). */
struct sim_tls_ctx *sim_tls_ctx_new(const char *cert_file, const char *key_file, char *err,
                                    size_t errlen) TB_MUST_CHECK;
void sim_tls_ctx_free(struct sim_tls_ctx *ctx);

/* A server-side TLS state for a new connection (NULL on an allocation
 * failure); free with sim_tls_free. */
struct sim_tls *sim_tls_new(struct sim_tls_ctx *ctx) TB_MUST_CHECK;
void sim_tls_free(struct sim_tls *t);

/* Like recv(2) for plaintext: reads from fd as needed, drives the
 * handshake.  > 0: bytes read into buf; 0: the peer closed (close_notify
 * or EOF); -1 with errno EAGAIN (nothing more now; handshake output may be
 * waiting: sim_tls_unsent) or EPROTO (TLS failure) or recv's errno. */
ssize_t sim_tls_recv(struct sim_tls *t, int fd, void *buf, size_t n);

/* Encrypts n bytes of plaintext into the ciphertext buffer (all of them,
 * or false on a TLS failure: the connection is done). */
bool sim_tls_write(struct sim_tls *t, const void *buf, size_t n) TB_MUST_CHECK;

/* Queues a close_notify alert (once) into the ciphertext buffer. */
void sim_tls_close_notify(struct sim_tls *t);

/* The ciphertext waiting to be sent: *buf (valid until the next call on
 * t) and its length; the caller sends it and says how much went with
 * sim_tls_sent. */
size_t sim_tls_pending(const struct sim_tls *t, const char **buf);
void sim_tls_sent(struct sim_tls *t, size_t n);

/* Ciphertext bytes waiting to be sent. */
size_t sim_tls_unsent(const struct sim_tls *t);

/* Whether decrypted plaintext or received ciphertext is held where epoll
 * cannot see it (SSL_pending, the input BIO). */
bool sim_tls_buffered(const struct sim_tls *t);

/* Whether the handshake is complete. */
bool sim_tls_ready(const struct sim_tls *t);

#endif
