/*
 * conns.c - the connection registry of the slow-client defence: every
 * connection with the deadline of the phase it is in, the count of open
 * connections per peer address (and of requests in flight per client
 * behind a trusted proxy), the sweeper thread that shuts down a
 * connection past its deadline, and the open-file reservation.
 */
#include "http_internal.h"

#include "core/log.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

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
int
http_count_add(struct count_table *t, const char *key, int delta)
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

void
http_count_free(struct count_table *t)
{
	for (int i = 0; i < HTTP_COUNT_BUCKETS; i++) {
		while (t->bucket[i] != NULL) {
			struct addr_count *e = t->bucket[i];

			t->bucket[i] = e->next;
			free(e);
		}
	}
}

struct conn_state *
http_conn_state_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci != NULL ? ci->socket_context : NULL;
}

/* Move cs to a new deadline (0: none), seconds from now. */
void
http_conn_deadline(struct conn_state *cs, int seconds)
{
	if (cs != NULL)
		atomic_store(&cs->deadline_us,
		    seconds > 0 ? time_mono_us() + (int64_t)seconds * 1000000 : 0);
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
		cs->trusted_peer = http_cidr_match(cfg, ntohl(in->sin_addr.s_addr));
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
	http_conn_deadline(cs, s->cfg.header_timeout_s);
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
		if (http_count_add(&s->peers, cs->peer, 1) > s->cfg.per_ip_limit)
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
		(void)http_count_add(&s->peers, cs->peer, -1);
	pthread_mutex_unlock(&s->lock);
	if (!cs->begun)
		atomic_fetch_sub(&s->fresh, 1);
	free(cs);
}

void
http_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
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
void *
http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct http_server *s = cls;
	struct conn_state *cs = http_conn_state_of(conn);

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
void *
http_sweep_main(void *arg)
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
void
http_reserve_files(unsigned int connections)
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
