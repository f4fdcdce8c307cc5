/*
 * server.c - libmicrohttpd glue (the only includer of microhttpd.h).
 *
 * A request arena is created on the first callback and destroyed in
 * MHD_OPTION_NOTIFY_COMPLETED. The response is queued on the second
 * callback at the earliest: libmicrohttpd 0.9.75 answers
 * "Connection: close" to one queued on the first, which costs keep-alive.
 *
 * A dispatch that answers later (HTTP_DEFERRED) suspends the connection:
 * the pool thread goes on serving others while some other thread does
 * the work and calls http_resume(), after which libmicrohttpd calls us
 * again for that connection and the resume callback produces the
 * response on a pool thread.
 *
 * Slow clients: every connection sits in a registry with a deadline for
 * the phase it is in (the request line and headers, then the body); a
 * sweeper thread shuts down the socket of one past its deadline, so
 * that libmicrohttpd, reading end-of-file, closes it: bytes trickling
 * in reset the idle timeout but not the deadline. Connections per peer
 * address, and requests in flight per client behind a trusted proxy,
 * are counted here (libmicrohttpd's per-IP limit would count the proxy).
 */
#include "server.h"

#include "core/log.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Open connections per address, or requests in flight per client. */
struct addr_count {
	struct addr_count *next;
	int n;
	char key[INET6_ADDRSTRLEN];
};

#define HTTP_COUNT_BUCKETS 1024

struct count_table {
	struct addr_count *bucket[HTTP_COUNT_BUCKETS];
};

/* Per TCP connection (MHD's socket context). */
struct conn_state {
	struct conn_state *prev, *next; /* the registry, under http_server.lock */
	int fd;
	atomic_llong deadline_us; /* monotonic; 0: none (a request is being served) */
	atomic_bool reading_head; /* nothing sent yet: a 408 may go out */
	bool begun;               /* has it begun a request yet? */
	bool killed;              /* shut down by the sweeper (under lock) */
	bool trusted_peer;        /* the peer is a trusted proxy */
	bool counted;             /* counted in peers (under lock) */
	int refuse;               /* 0, or 429 / 503: answer that to its first request */
	char peer[INET6_ADDRSTRLEN];
};

struct http_server {
	struct MHD_Daemon *daemon;
	struct http_config cfg;
	http_dispatch_fn dispatch;
	http_resume_fn resume;
	atomic_int in_flight; /* requests between first callback and completion */
	atomic_int fresh;     /* connections accepted that have not begun a request */
	atomic_int handed;    /* handed to MHD while stopping, not yet started by it */
	atomic_bool stopping;
	/* slow-client defence */
	pthread_mutex_t lock;
	pthread_cond_t sweep_cond;
	pthread_t sweeper;
	bool sweeper_started;
	bool sweep_stop;            /* under lock */
	struct conn_state *conns;   /* under lock */
	int open;                   /* connections, under lock */
	struct count_table peers;   /* open connections per peer address, under lock */
	struct count_table clients; /* requests in flight per proxied client, under lock */
};

/* An oversized body is drained up to this many times the limit. */
#define HTTP_DRAIN_FACTOR 8

struct exchange {
	struct arena *arena;
	struct http_server *server;
	char *body;
	size_t len;
	size_t cap;
	bool too_large;
	bool dispatched;
	size_t expected;      /* Content-Length, 0 when unknown */
	size_t dropped;       /* body bytes read past the limit */
	size_t expected_over; /* > 0: too large to drain */
	int64_t started_us;
	struct conn_state *cs;  /* NULL when MHD gave no socket context */
	const char *client_key; /* counted in clients until completion, or NULL */
	int refuse;             /* 0, or the status to answer instead of dispatching */
	/* kept here, not on the stack, so that a deferred answer can use them */
	struct request req;
	struct response res;
	bool deferred; /* suspended, waiting for http_resume */
	atomic_bool resumed;
};

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
static size_t
unescape_safe(void *cls, struct MHD_Connection *conn, char *s)
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

static bool
request_id_valid(const char *s)
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

static const char *
request_id_new(struct arena *a)
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

static bool
cidr_match(const struct http_config *cfg, uint32_t addr)
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
static const char *
client_ip(struct arena *a, const struct http_config *cfg, struct MHD_Connection *conn)
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
	if (xff != NULL && cidr_match(cfg, addr)) {
		end = xff + strlen(xff);
		while (end > xff && cidr_match(cfg, addr)) {
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

static unsigned int
count_hash(const char *key)
{
	unsigned int h = 2166136261u;

	for (; *key != '\0'; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h % HTTP_COUNT_BUCKETS;
}

/*
 * Add delta to key's count and return the new count; an entry that
 * drops to 0 goes. Out of memory counts as 0 (the client is let in).
 */
static int
count_add(struct count_table *t, const char *key, int delta)
{
	struct addr_count **pp = &t->bucket[count_hash(key)], *e;
	int n;

	while ((e = *pp) != NULL && strcmp(e->key, key) != 0)
		pp = &e->next;
	if (e == NULL) {
		if (delta <= 0)
			return 0;
		e = calloc(1, sizeof(*e));
		if (e == NULL)
			return 0;
		snprintf(e->key, sizeof(e->key), "%s", key);
		*pp = e;
	}
	e->n += delta;
	n = e->n;
	if (n <= 0) {
		*pp = e->next;
		free(e);
	}
	return n;
}

static void
count_free(struct count_table *t)
{
	for (int i = 0; i < HTTP_COUNT_BUCKETS; i++) {
		while (t->bucket[i] != NULL) {
			struct addr_count *e = t->bucket[i];

			t->bucket[i] = e->next;
			free(e);
		}
	}
}

static struct conn_state *
conn_state_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci != NULL ? ci->socket_context : NULL;
}

/* Move cs to a new deadline (0: none), seconds from now. */
static void
conn_deadline(struct conn_state *cs, int seconds)
{
	if (cs != NULL)
		atomic_store(&cs->deadline_us,
		    seconds > 0 ? time_mono_us() + (int64_t)seconds * 1000000 : 0);
}

/* a streamed body (response_stream): what the MHD callbacks need */
struct stream_body {
	response_read_fn read;
	void (*done)(void *arg);
	void *arg;
};

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream_body *b = cls;
	long n;

	(void)pos;
	n = b->read(b->arg, buf, max);
	if (n > 0)
		return (ssize_t)n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void
stream_free(void *cls)
{
	struct stream_body *b = cls;

	if (b->done != NULL)
		b->done(b->arg);
	free(b);
}

/* The MHD response of res (NULL on failure; a stream's done has run then). */
static struct MHD_Response *
make_response(const struct response *res)
{
	struct stream_body *b;
	struct MHD_Response *r;

	if (res->stream == NULL)
		return MHD_create_response_from_buffer(res->body_len, (void *)(uintptr_t)res->body,
		    MHD_RESPMEM_PERSISTENT);
	b = malloc(sizeof(*b));
	if (b == NULL) {
		if (res->stream_done != NULL)
			res->stream_done(res->stream_arg);
		return NULL;
	}
	b->read = res->stream;
	b->done = res->stream_done;
	b->arg = res->stream_arg;
	r = MHD_create_response_from_callback(res->stream_len < 0 ? MHD_SIZE_UNKNOWN
								  : (uint64_t)res->stream_len,
	    64 * 1024, stream_read, b, stream_free);
	if (r == NULL)
		stream_free(b);
	return r;
}

static enum MHD_Result
send_response(struct http_server *s, struct MHD_Connection *conn, const struct request *req,
    const struct response *res)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = make_response(res);
	if (r == NULL)
		return MHD_NO;
	if (res->content_type != NULL)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, res->content_type);
	MHD_add_response_header(r, "X-Request-Id", req->request_id);
	for (int i = 0; i < res->nheaders; i++)
		MHD_add_response_header(r, res->headers[i].name, res->headers[i].value);
	/* draining: no further requests on this connection */
	if (atomic_load(&s->stopping))
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(conn, (unsigned int)res->status, r);
	MHD_destroy_response(r);
	return ret;
}

static void
fill_request(struct exchange *x, struct MHD_Connection *conn, const char *url, const char *method,
    struct request *req)
{
	const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");

	memset(req, 0, sizeof(*req));
	req->arena = x->arena;
	req->method = method;
	req->path = url;
	req->request_id =
	    request_id_valid(rid) ? arena_strdup(x->arena, rid) : request_id_new(x->arena);
	req->client_ip = client_ip(x->arena, &x->server->cfg, conn);
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

/* 429 (this address has too many) or 503 (the server is full), Retry-After: 1. */
static void
refused(struct request *req, struct response *res, int status)
{
	struct gp_error err;

	gp_error_clear(&err);
	if (status == 429)
		gp_error_set(&err, 429, "too_many_connections",
		    "too many connections or requests from this address, try again later");
	else
		gp_error_set(&err, 503, "overloaded",
		    "the server has too many connections, try again later");
	response_problem(req, res, &err);
	response_header(res, "Retry-After", "1");
	response_header(res, "Connection", "close");
}

static bool
probe_path(const char *path)
{
	return strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0 ||
	    strcmp(path, "/metrics") == 0;
}

static void
too_large(struct request *req, struct response *res, size_t max)
{
	struct gp_error err;

	gp_error_clear(&err);
	gp_error_set(&err, 413, "payload_too_large",
	    "the request body exceeds the limit of %zu bytes", max);
	response_problem(req, res, &err);
	response_header(res, "Connection", "close");
}

static enum MHD_Result
send_exchange(struct http_server *s, struct exchange *x, struct MHD_Connection *conn)
{
	if (s->cfg.access_log) {
		char status[8], dur[32];

		snprintf(status, sizeof(status), "%d", x->res.status);
		snprintf(dur, sizeof(dur), "%.3f",
		    (double)(time_mono_us() - x->started_us) / 1000.0);
		log_info(x->req.request_id, "request", "method", x->req.method, "path", x->req.path,
		    "status", status, "duration_ms", dur, "client", x->req.client_ip);
	}
	return send_response(s, conn, &x->req, &x->res);
}

/* Dispatch (or answer 413) and queue the response; once per exchange. */
static enum MHD_Result
finish_exchange(struct http_server *s, struct exchange *x, struct MHD_Connection *conn,
    const char *url, const char *method)
{
	x->dispatched = true;
	conn_deadline(x->cs, 0);
	fill_request(x, conn, url, method, &x->req);
	memset(&x->res, 0, sizeof(x->res));
	if (x->refuse != 0) {
		refused(&x->req, &x->res, x->refuse);
	} else if (x->too_large) {
		too_large(&x->req, &x->res, s->cfg.max_body);
	} else if (s->cfg.probe_only && !probe_path(url)) {
		struct gp_error err;

		gp_error_clear(&err);
		gp_error_set(&err, 404, "not_found",
		    "this listener serves only /healthz, /readyz and /metrics");
		response_problem(&x->req, &x->res, &err);
	} else if (s->dispatch(&x->req, &x->res) == HTTP_DEFERRED) {
		x->deferred = true;
		MHD_suspend_connection(conn);
		return MHD_YES;
	}
	return send_exchange(s, x, conn);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct http_server *s = cls;
	struct exchange *x = *con_cls;

	(void)version;
	if (x == NULL) {
		struct conn_state *cs = conn_state_of(conn);
		const char *cl;

		if (cs != NULL && !cs->begun) {
			cs->begun = true;
			atomic_fetch_sub(&s->fresh, 1);
		}
		x = calloc(1, sizeof(*x));
		if (x == NULL)
			return MHD_NO;
		x->arena = arena_create();
		x->server = s;
		x->started_us = time_mono_us();
		x->cs = cs;
		if (cs != NULL) {
			/* the headers are in: now the body's deadline */
			atomic_store(&cs->reading_head, false);
			conn_deadline(cs, s->cfg.body_timeout_s);
			x->refuse = cs->refuse;
			if (x->refuse == 0 && cs->trusted_peer && s->cfg.ntrusted > 0) {
				const char *key = client_ip(x->arena, &s->cfg, conn);
				int n;

				pthread_mutex_lock(&s->lock);
				n = count_add(&s->clients, key, 1);
				pthread_mutex_unlock(&s->lock);
				if (n > 0)
					x->client_key = key;
				if (n > s->cfg.per_ip_limit)
					x->refuse = 429;
			}
		}
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl != NULL) {
			char *end;
			unsigned long long n = strtoull(cl, &end, 10);

			if (*end != '\0' || n > s->cfg.max_body) {
				x->too_large = true;
				/* a declared length past the drain bound: answer on the first chunk */
				if (*end != '\0' || n > HTTP_DRAIN_FACTOR * s->cfg.max_body)
					x->expected_over = HTTP_DRAIN_FACTOR * s->cfg.max_body;
			} else {
				x->expected = (size_t)n;
			}
		}
		atomic_fetch_add(&s->in_flight, 1);
		*con_cls = x;
		/* over a limit: answer now (libmicrohttpd then closes) */
		if (x->refuse != 0)
			return finish_exchange(s, x, conn, url, method);
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (x->dispatched)
			return MHD_YES;
		if (x->too_large || x->len + n > s->cfg.max_body) {
			/*
			 * Over the limit: read and drop the rest up to
			 * HTTP_DRAIN_FACTOR times the limit, so the client
			 * still reads the 413 (closing on unread data resets
			 * the connection); beyond that answer at once, and MHD
			 * closes the connection after the response.
			 */
			x->too_large = true;
			x->dropped += n;
			if (x->dropped + x->expected_over > HTTP_DRAIN_FACTOR * s->cfg.max_body)
				return finish_exchange(s, x, conn, url, method);
			return MHD_YES;
		}
		if (x->len + n + 1 > x->cap) {
			size_t cap = x->cap ? x->cap : (x->expected > 0 ? x->expected + 1 : 1024);
			char *nb;

			while (cap < x->len + n + 1)
				cap *= 2;
			nb = arena_alloc(x->arena, cap);
			if (x->len > 0)
				memcpy(nb, x->body, x->len);
			x->body = nb;
			x->cap = cap;
		}
		memcpy(x->body + x->len, upload_data, n);
		x->len += n;
		x->body[x->len] = '\0';
		return MHD_YES;
	}
	if (x->dispatched) {
		if (!x->deferred || !atomic_load(&x->resumed))
			return MHD_NO;
		/* back from http_resume: the answer is ready */
		x->deferred = false;
		s->resume(&x->req, &x->res);
		return send_exchange(s, x, conn);
	}
	return finish_exchange(s, x, conn, url, method);
}

void
http_resume(struct request *req)
{
	struct exchange *x =
	    (struct exchange *)(void *)((char *)req - offsetof(struct exchange, req));

	atomic_store(&x->resumed, true);
	MHD_resume_connection(req->transport);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct http_server *s = cls;
	struct exchange *x = *con_cls;

	(void)conn;
	(void)toe;
	if (x == NULL)
		return;
	if (x->client_key != NULL) {
		pthread_mutex_lock(&s->lock);
		(void)count_add(&s->clients, x->client_key, -1);
		pthread_mutex_unlock(&s->lock);
	}
	if (x->cs != NULL) {
		/* kept alive: idle, then the next request's headers */
		atomic_store(&x->cs->reading_head, true);
		conn_deadline(x->cs, s->cfg.timeout_s + s->cfg.header_timeout_s);
	}
	arena_destroy(x->arena);
	free(x);
	*con_cls = NULL;
	atomic_fetch_sub(&s->in_flight, 1);
}

/* The peer's address as text, and whether it is a trusted proxy. */
static void
peer_of(const struct http_config *cfg, struct MHD_Connection *conn, struct conn_state *cs)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

	snprintf(cs->peer, sizeof(cs->peer), "unknown");
	if (sa != NULL && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, cs->peer, sizeof(cs->peer));
		cs->trusted_peer = cidr_match(cfg, ntohl(in->sin_addr.s_addr));
	} else if (sa != NULL && sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
		    cs->peer, sizeof(cs->peer));
	}
}

/*
 * A connection starts: into the registry with its headers' deadline,
 * counted against its peer's limit and the server's (over either, its
 * first request is refused). Also count connections that were accepted
 * but have not begun a request, so that a graceful stop waits for
 * requests still on their way in.
 */
static void
connection_started(struct http_server *s, struct MHD_Connection *conn, struct conn_state *cs)
{
	const union MHD_ConnectionInfo *fi =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	cs->fd = fi != NULL ? fi->connect_fd : -1;
	atomic_store(&cs->reading_head, true);
	conn_deadline(cs, s->cfg.header_timeout_s);
	peer_of(&s->cfg, conn, cs);
	pthread_mutex_lock(&s->lock);
	cs->next = s->conns;
	if (s->conns != NULL)
		s->conns->prev = cs;
	s->conns = cs;
	if (++s->open > s->cfg.connection_limit)
		cs->refuse = 503;
	if (!cs->trusted_peer) {
		cs->counted = true;
		if (count_add(&s->peers, cs->peer, 1) > s->cfg.per_ip_limit)
			cs->refuse = 429;
	}
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_add(&s->fresh, 1);
}

/*
 * Out of the registry before libmicrohttpd closes the descriptor
 * (it notifies MHD_CONNECTION_NOTIFY_CLOSED first), so the sweeper
 * never shuts down a descriptor number reused by another connection.
 */
static void
connection_closed(struct http_server *s, struct conn_state *cs)
{
	pthread_mutex_lock(&s->lock);
	if (cs->prev != NULL)
		cs->prev->next = cs->next;
	else
		s->conns = cs->next;
	if (cs->next != NULL)
		cs->next->prev = cs->prev;
	s->open--;
	if (cs->counted)
		(void)count_add(&s->peers, cs->peer, -1);
	pthread_mutex_unlock(&s->lock);
	if (!cs->begun)
		atomic_fetch_sub(&s->fresh, 1);
	free(cs);
}

static void
on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;
	struct conn_state *cs = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		/*
		 * While stopping, MHD accepts nothing itself: this is one of the
		 * connections drain_backlog() handed over, now counted as fresh.
		 */
		if (atomic_load(&s->stopping)) {
			int h = atomic_load(&s->handed);

			while (h > 0 && !atomic_compare_exchange_weak(&s->handed, &h, h - 1))
				;
		}
		cs = calloc(1, sizeof(*cs));
		*socket_context = cs;
		if (cs != NULL)
			connection_started(s, conn, cs);
		return;
	}
	if (cs == NULL)
		return;
	connection_closed(s, cs);
	*socket_context = NULL;
}

/*
 * The request line is in: its headers have header_timeout_s from now
 * (on a kept-alive connection the deadline was the idle timeout and
 * this together; on a new one it runs from the connection's start).
 */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct http_server *s = cls;
	struct conn_state *cs = conn_state_of(conn);

	(void)uri;
	if (cs != NULL) {
		int64_t d = time_mono_us() + (int64_t)s->cfg.header_timeout_s * 1000000;
		long long cur = atomic_load(&cs->deadline_us);

		if (cur == 0 || d < cur)
			atomic_store(&cs->deadline_us, d);
	}
	return NULL;
}

static const char timeout_reply[] = "HTTP/1.1 408 Request Timeout\r\n"
				    "Content-Length: 0\r\n"
				    "Connection: close\r\n\r\n";

/*
 * Every 200 ms: shut down the sockets of connections past their
 * deadline (a 408 first when nothing has been sent on them yet);
 * libmicrohttpd then reads end-of-file and closes them itself. A
 * connection whose pool thread has not read what arrived is spared.
 */
static void *
sweep_main(void *arg)
{
	struct http_server *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->sweep_stop) {
		struct timespec ts;
		int64_t now;
		int late = 0;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 200 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		(void)pthread_cond_timedwait(&s->sweep_cond, &s->lock, &ts);
		now = time_mono_us();
		for (struct conn_state *cs = s->conns; cs != NULL; cs = cs->next) {
			long long d = atomic_load(&cs->deadline_us);
			int unread = 0;

			if (d == 0 || now <= d || cs->killed || cs->fd < 0)
				continue;
			/*
			 * Bytes waiting unread: the client sent them, its pool
			 * thread is what is behind (a handler blocked on the
			 * database). Not the client's fault; look again later.
			 */
			if (ioctl(cs->fd, FIONREAD, &unread) == 0 && unread > 0)
				continue;
			cs->killed = true;
			if (atomic_load(&cs->reading_head))
				(void)send(cs->fd, timeout_reply, sizeof(timeout_reply) - 1,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
			(void)shutdown(cs->fd, SHUT_RDWR);
			late++;
		}
		if (late > 0) {
			char n[16];

			snprintf(n, sizeof(n), "%d", late);
			log_warn(NULL, "closed connections past their header or body deadline",
			    "connections", n);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/*
 * Make room for the connections in the open-file limit (soft up to
 * hard): every server adds its share to what the process needs.
 */
static void
reserve_files(unsigned int connections)
{
	static atomic_uint need = 256; /* database connections, logs, the rest */
	unsigned int total = atomic_fetch_add(&need, connections) + connections;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= total)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > total ? total : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < total) {
		char have[24], want[24];

		snprintf(have, sizeof(have), "%llu", (unsigned long long)rl.rlim_cur);
		snprintf(want, sizeof(want), "%u", total);
		log_warn(NULL, "the open-file limit is below what the connection limits need",
		    "limit", have, "needed", want);
	}
}

static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	/*
	 * A client gone mid-request (or cut off by the deadline sweeper) is
	 * routine: one line each would let a crowd of slow clients flood
	 * the log, so those go to debug.
	 */
	if (strstr(buf, "when reading request") != NULL)
		log_debug(NULL, "libmicrohttpd", "detail", buf);
	else
		log_warn(NULL, "libmicrohttpd", "detail", buf);
}

/*
 * The listening socket, bound here rather than by libmicrohttpd: a busy
 * address is then one error of ours (errno for the caller's message),
 * not libmicrohttpd's "Failed to bind to port 0" (it names the port
 * argument, 0 when the address comes as MHD_OPTION_SOCK_ADDR). Plain
 * SO_REUSEADDR (a restart reuses the port at once), never SO_REUSEPORT
 * (two servers would share the port). -1 with errno set on failure.
 */
static int
listen_socket(const struct sockaddr_in *addr, int *port)
{
	struct sockaddr_in got;
	socklen_t glen = sizeof(got);
	int one = 1, fd, e;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0 ||
	    listen(fd, SOMAXCONN) != 0 || getsockname(fd, (struct sockaddr *)&got, &glen) != 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	*port = ntohs(got.sin_port);
	return fd;
}

int
http_start(struct http_server **out, const struct http_config *cfg, http_dispatch_fn dispatch,
    http_resume_fn resume, int *bound_port)
{
	struct http_server *s = calloc(1, sizeof(*s));
	struct sockaddr_in addr;
	unsigned int mhd_limit;
	int fd, port, e;

	if (s == NULL)
		return -1;
	s->cfg = *cfg;
	s->dispatch = dispatch;
	s->resume = resume;
	/* the overflow answered 503 rather than refused at once */
	mhd_limit =
	    (unsigned int)cfg->connection_limit + (unsigned int)cfg->connection_limit / 8 + 8;
	reserve_files(mhd_limit);
	pthread_mutex_init(&s->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->sweep_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)cfg->port);
	if (inet_pton(AF_INET, cfg->host, &addr.sin_addr) != 1) {
		log_error(NULL, "could not parse the listen address", "host", cfg->host);
		errno = EINVAL;
		goto fail;
	}
	fd = listen_socket(&addr, &port);
	if (fd < 0)
		goto fail;
	s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
		MHD_USE_TURBO | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME,
	    0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape_safe, NULL, MHD_OPTION_LISTEN_SOCKET,
	    (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->threads,
	    MHD_OPTION_CONNECTION_LIMIT, mhd_limit, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)cfg->timeout_s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
	if (s->daemon == NULL) {
		e = errno;
		close(fd);
		errno = e;
		goto fail;
	}
	if (pthread_create(&s->sweeper, NULL, sweep_main, s) != 0) {
		MHD_stop_daemon(s->daemon); /* closes fd: it was not quiesced */
		errno = EAGAIN;
		goto fail;
	}
	s->sweeper_started = true;
	*bound_port = port;
	*out = s;
	return 0;
fail:
	e = errno;
	pthread_cond_destroy(&s->sweep_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	errno = e;
	return -1;
}

int
http_in_flight(const struct http_server *s)
{
	return atomic_load(&s->in_flight);
}

/*
 * Hand the connections still waiting in the listen backlog to the daemon:
 * their clients connected before the stop and are owed an answer.
 */
static void
drain_backlog(struct http_server *s, MHD_socket fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return;
	for (;;) {
		struct sockaddr_storage addr;
		socklen_t alen = sizeof(addr);
		int c = accept(fd, (struct sockaddr *)&addr, &alen);

		if (c < 0) {
			if (errno == EINTR)
				continue;
			break; /* EAGAIN: the backlog is empty */
		}
		(void)fcntl(c, F_SETFD, FD_CLOEXEC);
		/* MHD starts it later, on a pool thread: count it until then */
		atomic_fetch_add(&s->handed, 1);
		if (MHD_add_connection(s->daemon, c, (struct sockaddr *)&addr, alen) != MHD_YES) {
			atomic_fetch_sub(&s->handed, 1);
			log_warn(NULL, "could not hand over a connection while stopping");
		}
	}
}

void
http_stop(struct http_server *s, int grace_ms)
{
	MHD_socket fd;
	int waited = 0;

	if (s == NULL)
		return;
	atomic_store(&s->stopping, true);
	fd = MHD_quiesce_daemon(s->daemon);
	if (fd != MHD_INVALID_SOCKET) {
		drain_backlog(s, fd);
		/*
		 * Refuse new connections now; the descriptor itself is closed
		 * only after MHD_stop_daemon, as libmicrohttpd requires.
		 */
		shutdown(fd, SHUT_RDWR);
	}
	while ((atomic_load(&s->in_flight) > 0 || atomic_load(&s->fresh) > 0 ||
		   atomic_load(&s->handed) > 0) &&
	    waited < grace_ms) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		waited += 10;
	}
	if (s->sweeper_started) {
		pthread_mutex_lock(&s->lock);
		s->sweep_stop = true;
		pthread_cond_signal(&s->sweep_cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->sweeper, NULL);
	}
	MHD_stop_daemon(s->daemon);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	count_free(&s->peers);
	count_free(&s->clients);
	pthread_cond_destroy(&s->sweep_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
