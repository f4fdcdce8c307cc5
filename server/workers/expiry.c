/*
 * expiry.c - the expiry worker (see expiry.h): a periodic worker
 * (periodic.h) on every replica (no leadership lock: the passes are idempotent).
 */
#include "expiry.h"

#include "core/json.h"
#include "core/log.h"
#include "db/db.h"
#include "db/db_pools.h"
#include "periodic.h"
#include "service/pool_service.h"
#include "service/pool_status.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define RELEASES_PER_RUN 100 /* pools released per run at most */

/*
 * One pass: expire pending requests past their lifetime, release pools
 * past their end time (the approval path of service/pool_service.c, as
 * the API's release), settle pool statuses.
 */
static void
expiry_run_once(void *arg)
{
	struct gp_error err;
	int64_t n = 0;
	char buf[24];

	(void)arg;
	gp_error_clear(&err);
	if (service_requests_expire(db_thread(), &n, &err) < 0)
		log_warn(NULL, "could not expire pool requests", "error", err.message);
	if (n > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)n);
		log_info(NULL, "expired pending pool requests", "count", buf);
	}
	for (int i = 0; i < RELEASES_PER_RUN; i++) {
		struct arena *a = arena_create();
		struct pool_row pool;
		bool found = false;

		gp_error_clear(&err);
		if (service_release_due(db_thread(), a, &found, &pool, &err) < 0) {
			log_warn(NULL, "could not release a pool at its end time", "error",
			    err.message);
			arena_destroy(a);
			break;
		}
		if (found)
			log_info(NULL, "released a pool at its end time", "pool", pool.name,
			    "project", pool.project);
		arena_destroy(a);
		if (!found)
			break;
	}
	gp_error_clear(&err);
	if (pool_status_settle_due(db_thread(), &n, &err) < 0)
		log_warn(NULL, "could not settle pool statuses", "error", err.message);
}

int
expiry_start(struct periodic **out, int interval_s)
{
	struct periodic_config pc = {
		.name = "expiry",
		.interval_ms = (interval_s > 0 ? interval_s : 10) * 1000,
		/*
		 * every replica runs its own passes (each step is idempotent),
		 * at its own interval: a leader's interval would rule the others
		 */
		.leader = false,
		.run = expiry_run_once,
	};

	pc.jitter_ms = pc.interval_ms / 10;
	return periodic_start(out, &pc);
}
