/*
 * migrate.c - applies the migrations embedded at build time
 * (scripts/embed_migrations.cmake generates the table).
 */
#include "migrate.h"
#include "db_internal.h"

#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>

struct migration {
	int version;
	const char *name;
	const char *sql;
};

extern const struct migration gp_migrations[];
extern const int gp_nmigrations;

#define MIGRATE_LOCK_KEY "7461626c65677075"     /* arbitrary constant */

static const char create_table_sql[] =
	"CREATE TABLE IF NOT EXISTS schema_migrations ("
	" version integer PRIMARY KEY,"
	" name text NOT NULL,"
	" applied_at timestamptz NOT NULL DEFAULT now())";

DB_STMT(stmt_current_version,
	"SELECT coalesce(max(version), 0) FROM schema_migrations");
DB_STMT(stmt_record_version,
	"INSERT INTO schema_migrations (version, name) VALUES ($1, $2)");
DB_STMT(stmt_has_table,
	"SELECT to_regclass('public.schema_migrations') IS NOT NULL");

int
migrate_latest_version(void)
{
	return gp_nmigrations > 0 ? gp_migrations[gp_nmigrations - 1].version : 0;
}

int
migrate_current_version(struct db *db, int *out, struct gp_error *err)
{
	struct arena *a = arena_create();
	PGresult *r;
	int rc = -1;

	r = db_exec(db, a, &stmt_has_table, 0, NULL, err);
	if (r == NULL)
		goto fail;
	if (!db_bool(r, 0, 0)) {
		*out = 0;
		rc = 0;
		goto fail;
	}
	r = db_exec(db, a, &stmt_current_version, 0, NULL, err);
	if (r == NULL)
		goto fail;
	*out = (int)db_int64(r, 0, 0);
	rc = 0;
fail:
	arena_destroy(a);
	return rc;
}

static int
migrate_one(struct db *db, const struct migration *m, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *params[2];
	int rc = -1;

	if (db_exec_simple(db, "BEGIN", err) < 0)
		goto fail;
	if (db_exec_simple(db, m->sql, err) < 0) {
		gp_error_set(err, 500, "migration_failed", "could not apply migration %s: %s",
			     m->name, err->message);
		goto rollback;
	}
	params[0] = db_param_int(a, m->version);
	params[1] = m->name;
	if (db_exec(db, a, &stmt_record_version, 2, params, err) == NULL)
		goto rollback;
	if (db_exec_simple(db, "COMMIT", err) < 0)
		goto fail;
	log_info(NULL, "applied migration", "migration", m->name);
	rc = 0;
	goto fail;
rollback:
	{
		struct gp_error ignored;

		(void)db_exec_simple(db, "ROLLBACK", &ignored);
	}
fail:
	arena_destroy(a);
	return rc;
}

int
migrate_apply(struct db *db, struct gp_error *err)
{
	int current = 0, rc = -1;
	struct gp_error ignored;

	if (db_exec_simple(db, "SELECT pg_advisory_lock(x'" MIGRATE_LOCK_KEY "'::int8)", err) < 0)
		return -1;
	if (db_exec_simple(db, create_table_sql, err) < 0)
		goto fail;
	if (migrate_current_version(db, &current, err) < 0)
		goto fail;
	if (current > migrate_latest_version()) {
		gp_error_set(err, 500, "schema_too_new",
			     "the database schema is at version %d, newer than this binary's %d",
			     current, migrate_latest_version());
		goto fail;
	}
	for (int i = 0; i < gp_nmigrations; i++) {
		if (gp_migrations[i].version <= current)
			continue;
		if (migrate_one(db, &gp_migrations[i], err) < 0)
			goto fail;
	}
	rc = 0;
fail:
	(void)db_exec_simple(db, "SELECT pg_advisory_unlock(x'" MIGRATE_LOCK_KEY "'::int8)", &ignored);
	return rc;
}
