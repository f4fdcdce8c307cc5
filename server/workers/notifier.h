/*
 * notifier.h - cross-replica wake-ups: one dedicated PostgreSQL
 * connection per process (db_listen.h) that LISTENs on the channels
 * registered at start, on a thread of its own, and hands every NOTIFY
 * payload to its channel's callback. When the connection breaks it
 * reconnects by itself (backoff from 100 ms up to reconnect_max_ms) and
 * LISTENs again; notifications sent while it was away are lost, so after
 * every reconnect each callback is called once with payload NULL:
 * "anything may have changed" (notifier_wake_registry then wakes every
 * waiting request, which re-reads what it waits for).
 */
#ifndef GP_WORKERS_NOTIFIER_H
#define GP_WORKERS_NOTIFIER_H

#include <stdbool.h>
#include <stdint.h>

struct notifier;

/* On the notifier's thread; payload NULL after a reconnect (see above). */
typedef void (*notifier_fn)(const char *payload, void *arg);

struct notifier_channel {
	const char *name; /* [a-z_][a-z0-9_]*, at most 63 characters */
	notifier_fn fn;
	void *arg;
};

#define NOTIFIER_MAX_CHANNELS 16

struct notifier_config {
	const char *url;                         /* libpq conninfo or URI */
	const char *application_name;            /* default "gpupoold notifier" */
	const struct notifier_channel *channels; /* copied */
	int nchannels;                           /* 1..NOTIFIER_MAX_CHANNELS */
	int reconnect_max_ms;                    /* default 5000 */
};

/*
 * Start the thread; it connects in the background (a database that is
 * away at start is retried like a lost connection). -1 on a bad
 * configuration or when the thread cannot start; nothing is left behind.
 */
int notifier_start(struct notifier **out, const struct notifier_config *cfg)
    __attribute__((warn_unused_result));

/*
 * Stop the thread (within one poll, promptly) and close the connection:
 * no callback runs afterwards and notifier_connected is false, but n stays
 * readable by other threads until notifier_stop. NULL is a no-op.
 */
void notifier_halt(struct notifier *n);

/* notifier_halt, then free n (no other thread may still use it). NULL is a no-op. */
void notifier_stop(struct notifier *n);

/* Whether the LISTEN connection is up, and its server process id (0 when down). */
bool notifier_connected(struct notifier *n);
int notifier_backend_pid(struct notifier *n);

/* Connections opened after the first one (reconnects). */
uint64_t notifier_reconnects(struct notifier *n);

/*
 * A notifier_fn for a channel whose payloads are registry keys: arg is a
 * struct deferred_registry; wakes the payload's key, or everything for
 * NULL.
 */
void notifier_wake_registry(const char *payload, void *arg);

#endif
