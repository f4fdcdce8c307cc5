/*
 * telemetry.c - the telemetry worker (telemetry.h).
 */
#include "telemetry.h"

#include <stdint.h>
#include <stdio.h>

#include "core/log.h"
#include "core/timeutil.h"
#include "db/db.h"
#include "db/db_agent.h"
#include "periodic.h"

#define ROLLUP_HOURS 3 /* recompute this many past hours each pass (late samples) */

static struct telemetry_config tcfg;

static void
telemetry_run_once(void *arg)
{
	struct gp_error err;
	int64_t n = 0;
	char buf[24];

	(void)arg;
	gp_error_clear(&err);
	if (db_metric_partitions(db_thread(), tcfg.retention_days, 2, &n, &err) < 0)
		log_warn(NULL, "could not keep the metric partitions", "error", err.message);
	else if (n > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)n);
		log_info(NULL, "dropped metric partitions past retention", "count", buf);
	}
	gp_error_clear(&err);
	if (db_metric_rollup(db_thread(), time_now_us() - (int64_t)ROLLUP_HOURS * 3600 * 1000000,
		tcfg.idle_threshold, &n, &err) < 0)
		log_warn(NULL, "could not roll up metrics", "error", err.message);
	gp_error_clear(&err);
	if (db_alerts_idle(db_thread(), tcfg.idle_after_s, tcfg.idle_threshold, &n, &err) < 0)
		log_warn(NULL, "could not sweep idle allocations", "error", err.message);
}

int
telemetry_start(struct periodic **out, const struct telemetry_config *cfg)
{
	struct periodic_config pc = {
		.name = "telemetry",
		.leader = true,
		.run = telemetry_run_once,
	};

	tcfg = *cfg;
	pc.interval_ms = (tcfg.interval_s > 0 ? tcfg.interval_s : 60) * 1000;
	pc.jitter_ms = pc.interval_ms / 10;
	return periodic_start(out, &pc);
}
