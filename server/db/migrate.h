/*
 * migrate.h - the embedded schema migrations (migrations/NNNN_name.sql).
 */
#ifndef GP_DB_MIGRATE_H
#define GP_DB_MIGRATE_H

#include "db.h"

/* Highest migration version compiled into this binary. */
int migrate_latest_version(void);

/*
 * Apply pending migrations in order, each in its own transaction, under
 * a session advisory lock so concurrent replicas migrate once. Logs each
 * applied version. Fails when the database is newer than this binary.
 */
int migrate_apply(struct db *db, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Fail (500 "migration_changed") when a migration applied to the database
 * differs from the one compiled into this binary (checksums recorded at
 * apply time; versions recorded before checksums get theirs filled in).
 */
int migrate_verify(struct db *db, struct gp_error *err) __attribute__((warn_unused_result));

/* Current schema version of the database (0 when never migrated). */
int migrate_current_version(struct db *db, int *out, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
