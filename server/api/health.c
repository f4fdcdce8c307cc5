/*
 * health.c - /healthz, /readyz, /metrics and the served contract.
 */
#include "health.h"

#ifndef GP_VERSION
#define GP_VERSION "0.0.0"
#endif

#include <stdatomic.h>
#include <stdint.h>
#include "metrics.h"

#include "auth/token.h"
#include "db/migrate.h"

#include <string.h>
#include <strings.h>

int
api_healthz(struct request *req, struct response *res, struct gp_error *err)
{
	static const char body[] = "{\"status\":\"ok\",\"version\":\"" GP_VERSION "\"}";

	(void)req;
	(void)err;
	response_raw(res, 200, "application/json", body, sizeof(body) - 1);
	return 0;
}

int
api_readyz(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *o;
	int version = 0;

	if (migrate_current_version(db_thread(), &version, err) < 0)
		return -1;
	if (version != api_app(req)->schema_version)
		return gp_error_set(err, 503, "schema_mismatch",
		    "the database schema is at version %d, this server needs %d", version,
		    api_app(req)->schema_version);
	o = json_object_new_object();
	json_add_str(o, "status", "ready");
	json_add_int(o, "schema_version", version);
	response_json(req, res, 200, o);
	return 0;
}

int
api_metrics(struct request *req, struct response *res, struct gp_error *err)
{
	struct app *app = api_app(req);
	const char *body;
	size_t len;

	if (app->metrics_protected) {
		const char *h = req->header(req, "Authorization");
		unsigned char digest[TOKEN_DIGEST_LEN];

		if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
			return gp_error_set(err, 401, "unauthorized",
			    "/metrics needs the bearer token of GPUPOOL_METRICS_TOKEN");
		token_digest(h + 7, strlen(h + 7), digest);
		if (!token_digest_equal(digest, app->metrics_digest))
			return gp_error_set(err, 401, "unauthorized", "invalid metrics token");
	}
	body = metrics_render(req->arena, &len);
	response_raw(res, 200, "text/plain; version=0.0.4", body, len);
	return 0;
}

int
api_openapi(struct request *req, struct response *res, struct gp_error *err)
{
	struct app *app = api_app(req);

	static _Atomic uint64_t tag;
	uint64_t h = atomic_load(&tag);

	(void)err;
	if (h == 0) {
		/* FNV-1a of the embedded document: its ETag, for If-None-Match */
		h = 1469598103934665603ULL;
		for (size_t i = 0; i < app->openapi_len; i++)
			h = (h ^ (unsigned char)app->openapi[i]) * 1099511628211ULL;
		h |= 1; /* never 0, which means not computed yet */
		atomic_store(&tag, h);
	}
	response_raw(res, 200, "application/yaml", app->openapi, app->openapi_len);
	response_header(res, "ETag",
	    arena_printf(req->arena, "\"%016llx\"", (unsigned long long)h));
	return 0;
}
