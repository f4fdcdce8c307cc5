/*
 * billing_accrual.h - the billing accrual worker: a periodic worker
 * (periodic.h) with leadership, so that one replica accrues the usage
 * ledger into hourly billing rows (service_billing_accrue) and the others
 * stand by. The pass is idempotent, and the SQL function takes a
 * transaction-level advisory lock, so an accrual started on demand
 * (POST /v1/billing/accrual/run) or by a replica that just lost
 * leadership waits for the one under way instead of racing it.
 */
#ifndef GP_WORKERS_BILLING_ACCRUAL_H
#define GP_WORKERS_BILLING_ACCRUAL_H

#include "periodic.h"

struct billing_accrual_config {
	int interval_s; /* between passes */
	int settle_s;   /* hours ending this long ago are final */
	int hold_ms;    /* tests: keep each accrual's transaction open this long */
};

int billing_accrual_start(struct periodic **out, const struct billing_accrual_config *cfg)
    __attribute__((warn_unused_result));

#endif
