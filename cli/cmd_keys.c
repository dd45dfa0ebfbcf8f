/*
 * tokbench keys: API keys straight in the database (TOKBENCH_DATABASE_URL),
 * for the first admin key of a project, before any key exists to call
 * /v1/keys with.
 *
 *   tokbench keys create --project NAME [--admin] [--scopes read,write]
 *                        [--name N] [--expires-in 30d] [--database-url URL]
 *   tokbench keys list [--project NAME] [--json] [--database-url URL]
 *   tokbench keys revoke ID [--database-url URL]
 *
 * create applies the migrations first, creates the project when missing, and
 * prints only the key on stdout (so that `KEY=$(tokbench keys create ...)`
 * works); the key is never stored anywhere but in that output.  list prints
 * the keys' public records (prefix, never the key or its hash), one line
 * each, or the JSON array with --json.  revoke revokes a key of any project
 * (the database URL is the authority here) and NOTIFYs the api processes,
 * which drop their cached copy at once; exit 1 when no key has that id.
 */
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "db/tb_auth.h"
#include "base/tb_log.h"
#include "db/tb_migrate.h"

static void
usage(FILE *out)
{
  fprintf(out, "usage: tokbench keys create --project NAME [--admin] [--scopes LIST]\n"
               "                            [--name NAME] [--expires-in DURATION]\n"
               "                            [--database-url URL]\n\n"
               "Creates an API key in project NAME (created when missing) and prints\n"
               "the key, once, on stdout.  --admin grants read,write,admin; --scopes\n"
               "takes a comma list of read, write, admin (default read,write).\n"
               "DURATION: 3600, 45s, 15m, 12h, 30d, 2w (default: never expires).\n"
               "The database URL defaults to TOKBENCH_DATABASE_URL; the migrations\n"
               "are applied first.\n\n"
               "usage: tokbench keys list [--project NAME] [--json] [--database-url URL]\n\n"
               "Lists the keys (of project NAME, else of every project): id, project,\n"
               "name, prefix, scopes, created, expires, revoked, last used.\n\n"
               "usage: tokbench keys revoke ID [--database-url URL]\n\n"
               "Revokes the key ID (as list shows it); api processes stop accepting\n"
               "it at once.  Exit 1 when no key has this id.\n");
}

/* Connects to url (NULL: TOKBENCH_DATABASE_URL unset) and applies the
 * migrations; NULL after a message on stderr. */
static struct tb_db *
connect_db(const char *url)
{
  char *err = NULL;
  if (url == NULL) {
    fprintf(stderr, "tokbench keys: TOKBENCH_DATABASE_URL is not set\n");
    return NULL;
  }
  tb_log_init("keys", TB_LOG_WARN);
  struct tb_db *db = tb_db_connect(url, 5000, &err);
  if (db == NULL) {
    fprintf(stderr, "tokbench keys: cannot connect: %s\n", err);
    free(err);
    return NULL;
  }
  if (tb_migrate_run(db, &err) < 0) {
    fprintf(stderr, "tokbench keys: migrations: %s\n", err);
    free(err);
    tb_db_close(db);
    return NULL;
  }
  return db;
}

enum {
  ARG_OTHER = -1,
  ARG_TAKEN = -2
};

/* argv[*i] among the arguments every keys command takes: --help (usage on
 * stdout, exit status 0), --database-url URL and, when project is not
 * NULL, --project NAME.  Returns ARG_TAKEN (*i moved past its value),
 * ARG_OTHER (not one of them) or the exit status. */
static int
common_arg(int argc, char **argv, int *i, const char **url, const char **project)
{
  const char *a = argv[*i];
  bool has_arg = *i + 1 < argc;
  if (strcmp(a, "--help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(a, "--database-url") == 0 && has_arg) {
    *url = argv[++*i];
    return ARG_TAKEN;
  }
  if (project != NULL && strcmp(a, "--project") == 0 && has_arg) {
    *project = argv[++*i];
    return ARG_TAKEN;
  }
  return ARG_OTHER;
}

/* An argument no keys command takes: exit status 2. */
static int
unknown_arg(const char *a)
{
  fprintf(stderr, "tokbench keys: unknown argument '%s'\n", a);
  usage(stderr);
  return 2;
}

static int
keys_create(int argc, char **argv)
{
  const char *url = getenv("TOKBENCH_DATABASE_URL");
  const char *project = NULL, *name = "", *scopes = NULL;
  bool admin = false;
  int64_t expires = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_arg = i + 1 < argc;
    int ca = common_arg(argc, argv, &i, &url, &project);
    if (ca != ARG_OTHER) {
      if (ca != ARG_TAKEN)
        return ca;
    } else if (strcmp(a, "--admin") == 0) {
      admin = true;
    } else if (strcmp(a, "--name") == 0 && has_arg) {
      name = argv[++i];
    } else if (strcmp(a, "--scopes") == 0 && has_arg) {
      scopes = argv[++i];
    } else if (strcmp(a, "--expires-in") == 0 && has_arg) {
      if (!tb_scope_parse_duration(argv[++i], &expires)) {
        fprintf(stderr, "tokbench keys: bad --expires-in '%s'\n", argv[i]);
        return 2;
      }
    } else {
      return unknown_arg(a);
    }
  }
  unsigned mask = TB_SCOPE_READ | TB_SCOPE_WRITE;
  if (scopes != NULL && !tb_scope_parse(scopes, &mask)) {
    fprintf(stderr, "tokbench keys: bad --scopes '%s' (read, write, admin)\n", scopes);
    return 2;
  }
  if (admin)
    mask |= TB_SCOPE_READ | TB_SCOPE_WRITE | TB_SCOPE_ADMIN;
  if (project == NULL || project[0] == '\0' || strlen(project) > 100) {
    fprintf(stderr, "tokbench keys: --project NAME (1 to 100 characters) is required\n");
    return 2;
  }
  if (strlen(name) > 200) {
    fprintf(stderr, "tokbench keys: --name is too long\n");
    return 2;
  }
  if (url == NULL) {
    fprintf(stderr, "tokbench keys: TOKBENCH_DATABASE_URL is not set\n");
    return 2;
  }
  char *key = NULL, *doc = NULL;
  char pid[37];
  int rc = 1;
  struct tb_db *db = connect_db(url);
  if (db == NULL)
    return 1;
  if (tb_auth_project_ensure(db, project, pid) != 1) {
    fprintf(stderr, "tokbench keys: cannot create project '%s'\n", project);
    goto out;
  }
  if (tb_auth_key_create(db, pid, NULL, name, mask, expires, &key, &doc) != 1) {
    fprintf(stderr, "tokbench keys: cannot create the key\n");
    goto out;
  }
  printf("%s\n", key);
  fflush(stdout);
  rc = 0;
out:
  if (key != NULL) {
    OPENSSL_cleanse(key, strlen(key));
    free(key);
  }
  free(doc);
  tb_db_close(db);
  return rc;
}

/* A member of a key record as text for the table ("-" for null). */
static const char *
field(json_t *k, const char *name, char *buf, size_t len)
{
  json_t *v = json_object_get(k, name);
  if (json_is_string(v))
    return json_string_value(v);
  if (json_is_array(v)) { /* scopes */
    size_t i, o = 0;
    json_t *e;
    buf[0] = '\0';
    json_array_foreach (v, i, e) {
      int n = snprintf(buf + o, len - o, "%s%s", i ? "," : "",
                       json_string_value(e) ? json_string_value(e) : "?");
      if (n < 0 || (size_t)n >= len - o)
        break;
      o += (size_t)n;
    }
    return buf;
  }
  return "-";
}

static int
keys_list(int argc, char **argv)
{
  const char *url = getenv("TOKBENCH_DATABASE_URL"), *project = NULL;
  bool as_json = false;
  for (int i = 1; i < argc; i++) {
    int ca = common_arg(argc, argv, &i, &url, &project);
    if (ca != ARG_OTHER) {
      if (ca != ARG_TAKEN)
        return ca;
    } else if (strcmp(argv[i], "--json") == 0) {
      as_json = true;
    } else {
      return unknown_arg(argv[i]);
    }
  }
  struct tb_db *db = connect_db(url);
  if (db == NULL)
    return 1;
  char *text = NULL;
  int rc = 1;
  json_t *list = NULL;
  if (tb_auth_keys_list(db, project, &text) != 1) {
    fprintf(stderr, "tokbench keys: cannot list the keys\n");
    goto out;
  }
  if (as_json) {
    printf("%s\n", text);
    rc = 0;
    goto out;
  }
  list = json_loads(text, 0, NULL);
  if (!json_is_array(list)) {
    fprintf(stderr, "tokbench keys: unreadable list\n");
    goto out;
  }
  printf("%-36s  %-16s  %-16s  %-12s  %-16s  %-32s  %-32s  %-32s  %s\n", "ID", "PROJECT", "NAME",
         "PREFIX", "SCOPES", "CREATED", "EXPIRES", "REVOKED", "LAST USED");
  size_t i;
  json_t *k;
  json_array_foreach (list, i, k) {
    char sc[64];
    const char *name = field(k, "name", sc, sizeof sc);
    printf("%-36s  %-16s  %-16s  %-12s  ", field(k, "id", sc, sizeof sc),
           field(k, "project", sc, sizeof sc), name[0] ? name : "-",
           field(k, "prefix", sc, sizeof sc));
    printf("%-16s  ", field(k, "scopes", sc, sizeof sc));
    printf("%-32s  %-32s  %-32s  %s\n", field(k, "created_at", sc, sizeof sc),
           field(k, "expires_at", sc, sizeof sc), field(k, "revoked_at", sc, sizeof sc),
           field(k, "last_used_at", sc, sizeof sc));
  }
  rc = 0;
out:
  fflush(stdout);
  json_decref(list);
  free(text);
  tb_db_close(db);
  return rc;
}

/* True when s is a UUID in text (8-4-4-4-12 hex). */
static bool
uuid_ok(const char *s)
{
  if (strlen(s) != 36)
    return false;
  for (int i = 0; i < 36; i++) {
    char c = s[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-'
             : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
      return false;
  }
  return true;
}

static int
keys_revoke(int argc, char **argv)
{
  const char *url = getenv("TOKBENCH_DATABASE_URL"), *id = NULL;
  for (int i = 1; i < argc; i++) {
    int ca = common_arg(argc, argv, &i, &url, NULL);
    if (ca != ARG_OTHER) {
      if (ca != ARG_TAKEN)
        return ca;
    } else if (argv[i][0] != '-' && id == NULL) {
      id = argv[i];
    } else {
      return unknown_arg(argv[i]);
    }
  }
  if (id == NULL || !uuid_ok(id)) {
    fprintf(stderr, "tokbench keys: revoke ID: the key's id (a UUID, as `keys list` shows)\n");
    return 2;
  }
  struct tb_db *db = connect_db(url);
  if (db == NULL)
    return 1;
  char *doc = NULL;
  int rc = tb_auth_key_revoke(db, id, NULL, &doc);
  tb_db_close(db);
  if (rc < 0) {
    fprintf(stderr, "tokbench keys: cannot revoke the key\n");
    return 1;
  }
  if (rc == 0) {
    fprintf(stderr, "tokbench keys: no key has id %s\n", id);
    return 1;
  }
  printf("%s\n", doc);
  free(doc);
  return 0;
}

int
tb_cli_keys(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "create") == 0)
    return keys_create(argc - 1, argv + 1);
  if (strcmp(argv[1], "list") == 0)
    return keys_list(argc - 1, argv + 1);
  if (strcmp(argv[1], "revoke") == 0)
    return keys_revoke(argc - 1, argv + 1);
  fprintf(stderr, "tokbench keys: unknown subcommand '%s'\n", argv[1]);
  return 2;
}
