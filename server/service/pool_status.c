/*
 * pool_status.c - the settle path of pool statuses (see pool_status.h).
 */
#include "pool_status.h"

#include "db/db_approvals.h"

int
pool_status_settle_due(struct db *db, int64_t *n, struct gp_error *err)
{
	*n = 0;
	return db_pools_settle(db, n, err);
}
