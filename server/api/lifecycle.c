/*
 * lifecycle.c - the /metrics collectors of the handler files (see
 * api_start in api.h). The group-commit queues are workers/pool_queues.c;
 * the database, process and registry collectors live with what they
 * count (db/db.c, core/metrics_process.c, workers/deferred.c).
 */
#include "lifecycle.h"
#include "telemetry.h"

#include "capacity.h"
#include "service/layout_cache.h"
#include "pools.h"

#include "core/metrics_registry.h"
#include "core/strbuf.h"

/* Capacity gauges: one grouped scan of gpus; nothing when the database is away. */
static void
collect_capacity(struct strbuf *b, struct arena *a, void *arg)
{
	const char *text = capacity_metrics_text(a, arg);

	if (text != NULL)
		strbuf_printf(b, "%s", text);
}

/* Pool gauges; nothing when the database is away. */
static void
collect_pools(struct strbuf *b, struct arena *a, void *arg)
{
	const char *text = pools_metrics_text(a);

	(void)arg;
	if (text != NULL)
		strbuf_printf(b, "%s", text);
}

/* Open alerts per type; nothing when the database is away. */
static void
collect_alerts(struct strbuf *b, struct arena *a, void *arg)
{
	const char *text = alerts_metrics_text(a);

	(void)arg;
	if (text != NULL)
		strbuf_printf(b, "%s", text);
}

int
api_start(struct app *app)
{
	if (metrics_register("capacity", collect_capacity, (void *)app->catalog) < 0 ||
	    metrics_register("pools", collect_pools, NULL) < 0 ||
	    metrics_register("alerts", collect_alerts, NULL) < 0) {
		metrics_unregister_all();
		return -1;
	}
	return 0;
}

void
api_stop(struct app *app)
{
	(void)app;
	metrics_unregister_all();
	layout_cache_reset(); /* its keys point into the catalog */
}
