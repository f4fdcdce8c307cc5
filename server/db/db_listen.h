/*
 * db_listen.h - a LISTEN connection: a connection of its own (not a
 * thread's db_thread()) that listens on a fixed set of channels and
 * hands each NOTIFY to a callback. The workers' notifier owns one per
 * process and re-opens it when it breaks.
 */
#ifndef GP_DB_LISTEN_H
#define GP_DB_LISTEN_H

#include "core/error.h"

struct db_listener;

/* One notification: channel and payload ("" when NOTIFY gave none). */
typedef void (*db_notify_fn)(const char *channel, const char *payload, void *arg);

/*
 * Connect to url (libpq conninfo or URI; TCP keepalives on, so that a
 * silent peer is noticed) as application_name and LISTEN on each of
 * channels[0..n): names of [a-z_][a-z0-9_]* up to 63 characters (they
 * come from code, never from a request). -1 with err (503 when the
 * database is away, 500 on a bad channel name).
 */
int db_listen_open(struct db_listener **out, const char *url, const char *application_name,
    const char *const *channels, int n, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Wait up to timeout_ms for notifications, or for wake_fd (-1: none) to
 * become readable (it is not read), and call fn for every notification
 * that arrived, in order, on this thread. 0 on a timeout, a wake or after
 * dispatching; -1 with err (503) when the connection is lost: close it
 * and open another (notifications sent meanwhile are lost).
 */
int db_listen_wait(struct db_listener *l, int timeout_ms, int wake_fd, db_notify_fn fn, void *arg,
    struct gp_error *err) __attribute__((warn_unused_result));

/* The server process id of the connection (pg_terminate_backend in tests). */
int db_listen_backend_pid(const struct db_listener *l);

/* Close the connection; NULL is a no-op. */
void db_listen_close(struct db_listener *l);

#endif
