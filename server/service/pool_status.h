/*
 * pool_status.h - the one settle path of pool statuses: a pool is
 * degraded when one of its allocations failed, active when all are
 * ready, released when nothing is left; degraded raises the
 * pool_degraded alert, active and released resolve it, and each change
 * writes one audit document ({"status": before} -> {"status": after}).
 *
 * The rule lives in one SQL function, pools_settle (migration
 * 0019_pool_status.sql), for atomicity: an agent's status report
 * (agent_apply_status, reached through db_agent_status) settles the
 * pools of the allocations it moved in the transaction that holds their
 * locks; the expiry worker calls pool_status_settle_due, the only C
 * entry, for the pools whose status moves without a report.
 */
#ifndef GP_SERVICE_POOL_STATUS_H
#define GP_SERVICE_POOL_STATUS_H

#include <stdint.h>

#include "core/error.h"
#include "db/db.h"

/*
 * Confirm releases on nodes without an agent (their operator removes the
 * instances), then settle the releasing and provisioning pools. *n gets
 * how many pools changed status.
 */
int pool_status_settle_due(struct db *db, int64_t *n, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
