/*
 * pgtmp.h: a throwaway PostgreSQL cluster for the unit tests of the modules
 * that are nothing without one (tb_db, tb_migrate, tb_queue).
 *
 * pgtmp_up makes a private directory under $TMPDIR (or /tmp) and runs
 * scripts/tb-pg in it (init, start, url), exactly as the integration
 * harness does: initdb as the unprivileged "postgres" user when run as root,
 * a Unix socket only (mode 0700), no TCP.  pgtmp_down stops the cluster and
 * removes the directory.  The tests run from the repository's root (as
 * scripts/run-tests.sh runs them), where scripts/tb-pg is.
 *
 * Header-only (static inline functions) because only the tests include it.
 */
#ifndef TB_TEST_PGTMP_H
#define TB_TEST_PGTMP_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PGTMP_URL_MAX 512

struct pgtmp {
  char dir[256];
  int port;
  char url[PGTMP_URL_MAX];
};

/* Runs "scripts/tb-pg <cmd> <dir> [port]"; its output into out (may be NULL). */
static inline bool
pgtmp_run(const struct pgtmp *p, const char *cmd, bool with_port, char *out, size_t len)
{
  char line[512];
  if (with_port)
    snprintf(line, sizeof line, "scripts/tb-pg %s '%s' %d 2>&1", cmd, p->dir, p->port);
  else
    snprintf(line, sizeof line, "scripts/tb-pg %s '%s' 2>&1", cmd, p->dir);
  FILE *f = popen(line, "r");
  if (f == NULL)
    return false;
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  int rc = pclose(f);
  if (rc != 0)
    fprintf(stderr, "# tb-pg %s failed: %s\n", cmd, buf);
  if (out != NULL && len > 0) {
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
      buf[--n] = '\0';
    size_t c = n < len - 1 ? n : len - 1;
    memcpy(out, buf, c);
    out[c] = '\0';
  }
  return rc == 0;
}

/* A new cluster with an empty database "tokbench"; false when it cannot
 * start (no PostgreSQL binaries: `make deps`). */
static inline bool
pgtmp_up(struct pgtmp *p)
{
  memset(p, 0, sizeof *p);
  const char *tmp = getenv("TMPDIR");
  snprintf(p->dir, sizeof p->dir, "%s/tb-unit-pg-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(p->dir) == NULL || chmod(p->dir, 0755) != 0)
    return false;
  /* the socket's name is all the port is: any number will do in our dir */
  p->port = 5432 + (int)(getpid() % 20000);
  return pgtmp_run(p, "init", false, NULL, 0) && pgtmp_run(p, "start", true, NULL, 0) &&
         pgtmp_run(p, "url", true, p->url, sizeof p->url);
}

static inline void
pgtmp_down(struct pgtmp *p)
{
  if (p->dir[0] == '\0')
    return;
  (void)pgtmp_run(p, "stop", false, NULL, 0);
  char line[512];
  snprintf(line, sizeof line, "rm -rf '%s'", p->dir);
  if (system(line) != 0)
    fprintf(stderr, "# cannot remove %s\n", p->dir);
  p->dir[0] = '\0';
}

/* The group fixtures of a test binary whose tests share one cluster. */
static struct pgtmp pgtmp_cluster;

static inline int
pgtmp_group_setup(void **state)
{
  (void)state;
  return pgtmp_up(&pgtmp_cluster) ? 0 : -1;
}

static inline int
pgtmp_group_teardown(void **state)
{
  (void)state;
  pgtmp_down(&pgtmp_cluster);
  return 0;
}

#endif
