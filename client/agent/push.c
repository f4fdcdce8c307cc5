/*
 * push.c - the push listener (libmicrohttpd) and its HMAC-SHA256 check
 * (crypto/digest.h).
 */
#include <microhttpd.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "crypto/digest.h"
#include "push.h"
#include "util.h"

/* HMAC-SHA256 of "<timestamp>.<body>" under secret into md[DIGEST_SHA256_LEN]. */
static int
mac(const char *secret, const char *timestamp, const char *body, size_t body_len, unsigned char *md)
{
	size_t tl = strlen(timestamp);
	unsigned char *msg = malloc(tl + 1 + body_len + 1);
	if (msg == NULL)
		return -1;
	memcpy(msg, timestamp, tl);
	msg[tl] = '.';
	if (body_len > 0)
		memcpy(msg + tl + 1, body, body_len);
	int r = digest_hmac_sha256(secret, strlen(secret), msg, tl + 1 + body_len, md);
	digest_cleanse(msg, tl + 1 + body_len);
	free(msg);
	return r;
}

int
push_sign(const char *secret, const char *timestamp, const char *body, size_t body_len, char *out,
    size_t outlen)
{
	unsigned char md[DIGEST_SHA256_LEN];
	if (outlen < 3 + 2 * DIGEST_SHA256_LEN + 1 ||
	    mac(secret, timestamp, body, body_len, md) != 0)
		return -1;
	memcpy(out, "v1=", 3);
	digest_hex(md, sizeof(md), out + 3);
	digest_cleanse(md, sizeof(md));
	return 0;
}

static int
unhex(const char *s, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];
			int x = c >= '0' && c <= '9' ? c - '0'
			    : c >= 'a' && c <= 'f'   ? c - 'a' + 10
			    : c >= 'A' && c <= 'F'   ? c - 'A' + 10
						     : -1;
			if (x < 0)
				return -1;
			v = v * 16 + x;
		}
		out[i] = (unsigned char)v;
	}
	return 0;
}

int
push_verify(const char *secret, const char *timestamp, const char *signature, const char *body,
    size_t body_len, long long now, const char **why)
{
	*why = "missing X-Gpupool-Timestamp or X-Gpupool-Signature";
	if (secret == NULL || secret[0] == '\0' || timestamp == NULL || signature == NULL)
		return -1;
	char *end;
	errno = 0;
	long long ts = strtoll(timestamp, &end, 10);
	if (errno != 0 || end == timestamp || *end != '\0' || timestamp[0] == '-' ||
	    timestamp[0] == '+' || timestamp[0] == ' ') {
		*why = "malformed timestamp";
		return -1;
	}
	if (ts > now + PUSH_MAX_SKEW || ts < now - PUSH_MAX_SKEW) {
		*why = "timestamp more than 300 s off";
		return -1;
	}
	/* one or more comma-separated "v1=<hex>" values; any may match */
	unsigned char md[DIGEST_SHA256_LEN];
	if (mac(secret, timestamp, body, body_len, md) != 0) {
		*why = "cannot compute the HMAC";
		return -1;
	}
	*why = "bad signature";
	const char *p = signature;
	while (*p != '\0') {
		while (*p == ' ' || *p == ',')
			p++;
		const char *q = p;
		while (*q != '\0' && *q != ',')
			q++;
		if (q - p == 3 + 64 && strncmp(p, "v1=", 3) == 0) {
			unsigned char got[32];
			if (unhex(p + 3, got, 32) == 0 && digest_equal(got, md, 32)) {
				digest_cleanse(md, sizeof(md));
				return 0;
			}
		}
		p = q;
	}
	digest_cleanse(md, sizeof(md));
	return -1;
}

struct push_server {
	struct MHD_Daemon *d;
	push_submit_fn submit;
	push_secret_fn secret;
	void *ctx;
	int port;
};

struct conn_body {
	char *buf;
	size_t len;
	bool too_big;
};

static enum MHD_Result
reply(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
problem(struct MHD_Connection *c, unsigned status, const char *code, const char *detail)
{
	char body[512];
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("about:blank"));
	json_object_object_add(o, "status", json_object_new_int((int)status));
	json_object_object_add(o, "code", json_object_new_string(code));
	json_object_object_add(o, "detail", json_object_new_string(detail));
	snprintf(body, sizeof(body), "%s",
	    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return reply(c, status, "application/problem+json", body);
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)version;
	struct push_server *p = cls;
	struct conn_body *cb = *con_cls;
	if (cb == NULL) {
		cb = calloc(1, sizeof(*cb));
		if (cb == NULL)
			return MHD_NO;
		*con_cls = cb;
		return MHD_YES;
	}
	if (*upload_size > 0) {
		if (!cb->too_big && cb->len + *upload_size <= PUSH_MAX_BODY) {
			char *nb = realloc(cb->buf, cb->len + *upload_size + 1);
			if (nb == NULL)
				return MHD_NO;
			cb->buf = nb;
			memcpy(cb->buf + cb->len, upload, *upload_size);
			cb->len += *upload_size;
			cb->buf[cb->len] = '\0';
		} else {
			cb->too_big = true;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(url, "/v1/desired-state") != 0)
		return problem(c, MHD_HTTP_NOT_FOUND, "not_found", "only POST /v1/desired-state");
	if (strcmp(method, "POST") != 0)
		return problem(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed", "use POST");
	if (cb->too_big)
		return problem(c, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large", "body over 1 MiB");
	char secret[256];
	if (!p->secret(p->ctx, secret, sizeof(secret)))
		return problem(c, MHD_HTTP_SERVICE_UNAVAILABLE, "not_enrolled",
		    "the agent has not enrolled yet");
	const char *ts = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Gpupool-Timestamp");
	const char *sig = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Gpupool-Signature");
	const char *why;
	int ok = push_verify(secret, ts, sig, cb->buf ? cb->buf : "", cb->len, ag_now(), &why);
	digest_cleanse(secret, sizeof(secret));
	if (ok != 0) {
		log_warn(NULL, "push rejected", "reason", why);
		return problem(c, MHD_HTTP_UNAUTHORIZED, "bad_signature", why);
	}
	struct json_object *doc = cb->buf ? json_tokener_parse(cb->buf) : NULL;
	if (doc == NULL)
		return problem(c, MHD_HTTP_BAD_REQUEST, "invalid_json", "the body is not JSON");
	char err[256];
	long long gen = p->submit(p->ctx, doc, err, sizeof(err));
	json_object_put(doc);
	if (gen < 0)
		return problem(c, MHD_HTTP_BAD_REQUEST, "invalid_desired_state", err);
	char body[64];
	snprintf(body, sizeof(body), "{\"observed_generation\":%lld}", gen);
	return reply(c, MHD_HTTP_OK, "application/json", body);
}

static void
completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
	(void)cls;
	(void)c;
	(void)t;
	struct conn_body *cb = *con_cls;
	if (cb != NULL) {
		free(cb->buf);
		free(cb);
		*con_cls = NULL;
	}
}

struct push_server *
push_start(const char *listen, push_submit_fn submit, push_secret_fn secret, void *ctx, char *err,
    size_t errlen)
{
	char host[256];
	ag_strlcpy(host, listen, sizeof(host));
	char *colon = strrchr(host, ':');
	if (colon == NULL) {
		snprintf(err, errlen, "--listen wants HOST:PORT, got \"%s\"", listen);
		return NULL;
	}
	*colon = '\0';
	int port = ag_parse_int(colon + 1, 0, 65535, -1);
	if (port < 0) {
		snprintf(err, errlen,
		    "--listen wants HOST:PORT with a port from 0 to 65535, got \"%s\"", listen);
		return NULL;
	}
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (host[0] == '\0' || strcmp(host, "*") == 0)
		ag_strlcpy(host, "0.0.0.0", sizeof(host));
	if (strcmp(host, "localhost") == 0)
		ag_strlcpy(host, "127.0.0.1", sizeof(host));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || port < 0 || port > 65535) {
		snprintf(err, errlen, "--listen: \"%s\" is not an IPv4 HOST:PORT", listen);
		return NULL;
	}
	struct push_server *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->submit = submit;
	p->secret = secret;
	p->ctx = ctx;
	p->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	    handle, p, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED,
	    completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_END);
	if (p->d == NULL) {
		snprintf(err, errlen, "cannot listen on %s", listen);
		free(p);
		return NULL;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(p->d, MHD_DAEMON_INFO_BIND_PORT);
	p->port = di != NULL ? di->port : port;
	return p;
}

int
push_port(const struct push_server *p)
{
	return p->port;
}

void
push_stop(struct push_server *p)
{
	if (p == NULL)
		return;
	MHD_stop_daemon(p->d);
	free(p);
}
