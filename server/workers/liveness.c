/*
 * liveness.c - the agent liveness worker (liveness.h).
 */
#include "liveness.h"

#include "core/log.h"
#include "db/db.h"
#include "db/db_agent.h"
#include "periodic.h"

#include <stdint.h>
#include <stdio.h>

static void
liveness_run_once(void *arg)
{
	const int *grace_s = arg;
	struct gp_error err;
	int64_t n = 0;
	char buf[24];

	gp_error_clear(&err);
	if (db_agent_liveness(db_thread(), *grace_s, &n, &err) < 0) {
		log_warn(NULL, "could not sweep agent liveness", "error", err.message);
		return;
	}
	if (n > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)n);
		log_warn(NULL, "nodes whose agent went silent are unknown", "count", buf);
	}
}

int
liveness_start(struct periodic **out, int grace_s)
{
	struct periodic_config pc = {
		.name = "agent-liveness",
		.leader = true,
		.run = liveness_run_once,
		.arg = &grace_s,
		.arg_size = sizeof(grace_s),
	};

	if (grace_s <= 0)
		grace_s = 50;
	pc.interval_ms = grace_s * 1000 / 5;
	if (pc.interval_ms < 1000)
		pc.interval_ms = 1000;
	pc.jitter_ms = pc.interval_ms / 10;
	return periodic_start(out, &pc);
}
