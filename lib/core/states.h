/*
 * states.h - the states and actions of pools, pool requests and
 * allocations as enums. Text only at the edges: the JSON the API speaks
 * and the SQL the database stores, both through the functions below
 * (the names are the same at both edges).
 */
#ifndef GP_CORE_STATES_H
#define GP_CORE_STATES_H

enum pool_action {
	POOL_ACTION_CREATE,
	POOL_ACTION_EXPAND,
	POOL_ACTION_SHRINK,
	POOL_ACTION_RELEASE,
};

enum pool_request_state {
	POOL_REQUEST_PENDING,
	POOL_REQUEST_APPROVED,
	POOL_REQUEST_FULFILLED,
	POOL_REQUEST_FAILED,
	POOL_REQUEST_REJECTED,
	POOL_REQUEST_CANCELLED,
	POOL_REQUEST_EXPIRED,
};

enum pool_status {
	POOL_STATUS_PENDING,
	POOL_STATUS_PROVISIONING,
	POOL_STATUS_ACTIVE,
	POOL_STATUS_DEGRADED,
	POOL_STATUS_RELEASING,
	POOL_STATUS_RELEASED,
};

enum allocation_state {
	ALLOCATION_RESERVED,
	ALLOCATION_PROVISIONING,
	ALLOCATION_READY,
	ALLOCATION_FAILED,
	ALLOCATION_RELEASING,
	ALLOCATION_RELEASED,
};

/* Names as the API and the database spell them; parse: -1 when unknown. */
int pool_action_parse(const char *s, enum pool_action *out);
const char *pool_action_name(enum pool_action a);
int pool_request_state_parse(const char *s, enum pool_request_state *out);
const char *pool_request_state_name(enum pool_request_state s);
int pool_status_parse(const char *s, enum pool_status *out);
const char *pool_status_name(enum pool_status s);
int allocation_state_parse(const char *s, enum allocation_state *out);
const char *allocation_state_name(enum allocation_state s);

#endif
