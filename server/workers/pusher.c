/*
 * pusher.c - the outbox pusher (pusher.h).
 */
#include "pusher.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "core/log.h"
#include "core/timeutil.h"
#include "crypto/digest.h"
#include "db/db.h"
#include "domain/callback.h"
#include "db/db_agent.h"
#include "periodic.h"

#define PUSH_BATCH 64            /* nodes pushed per pass at most */
#define PUSH_MAX_DELAY_MS 300000 /* backoff cap: 5 minutes */

struct push {
	struct outbox_push o;
	int64_t generation;
	const char *doc;
	CURL *easy;
	struct curl_slist *headers;
	char url[600];
	char error[CURL_ERROR_SIZE]; /* curl's text: logged here, never stored */
	const char *failure;         /* the class stored and alerted: see push_class() */
	long status;
};

/*
 * A failed push's class: timeout, refused (no connection: refused,
 * unreachable, no such host), tls, http_status (an answer that is not
 * 2xx) or error. Only the class is stored and shown in the push_failed
 * alert: never the remote's text or status, so the pusher is no port
 * scanner for whoever enrolls a callback URL.
 */
static const char *
push_class(CURLcode rc)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return "timeout";
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
		return "refused";
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_USE_SSL_FAILED:
		return "tls";
	default:
		return "error";
	}
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static int
backoff_ms(const struct pusher_config *cfg, int attempts)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint32_t)time(NULL);
	/* doubling from the first delay, jittered between half and the whole */
	return (int)time_backoff(cfg->backoff_ms, attempts - 1, PUSH_MAX_DELAY_MS, r);
}

/*
 * Connect only where a push may go: an address the callback host resolves
 * to now (not at enrollment) that is link-local, metadata or unspecified
 * is refused unless GPUPOOL_AGENT_CALLBACK_ALLOW lists it.
 */
static curl_socket_t
push_open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *sa)
{
	const struct pusher_config *cfg = arg;
	struct callback_addr addr;
	char text[INET6_ADDRSTRLEN] = "";

	(void)purpose;
	if (sa->family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)&sa->addr)->sin_addr,
		    text, sizeof(text));
	else if (sa->family == AF_INET6)
		inet_ntop(AF_INET6,
		    &((const struct sockaddr_in6 *)(const void *)&sa->addr)->sin6_addr, text,
		    sizeof(text));
	if (!callback_parse_addr(text, &addr) ||
	    callback_check_addr(cfg->callback_allow, &addr, NULL) == CALLBACK_RESTRICTED)
		return CURL_SOCKET_BAD;
	return socket(sa->family, sa->socktype, sa->protocol);
}

/* Set up one signed POST of p->doc to the agent. */
static int
push_prepare(struct push *p, const struct pusher_config *cfg, struct arena *a)
{
	char ts[24], sig[65];
	size_t len = strlen(p->doc);
	char *msg;
	const char *base = p->o.callback_url;
	size_t bl = strlen(base);

	snprintf(p->url, sizeof(p->url), "%.*s/v1/desired-state",
	    (int)(bl > 0 && base[bl - 1] == '/' ? bl - 1 : bl), base);
	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	msg = arena_printf(a, "%s.%s", ts, p->doc);
	digest_hmac_sha256_hex(p->o.push_secret, strlen(p->o.push_secret), msg, strlen(msg), sig);
	p->headers = curl_slist_append(NULL, "Content-Type: application/json");
	p->headers = curl_slist_append(p->headers, arena_printf(a, "X-Gpupool-Timestamp: %s", ts));
	p->headers =
	    curl_slist_append(p->headers, arena_printf(a, "X-Gpupool-Signature: v1=%s", sig));
	digest_cleanse(sig, sizeof(sig));
	p->easy = curl_easy_init();
	if (p->easy == NULL || p->headers == NULL)
		return -1;
	curl_easy_setopt(p->easy, CURLOPT_URL, p->url);
	curl_easy_setopt(p->easy, CURLOPT_POSTFIELDS, p->doc);
	curl_easy_setopt(p->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(p->easy, CURLOPT_HTTPHEADER, p->headers);
	curl_easy_setopt(p->easy, CURLOPT_TIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(p->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(p->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(p->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(p->easy, CURLOPT_OPENSOCKETFUNCTION, push_open_socket);
	curl_easy_setopt(p->easy, CURLOPT_OPENSOCKETDATA, (void *)cfg);
	curl_easy_setopt(p->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(p->easy, CURLOPT_ERRORBUFFER, p->error);
	curl_easy_setopt(p->easy, CURLOPT_PRIVATE, p);
	curl_easy_setopt(p->easy, CURLOPT_USERAGENT, "gpupoold-pusher");
	return 0;
}

static void
pusher_run_once(void *arg)
{
	const struct pusher_config *cfg = arg;
	struct arena *a = arena_create();
	struct gp_error err;
	struct outbox_push *rows = NULL;
	struct push *pushes;
	CURLM *multi = NULL;
	int n = 0, running = 0, added = 0;

	arena_set_sensitive(a); /* push secrets */
	gp_error_clear(&err);
	/* lease: longer than a whole pass can take */
	if (db_outbox_claim(db_thread(), a, PUSH_BATCH * 4, cfg->timeout_ms / 1000 + 30, &rows, &n,
		&err) < 0) {
		log_warn(NULL, "could not claim outbox rows", "error", err.message);
		goto out;
	}
	if (n == 0)
		goto out;
	pushes = arena_alloc(a, sizeof(*pushes) * (size_t)n);
	multi = curl_multi_init();
	if (multi == NULL)
		goto out;
	for (int i = 0; i < n; i++) {
		struct push *p = &pushes[i];

		memset(p, 0, sizeof(*p));
		p->o = rows[i];
		gp_error_clear(&err);
		if (db_agent_desired_state(db_thread(), a, p->o.node_id, &p->generation, &p->doc,
			&err) < 0 ||
		    push_prepare(p, cfg, a) < 0) {
			snprintf(p->error, sizeof(p->error), "%.200s",
			    gp_error_isset(&err) ? err.message : "could not prepare the push");
			p->failure = "error";
			continue;
		}
		curl_multi_add_handle(multi, p->easy);
		added++;
	}
	if (added > 0) {
		do {
			CURLMcode mc = curl_multi_perform(multi, &running);

			if (mc == CURLM_OK && running > 0)
				mc = curl_multi_poll(multi, NULL, 0, 1000, NULL);
			if (mc != CURLM_OK)
				break;
		} while (running > 0);
		for (;;) {
			int left = 0;
			CURLMsg *m = curl_multi_info_read(multi, &left);
			struct push *p = NULL;

			if (m == NULL)
				break;
			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&p);
			if (m->data.result == CURLE_OK)
				curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE,
				    &p->status);
			else {
				p->failure = push_class(m->data.result);
				if (p->error[0] == '\0')
					snprintf(p->error, sizeof(p->error), "%s",
					    curl_easy_strerror(m->data.result));
			}
		}
	}
	for (int i = 0; i < n; i++) {
		struct push *p = &pushes[i];
		char node[24];
		bool gave_up = false;

		snprintf(node, sizeof(node), "%lld", (long long)p->o.node_id);
		gp_error_clear(&err);
		if (p->status >= 200 && p->status < 300) {
			if (db_outbox_done(db_thread(), p->o.node_id, p->generation, &err) < 0)
				log_warn(NULL, "could not record a push", "node", node, "error",
				    err.message);
		} else {
			const char *why = p->status != 0 ? "http_status"
			    : p->failure != NULL         ? p->failure
							 : "error";

			if (db_outbox_retry(db_thread(), p->o.node_id, p->o.attempts,
				cfg->max_attempts, backoff_ms(cfg, p->o.attempts), why, &gave_up,
				&err) < 0)
				log_warn(NULL, "could not record a failed push", "node", node,
				    "error", err.message);
			else if (gave_up)
				log_warn(NULL, "gave up pushing to a node agent", "node", node,
				    "class", why, "error",
				    p->status != 0 ? arena_printf(a, "HTTP %ld", p->status)
						   : p->error);
		}
		if (p->easy != NULL) {
			curl_multi_remove_handle(multi, p->easy);
			curl_easy_cleanup(p->easy);
		}
		curl_slist_free_all(p->headers);
	}
out:
	if (multi != NULL)
		curl_multi_cleanup(multi);
	arena_destroy(a);
}

int
pusher_start(struct periodic **out, const struct pusher_config *cfg)
{
	struct pusher_config own = *cfg; /* copied by periodic_start */
	struct periodic_config pc = {
		.name = "outbox-pusher",
		.leader = false, /* rows are claimed with SKIP LOCKED and a lease */
		.run = pusher_run_once,
		.arg = &own,
		.arg_size = sizeof(own),
	};

	/* once, at start-up, before the pusher's thread exists */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -1;
	if (own.interval_ms <= 0)
		own.interval_ms = 1000;
	if (own.timeout_ms <= 0)
		own.timeout_ms = 5000;
	if (own.max_attempts <= 0)
		own.max_attempts = 10;
	if (own.backoff_ms <= 0)
		own.backoff_ms = 1000;
	pc.interval_ms = own.interval_ms;
	pc.jitter_ms = own.interval_ms / 10;
	return periodic_start(out, &pc);
}
