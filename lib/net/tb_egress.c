/*
 * tb_egress: the egress policy.  See tb_egress.h.
 *
 * Every address is held as 16 bytes of IPv6, IPv4 as ::ffff:a.b.c.d with
 * its prefix length plus 96, so one longest-prefix match serves both
 * families.  Rules are few (built-ins plus at most TB_EGRESS_RULES_MAX per
 * operator list): a linear scan per connection costs nothing next to a
 * TCP handshake.
 */
#include "net/tb_egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum origin {
  BUILTIN = 0,
  OPERATOR = 1
};

struct net_rule {
  unsigned char addr[16];
  unsigned prefix; /* 0..128 */
  bool deny;
  enum origin origin;
  char text[80]; /* "169.254.0.0/16 (built-in: link-local)" etc. */
};

struct host_rule {
  char *name;  /* lower case, no trailing dot */
  bool suffix; /* matches names under it (".x" / "*.x"), not x itself */
  bool deny;
  enum origin origin;
};

struct tb_egress {
  struct net_rule *nets;
  size_t n_nets, cap_nets;
  struct host_rule *hosts;
  size_t n_hosts, cap_hosts;
};

/* Built-in refusals.  Metadata addresses: AWS IMDS 169.254.169.254 and
 * fd00:ec2::254 (docs.aws.amazon.com, "Access instance metadata"), GCP
 * metadata.google.internal / 169.254.169.254 (cloud.google.com, "About VM
 * metadata"), Azure IMDS 169.254.169.254, Alibaba Cloud 100.100.100.200
 * (alibabacloud.com, "Instance metadata").  They are listed on their own
 * although link-local covers the IPv4 one, so the refusal names them. */
static const struct {
  const char *net, *label;
} builtin_nets[] = {
  { "0.0.0.0/8", "this host" },
  { "127.0.0.0/8", "loopback" },
  { "::1/128", "loopback" },
  { "::/128", "unspecified" },
  { "169.254.0.0/16", "link-local" },
  { "fe80::/10", "link-local" },
  { "169.254.169.254/32", "cloud metadata" },
  { "fd00:ec2::254/128", "cloud metadata" },
  { "100.100.100.200/32", "cloud metadata" },
  { "224.0.0.0/4", "multicast" },
  { "ff00::/8", "multicast" },
  { "240.0.0.0/4", "reserved" },
};

static const char *const builtin_hosts[] = {
  "metadata.google.internal",   "metadata.goog", "metadata", "instance-data",
  "instance-data.ec2.internal",
};

static struct tb_egress *installed;

void
tb_egress_install(struct tb_egress *p)
{
  tb_egress_free(installed);
  installed = p;
}

bool
tb_egress_install_cfg(const struct tb_cfg *cfg, char **err)
{
  struct tb_egress *p = tb_egress_new(tb_cfg_get(cfg, "TOKBENCH_EGRESS_ALLOW"),
                                      tb_cfg_get(cfg, "TOKBENCH_EGRESS_DENY"), err);
  if (p == NULL)
    return false;
  tb_egress_install(p);
  return true;
}

const struct tb_egress *
tb_egress_current(void)
{
  return installed;
}

void
tb_egress_free(struct tb_egress *p)
{
  if (p == NULL)
    return;
  for (size_t i = 0; i < p->n_hosts; i++)
    free(p->hosts[i].name);
  free(p->hosts);
  free(p->nets);
  free(p);
}

/* An IPv4 address as ::ffff:a.b.c.d. */
static void
map_v4(const struct in_addr *a, unsigned char out[16])
{
  memset(out, 0, 10);
  out[10] = out[11] = 0xff;
  memcpy(out + 12, &a->s_addr, 4);
}

/* IPv4 carried in IPv6 (compatible ::a.b.c.d other than :: and ::1, NAT64
 * 64:ff9b::/96) rewritten as mapped, so IPv4 rules judge it. */
static void
normalize_v6(unsigned char a[16])
{
  static const unsigned char nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
  static const unsigned char zero[12] = { 0 };
  bool compat =
    memcmp(a, zero, 12) == 0 && (a[12] | a[13] | a[14]) != 0; /* not :: or ::1 (or ::0.0.0.x) */
  if (compat || memcmp(a, nat64, 12) == 0) {
    memset(a, 0, 10);
    a[10] = a[11] = 0xff;
  }
}

/* Parses "addr" or "addr/len" into a rule's address and prefix. */
static bool
parse_net(const char *s, unsigned char addr[16], unsigned *prefix)
{
  char buf[64];
  size_t n = strlen(s);
  if (n == 0 || n >= sizeof buf)
    return false;
  memcpy(buf, s, n + 1);
  char *slash = strchr(buf, '/');
  long len = -1;
  if (slash != NULL) {
    *slash = '\0';
    char *end;
    if (slash[1] == '\0' || !isdigit((unsigned char)slash[1]))
      return false;
    len = strtol(slash + 1, &end, 10);
    if (*end != '\0')
      return false;
  }
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, buf, &a4) == 1) {
    if (len > 32)
      return false;
    map_v4(&a4, addr);
    *prefix = (unsigned)(len < 0 ? 32 : len) + 96;
  } else if (inet_pton(AF_INET6, buf, &a6) == 1) {
    if (len > 128)
      return false;
    memcpy(addr, a6.s6_addr, 16);
    *prefix = (unsigned)(len < 0 ? 128 : len);
  } else {
    return false;
  }
  /* clear the host bits, so 10.1.2.3/8 means 10.0.0.0/8 */
  for (unsigned bit = *prefix; bit < 128; bit++)
    addr[bit / 8] &= (unsigned char)~(0x80u >> (bit % 8));
  return true;
}

static bool
prefix_match(const unsigned char a[16], const unsigned char net[16], unsigned prefix)
{
  unsigned full = prefix / 8, rest = prefix % 8;
  if (memcmp(a, net, full) != 0)
    return false;
  if (rest == 0)
    return true;
  unsigned char mask = (unsigned char)(0xff00u >> rest);
  return (a[full] & mask) == (net[full] & mask);
}

static void
add_net(struct tb_egress *p, const unsigned char addr[16], unsigned prefix, bool deny,
        enum origin o, const char *text)
{
  if (p->n_nets == p->cap_nets) {
    p->cap_nets = p->cap_nets ? p->cap_nets * 2 : 32;
    p->nets = tb_xrealloc(p->nets, p->cap_nets * sizeof *p->nets);
  }
  struct net_rule *r = &p->nets[p->n_nets++];
  memcpy(r->addr, addr, 16);
  r->prefix = prefix;
  r->deny = deny;
  r->origin = o;
  snprintf(r->text, sizeof r->text, "%s", text);
}

static void
add_host(struct tb_egress *p, const char *name, size_t len, bool suffix, bool deny, enum origin o)
{
  if (p->n_hosts == p->cap_hosts) {
    p->cap_hosts = p->cap_hosts ? p->cap_hosts * 2 : 16;
    p->hosts = tb_xrealloc(p->hosts, p->cap_hosts * sizeof *p->hosts);
  }
  struct host_rule *r = &p->hosts[p->n_hosts++];
  r->name = tb_xstrndup(name, len);
  for (char *c = r->name; *c; c++)
    *c = (char)tolower((unsigned char)*c);
  r->suffix = suffix;
  r->deny = deny;
  r->origin = o;
}

static bool
host_name_ok(const char *s, size_t n)
{
  if (n == 0 || n > TB_EGRESS_HOST_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(isalnum(c) || c == '-' || c == '.' || c == '_'))
      return false;
  }
  return true;
}

/* One entry of an operator's list. */
static bool
add_entry(struct tb_egress *p, const char *e, size_t n, bool deny, const char *list, char **err)
{
  char text[80];
  const char *kind = deny ? "TOKBENCH_EGRESS_DENY" : "TOKBENCH_EGRESS_ALLOW";
  if (n == 8 && strncasecmp(e, "loopback", 8) == 0) {
    return add_entry(p, "127.0.0.0/8", 11, deny, list, err) &&
           add_entry(p, "::1/128", 7, deny, list, err);
  }
  char buf[TB_EGRESS_HOST_MAX + 3];
  if (n >= sizeof buf) {
    *err = tb_xasprintf("%s: an entry is longer than %d characters", list, TB_EGRESS_HOST_MAX);
    return false;
  }
  memcpy(buf, e, n);
  buf[n] = '\0';
  unsigned char addr[16];
  unsigned prefix;
  if (parse_net(buf, addr, &prefix)) {
    snprintf(text, sizeof text, "%.40s (%s)", buf, kind);
    add_net(p, addr, prefix, deny, OPERATOR, text);
    return true;
  }
  const char *name = buf;
  bool suffix = false;
  if (name[0] == '*' && name[1] == '.') {
    name += 2;
    suffix = true;
  } else if (name[0] == '.') {
    name += 1;
    suffix = true;
  }
  size_t nl = strlen(name);
  while (nl > 0 && name[nl - 1] == '.')
    nl--;
  if (strchr(buf, '/') != NULL || strchr(buf, ':') != NULL || !host_name_ok(name, nl)) {
    *err = tb_xasprintf("%s: \"%.80s\" is neither a network (CIDR) nor a host name", list, buf);
    return false;
  }
  add_host(p, name, nl, suffix, deny, OPERATOR);
  return true;
}

static bool
add_list(struct tb_egress *p, const char *v, bool deny, char **err)
{
  const char *list = deny ? "TOKBENCH_EGRESS_DENY" : "TOKBENCH_EGRESS_ALLOW";
  size_t count = 0;
  const char *s = v, *a;
  size_t n;
  while (tb_list_next(&s, &a, &n)) {
    if (n == 0)
      continue;
    if (++count > TB_EGRESS_RULES_MAX) {
      *err = tb_xasprintf("%s: more than %d entries", list, TB_EGRESS_RULES_MAX);
      return false;
    }
    if (!add_entry(p, a, n, deny, list, err))
      return false;
  }
  return true;
}

struct tb_egress *
tb_egress_new(const char *allow, const char *deny, char **err)
{
  struct tb_egress *p = tb_xcalloc(1, sizeof *p);
  for (size_t i = 0; i < TB_ARRAY_LEN(builtin_nets); i++) {
    unsigned char addr[16];
    unsigned prefix;
    char text[80];
    if (!parse_net(builtin_nets[i].net, addr, &prefix))
      abort(); /* a typo in the table above */
    snprintf(text, sizeof text, "%s (built-in: %s)", builtin_nets[i].net, builtin_nets[i].label);
    add_net(p, addr, prefix, true, BUILTIN, text);
  }
  for (size_t i = 0; i < TB_ARRAY_LEN(builtin_hosts); i++)
    add_host(p, builtin_hosts[i], strlen(builtin_hosts[i]), false, true, BUILTIN);
  if (!add_list(p, allow, false, err) || !add_list(p, deny, true, err)) {
    tb_egress_free(p);
    return NULL;
  }
  return p;
}

/* The deciding rule for a (normalized) address, or NULL: allowed. */
static const struct net_rule *
decide(const struct tb_egress *p, const unsigned char a[16])
{
  const struct net_rule *best = NULL;
  for (size_t i = 0; i < p->n_nets; i++) {
    const struct net_rule *r = &p->nets[i];
    if (!prefix_match(a, r->addr, r->prefix))
      continue;
    if (best == NULL || r->prefix > best->prefix ||
        (r->prefix == best->prefix &&
         (r->origin > best->origin || (r->origin == best->origin && r->deny && !best->deny))))
      best = r;
  }
  return best;
}

static bool
judge_addr(const struct tb_egress *p, unsigned char a[16], char *why, size_t why_len)
{
  normalize_v6(a);
  const struct net_rule *r = decide(p, a);
  if (r == NULL || !r->deny)
    return true;
  char text[INET6_ADDRSTRLEN];
  static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
  if (memcmp(a, mapped, 12) == 0)
    inet_ntop(AF_INET, a + 12, text, sizeof text);
  else
    inet_ntop(AF_INET6, a, text, sizeof text);
  snprintf(why, why_len, "egress refused: %s by rule %s", text, r->text);
  return false;
}

bool
tb_egress_addr_ok(const struct tb_egress *p, const struct sockaddr *sa, char *why, size_t why_len)
{
  if (p == NULL)
    return true;
  unsigned char a[16];
  if (sa->sa_family == AF_INET) {
    map_v4(&((const struct sockaddr_in *)(const void *)sa)->sin_addr, a);
  } else if (sa->sa_family == AF_INET6) {
    memcpy(a, ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr, 16);
  } else {
    snprintf(why, why_len, "egress refused: address family %d", sa->sa_family);
    return false;
  }
  return judge_addr(p, a, why, why_len);
}

static bool
host_rule_match(const struct host_rule *r, const char *h, size_t hl)
{
  size_t nl = strlen(r->name);
  if (!r->suffix)
    return hl == nl && memcmp(h, r->name, nl) == 0;
  return hl > nl + 1 && h[hl - nl - 1] == '.' && memcmp(h + hl - nl, r->name, nl) == 0;
}

enum tb_egress_host
tb_egress_host_check(const struct tb_egress *p, const char *host, char *why, size_t why_len)
{
  if (p == NULL)
    return TB_EGRESS_HOST_DECIDE_BY_ADDRESS;
  char h[TB_EGRESS_HOST_MAX + 2];
  size_t hl = strlen(host);
  while (hl > 0 && host[hl - 1] == '.')
    hl--;
  if (hl >= sizeof h) {
    snprintf(why, why_len, "egress refused: host name longer than %d", TB_EGRESS_HOST_MAX);
    return TB_EGRESS_HOST_REFUSED;
  }
  for (size_t i = 0; i < hl; i++)
    h[i] = (char)tolower((unsigned char)host[i]);
  h[hl] = '\0';
  const struct host_rule *allow = NULL, *builtin = NULL;
  for (size_t i = 0; i < p->n_hosts; i++) {
    const struct host_rule *r = &p->hosts[i];
    if (!host_rule_match(r, h, hl))
      continue;
    if (r->origin == OPERATOR && r->deny) {
      snprintf(why, why_len, "egress refused: host %s by rule %s%s (TOKBENCH_EGRESS_DENY)", h,
               r->suffix ? "*." : "", r->name);
      return TB_EGRESS_HOST_REFUSED;
    }
    if (r->origin == OPERATOR)
      allow = r;
    else
      builtin = r;
  }
  if (allow != NULL)
    return TB_EGRESS_HOST_ALLOWED;
  if (builtin != NULL) {
    snprintf(why, why_len, "egress refused: host %s by rule %s (built-in: cloud metadata)", h,
             builtin->name);
    return TB_EGRESS_HOST_REFUSED;
  }
  return TB_EGRESS_HOST_DECIDE_BY_ADDRESS;
}

/* The host of url (new string, curl's spelling: IPv6 in brackets), or NULL. */
static char *
url_part(const char *url, CURLUPart part)
{
  CURLU *u = curl_url();
  char *v = NULL, *out = NULL;
  if (u == NULL)
    return NULL;
  if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get(u, part, &v, part == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0) == CURLUE_OK)
    out = tb_xstrdup(v);
  curl_free(v);
  curl_url_cleanup(u);
  return out;
}

/* Judges host as an address literal: 1 allowed, 0 refused, -1 not a literal. */
static int
literal_check(const struct tb_egress *p, const char *host, char *why, size_t why_len)
{
  unsigned char a[16];
  size_t hl = strlen(host);
  if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
    char buf[INET6_ADDRSTRLEN + 64];
    size_t n = strcspn(host + 1, "%]"); /* drop a zone id */
    if (n >= sizeof buf)
      return 0;
    memcpy(buf, host + 1, n);
    buf[n] = '\0';
    struct in6_addr a6;
    if (inet_pton(AF_INET6, buf, &a6) != 1)
      return 0;
    memcpy(a, a6.s6_addr, 16);
    return judge_addr(p, a, why, why_len) ? 1 : 0;
  }
  struct in_addr a4;
  if (inet_aton(host, &a4) != 0) { /* also 2130706433, 0x7f.1, 127.1 */
    map_v4(&a4, a);
    return judge_addr(p, a, why, why_len) ? 1 : 0;
  }
  return -1;
}

/* Writes host in the one spelling the rules judge into out (cap bytes):
 * trailing dots dropped ("169.254.169.254." is that address, not a name),
 * lower case.  A name that is not ASCII is refused (false, with why):
 * libcurl turns it into another name with IDNA (full-width letters and
 * digits become ASCII ones, "。" a dot) after any check of ours could see
 * it, so such a name is taken only in its ASCII (xn--) form. */
static bool
host_norm(const char *host, char *out, size_t cap, char *why, size_t why_len)
{
  size_t hl = strlen(host);
  while (hl > 0 && host[hl - 1] == '.')
    hl--;
  if (hl >= cap) {
    snprintf(why, why_len, "egress refused: host name longer than %d", TB_EGRESS_HOST_MAX);
    return false;
  }
  for (size_t i = 0; i < hl; i++) {
    unsigned char c = (unsigned char)host[i];
    if (c >= 0x80 || c < 0x21) {
      snprintf(why, why_len,
               "egress refused: host name not in ASCII (IDNA: give its xn-- "
               "form)");
      return false;
    }
    out[i] = (char)tolower(c);
  }
  out[hl] = '\0';
  return true;
}

bool
tb_egress_url_ok(const struct tb_egress *p, const char *url, char *why, size_t why_len)
{
  if (p == NULL)
    return true;
  char *raw = url_part(url, CURLUPART_HOST), host[TB_EGRESS_HOST_MAX + 2];
  bool ok = true;
  if (raw == NULL)
    goto out;
  if (!host_norm(raw, host, sizeof host, why, why_len)) {
    ok = false;
    goto out;
  }
  int lit = literal_check(p, host, why, why_len);
  if (lit >= 0) {
    ok = lit == 1;
    goto out;
  }
  enum tb_egress_host hc = tb_egress_host_check(p, host, why, why_len);
  if (hc != TB_EGRESS_HOST_DECIDE_BY_ADDRESS) {
    ok = hc == TB_EGRESS_HOST_ALLOWED;
    goto out;
  }
  size_t hl = strlen(host);
  if ((hl == 9 && strcmp(host, "localhost") == 0) ||
      (hl > 10 && strcmp(host + hl - 10, ".localhost") == 0)) {
    /* RFC 6761: localhost names are loopback, whatever a resolver says */
    ok = literal_check(p, "127.0.0.1", why, why_len) == 1;
  }
out:
  free(raw);
  return ok;
}

bool
tb_egress_url_reachable(const struct tb_egress *p, const char *url, char *why, size_t why_len)
{
  if (p == NULL || !tb_egress_url_ok(p, url, why, why_len))
    return p == NULL;
  char *raw = url_part(url, CURLUPART_HOST), host[TB_EGRESS_HOST_MAX + 2], w[TB_EGRESS_WHY_MAX];
  bool ok = true;
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
  /* a literal or a name a rule decides was judged above; an unknown name
   * is the run's to report */
  if (raw == NULL || !host_norm(raw, host, sizeof host, w, sizeof w) ||
      literal_check(p, host, w, sizeof w) >= 0 ||
      tb_egress_host_check(p, host, w, sizeof w) != TB_EGRESS_HOST_DECIDE_BY_ADDRESS ||
      getaddrinfo(host, NULL, &hints, &res) != 0)
    goto out;
  ok = false;
  for (const struct addrinfo *a = res; a != NULL && !ok; a = a->ai_next)
    ok = tb_egress_addr_ok(p, a->ai_addr, w, sizeof w);
  if (!ok)
    snprintf(why, why_len, "%s (host %s)", w, host);
  freeaddrinfo(res);
out:
  free(raw);
  return ok;
}

char *
tb_egress_origin(const char *url)
{
  char *scheme = url_part(url, CURLUPART_SCHEME);
  char *host = url_part(url, CURLUPART_HOST);
  char *port = url_part(url, CURLUPART_PORT);
  char *out = NULL;
  if (scheme != NULL && host != NULL && port != NULL) {
    for (char *c = scheme; *c; c++)
      *c = (char)tolower((unsigned char)*c);
    for (char *c = host; *c; c++)
      *c = (char)tolower((unsigned char)*c);
    size_t hl = strlen(host);
    while (hl > 0 && host[hl - 1] == '.')
      host[--hl] = '\0';
    out = tb_xasprintf("%s://%s:%s", scheme, host, port);
  }
  free(scheme);
  free(host);
  free(port);
  return out;
}

/* CURLOPT_OPENSOCKETFUNCTION: libcurl's socket(2), after the check. */
static curl_socket_t
open_cb(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
  struct tb_egress_guard *g = clientp;
  if (purpose != CURLSOCKTYPE_IPCXN)
    return CURL_SOCKET_BAD;
  if (!g->host_allowed) {
    char why[TB_EGRESS_WHY_MAX];
    if (!tb_egress_addr_ok(g->p, &addr->addr, why, sizeof why)) {
      g->refused = true;
      memcpy(g->why, why, sizeof g->why);
      return CURL_SOCKET_BAD;
    }
  }
  return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

bool
tb_egress_guard_easy(struct tb_egress_guard *g, const struct tb_egress *p, CURL *e, const char *url)
{
  memset(g, 0, sizeof *g);
  g->p = p;
  if (p == NULL)
    return true;
  char *raw = url_part(url, CURLUPART_HOST), host[TB_EGRESS_HOST_MAX + 2];
  if (raw != NULL && !host_norm(raw, host, sizeof host, g->why, sizeof g->why)) {
    g->refused = true;
    free(raw);
    return false;
  }
  if (raw != NULL && literal_check(p, host, g->why, sizeof g->why) == -1) {
    enum tb_egress_host hc = tb_egress_host_check(p, host, g->why, sizeof g->why);
    if (hc == TB_EGRESS_HOST_REFUSED) {
      g->refused = true;
      free(raw);
      return false;
    }
    g->host_allowed = hc == TB_EGRESS_HOST_ALLOWED;
  }
  g->why[0] = '\0';
  free(raw);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_cb);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, g);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  return true;
}
