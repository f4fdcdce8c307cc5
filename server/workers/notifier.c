/*
 * notifier.c - the LISTEN thread (see notifier.h). Stop is a byte on a
 * pipe that every wait also polls, so that it ends a wait or a backoff
 * at once.
 */
#include "notifier.h"
#include "deferred.h"

#include "core/error.h"
#include "core/log.h"
#include "db/db_listen.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOTIFIER_BACKOFF_MIN_MS 100
#define NOTIFIER_POLL_MS 1000

struct notifier {
	struct notifier_config cfg;
	struct notifier_channel channels[NOTIFIER_MAX_CHANNELS];
	const char *names[NOTIFIER_MAX_CHANNELS];
	pthread_t thread;
	int pipe[2]; /* [1] written by notifier_stop */
	atomic_bool stop;
	bool halted; /* notifier_halt joined the thread (the stopping thread's only) */
	atomic_bool connected;
	atomic_int backend_pid;
	atomic_uint_fast64_t reconnects;
};

static void
dispatch(const char *channel, const char *payload, void *arg)
{
	struct notifier *n = arg;

	for (int i = 0; i < n->cfg.nchannels; i++)
		if (strcmp(n->channels[i].name, channel) == 0)
			n->channels[i].fn(payload, n->channels[i].arg);
}

/* Sleep ms or until stopped. */
static void
backoff(struct notifier *n, int ms)
{
	struct pollfd pfd = { .fd = n->pipe[0], .events = POLLIN };

	(void)poll(&pfd, 1, ms);
}

static void *
notifier_main(void *arg)
{
	struct notifier *n = arg;
	struct db_listener *l = NULL;
	bool first = true;
	int wait_ms = NOTIFIER_BACKOFF_MIN_MS;

	while (!atomic_load(&n->stop)) {
		struct gp_error err;

		gp_error_clear(&err);
		if (l == NULL) {
			if (db_listen_open(&l, n->cfg.url, n->cfg.application_name, n->names,
				n->cfg.nchannels, &err) < 0) {
				if (first || wait_ms == NOTIFIER_BACKOFF_MIN_MS)
					log_warn(NULL, "could not open the LISTEN connection",
					    "error", err.message);
				l = NULL;
				first = false;
				backoff(n, wait_ms);
				wait_ms = wait_ms * 2 > n->cfg.reconnect_max_ms
				    ? n->cfg.reconnect_max_ms
				    : wait_ms * 2;
				continue;
			}
			atomic_store(&n->backend_pid, db_listen_backend_pid(l));
			/* counted before it shows as up (node_cache_source relies on it) */
			if (!first)
				atomic_fetch_add(&n->reconnects, 1);
			atomic_store(&n->connected, true);
			wait_ms = NOTIFIER_BACKOFF_MIN_MS;
			if (!first) {
				log_info(NULL, "LISTEN connection restored");
				/* what was sent while away is lost: tell every channel */
				for (int i = 0; i < n->cfg.nchannels; i++)
					n->channels[i].fn(NULL, n->channels[i].arg);
			}
			first = false;
			continue;
		}
		if (db_listen_wait(l, NOTIFIER_POLL_MS, n->pipe[0], dispatch, n, &err) < 0) {
			log_warn(NULL, "lost the LISTEN connection; reconnecting", "error",
			    err.message);
			atomic_store(&n->connected, false);
			atomic_store(&n->backend_pid, 0);
			db_listen_close(l);
			l = NULL;
		}
	}
	atomic_store(&n->connected, false);
	atomic_store(&n->backend_pid, 0);
	db_listen_close(l);
	return NULL;
}

int
notifier_start(struct notifier **out, const struct notifier_config *cfg)
{
	struct notifier *n;

	if (cfg->nchannels < 1 || cfg->nchannels > NOTIFIER_MAX_CHANNELS || cfg->url == NULL)
		return -1;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return -1;
	n->cfg = *cfg;
	if (n->cfg.application_name == NULL)
		n->cfg.application_name = "gpupoold notifier";
	if (n->cfg.reconnect_max_ms < NOTIFIER_BACKOFF_MIN_MS)
		n->cfg.reconnect_max_ms = 5000;
	for (int i = 0; i < cfg->nchannels; i++) {
		n->channels[i] = cfg->channels[i];
		n->names[i] = cfg->channels[i].name;
	}
	n->cfg.channels = n->channels;
	atomic_init(&n->stop, false);
	atomic_init(&n->connected, false);
	atomic_init(&n->backend_pid, 0);
	atomic_init(&n->reconnects, 0);
	if (pipe(n->pipe) < 0) {
		free(n);
		return -1;
	}
	(void)fcntl(n->pipe[0], F_SETFD, FD_CLOEXEC);
	(void)fcntl(n->pipe[1], F_SETFD, FD_CLOEXEC);
	if (pthread_create(&n->thread, NULL, notifier_main, n) != 0) {
		log_error(NULL, "could not start the notifier thread");
		close(n->pipe[0]);
		close(n->pipe[1]);
		free(n);
		return -1;
	}
	*out = n;
	return 0;
}

void
notifier_halt(struct notifier *n)
{
	if (n == NULL || n->halted)
		return;
	atomic_store(&n->stop, true);
	while (write(n->pipe[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(n->thread, NULL);
	n->halted = true;
}

void
notifier_stop(struct notifier *n)
{
	if (n == NULL)
		return;
	notifier_halt(n);
	close(n->pipe[0]);
	close(n->pipe[1]);
	free(n);
}

bool
notifier_connected(struct notifier *n)
{
	return atomic_load(&n->connected);
}

int
notifier_backend_pid(struct notifier *n)
{
	return atomic_load(&n->backend_pid);
}

uint64_t
notifier_reconnects(struct notifier *n)
{
	return atomic_load(&n->reconnects);
}

void
notifier_wake_registry(const char *payload, void *arg)
{
	struct deferred_registry *r = arg;

	if (payload == NULL)
		(void)deferred_wake_all(r);
	else
		(void)deferred_wake(r, payload);
}
