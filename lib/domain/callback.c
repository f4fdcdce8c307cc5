/*
 * callback.c - where the server may push to node agents (callback.h).
 */
#include "domain/callback.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ENTRY_MAX 256

bool
callback_parse_addr(const char *s, struct callback_addr *out)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	unsigned char buf[16];

	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, s, buf) == 1) {
		out->family = 4;
		memcpy(out->a, buf, 4);
		return true;
	}
	if (inet_pton(AF_INET6, s, buf) != 1)
		return false;
	if (memcmp(buf, mapped, sizeof(mapped)) == 0) {
		out->family = 4;
		memcpy(out->a, buf + 12, 4);
		return true;
	}
	out->family = 6;
	memcpy(out->a, buf, 16);
	return true;
}

static bool
prefix_match(const unsigned char *a, const unsigned char *net, int bits)
{
	int full = bits / 8, rest = bits % 8;

	if (memcmp(a, net, (size_t)full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[full] ^ net[full]) & (unsigned char)(0xff << (8 - rest))) == 0;
}

/* One entry "addr" or "addr/bits": *net, *bits (-1 when not an address). */
static bool
parse_entry(const char *e, struct callback_addr *net, int *bits)
{
	char buf[ENTRY_MAX];
	char *slash, *end = NULL;
	long b;

	snprintf(buf, sizeof(buf), "%s", e);
	slash = strchr(buf, '/');
	if (slash != NULL)
		*slash = '\0';
	if (!callback_parse_addr(buf, net))
		return false;
	*bits = net->family == 4 ? 32 : 128;
	if (slash == NULL)
		return true;
	b = strtol(slash + 1, &end, 10);
	if (slash[1] == '\0' || *end != '\0' || b < 0 || b > *bits)
		return false;
	*bits = (int)b;
	return true;
}

static bool
host_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '.')
			return false;
	return true;
}

/* Call fn for each trimmed entry of list; stop and return false when it does. */
static bool
each_entry(const char *list, bool (*fn)(const char *e, void *arg), void *arg)
{
	const char *p = list;

	while (p != NULL && *p != '\0') {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		char e[ENTRY_MAX];

		while (n > 0 && isspace((unsigned char)*p))
			p++, n--;
		while (n > 0 && isspace((unsigned char)p[n - 1]))
			n--;
		if (n >= sizeof(e))
			return fn(NULL, arg);
		memcpy(e, p, n);
		e[n] = '\0';
		if (!fn(e, arg))
			return false;
		p = comma ? comma + 1 : NULL;
	}
	return true;
}

static bool
entry_valid(const char *e, void *arg)
{
	struct callback_addr net;
	int bits;

	(void)arg;
	return e != NULL &&
	    (parse_entry(e, &net, &bits) || (!strchr(e, '/') && host_name_valid(e)));
}

bool
callback_allow_valid(const char *list)
{
	return list != NULL && *list != '\0' && each_entry(list, entry_valid, NULL);
}

int
callback_url_host(const char *url, char *host, size_t len)
{
	const char *p, *end;
	size_t n;

	if (strncmp(url, "http://", 7) == 0)
		p = url + 7;
	else if (strncmp(url, "https://", 8) == 0)
		p = url + 8;
	else
		return -1;
	end = p + strcspn(p, "/?#");
	if (memchr(p, '@', (size_t)(end - p)) != NULL)
		return -1;
	if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(end - p));

		if (close == NULL)
			return -1;
		p++;
		end = close;
	} else {
		const char *colon = memchr(p, ':', (size_t)(end - p));

		if (colon != NULL)
			end = colon;
	}
	n = (size_t)(end - p);
	if (n == 0 || n >= len)
		return -1;
	for (size_t i = 0; i < n; i++)
		host[i] = (char)tolower((unsigned char)p[i]);
	host[n] = '\0';
	return 0;
}

struct name_match {
	const char *host;
	bool found;
};

static bool
name_entry(const char *e, void *arg)
{
	struct name_match *m = arg;

	if (e != NULL && strcasecmp(e, m->host) == 0)
		m->found = true;
	return !m->found;
}

bool
callback_host_listed(const char *allow, const char *host)
{
	struct name_match m = { .host = host };

	if (allow != NULL)
		(void)each_entry(allow, name_entry, &m);
	return m.found;
}

/*
 * Link-local, cloud metadata and unspecified addresses: the widest entry
 * that may list them (bits), or -1 when addr is none of them.
 */
static int
restricted_bits(const struct callback_addr *addr)
{
	static const struct {
		int family;
		unsigned char net[16];
		int bits;
	} blocks[] = {
		{ 4, { 169, 254 }, 16 },           /* link-local, IMDS */
		{ 4, { 100, 100, 100, 200 }, 32 }, /* Alibaba metadata */
		{ 4, { 168, 63, 129, 16 }, 32 },   /* Azure wire server */
		{ 4, { 0 }, 8 },                   /* "this network" */
		{ 6, { 0xfe, 0x80 }, 10 },         /* link-local */
		{ 6, { 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54 },
		    128 },         /* AWS IMDS */
		{ 6, { 0 }, 128 }, /* :: */
	};

	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
		if (blocks[i].family == addr->family &&
		    prefix_match(addr->a, blocks[i].net, blocks[i].bits))
			return blocks[i].bits;
	return -1;
}

struct addr_match {
	const struct callback_addr *addr;
	int min_bits; /* an entry broader than this does not count */
	bool found;
};

static bool
addr_entry(const char *e, void *arg)
{
	struct addr_match *m = arg;
	struct callback_addr net;
	int bits;

	if (e != NULL && parse_entry(e, &net, &bits) && net.family == m->addr->family &&
	    bits >= m->min_bits && prefix_match(m->addr->a, net.a, bits))
		m->found = true;
	return !m->found;
}

enum callback_verdict
callback_check_addr(const char *allow, const struct callback_addr *addr,
    const struct callback_addr *peer)
{
	int r = restricted_bits(addr);
	struct addr_match m = { .addr = addr, .min_bits = r > 0 ? r : 0 };

	if (allow != NULL)
		(void)each_entry(allow, addr_entry, &m);
	if (m.found)
		return CALLBACK_ALLOWED;
	if (r >= 0)
		return CALLBACK_RESTRICTED;
	if (peer != NULL && peer->family == addr->family &&
	    memcmp(peer->a, addr->a, addr->family == 4 ? 4 : 16) == 0)
		return CALLBACK_ALLOWED;
	return CALLBACK_NOT_LISTED;
}
