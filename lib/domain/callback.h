/*
 * callback.h - where the server may push to node agents
 * (GPUPOOL_AGENT_CALLBACK_ALLOW, docs/operations.md "Agent callbacks"). A
 * callback URL's host is accepted when it is the enrolling peer's own
 * address or is listed (an address, a network address/bits, or a host
 * name); link-local and cloud metadata addresses only when an entry no
 * broader than their block lists them. Pure: name resolution is the
 * caller's.
 */
#ifndef GP_DOMAIN_CALLBACK_H
#define GP_DOMAIN_CALLBACK_H

#include <stdbool.h>
#include <stddef.h>

struct callback_addr {
	int family;          /* 4 or 6; an IPv4-mapped IPv6 address is 4 */
	unsigned char a[16]; /* network order; IPv4 in the first 4 bytes */
};

enum callback_verdict {
	CALLBACK_ALLOWED,
	CALLBACK_NOT_LISTED, /* not the peer's address and not listed */
	CALLBACK_RESTRICTED, /* link-local, metadata or unspecified, not listed explicitly */
};

/* True when list is a comma-separated list of addresses, networks and host names. */
bool callback_allow_valid(const char *list);

/* Parse a literal IPv4 or IPv6 address (no brackets). */
bool callback_parse_addr(const char *s, struct callback_addr *out);

/*
 * The host of an http(s) URL into host (without the brackets of an IPv6
 * literal, lower case); -1 when there is none or the URL carries user
 * information ("user@host").
 */
int callback_url_host(const char *url, char *host, size_t len);

/* True when host (a name) is listed by name in allow (NULL: nothing listed). */
bool callback_host_listed(const char *allow, const char *host);

/* The verdict for one address a callback host stands for; peer may be NULL. */
enum callback_verdict callback_check_addr(const char *allow, const struct callback_addr *addr,
    const struct callback_addr *peer);

#endif
