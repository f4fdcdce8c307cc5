/*
 * lifecycle.c - what the API needs running beside the HTTP server (see
 * api_start in api.h): the group-commit queues of the pool handlers and
 * the /metrics collectors of the handler files, registered here in the
 * order /metrics has always listed them.
 */
#include "api.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
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

/* Requests waiting in the deferred-request registry (long-polls). */
static void
collect_deferred(struct strbuf *b, struct arena *a, void *arg)
{
	struct app *app = arg;

	(void)a;
	if (app->waits == NULL)
		return;
	strbuf_printf(b,
	    "# HELP gpupool_deferred_waiting Requests waiting in the registry (agent long-polls).\n"
	    "# TYPE gpupool_deferred_waiting gauge\n"
	    "gpupool_deferred_waiting %d\n",
	    deferred_count(app->waits));
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

#ifndef GP_VERSION
#define GP_VERSION "0.0.0"
#endif
#ifndef GP_COMMIT
#define GP_COMMIT "unknown"
#endif

/* gpupool_build_info and the process_* metrics Prometheus client libraries export. */
static void
collect_process(struct strbuf *b, struct arena *a, void *arg)
{
	static double start_time;
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	unsigned long utime = 0, stime = 0, vsize = 0;
	long rss = 0;
	unsigned long long starttime = 0;
	struct rlimit rl;
	int fds = 0;
	FILE *f;
	DIR *d;

	(void)a;
	(void)arg;
	strbuf_printf(b,
	    "# HELP gpupool_build_info The running build (always 1).\n"
	    "# TYPE gpupool_build_info gauge\n"
	    "gpupool_build_info{version=\"%s\",commit=\"%s\"} 1\n",
	    GP_VERSION, GP_COMMIT);
	f = fopen("/proc/self/stat", "r");
	if (f != NULL) {
		/* fields 14, 15 (utime, stime), 22 (starttime), 23 (vsize), 24 (rss) */
		if (fscanf(f,
			"%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d "
			"%*d %*d %llu %lu %ld",
			&utime, &stime, &starttime, &vsize, &rss) != 5)
			utime = stime = 0;
		fclose(f);
	}
	if (start_time == 0 && ticks > 0) {
		double boot = 0;
		char line[256];

		f = fopen("/proc/stat", "r");
		while (f != NULL && fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "btime %lf", &boot) == 1)
				break;
		if (f != NULL)
			fclose(f);
		start_time = boot + (double)starttime / (double)ticks;
	}
	d = opendir("/proc/self/fd");
	if (d != NULL) {
		while (readdir(d) != NULL)
			fds++;
		closedir(d);
		fds -= 3; /* ".", ".." and the directory's own descriptor */
	}
	strbuf_printf(b,
	    "# HELP process_cpu_seconds_total User and system CPU time spent in seconds.\n"
	    "# TYPE process_cpu_seconds_total counter\n"
	    "process_cpu_seconds_total %.2f\n"
	    "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
	    "# TYPE process_resident_memory_bytes gauge\n"
	    "process_resident_memory_bytes %lld\n"
	    "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
	    "# TYPE process_virtual_memory_bytes gauge\n"
	    "process_virtual_memory_bytes %lu\n"
	    "# HELP process_open_fds Number of open file descriptors.\n"
	    "# TYPE process_open_fds gauge\n"
	    "process_open_fds %d\n"
	    "# HELP process_start_time_seconds Start time of the process since the epoch in seconds.\n"
	    "# TYPE process_start_time_seconds gauge\n"
	    "process_start_time_seconds %.2f\n",
	    ticks > 0 ? (double)(utime + stime) / (double)ticks : 0.0, (long long)rss * page, vsize,
	    fds, start_time);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		strbuf_printf(b,
		    "# HELP process_max_fds Maximum number of open file descriptors.\n"
		    "# TYPE process_max_fds gauge\n"
		    "process_max_fds %llu\n",
		    (unsigned long long)rl.rlim_cur);
}

int
api_start(struct app *app)
{
	if (metrics_register("approvals", collect_approvals, NULL) < 0 ||
	    metrics_register("db", collect_db, NULL) < 0 ||
	    metrics_register("capacity", collect_capacity, (void *)app->catalog) < 0 ||
	    metrics_register("pools", collect_pools, NULL) < 0 ||
	    metrics_register("alerts", collect_alerts, NULL) < 0 ||
	    metrics_register("process", collect_process, NULL) < 0 ||
	    metrics_register("deferred", collect_deferred, app) < 0)
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
