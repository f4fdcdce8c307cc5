/*
 * db_classes.c - upkeep of the per-class GPU counts (see db_classes.h).
 */
#include "db_classes.h"
#include "db_internal.h"

DB_STMT(stmt_classes_compact, "SELECT gpu_classes_compact()");

int
db_classes_compact(struct db *db, int64_t *folded, struct gp_error *err)
{
	struct arena *a = arena_create();
	PGresult *r = db_exec(db, a, &stmt_classes_compact, 0, NULL, err);
	int rc = -1;

	if (r != NULL) {
		*folded = db_int64(r, 0, 0);
		rc = 0;
	}
	arena_destroy(a);
	return rc;
}
