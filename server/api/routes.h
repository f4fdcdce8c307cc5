/*
 * routes.h - the route table (routes.c): every method and path, its handler,
 * who may call it and the query parameters it takes.
 */
#ifndef GP_API_ROUTES_H
#define GP_API_ROUTES_H

#include "api.h"

typedef int (*route_handler_fn)(struct request *req, struct response *res, struct gp_error *err);

/* Who may call a route (bits); per-object checks happen in the handler. */
enum {
	ALLOW_PUBLIC = 1 << 0, /* no token needed */
	ALLOW_USER = 1 << 1,   /* any authenticated user */
	ALLOW_ADMIN = 1 << 2,
	ALLOW_OPERATOR = 1 << 3,
	ALLOW_BILLING = 1 << 4,
	ALLOW_NODE = 1 << 5,    /* a node token (gpn_): the agent's own routes */
	AUTH_PROJECTS = 1 << 8, /* read the caller's memberships with the token */
};

struct route {
	const char *method;
	const char *pattern; /* "/v1/projects/{}/members/{}" */
	route_handler_fn handler;
	unsigned allow;
	/*
	 * The query parameters it takes, separated by spaces (NULL: none);
	 * the operation's in api/openapi.yaml (tests/contract). Any other,
	 * or one given twice, is 422 before the handler runs.
	 */
	const char *query;
};

#define Q_NONE NULL
/* limit and cursor, the query parameters of every paged list (api_page) */
#define Q_PAGE "limit cursor"

extern const struct route api_routes[];
extern const int api_nroutes;

#endif
