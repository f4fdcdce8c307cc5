/*
 * billing_accrual.c - the billing accrual worker (see billing_accrual.h).
 */
#include "billing_accrual.h"

#include "core/arena.h"
#include "core/log.h"
#include "db/db.h"
#include "db/db_billing.h"

#include <stdio.h>

/* spans of a backlog per pass: a pass stays short, so that a stop never waits long */
#define SPANS_PER_PASS 4

/* one worker per process: its configuration and handle live here */
static struct billing_accrual_config accrual_cfg;
static struct periodic *_Atomic accrual_self;

static void
accrual_run_once(void *arg)
{
	const struct billing_accrual_config *cfg = arg;
	struct billing_accrual_result res = { 0 };
	struct arena *a = arena_create();
	struct gp_error err;

	gp_error_clear(&err);
	if (db_billing_accrue(db_thread(), a, cfg->settle_s, cfg->hold_ms, SPANS_PER_PASS, &res,
		&err) < 0) {
		log_warn(NULL, "billing accrual failed", "error", err.message);
	} else if (res.more && accrual_self != NULL) {
		/* a backlog: the next pass at once (after a stop check) */
		periodic_kick(accrual_self);
	}
	if (res.upserted > 0 || res.deleted > 0) {
		char up[24], del[24];

		snprintf(up, sizeof(up), "%lld", (long long)res.upserted);
		snprintf(del, sizeof(del), "%lld", (long long)res.deleted);
		log_info(NULL, "billing accrual", "upserted", up, "deleted", del);
	}
	arena_destroy(a);
}

int
billing_accrual_start(struct periodic **out, const struct billing_accrual_config *cfg)
{
	struct periodic_config pc = {
		.name = "billing_accrual",
		.leader = true,
		.run = accrual_run_once,
		.arg = &accrual_cfg,
	};

	accrual_cfg = *cfg;
	pc.interval_ms = (cfg->interval_s > 0 ? cfg->interval_s : 300) * 1000;
	pc.jitter_ms = pc.interval_ms / 10;
	if (periodic_start(out, &pc) < 0)
		return -1;
	accrual_self = *out;
	return 0;
}
