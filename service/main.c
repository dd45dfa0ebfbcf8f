/*
 * tokbench-api: the REST service.
 *
 * Start-up: configuration (environment, optional --config file), logs, the
 * database pool (waiting for PostgreSQL up to TOKBENCH_DB_WAIT_MS), the
 * migrations, then libmicrohttpd with a pool of threads, each request served
 * from the routing table.  SIGTERM/SIGINT stop it cleanly.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "api_health.h"
#include "tb_log.h"
#include "tb_migrate.h"

static const struct tb_cfg_key api_keys[] = {
  { "TOKBENCH_DATABASE_URL", NULL, "PostgreSQL URL (libpq)", true },
  { "TOKBENCH_LISTEN_HOST", "127.0.0.1", "address to listen on", false },
  { "TOKBENCH_LISTEN_PORT", "8080", "TCP port to listen on", false },
  { "TOKBENCH_THREADS", "4", "request threads", false },
  { "TOKBENCH_DB_POOL", "8", "database connections", false },
  { "TOKBENCH_DB_WAIT_MS", "10000", "how long to wait for the database at start", false },
  { "TOKBENCH_LOG_LEVEL", "info", "debug, info, warn or error", false },
};

static volatile sig_atomic_t stop_flag;

static void
on_signal(int sig)
{
  (void)sig;
  stop_flag = 1;
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
       const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
  struct tb_api *api = cls;
  (void)version;
  (void)upload;
  if (*req_cls == NULL) { /* first call: headers only */
    *req_cls = api;
    return MHD_YES;
  }
  if (*upload_size != 0) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(method, "GET") == 0 && strcmp(url, "/healthz") == 0)
    return tb_api_healthz(api, c);
  if (strcmp(method, "GET") == 0 && strcmp(url, "/readyz") == 0)
    return tb_api_readyz(api, c);
  return tb_api_reply_problem(c, MHD_HTTP_NOT_FOUND, "not-found", "Not found", NULL);
}

static void
usage(FILE *out)
{
  fprintf(out, "usage: tokbench-api [--config FILE] [--help] [--version]\n\n"
               "The tokbench REST API.\n\n");
  tb_cfg_help(api_keys, TB_ARRAY_LEN(api_keys), out);
}

int
main(int argc, char **argv)
{
  const char *config = getenv("TOKBENCH_CONFIG");
  static const struct option opts[] = {
    { "config", required_argument, NULL, 'c' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
  };
  int o;
  while ((o = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
    switch (o) {
    case 'c':
      config = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    case 'V':
      printf("tokbench-api %s\n", TB_VERSION);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  char *err = NULL;
  struct tb_api api = { 0 };
  int rc = 1;
  api.cfg = tb_cfg_load(api_keys, TB_ARRAY_LEN(api_keys), config, &err);
  if (api.cfg == NULL) {
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    return 2;
  }
  int level = tb_log_level_parse(tb_cfg_get(api.cfg, "TOKBENCH_LOG_LEVEL"));
  tb_log_init("api", level < 0 ? TB_LOG_INFO : (enum tb_log_level)level);
  int64_t port, threads, pool, wait_ms;
  if (!tb_cfg_get_int(api.cfg, "TOKBENCH_LISTEN_PORT", 0, 65535, &port, &err) ||
      !tb_cfg_get_int(api.cfg, "TOKBENCH_THREADS", 1, 256, &threads, &err) ||
      !tb_cfg_get_int(api.cfg, "TOKBENCH_DB_POOL", 1, 256, &pool, &err) ||
      !tb_cfg_get_int(api.cfg, "TOKBENCH_DB_WAIT_MS", 0, 3600000, &wait_ms, &err)) {
    fprintf(stderr, "tokbench-api: %s\n", err);
    free(err);
    goto out;
  }
  const char *url = tb_cfg_get(api.cfg, "TOKBENCH_DATABASE_URL");
  if (url == NULL) {
    fprintf(stderr, "tokbench-api: TOKBENCH_DATABASE_URL is not set\n");
    rc = 2;
    goto out;
  }
  api.pool = tb_db_pool_new(url, (unsigned)pool, (int)wait_ms, &err);
  if (api.pool == NULL) {
    tb_log(TB_LOG_ERROR, "cannot connect to the database", "error", TB_LS, err, NULL);
    free(err);
    goto out;
  }
  struct tb_db *db = tb_db_pool_get(api.pool);
  int applied = tb_migrate_run(db, &err);
  tb_db_pool_put(api.pool, db);
  if (applied < 0) {
    tb_log(TB_LOG_ERROR, "migrations failed", "error", TB_LS, err, NULL);
    free(err);
    goto out;
  }

  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  if (inet_pton(AF_INET, tb_cfg_get(api.cfg, "TOKBENCH_LISTEN_HOST"), &sa.sin_addr) != 1) {
    fprintf(stderr, "tokbench-api: TOKBENCH_LISTEN_HOST must be an IPv4 address\n");
    goto out;
  }
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  api.daemon = MHD_start_daemon(
    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
      MHD_USE_ERROR_LOG,
    0, NULL, NULL, handle, &api, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
    MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
    MHD_OPTION_END);
  if (api.daemon == NULL) {
    tb_log(TB_LOG_ERROR, "cannot listen", "port", TB_LI, port, NULL);
    goto out;
  }
  tb_log(TB_LOG_INFO, "listening", "host", TB_LS, tb_cfg_get(api.cfg, "TOKBENCH_LISTEN_HOST"),
         "port", TB_LI, port, "migrations_applied", TB_LI, (int64_t)applied, NULL);
  while (!stop_flag)
    pause();
  tb_log(TB_LOG_INFO, "stopping", NULL);
  api.stopping = true;
  rc = 0;
out:
  if (api.daemon != NULL)
    MHD_stop_daemon(api.daemon);
  tb_db_pool_free(api.pool);
  tb_cfg_free(api.cfg);
  return rc;
}
