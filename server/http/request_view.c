/*
 * request_view.c - what a handler sees of a libmicrohttpd request: headers
 * (a header sent on several lines joined into one list), the query with
 * the percent-decoding that keeps "%2F", "%00" and "%25" apart, the
 * request id, and the client's address behind trusted proxies.
 */
#include "http_internal.h"

#include "core/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

static const char *
lookup_header(const struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->transport, MHD_HEADER_KIND, name);
}

struct header_join {
	struct arena *arena;
	const char *name;
	char *out; /* NULL until a line is found */
};

static enum MHD_Result
header_join_line(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct header_join *j = cls;

	(void)kind;
	if (key == NULL || value == NULL || strcasecmp(key, j->name) != 0)
		return MHD_YES;
	j->out = j->out == NULL ? arena_strdup(j->arena, value)
				: arena_printf(j->arena, "%s, %s", j->out, value);
	return MHD_YES;
}

/* A header sent on several lines is one comma-separated list (RFC 9110 5.3). */
static const char *
lookup_header_list(const struct request *req, const char *name)
{
	struct header_join j = { req->arena, name, NULL };

	MHD_get_connection_values(req->transport, MHD_HEADER_KIND, header_join_line, &j);
	return j.out;
}

struct query_names {
	struct arena *arena;
	const char **names;
	int n, cap;
};

static enum MHD_Result
query_name(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct query_names *q = cls;

	(void)kind;
	(void)value;
	if (q->n == q->cap) {
		int cap = q->cap ? q->cap * 2 : 8;
		const char **names = arena_alloc(q->arena, sizeof(*names) * (size_t)cap);

		if (q->n > 0)
			memcpy(names, q->names, sizeof(*names) * (size_t)q->n);
		q->names = names;
		q->cap = cap;
	}
	q->names[q->n++] = key != NULL ? key : "";
	return MHD_YES;
}

static const char *const *
lookup_query_names(const struct request *req, int *n)
{
	struct query_names q = { req->arena, NULL, 0, 0 };

	MHD_get_connection_values(req->transport, MHD_GET_ARGUMENT_KIND, query_name, &q);
	*n = q.n;
	return q.names;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Percent-decoding done by libmicrohttpd for the path and the query
 * arguments, except "%2F" ('/'), "%00" (NUL) and "%25" ('%'), which stay
 * encoded: a decoded '/' inside a path segment would route
 * "/v1/projects/a%2Fmembers" to another endpoint than a proxy in front
 * of us sees, and a NUL would cut a name short. Query values get those
 * three decoded by lookup_query (a NUL makes the value absent).
 */
size_t
http_unescape_safe(void *cls, struct MHD_Connection *conn, char *s)
{
	char *r = s, *w = s;

	(void)cls;
	(void)conn;
	while (*r != '\0') {
		int hi, lo;

		if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0) {
			int c = hi * 16 + lo;

			if (c != '/' && c != 0 && c != '%') {
				*w++ = (char)c;
				r += 3;
				continue;
			}
		}
		*w++ = *r++;
	}
	*w = '\0';
	return (size_t)(w - s);
}

static const char *
lookup_query(const struct request *req, const char *name)
{
	const char *v = MHD_lookup_connection_value(req->transport, MHD_GET_ARGUMENT_KIND, name);
	char *out, *w;

	if (v == NULL || strchr(v, '%') == NULL)
		return v;
	/* finish what unescape_safe left: %2F, %25 and %00 */
	out = arena_alloc(req->arena, strlen(v) + 1);
	w = out;
	while (*v != '\0') {
		int hi, lo;

		if (v[0] == '%' && (hi = hexval(v[1])) >= 0 && (lo = hexval(v[2])) >= 0) {
			if (hi == 0 && lo == 0)
				return NULL;
			*w++ = (char)(hi * 16 + lo);
			v += 3;
			continue;
		}
		*w++ = *v++;
	}
	*w = '\0';
	return out;
}

bool
http_request_id_valid(const char *s)
{
	size_t n = 0;

	if (s == NULL)
		return false;
	for (; s[n] != '\0'; n++) {
		char c = s[n];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '_' || c == '.'))
			return false;
		if (n >= 64)
			return false;
	}
	return n > 0;
}

const char *
http_request_id_new(struct arena *a)
{
	static const char alphabet[] = "0123456789abcdefghijklmnopqrstuv";
	unsigned char raw[16];
	char *id = arena_alloc(a, sizeof(raw) + 1);

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		int64_t t = time_mono_us();

		memcpy(raw, &t, sizeof(t));
		memcpy(raw + 8, &t, sizeof(t));
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		id[i] = alphabet[raw[i] & 31];
	return id;
}

bool
http_cidr_match(const struct http_config *cfg, uint32_t addr)
{
	for (int i = 0; i < cfg->ntrusted; i++)
		if ((addr & cfg->trusted[i].mask) == cfg->trusted[i].net)
			return true;
	return false;
}

/* One address of a header list, trimmed; false when it is not IPv4. */
static bool
parse_v4(const char *s, size_t len, uint32_t *out)
{
	char buf[INET_ADDRSTRLEN];
	struct in_addr in;

	while (len > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, &in) != 1)
		return false;
	*out = ntohl(in.s_addr);
	return true;
}

/*
 * The client's address: the peer's, or behind trusted proxies the
 * rightmost X-Forwarded-For entry that is not a trusted proxy (entries
 * left of it are the client's own claims). An entry that is not an
 * IPv4 address ends the walk at the last address believed.
 */
const char *
http_client_ip(struct arena *a, const struct http_config *cfg, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char buf[INET6_ADDRSTRLEN] = "unknown";
	const char *xff, *end;
	uint32_t addr;
	struct in_addr in;

	if (ci == NULL || ci->client_addr == NULL)
		return arena_strdup(a, buf);
	if (ci->client_addr->sa_family == AF_INET6) {
		inet_ntop(AF_INET6,
		    &((const struct sockaddr_in6 *)(const void *)ci->client_addr)->sin6_addr, buf,
		    sizeof(buf));
		return arena_strdup(a, buf);
	}
	if (ci->client_addr->sa_family != AF_INET)
		return arena_strdup(a, buf);
	addr = ntohl(((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr.s_addr);
	xff = cfg->ntrusted > 0
	    ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Forwarded-For")
	    : NULL;
	if (xff != NULL && http_cidr_match(cfg, addr)) {
		end = xff + strlen(xff);
		while (end > xff && http_cidr_match(cfg, addr)) {
			const char *start = end;
			uint32_t hop;

			while (start > xff && start[-1] != ',')
				start--;
			if (!parse_v4(start, (size_t)(end - start), &hop))
				break;
			addr = hop;
			end = start > xff ? start - 1 : xff;
		}
	}
	in.s_addr = htonl(addr);
	inet_ntop(AF_INET, &in, buf, sizeof(buf));
	return arena_strdup(a, buf);
}

int
http_parse_cidrs(const char *s, struct http_cidr *out, int max, int *n)
{
	*n = 0;
	for (;;) {
		const char *comma = strchr(s, ',');
		const char *b = s, *e = comma ? comma : s + strlen(s), *slash;
		uint32_t addr, mask = 0xffffffffu;

		while (b < e && (*b == ' ' || *b == '\t'))
			b++;
		while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (*n == max || b == e)
			return -1;
		slash = memchr(b, '/', (size_t)(e - b));
		if (slash != NULL) {
			int bits = 0;

			if (slash + 1 == e || e - slash > 3)
				return -1;
			for (const char *d = slash + 1; d < e; d++) {
				if (*d < '0' || *d > '9')
					return -1;
				bits = bits * 10 + (*d - '0');
			}
			if (bits > 32)
				return -1;
			mask = bits == 0 ? 0 : 0xffffffffu << (32 - bits);
			e = slash;
		}
		if (!parse_v4(b, (size_t)(e - b), &addr))
			return -1;
		out[*n].net = addr & mask;
		out[*n].mask = mask;
		(*n)++;
		if (comma == NULL)
			return 0;
		s = comma + 1;
	}
}

/* The request view of an exchange: its headers, query and client. */
void
http_fill_request(struct exchange *x, struct MHD_Connection *conn, const char *url,
    const char *method, struct request *req)
{
	const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");

	memset(req, 0, sizeof(*req));
	req->arena = x->arena;
	req->method = method;
	req->path = url;
	req->request_id = http_request_id_valid(rid) ? arena_strdup(x->arena, rid)
						     : http_request_id_new(x->arena);
	req->client_ip = http_client_ip(x->arena, &x->server->cfg, conn);
	req->body = x->body;
	req->body_len = x->len;
	req->started_us = x->started_us;
	req->header = lookup_header;
	req->header_list = lookup_header_list;
	req->query = lookup_query;
	req->query_names = lookup_query_names;
	req->wake = http_resume;
	req->transport = conn;
	req->ctx = x->server->cfg.ctx;
}
