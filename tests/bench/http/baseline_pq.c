/*
 * baseline_pq.c - baseline (b) of tests/bench/http: a bare
 * libmicrohttpd + libpq handler doing what GET /v1/me costs at the
 * least: one prepared, indexed SELECT per request on a per-thread
 * connection. The statement is gpupoold's token lookup (tokens JOIN
 * users by the unique digest) on a database migrated by gpupoold, so
 * the database side of the comparison is the same query plan.
 *
 *   bench_http_pq PORT CONNINFO DIGEST_HEX   (runs until SIGINT or SIGTERM)
 *
 * DIGEST_HEX is the SHA-256 of a live token, 64 hex digits; every
 * request looks it up. Replies 200 {"username":...,"role":...}, 401 when
 * the token is not found, 503 when the database fails.
 */
#include "common.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STMT_NAME "token_auth"

static const char token_auth_sql[] =
    "SELECT t.id, t.kind, u.id, u.username, u.role, "
    "(extract(epoch from t.last_used_at) * 1000000)::int8, t.digest "
    "FROM tokens t JOIN users u ON u.id = t.user_id "
    "WHERE t.digest = $1 AND t.revoked_at IS NULL "
    "AND (t.expires_at IS NULL OR t.expires_at > now()) AND NOT u.disabled";

static const char *conninfo;
static char digest_param[2 + 64 + 1]; /* "\x" + hex: bytea text input */
static pthread_key_t conn_key;
static char seen;

static void
conn_free(void *p)
{
	PQfinish(p);
}

/* This thread's connection: connected and prepared on first use. */
static PGconn *
thread_conn(void)
{
	PGconn *c = pthread_getspecific(conn_key);
	PGresult *r;

	if (c != NULL && PQstatus(c) == CONNECTION_OK)
		return c;
	if (c != NULL) {
		PQfinish(c);
		pthread_setspecific(conn_key, NULL);
	}
	c = PQconnectdb(conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "could not connect: %s", PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	r = PQprepare(c, STMT_NAME, token_auth_sql, 1, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "could not prepare: %s", PQerrorMessage(c));
		PQclear(r);
		PQfinish(c);
		return NULL;
	}
	PQclear(r);
	pthread_setspecific(conn_key, c);
	return c;
}

static enum MHD_Result
reply(struct MHD_Connection *conn, unsigned int status, const char *body, size_t len)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	static const char unavailable[] = "{\"error\":\"database_unavailable\"}";
	static const char unauthorized[] = "{\"error\":\"unauthorized\"}";
	const char *params[1] = { digest_param };
	char body[256];
	PGconn *c;
	PGresult *r;
	int n;

	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	(void)upload_data;
	if (*con_cls == NULL) {
		*con_cls = &seen;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	c = thread_conn();
	if (c == NULL)
		return reply(conn, 503, unavailable, sizeof(unavailable) - 1);
	r = PQexecPrepared(c, STMT_NAME, 1, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		PQclear(r);
		return reply(conn, 503, unavailable, sizeof(unavailable) - 1);
	}
	if (PQntuples(r) != 1) {
		PQclear(r);
		return reply(conn, 401, unauthorized, sizeof(unauthorized) - 1);
	}
	/* user names match ^[a-z0-9][a-z0-9._-]*$ and roles are fixed words */
	n = snprintf(body, sizeof(body), "{\"username\":\"%s\",\"role\":\"%s\",\"projects\":[]}",
	    PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4));
	PQclear(r);
	if (n < 0 || (size_t)n >= sizeof(body))
		return reply(conn, 503, unavailable, sizeof(unavailable) - 1);
	return reply(conn, MHD_HTTP_OK, body, (size_t)n);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	*con_cls = NULL;
}

static int
digest_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 64;
}

int
main(int argc, char **argv)
{
	struct MHD_Daemon *d;
	PGconn *probe;
	int port;

	if (argc != 4 || (port = bench_parse_port(argv[1])) < 0 || !digest_valid(argv[3])) {
		fprintf(stderr, "usage: bench_http_pq PORT CONNINFO DIGEST_HEX\n");
		return 2;
	}
	conninfo = argv[2];
	snprintf(digest_param, sizeof(digest_param), "\\x%s", argv[3]);
	probe = PQconnectdb(conninfo);
	if (PQstatus(probe) != CONNECTION_OK) {
		fprintf(stderr, "could not connect: %s", PQerrorMessage(probe));
		PQfinish(probe);
		return 1;
	}
	PQfinish(probe);
	if (pthread_key_create(&conn_key, conn_free) != 0)
		return 1;
	bench_block_signals();
	d = bench_start(port, on_request, NULL, on_completed);
	if (d == NULL)
		return 1;
	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);
	bench_wait_for_signal();
	MHD_stop_daemon(d);
	return 0;
}
