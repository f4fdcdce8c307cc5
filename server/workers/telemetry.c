/*
 * telemetry.c - the telemetry worker (telemetry.h).
 */
#include "telemetry.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/log.h"
#include "core/timeutil.h"
#include "db/db.h"
#include "db/db_agent.h"
#include "periodic.h"

#define ROLLUP_SETTLE_S (3 * 3600) /* recompute this much before the watermark (late samples) */
#define ROLLUP_MAX_HOURS 24        /* hours past the watermark per statement (a backlog) */
#define ROLLUP_MAX_CALLS 16        /* statements per pass; the next pass goes on */
#define PRUNE_LIMIT 5000           /* rows of each kind deleted per pass at most */

static void
telemetry_run_once(void *arg)
{
	const struct telemetry_config *tcfg = arg;
	struct gp_error err;
	int64_t n = 0;
	char buf[24];

	gp_error_clear(&err);
	if (db_metric_partitions(db_thread(), tcfg->retention_days, 2, &n, &err) < 0)
		log_warn(NULL, "could not keep the metric partitions", "error", err.message);
	else if (n > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)n);
		log_info(NULL, "dropped metric partitions past retention", "count", buf);
	}
	for (int i = 0; i < ROLLUP_MAX_CALLS; i++) {
		bool more = false;

		gp_error_clear(&err);
		if (db_metric_rollup(db_thread(), tcfg->idle_threshold, ROLLUP_SETTLE_S,
			ROLLUP_MAX_HOURS, &n, &more, &err) < 0) {
			log_warn(NULL, "could not roll up metrics", "error", err.message);
			break;
		}
		if (!more)
			break;
	}
	gp_error_clear(&err);
	if (db_agent_plane_prune(db_thread(), tcfg->outbox_retention_days,
		tcfg->alerts_retention_days, tcfg->profiles_retention_days, PRUNE_LIMIT, &n,
		&err) < 0)
		log_warn(NULL, "could not prune delivered outbox rows, alerts and profiles",
		    "error", err.message);
	else if (n > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)n);
		log_info(NULL, "pruned rows past retention", "count", buf);
	}
	gp_error_clear(&err);
	if (db_alerts_idle(db_thread(), tcfg->idle_after_s, tcfg->idle_threshold, &n, &err) < 0)
		log_warn(NULL, "could not sweep idle allocations", "error", err.message);
}

int
telemetry_start(struct periodic **out, const struct telemetry_config *cfg)
{
	struct telemetry_config own = *cfg; /* copied by periodic_start */
	struct periodic_config pc = {
		.name = "telemetry",
		.leader = true,
		.run = telemetry_run_once,
		.arg = &own,
		.arg_size = sizeof(own),
	};

	pc.interval_ms = (cfg->interval_s > 0 ? cfg->interval_s : 60) * 1000;
	pc.jitter_ms = pc.interval_ms / 10;
	return periodic_start(out, &pc);
}
