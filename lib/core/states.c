/*
 * states.c - names of the pool, pool-request and allocation states and
 * actions (see states.h).
 */
#include "core/states.h"

#include <stddef.h>
#include <string.h>

static const char *const action_names[] = { "create", "expand", "shrink", "release" };
static const char *const state_names[] = { "pending", "approved", "fulfilled", "failed", "rejected",
	"cancelled", "expired" };
static const char *const status_names[] = { "pending", "provisioning", "active", "degraded",
	"releasing", "released" };
static const char *const alloc_names[] = { "reserved", "provisioning", "ready", "failed",
	"releasing", "released" };

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int
name_parse(const char *const *names, int n, const char *s)
{
	if (s == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

int
pool_action_parse(const char *s, enum pool_action *out)
{
	int i = name_parse(action_names, NELEM(action_names), s);

	if (i < 0)
		return -1;
	*out = (enum pool_action)i;
	return 0;
}

const char *
pool_action_name(enum pool_action a)
{
	return (int)a >= 0 && (int)a < NELEM(action_names) ? action_names[a] : "unknown";
}

int
pool_request_state_parse(const char *s, enum pool_request_state *out)
{
	int i = name_parse(state_names, NELEM(state_names), s);

	if (i < 0)
		return -1;
	*out = (enum pool_request_state)i;
	return 0;
}

const char *
pool_request_state_name(enum pool_request_state s)
{
	return (int)s >= 0 && (int)s < NELEM(state_names) ? state_names[s] : "unknown";
}

int
pool_status_parse(const char *s, enum pool_status *out)
{
	int i = name_parse(status_names, NELEM(status_names), s);

	if (i < 0)
		return -1;
	*out = (enum pool_status)i;
	return 0;
}

const char *
pool_status_name(enum pool_status s)
{
	return (int)s >= 0 && (int)s < NELEM(status_names) ? status_names[s] : "unknown";
}

int
allocation_state_parse(const char *s, enum allocation_state *out)
{
	int i = name_parse(alloc_names, NELEM(alloc_names), s);

	if (i < 0)
		return -1;
	*out = (enum allocation_state)i;
	return 0;
}

const char *
allocation_state_name(enum allocation_state s)
{
	return (int)s >= 0 && (int)s < NELEM(alloc_names) ? alloc_names[s] : "unknown";
}
