/*
 * lifecycle.c - what the API needs running beside the HTTP server (see
 * api_start in api.h): the group-commit queues of the pool handlers and
 * the /metrics collectors of the handler files, registered here in the
 * order /metrics has always listed them.
 */
#include "api.h"
#include "capacity.h"
#include "service/layout_cache.h"
#include "pools.h"

#include "core/metrics_registry.h"
#include "core/strbuf.h"

/* The group-commit workers' counters. */
static void
collect_approvals(struct strbuf *b, struct arena *a, void *arg)
{
	(void)a;
	(void)arg;
	pool_approvals_metrics(b);
}

/* The database counters of this process. */
static void
collect_db(struct strbuf *b, struct arena *a, void *arg)
{
	(void)a;
	(void)arg;
	strbuf_printf(b,
	    "# HELP gpupool_db_errors_total Failed database operations.\n"
	    "# TYPE gpupool_db_errors_total counter\n"
	    "gpupool_db_errors_total %llu\n",
	    (unsigned long long)db_stat_errors());
	strbuf_printf(b,
	    "# HELP gpupool_db_reconnects_total Database reconnections.\n"
	    "# TYPE gpupool_db_reconnects_total counter\n"
	    "gpupool_db_reconnects_total %llu\n",
	    (unsigned long long)db_stat_reconnects());
}

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
	if (metrics_register("approvals", collect_approvals, NULL) < 0 ||
	    metrics_register("db", collect_db, NULL) < 0 ||
	    metrics_register("capacity", collect_capacity, (void *)app->catalog) < 0 ||
	    metrics_register("pools", collect_pools, NULL) < 0 ||
	    metrics_register("alerts", collect_alerts, NULL) < 0)
		goto fail;
	if (pool_workers_start(app) < 0)
		goto fail;
	return 0;
fail:
	metrics_unregister_all();
	return -1;
}

void
api_drain(struct app *app)
{
	pool_workers_stop(app);
}

void
api_stop(struct app *app)
{
	pool_workers_free(app);
	metrics_unregister_all();
	layout_cache_reset(); /* its keys point into the catalog */
}
