/*
 * tb_egress: the operator's egress policy, i.e. which addresses and host
 * names the service may connect to on a tenant's behalf (endpoints, probes,
 * a job's discovery, streams and metrics, callbacks).
 *
 * A policy is a list of rules, each a network (CIDR, IPv4 or IPv6) or a
 * host name, allowing or refusing.  Built-in rules refuse what a tenant must
 * never reach by default (docs/deploy.md, "Egress policy"):
 *   - cloud metadata: 169.254.169.254, fd00:ec2::254, 100.100.100.200 and the
 *     names metadata.google.internal, metadata.goog, metadata,
 *     instance-data, instance-data.ec2.internal;
 *   - link-local 169.254.0.0/16 and fe80::/10;
 *   - loopback 127.0.0.0/8, ::1, and "this host" 0.0.0.0/8, ::;
 *   - multicast, broadcast and reserved ranges.
 * Everything else (private ranges included: GPU endpoints live there) is
 * allowed.  The operator's rules come from TOKBENCH_EGRESS_ALLOW and
 * TOKBENCH_EGRESS_DENY: comma lists of networks ("10.0.0.0/8", "::1"), host
 * names ("gpu.example.com", ".example.com" or "*.example.com" for every name
 * under it) and the word "loopback" (127.0.0.0/8 and ::1).
 *
 * Addresses: the most specific network that matches decides; on a tie an
 * operator's rule beats a built-in one and a deny beats an allow.  So
 * ALLOW=0.0.0.0/0 does not open 169.254.0.0/16, while
 * ALLOW=169.254.169.254 does.  IPv4 inside IPv6 (mapped ::ffff:a.b.c.d,
 * compatible ::a.b.c.d, NAT64 64:ff9b::a.b.c.d) is judged as the IPv4
 * address.  A host is judged in one spelling: trailing dots dropped,
 * lower-cased; then an address literal in any form the resolver reads as
 * one (169.254.169.254., 2852039166, 0xa9.0xfe.0xa9.0xfe, 0251.0376.43518,
 * 169.254.43518) is judged as that address, and a name that is not ASCII
 * is refused (libcurl maps it with IDNA to another name, full-width
 * "ｍｅｔａｄａｔａ" to "metadata", past our checks: give the xn-- form).
 * Host names: an operator's
 * deny refuses the name whatever it resolves to; else an operator's allow
 * admits it whatever it resolves to (the operator trusts that name's DNS);
 * else a built-in deny refuses it; else its addresses decide.
 *
 * Enforcement is on the address a connection actually uses: a guard hooks
 * libcurl's CURLOPT_OPENSOCKETFUNCTION, which receives each resolved
 * address before the socket is made (libcurl's documentation of that
 * option), so a name resolved again later (DNS rebinding) is checked again.
 * Callers never follow redirects.  With a proxy set in the environment the
 * connection goes to the proxy, whose address is what is checked (the proxy
 * must carry its own policy).
 *
 * One process-wide policy, installed by a daemon at start before threads
 * (tb_egress_install); without one (the command-line tool on the user's own
 * machine) nothing is checked.
 */
#ifndef TB_EGRESS_H
#define TB_EGRESS_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "base/tb_cfg.h"
#include "base/tb_util.h"

/* The configuration keys of a daemon that connects on tenants' behalf (put
 * in its tb_cfg_key table, so --help lists them). */
#define TB_EGRESS_CFG_KEYS                                                                 \
  { "TOKBENCH_EGRESS_ALLOW", "",                                                           \
    "egress allowed beyond the defaults: networks (CIDR), host names (.domain for names "  \
    "under it) or loopback, comma-separated; a rule as specific as a built-in refusal "    \
    "(metadata, link-local, loopback) lifts it",                                           \
    false },                                                                               \
  {                                                                                        \
    "TOKBENCH_EGRESS_DENY", "",                                                            \
      "egress refused besides the built-in refusals: networks (CIDR) or host names", false \
  }

/* Caps: rules per list, one rule's text, a refusal message. */
#define TB_EGRESS_RULES_MAX 256
#define TB_EGRESS_HOST_MAX 253
#define TB_EGRESS_WHY_MAX 200
#define TB_EGRESS_RULE_SEP " by rule "

struct tb_egress;

/* A new policy: the built-in rules plus allow and deny (comma lists, may be
 * NULL or empty).  NULL with *err (caller frees) naming a bad entry. */
struct tb_egress *tb_egress_new(const char *allow, const char *deny, char **err) TB_MUST_CHECK;
void tb_egress_free(struct tb_egress *p);

/* The process-wide policy: install takes ownership (NULL: none); call before
 * threads start.  current: borrowed, NULL when none is installed. */
void tb_egress_install(struct tb_egress *p);
/* Builds the policy from TOKBENCH_EGRESS_ALLOW/_DENY of cfg and installs it.
 * False with *err (caller frees) on a bad list. */
bool tb_egress_install_cfg(const struct tb_cfg *cfg, char **err) TB_MUST_CHECK;
const struct tb_egress *tb_egress_current(void);

/* Judges one address (AF_INET or AF_INET6).  True when allowed; else false
 * with why (at least TB_EGRESS_WHY_MAX bytes): "egress refused: <address or
 * host> by rule <rule>" (TB_EGRESS_RULE_SEP splits off the rule).  p NULL:
 * allowed. */
bool tb_egress_addr_ok(const struct tb_egress *p, const struct sockaddr *sa, char *why,
                       size_t why_len) TB_MUST_CHECK;

enum tb_egress_host {
  TB_EGRESS_HOST_DECIDE_BY_ADDRESS = 0, /* no rule names it */
  TB_EGRESS_HOST_ALLOWED,               /* an operator's allow names it */
  TB_EGRESS_HOST_REFUSED,               /* a deny names it: why says which */
};
/* Judges a host name (not an address literal). */
enum tb_egress_host tb_egress_host_check(const struct tb_egress *p, const char *host, char *why,
                                         size_t why_len);

/* Judges a URL without resolving it (for create and patch): the host in
 * its one spelling (above), the host name rules, an address literal (any
 * form getaddrinfo reads as one, a trailing dot or not), and "localhost"
 * names as 127.0.0.1; a name not in ASCII is refused.  A name that resolves to a refused
 * address passes here and is refused when connecting.  True when not
 * refused; false with why.  A URL that does not parse is not judged (true):
 * the caller validates URLs. */
bool tb_egress_url_ok(const struct tb_egress *p, const char *url, char *why,
                      size_t why_len) TB_MUST_CHECK;

/* As tb_egress_url_ok, and a name no rule decides is resolved: false with
 * why when every address it resolves to is refused.  For a worker judging
 * an endpoint before it runs a job on it (a name that does not resolve is
 * not judged: the run reports it).  Blocks on the resolver. */
bool tb_egress_url_reachable(const struct tb_egress *p, const char *url, char *why,
                             size_t why_len) TB_MUST_CHECK;

/* The origin of a URL, "scheme://host:port" with the scheme and host
 * lower-cased and the default port written out, into a new string; NULL
 * when the URL does not parse.  Caller frees. */
char *tb_egress_origin(const char *url);

/*
 * A guard on one libcurl transfer (or every transfer of one URL host: the
 * engine shares one among a run's handles).  tb_egress_guard_easy judges
 * url's host name (false with g->why when refused: do not perform) and
 * installs the address check on e.  g must outlive every transfer of e.
 * After a failed transfer, g->refused says the policy refused every address
 * and g->why why.  p NULL: nothing installed, true.
 */
struct tb_egress_guard {
  const struct tb_egress *p;
  bool host_allowed;
  bool refused;
  char why[TB_EGRESS_WHY_MAX];
};
bool tb_egress_guard_easy(struct tb_egress_guard *g, const struct tb_egress *p, CURL *e,
                          const char *url) TB_MUST_CHECK;

#endif
