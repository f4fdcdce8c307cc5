/*
 * db_classes.h - upkeep of the per-class GPU counts (gpu_classes, a view
 * over the deltas the gpus triggers append; migration 0005).
 */
#ifndef GP_DB_CLASSES_H
#define GP_DB_CLASSES_H

#include "db.h"

#include <stdint.h>

/*
 * Fold the appended deltas into one row per class, in one statement of
 * its own transaction; readers see the same counts before and after.
 * *folded gets the number of delta rows removed (0: nothing to fold,
 * -1: another session was compacting). -1 and err on a database error.
 */
int db_classes_compact(struct db *db, int64_t *folded, struct gp_error *err)
	__attribute__((warn_unused_result));

#endif
