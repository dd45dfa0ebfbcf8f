/*
 * sim_tls: see sim_tls.h for the design (memory BIOs, one recv() per
 * WANT_READ, the ciphertext buffer).
 */
#include "sim_tls.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct sim_tls_ctx {
  SSL_CTX *ssl_ctx;
};

struct sim_tls {
  SSL *ssl;
  BIO *rb, *wb; /* input and output memory BIOs (owned by ssl) */
  char *out;    /* ciphertext not yet sent: out[off, len) */
  size_t off, len, cap;
  bool shut; /* close_notify queued */
};

static void
err_text(char *err, size_t errlen, const char *what, const char *file)
{
  unsigned long e = ERR_get_error();
  char reason[256] = "unknown error";
  if (e != 0)
    ERR_error_string_n(e, reason, sizeof(reason));
  snprintf(err, errlen, "%s %s: %s", what, file ? file : "", reason);
  ERR_clear_error();
}

/* ALPN: HTTP/1.1 when the client offers it (the simulator speaks nothing
 * else); otherwise no ALPN answer, and the client decides. */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
            unsigned int inlen, void *arg)
{
  (void)ssl;
  (void)arg;
  static const unsigned char h11[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
  unsigned char *sel = NULL;
  if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11), in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

struct sim_tls_ctx *
sim_tls_ctx_new(const char *cert_file, const char *key_file, char *err, size_t errlen)
{
  ERR_clear_error();
  SSL_CTX *sc = SSL_CTX_new(TLS_server_method());
  if (sc == NULL) {
    err_text(err, errlen, "TLS context", NULL);
    return NULL;
  }
  (void)SSL_CTX_set_min_proto_version(sc, TLS1_2_VERSION);
  SSL_CTX_set_options(sc, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_alpn_select_cb(sc, alpn_select, NULL);
  if (SSL_CTX_use_certificate_chain_file(sc, cert_file) != 1) {
    err_text(err, errlen, "--tls-cert", cert_file);
    goto fail;
  }
  if (SSL_CTX_use_PrivateKey_file(sc, key_file, SSL_FILETYPE_PEM) != 1) {
    err_text(err, errlen, "--tls-key", key_file);
    goto fail;
  }
  if (SSL_CTX_check_private_key(sc) != 1) {
    err_text(err, errlen, "--tls-key does not match --tls-cert:", key_file);
    goto fail;
  }
  struct sim_tls_ctx *ctx = tb_xcalloc(1, sizeof(*ctx));
  ctx->ssl_ctx = sc;
  return ctx;
fail:
  SSL_CTX_free(sc);
  return NULL;
}

void
sim_tls_ctx_free(struct sim_tls_ctx *ctx)
{
  if (ctx == NULL)
    return;
  SSL_CTX_free(ctx->ssl_ctx);
  free(ctx);
}

struct sim_tls *
sim_tls_new(struct sim_tls_ctx *ctx)
{
  SSL *ssl = SSL_new(ctx->ssl_ctx);
  BIO *rb = BIO_new(BIO_s_mem());
  BIO *wb = BIO_new(BIO_s_mem());
  if (ssl == NULL || rb == NULL || wb == NULL) {
    SSL_free(ssl);
    BIO_free(rb);
    BIO_free(wb);
    ERR_clear_error();
    return NULL;
  }
  /* an empty input BIO is "retry", never EOF */
  BIO_set_mem_eof_return(rb, -1);
  SSL_set_bio(ssl, rb, wb); /* ssl owns both from here */
  SSL_set_accept_state(ssl);
  struct sim_tls *t = tb_xcalloc(1, sizeof(*t));
  t->ssl = ssl;
  t->rb = rb;
  t->wb = wb;
  return t;
}

void
sim_tls_free(struct sim_tls *t)
{
  if (t == NULL)
    return;
  SSL_free(t->ssl);
  free(t->out);
  free(t);
}

/* Moves what the SSL wrote to its output BIO into the ciphertext buffer. */
static void
pull(struct sim_tls *t)
{
  size_t p;
  while ((p = BIO_ctrl_pending(t->wb)) > 0) {
    if (p > INT_MAX)
      p = INT_MAX;
    if (t->len + p > t->cap) {
      if (t->off > 0) {
        memmove(t->out, t->out + t->off, t->len - t->off);
        t->len -= t->off;
        t->off = 0;
      }
      tb_xgrow(&t->out, &t->cap, t->len + p, 4096);
    }
    int n = BIO_read(t->wb, t->out + t->len, (int)p);
    if (n <= 0)
      return;
    t->len += (size_t)n;
  }
}

ssize_t
sim_tls_recv(struct sim_tls *t, int fd, void *buf, size_t n)
{
  int want = n > INT_MAX ? INT_MAX : (int)n;
  for (;;) {
    ERR_clear_error();
    int r = SSL_read(t->ssl, buf, want);
    pull(t); /* handshake messages, tickets, alerts */
    if (r > 0)
      return r;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_ZERO_RETURN)
      return 0;
    if (e != SSL_ERROR_WANT_READ) {
      ERR_clear_error();
      errno = EPROTO;
      return -1;
    }
    /* the input BIO is empty: one recv() refills it (so it never holds
     * more than SIM_TLS_RECV bytes) */
    char raw[SIM_TLS_RECV];
    ssize_t k = recv(fd, raw, sizeof(raw), 0);
    if (k == 0)
      return 0;
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return -1; /* EAGAIN and the rest: recv's errno */
    }
    if (BIO_write(t->rb, raw, (int)k) != (int)k) {
      ERR_clear_error();
      errno = EPROTO;
      return -1;
    }
  }
}

bool
sim_tls_write(struct sim_tls *t, const void *buf, size_t n)
{
  const char *p = buf;
  while (n > 0) {
    int k = n > (1u << 30) ? (1 << 30) : (int)n;
    ERR_clear_error();
    int r = SSL_write(t->ssl, p, k);
    pull(t);
    if (r <= 0) {
      ERR_clear_error();
      return false;
    }
    p += r;
    n -= (size_t)r;
  }
  return true;
}

void
sim_tls_close_notify(struct sim_tls *t)
{
  if (t->shut)
    return;
  t->shut = true;
  if (!SSL_is_init_finished(t->ssl))
    return;
  ERR_clear_error();
  (void)SSL_shutdown(t->ssl);
  ERR_clear_error();
  pull(t);
}

size_t
sim_tls_pending(const struct sim_tls *t, const char **buf)
{
  *buf = t->out + t->off;
  return t->len - t->off;
}

void
sim_tls_sent(struct sim_tls *t, size_t n)
{
  t->off += n;
  if (t->off >= t->len)
    t->off = t->len = 0;
}

size_t
sim_tls_unsent(const struct sim_tls *t)
{
  return t->len - t->off;
}

bool
sim_tls_buffered(const struct sim_tls *t)
{
  return SSL_pending(t->ssl) > 0 || BIO_ctrl_pending(t->rb) > 0;
}

bool
sim_tls_ready(const struct sim_tls *t)
{
  return SSL_is_init_finished(t->ssl) == 1;
}
