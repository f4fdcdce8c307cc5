/*
 * billing_accrual.c - the billing accrual worker (see billing_accrual.h).
 */
#include "billing_accrual.h"

#include "core/arena.h"
#include "core/log.h"
#include "core/metrics_registry.h"
#include "core/strbuf.h"
#include "core/timeutil.h"
#include "db/db.h"
#include "db/db_billing.h"
#include "service/billing.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

/* spans of a backlog per pass: a pass stays short, so that a stop never waits long */
#define SPANS_PER_PASS 4

/* one worker per process: its handle (for /metrics and the next pass at once) */
static struct periodic *_Atomic accrual_self;

/* /metrics */
static atomic_uint_fast64_t passes_ok, passes_failed, rows_changed;
static atomic_int_fast64_t last_success_us;

static void
collect(struct strbuf *b, struct arena *a, void *arg)
{
	struct periodic *self = accrual_self;
	int64_t last = atomic_load(&last_success_us);

	(void)a;
	(void)arg;
	metrics_family(b, "gpupool_billing_accrual_passes_total", "counter",
	    "Billing accrual passes of this replica's worker.");
	strbuf_printf(b,
	    "gpupool_billing_accrual_passes_total{result=\"ok\"} %" PRIuFAST64 "\n"
	    "gpupool_billing_accrual_passes_total{result=\"error\"} %" PRIuFAST64 "\n",
	    atomic_load(&passes_ok), atomic_load(&passes_failed));
	metrics_single(b, "gpupool_billing_accrual_rows_total", "counter",
	    "Billing rows inserted, changed or deleted by this replica's worker.", "%" PRIuFAST64,
	    atomic_load(&rows_changed));
	metrics_single(b, "gpupool_billing_accrual_last_success_timestamp_seconds", "gauge",
	    "When this replica's worker last accrued (0: never).", "%" PRId64, last / 1000000);
	metrics_single(b, "gpupool_billing_accrual_leader", "gauge",
	    "Whether this replica holds the accrual leadership.", "%d",
	    self != NULL && periodic_is_leader(self) ? 1 : 0);
}

static void
accrual_run_once(void *arg)
{
	const struct billing_accrual_config *cfg = arg;
	struct billing_accrual_result res = { 0 };
	struct arena *a = arena_create();
	struct gp_error err;

	gp_error_clear(&err);
	if (service_billing_accrue(db_thread(), a, cfg->settle_s, cfg->hold_ms, SPANS_PER_PASS,
		NULL, NULL, &res, &err) < 0) {
		log_warn(NULL, "billing accrual failed", "error", err.message);
		atomic_fetch_add(&passes_failed, 1);
	} else {
		atomic_fetch_add(&passes_ok, 1);
		atomic_store(&last_success_us, time_now_us());
		/* a backlog: the next pass at once (after a stop check) */
		if (res.more && accrual_self != NULL)
			periodic_kick(accrual_self);
	}
	atomic_fetch_add(&rows_changed, (uint_fast64_t)(res.upserted + res.deleted));
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
	struct billing_accrual_config own = *cfg; /* copied by periodic_start */
	struct periodic_config pc = {
		.name = "billing_accrual",
		.leader = true,
		.run = accrual_run_once,
		.arg = &own,
		.arg_size = sizeof(own),
	};

	if (metrics_register("billing_accrual", collect, NULL) < 0)
		return -1;
	pc.interval_ms = (cfg->interval_s > 0 ? cfg->interval_s : 300) * 1000;
	pc.jitter_ms = pc.interval_ms / 10;
	if (periodic_start(out, &pc) < 0)
		return -1;
	accrual_self = *out;
	return 0;
}
