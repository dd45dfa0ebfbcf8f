/*
 * tokbench verify: checks the signature of a result document (issue 35,
 * item 4; lib/base/tb_sign, docs/verify.md) against a JWK set of public
 * keys, read from a URL (a service's GET /v1/signing-keys) or a file.
 *
 *   tokbench verify RESULT.json [--keys URL|FILE]
 *
 * Exit status: 0 a good signature (the key id and signed_at on stdout);
 * 1 a bad one, or a key id the set does not hold, or a revoked key; 2 the
 * file unreadable (not JSON, duplicate names), no signature in it, or the
 * keys unreadable.  A key of the set counts only when its kid is the one
 * its x gives (tb_sign_kid): a set cannot pass one key off as another.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_sign.h"
#include "cli.h"
#include "net/tb_http.h"

#define VERIFY_KEYS_MAX (1024u * 1024u) /* a JWK set's bytes, at most */
#define VERIFY_TIMEOUT_MS 10000L

enum {
  EXIT_GOOD = 0,
  EXIT_BAD = 1,
  EXIT_ERROR = 2
};

static const char verify_usage[] =
  "usage: tokbench verify RESULT.json [--keys URL|FILE]\n"
  "\n"
  "Checks the Ed25519 signature of a result document (its \"signature\"\n"
  "block, over the RFC 8785 canonical form of the rest) against the public\n"
  "keys of a JWK set: a service's /v1/signing-keys URL, or a file holding\n"
  "the set (default: $TOKBENCH_API_URL/v1/signing-keys, else\n"
  "http://127.0.0.1:8080/v1/signing-keys).\n"
  "\n"
  "Exit status: 0 good (prints the key id and when it signed), 1 bad\n"
  "signature, unknown or revoked key, 2 unreadable file, no signature, or\n"
  "keys that cannot be read.\n";

/* The JWK set at where (an http(s) URL or a file) as a new object; NULL
 * after a message on stderr. */
static json_t *
load_keys(const char *where)
{
  json_error_t e;
  json_t *set = NULL;
  if (strncmp(where, "http://", 7) == 0 || strncmp(where, "https://", 8) == 0) {
    struct tb_http_resp resp;
    tb_http_global_init();
    int rc = tb_http_call("GET", where, NULL, NULL, 0, VERIFY_TIMEOUT_MS, VERIFY_KEYS_MAX, &resp);
    if (rc != 0 || resp.status != 200 || resp.body == NULL)
      fprintf(stderr, "tokbench verify: cannot read the keys at %s: %s\n", where,
              rc != 0 ? resp.err : "not HTTP 200");
    else if ((set = json_loadb(resp.body, resp.len, JSON_REJECT_DUPLICATES, &e)) == NULL)
      fprintf(stderr, "tokbench verify: the keys at %s are not JSON: %s\n", where, e.text);
    tb_http_resp_free(&resp);
  } else if ((set = json_load_file(where, JSON_REJECT_DUPLICATES, &e)) == NULL) {
    fprintf(stderr, "tokbench verify: cannot read the keys in %s: %s\n", where, e.text);
  }
  if (set != NULL && !json_is_array(json_object_get(set, "keys"))) {
    fprintf(stderr, "tokbench verify: %s is not a JWK set (no \"keys\" array)\n", where);
    json_decref(set);
    set = NULL;
  }
  return set;
}

/* The key of set whose kid is kid, its own kid checked against its x:
 * true with pub and *jwk (borrowed). */
static bool
find_key(const json_t *set, const char *kid, unsigned char pub[TB_SIGN_PUB_LEN], const json_t **jwk)
{
  size_t i;
  const json_t *k;
  json_array_foreach (json_object_get(set, "keys"), i, k) {
    const char *id = json_string_value(json_object_get(k, "kid"));
    char real[TB_SIGN_KID_LEN + 1];
    if (id == NULL || strcmp(id, kid) != 0 || !tb_sign_jwk_pub(k, pub))
      continue;
    tb_sign_kid(pub, real);
    if (strcmp(real, kid) == 0) {
      *jwk = k;
      return true;
    }
  }
  return false;
}

/* The check of doc against set: the exit status, told on stdout or
 * stderr. */
static int
check(const char *file, const json_t *doc, const json_t *set)
{
  const json_t *sb = json_object_get(doc, "signature");
  const char *kid = json_string_value(json_object_get(sb, "kid"));
  const char *at = json_string_value(json_object_get(sb, "signed_at"));
  if (!json_is_object(sb) || kid == NULL) {
    fprintf(stderr, "tokbench verify: %s has no signature\n", file);
    return EXIT_ERROR;
  }
  unsigned char pub[TB_SIGN_PUB_LEN];
  const json_t *jwk = NULL;
  if (!find_key(set, kid, pub, &jwk)) {
    fprintf(stderr, "tokbench verify: %s: BAD: key %s is not among the keys given\n", file, kid);
    return EXIT_BAD;
  }
  const char *revoked = json_string_value(json_object_get(jwk, "revoked_at"));
  if (revoked != NULL) {
    fprintf(stderr, "tokbench verify: %s: BAD: key %s was revoked at %s\n", file, kid, revoked);
    return EXIT_BAD;
  }
  const char *why = NULL;
  switch (tb_sign_verify(doc, pub, &why)) {
  case TB_SIGN_GOOD:
    printf("%s: good signature by key %s, signed at %s\n", file, kid, at != NULL ? at : "unknown");
    return EXIT_GOOD;
  case TB_SIGN_ABSENT: fprintf(stderr, "tokbench verify: %s: %s\n", file, why); return EXIT_ERROR;
  case TB_SIGN_BAD: break;
  }
  fprintf(stderr, "tokbench verify: %s: BAD: %s (key %s)\n", file, why, kid);
  return EXIT_BAD;
}

int
tb_cli_verify(int argc, char **argv)
{
  const char *file = NULL, *keys = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(verify_usage, stdout);
      return EXIT_GOOD;
    }
    if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
      keys = argv[++i];
    } else if (file == NULL && (argv[i][0] != '-' || argv[i][1] == '\0')) {
      file = argv[i];
    } else {
      fprintf(stderr, "tokbench verify: unknown argument '%s'\n%s", argv[i], verify_usage);
      return EXIT_ERROR;
    }
  }
  if (file == NULL) {
    fputs(verify_usage, stderr);
    return EXIT_ERROR;
  }
  char *deflt = NULL;
  if (keys == NULL) {
    const char *api = getenv("TOKBENCH_API_URL");
    api = api != NULL && api[0] != '\0' ? api : "http://127.0.0.1:8080";
    size_t n = strlen(api);
    deflt =
      tb_xasprintf("%.*s/v1/signing-keys", (int)(n > 0 && api[n - 1] == '/' ? n - 1 : n), api);
    keys = deflt;
  }
  json_error_t e;
  json_t *doc = strcmp(file, "-") == 0 ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &e)
                                       : json_load_file(file, JSON_REJECT_DUPLICATES, &e);
  json_t *set = NULL;
  int rc = EXIT_ERROR;
  if (!json_is_object(doc))
    fprintf(stderr, "tokbench verify: cannot read %s: %s\n", file,
            doc == NULL ? e.text : "not a JSON object");
  else if (!json_is_object(json_object_get(doc, "signature")))
    fprintf(stderr, "tokbench verify: %s has no signature\n", file);
  else if ((set = load_keys(keys)) != NULL)
    rc = check(file, doc, set);
  json_decref(doc);
  json_decref(set);
  free(deflt);
  return rc;
}
