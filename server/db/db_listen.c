/*
 * db_listen.c - the LISTEN connection (see db_listen.h). LISTEN takes no
 * parameters, so its statement is the constant below followed by a
 * channel name that is checked against a strict pattern and quoted with
 * PQescapeIdentifier; names come from code only.
 */
#include "db_listen.h"

#include "core/log.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LISTEN_CHANNEL_MAX 63

static const char sql_listen[] = "LISTEN ";

struct db_listener {
	PGconn *conn;
};

static bool
channel_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > LISTEN_CHANNEL_MAX || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static int
listen_lost(struct db_listener *l, struct gp_error *err, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s",
	    l != NULL && l->conn != NULL ? PQerrorMessage(l->conn) : "");
	msg[strcspn(msg, "\n")] = '\0';
	gp_error_set(err, 503, "database_unavailable", "%s: %s", what, msg);
	if (err != NULL)
		err->retry_after = 1;
	return -1;
}

/* LISTEN on one channel; the connection is up. */
static int
listen_one(struct db_listener *l, const char *channel, struct gp_error *err)
{
	char sql[sizeof(sql_listen) + 2 * LISTEN_CHANNEL_MAX + 3];
	char *quoted;
	PGresult *r;
	bool ok;

	if (!channel_valid(channel)) {
		gp_error_set(err, 500, "internal", "invalid LISTEN channel name \"%s\"", channel);
		return -1;
	}
	quoted = PQescapeIdentifier(l->conn, channel, strlen(channel));
	if (quoted == NULL)
		return listen_lost(l, err, "could not quote a channel name");
	snprintf(sql, sizeof(sql), "%s%s", sql_listen, quoted);
	PQfreemem(quoted);
	r = PQexec(l->conn, sql);
	ok = r != NULL && PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok)
		return listen_lost(l, err, "could not LISTEN");
	return 0;
}

/* Server notices (a FATAL before a terminated session's EOF) go to the log. */
static void
listen_notice(void *arg, const char *message)
{
	char msg[256];

	(void)arg;
	snprintf(msg, sizeof(msg), "%s", message);
	msg[strcspn(msg, "\n")] = '\0';
	log_info(NULL, "LISTEN connection notice", "message", msg);
}

int
db_listen_open(struct db_listener **out, const char *url, const char *application_name,
    const char *const *channels, int n, struct gp_error *err)
{
	static const char *const keys[] = { "dbname", "application_name", "connect_timeout",
		"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", NULL };
	const char *vals[] = { url, application_name, "3", "1", "30", "10", "3", NULL };
	struct db_listener *l = calloc(1, sizeof(*l));

	if (l == NULL) {
		gp_error_set(err, 500, "internal", "out of memory");
		return -1;
	}
	l->conn = PQconnectdbParams(keys, vals, 1);
	if (l->conn == NULL || PQstatus(l->conn) != CONNECTION_OK) {
		listen_lost(l, err, "could not open the LISTEN connection");
		goto fail;
	}
	PQsetNoticeProcessor(l->conn, listen_notice, NULL);
	for (int i = 0; i < n; i++)
		if (listen_one(l, channels[i], err) < 0)
			goto fail;
	if (PQsetnonblocking(l->conn, 1) != 0) {
		listen_lost(l, err, "could not make the LISTEN connection non-blocking");
		goto fail;
	}
	*out = l;
	return 0;
fail:
	db_listen_close(l);
	return -1;
}

int
db_listen_wait(struct db_listener *l, int timeout_ms, int wake_fd, db_notify_fn fn, void *arg,
    struct gp_error *err)
{
	struct pollfd pfd[2];
	PGnotify *nf;
	int rc;

	pfd[0].fd = PQsocket(l->conn);
	pfd[0].events = POLLIN;
	pfd[0].revents = 0;
	pfd[1].fd = wake_fd;
	pfd[1].events = POLLIN;
	pfd[1].revents = 0;
	if (pfd[0].fd < 0 || PQstatus(l->conn) != CONNECTION_OK)
		return listen_lost(l, err, "the LISTEN connection is gone");
	rc = poll(pfd, wake_fd >= 0 ? 2 : 1, timeout_ms);
	if (rc < 0 && errno != EINTR)
		return listen_lost(l, err, "could not wait on the LISTEN connection");
	if (rc <= 0 || (pfd[0].revents == 0))
		return 0;
	if (PQconsumeInput(l->conn) == 0)
		return listen_lost(l, err, "the LISTEN connection broke");
	while ((nf = PQnotifies(l->conn)) != NULL) {
		fn(nf->relname, nf->extra != NULL ? nf->extra : "", arg);
		PQfreemem(nf);
	}
	/* a FATAL (pg_terminate_backend) arrives as data, then EOF */
	if (PQstatus(l->conn) != CONNECTION_OK)
		return listen_lost(l, err, "the LISTEN connection broke");
	return 0;
}

int
db_listen_backend_pid(const struct db_listener *l)
{
	return PQbackendPID(l->conn);
}

void
db_listen_close(struct db_listener *l)
{
	if (l == NULL)
		return;
	if (l->conn != NULL)
		PQfinish(l->conn);
	free(l);
}
