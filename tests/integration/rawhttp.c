/*
 * rawhttp.c - a minimal HTTP/1.1 client over plain sockets for the
 * integration tests (see rawhttp.h). Deliberately naive: one request per
 * call, responses framed by Content-Length or EOF.
 */
#include "rawhttp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "core/timeutil.h"

int
raw_connect(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

char *
raw_build(struct arena *a, const char *method, const char *path, const char *const *headers,
    const char *body, size_t body_len, size_t *len)
{
	size_t cap = strlen(method) + strlen(path) + 128 + (body ? body_len : 0);
	char *buf, *p;
	int n;

	for (const char *const *h = headers; h != NULL && *h != NULL; h++)
		cap += strlen(*h) + 2;
	buf = arena_alloc(a, cap);
	n = snprintf(buf, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n", method,
	    path);
	p = buf + n;
	for (const char *const *h = headers; h != NULL && *h != NULL; h++)
		p += sprintf(p, "%s\r\n", *h);
	if (body != NULL)
		p += sprintf(p, "Content-Length: %zu\r\n", body_len);
	p += sprintf(p, "\r\n");
	if (body != NULL && body_len > 0) {
		memcpy(p, body, body_len);
		p += body_len;
	}
	*len = (size_t)(p - buf);
	return buf;
}

/* Content-Length of a header block, -1 when absent. */
static long long
head_content_length(const char *head, size_t head_len)
{
	const char *p = head;
	const char *end = head + head_len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (nl == NULL)
			break;
		if ((size_t)(nl - p) > 15 && strncasecmp(p, "Content-Length:", 15) == 0)
			return strtoll(p + 15, NULL, 10);
		p = nl + 1;
	}
	return -1;
}

static int
remaining_ms(int64_t deadline_us)
{
	int64_t left = deadline_us - time_mono_us();

	return left <= 0 ? 0 : (int)(left / 1000) + 1;
}

int
raw_exchange_fd(struct arena *a, int fd, const char *req, size_t len, int timeout_ms,
    struct raw_response *out)
{
	int64_t deadline = time_mono_us() + (int64_t)timeout_ms * 1000;
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	size_t cap = 65536, got = 0, head_len = 0;
	long long clen = -1;
	char *buf = malloc(cap);
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	if (buf == NULL) {
		out->error = ENOMEM;
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (off < len) {
		ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			out->error = errno;
			break; /* the server may have answered early: read it */
		}
		off += (size_t)n;
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int pr;

		if (head_len > 0 && clen >= 0 && got >= head_len + (size_t)clen)
			break;
		pr = poll(&pfd, 1, remaining_ms(deadline));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			out->error = pr == 0 ? ETIMEDOUT : errno;
			break;
		}
		if (got + 4096 + 1 > cap) {
			char *nb;

			cap *= 2;
			nb = realloc(buf, cap);
			if (nb == NULL) {
				out->error = ENOMEM;
				break;
			}
			buf = nb;
		}
		n = recv(fd, buf + got, cap - got - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			out->error = errno;
			out->closed = true;
			break;
		}
		if (n == 0) {
			out->closed = true;
			break;
		}
		got += (size_t)n;
		buf[got] = '\0';
		if (head_len == 0) {
			char *e = strstr(buf, "\r\n\r\n");

			if (e != NULL) {
				head_len = (size_t)(e - buf) + 4;
				clen = head_content_length(buf, head_len);
			}
		}
	}
	if (head_len > 0) {
		int status = 0;

		if (sscanf(buf, "HTTP/1.%*d %d", &status) == 1)
			out->status = status;
		out->head = arena_strndup(a, buf, head_len);
		out->body_len = got - head_len;
		if (clen >= 0 && out->body_len > (size_t)clen)
			out->body_len = (size_t)clen;
		out->body = arena_strndup(a, buf + head_len, out->body_len);
		if (out->body_len > 0) {
			struct json_tokener *tok = json_tokener_new();
			struct json_object *o = NULL;

			if (tok != NULL) {
				o = json_tokener_parse_ex(tok, out->body, (int)out->body_len);
				if (o != NULL &&
				    json_tokener_get_error(tok) != json_tokener_success) {
					json_object_put(o);
					o = NULL;
				}
				json_tokener_free(tok);
			}
			out->json = json_own(a, o);
		}
	}
	free(buf);
	return out->status > 0 ? 0 : -1;
}

int
raw_exchange(struct arena *a, int port, const char *req, size_t len, int timeout_ms,
    struct raw_response *out)
{
	int fd = raw_connect(port);
	int rc;

	if (fd < 0) {
		memset(out, 0, sizeof(*out));
		out->error = errno;
		return -1;
	}
	rc = raw_exchange_fd(a, fd, req, len, timeout_ms, out);
	close(fd);
	return rc;
}

const char *
raw_header(struct arena *a, const struct raw_response *r, const char *name)
{
	size_t nlen = strlen(name);
	const char *p;

	if (r->head == NULL)
		return NULL;
	p = strstr(r->head, "\r\n");
	while (p != NULL) {
		const char *line = p + 2;
		const char *eol = strstr(line, "\r\n");

		if (eol == NULL || eol == line)
			break;
		if ((size_t)(eol - line) > nlen && strncasecmp(line, name, nlen) == 0 &&
		    line[nlen] == ':') {
			const char *v = line + nlen + 1;

			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			return arena_strndup(a, v, (size_t)(eol - v));
		}
		p = eol;
	}
	return NULL;
}

bool
raw_wait_closed(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;
	int pr;

	do
		pr = poll(&pfd, 1, timeout_ms);
	while (pr < 0 && errno == EINTR);
	if (pr <= 0)
		return false;
	return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}
