/*
 * defrag_apply.c - the defragmentation apply worker (defrag_apply.h).
 */
#include "defrag_apply.h"

#include "core/arena.h"
#include "core/log.h"
#include "db/db.h"
#include "db/db_defrag.h"
#include "periodic.h"

#include <stdio.h>
#include <string.h>

#define STEPS_PER_PLAN 256 /* per pass: a plan's moves wait for agents long before */

struct defrag_apply_cfg {
	double threshold;
	int timeout_s;
};

/* Steps of plan id until it waits or is finished; -1 on an error (logged). */
static int
run_plan(const struct defrag_apply_cfg *cfg, int64_t id)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lld", (long long)id);
	for (int i = 0; i < STEPS_PER_PLAN; i++) {
		struct arena *a = arena_create();
		struct gp_error err;
		const char *outcome;
		bool more;

		gp_error_clear(&err);
		if (db_defrag_step(db_thread(), a, id, cfg->threshold, cfg->timeout_s, &outcome,
			&err) < 0) {
			/* (a deadlock or serialization failure: the next pass runs it again) */
			log_warn(NULL, "could not advance a defrag plan", "plan", buf, "error",
			    err.message);
			arena_destroy(a);
			return -1;
		}
		more = strcmp(outcome, "step") == 0;
		if (strcmp(outcome, "idle") == 0)
			log_info(NULL, "defrag plan finished", "plan", buf);
		arena_destroy(a);
		if (!more)
			break;
	}
	return 0;
}

static void
defrag_apply_run_once(void *arg)
{
	const struct defrag_apply_cfg *cfg = arg;
	struct arena *a = arena_create();
	struct gp_error err;
	int64_t *ids;
	int n;

	gp_error_clear(&err);
	if (db_defrag_runnable(db_thread(), a, &ids, &n, &err) < 0)
		log_warn(NULL, "could not list applying defrag plans", "error", err.message);
	else
		for (int i = 0; i < n; i++)
			(void)run_plan(cfg, ids[i]);
	arena_destroy(a);
}

int
defrag_apply_start(struct periodic **out, int interval_s, double threshold, int timeout_s)
{
	struct defrag_apply_cfg cfg = { .threshold = threshold, .timeout_s = timeout_s };
	struct periodic_config pc = {
		.name = "defrag-apply",
		.leader = true,
		.run = defrag_apply_run_once,
		.arg = &cfg,
		.arg_size = sizeof(cfg),
	};

	if (interval_s <= 0)
		interval_s = 2;
	pc.interval_ms = interval_s * 1000;
	pc.jitter_ms = pc.interval_ms / 10;
	return periodic_start(out, &pc);
}
