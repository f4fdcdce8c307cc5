/*
 * pusher.h - the outbox pusher: drains the outbox (rows claimed with
 * FOR UPDATE SKIP LOCKED and a lease, so several replicas share the work)
 * and POSTs each node's current desired state to its agent's callback URL
 * with libcurl's multi interface, signed with the node's push secret
 * (X-Gpupool-Timestamp, X-Gpupool-Signature: v1=hex HMAC-SHA256 of
 * "<timestamp>.<body>"). Failures back off exponentially with jitter; after
 * the last attempt the rows are given up and an alert push_failed raised
 * (the agent still converges by long-poll). Link-local, metadata and
 * unspecified addresses are never connected to unless the allow list names
 * them (a callback host that resolves there later: DNS rebinding).
 * docs/agent.md.
 */
#ifndef GP_WORKERS_PUSHER_H
#define GP_WORKERS_PUSHER_H

struct periodic;

struct pusher_config {
	int interval_ms;  /* between passes (default 1000) */
	int timeout_ms;   /* per push (default 5000) */
	int max_attempts; /* then give up (default 10) */
	int backoff_ms;   /* first retry delay (default 1000), doubling, jittered, max 5 min */
	const char *callback_allow; /* GPUPOOL_AGENT_CALLBACK_ALLOW: may reach restricted addresses */
};

int pusher_start(struct periodic **out, const struct pusher_config *cfg)
    __attribute__((warn_unused_result));

#endif
