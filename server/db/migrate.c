/*
 * migrate.c - applies the migrations embedded at build time
 * (scripts/embed_migrations.cmake generates the table).
 */
#include "migrate.h"
#include "db_internal.h"

#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct migration {
	int version;
	const char *name;
	const char *sql;
};

extern const struct migration gp_migrations[];
extern const int gp_nmigrations;

#define MIGRATE_LOCK_KEY "7461626c65677075" /* arbitrary constant */

static const char create_table_sql[] = "CREATE TABLE IF NOT EXISTS schema_migrations ("
				       " version integer PRIMARY KEY,"
				       " name text NOT NULL,"
				       " applied_at timestamptz NOT NULL DEFAULT now(),"
				       " checksum text)";

/* databases migrated before checksums were recorded */
static const char add_checksum_sql[] =
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text";

DB_STMT(stmt_current_version, "SELECT coalesce(max(version), 0) FROM schema_migrations");
DB_STMT(stmt_record_version,
    "INSERT INTO schema_migrations (version, name, checksum) "
    "VALUES ($1, $2, encode(sha256(convert_to($3, 'UTF8')), 'hex'))");
/* an applied migration whose text changed since (NULL: recorded before checksums) */
DB_STMT(stmt_check_version,
    "SELECT checksum IS NOT NULL AND checksum <> encode(sha256(convert_to($2, 'UTF8')), 'hex') "
    "FROM schema_migrations WHERE version = $1");
DB_STMT(stmt_fill_checksum,
    "UPDATE schema_migrations SET checksum = encode(sha256(convert_to($2, 'UTF8')), 'hex') "
    "WHERE version = $1 AND checksum IS NULL");
DB_STMT(stmt_has_table, "SELECT to_regclass('public.schema_migrations') IS NOT NULL");

int
migrate_latest_version(void)
{
	return gp_nmigrations > 0 ? gp_migrations[gp_nmigrations - 1].version : 0;
}

int
migrate_current_version(struct db *db, int *out, struct gp_error *err)
{
	struct arena *a = arena_create();
	bool has = false;
	int64_t v = 0;
	int rc = db_exec_bool(db, a, &stmt_has_table, 0, NULL, &has, err);

	if (rc == 0 && has)
		rc = db_exec_int64(db, a, &stmt_current_version, 0, NULL, &v, err);
	if (rc == 0)
		*out = (int)v;
	arena_destroy(a);
	return rc;
}

static int
migrate_one(struct db *db, const struct migration *m, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *params[3];
	int rc = -1;

	if (db_exec_simple(db, "BEGIN", err) < 0)
		goto fail;
	if (db_exec_simple(db, m->sql, err) < 0) {
		char cause[sizeof(err->message)];

		memcpy(cause, err->message, sizeof(cause));
		gp_error_set(err, 500, "migration_failed", "could not apply migration %s: %s",
		    m->name, cause);
		goto rollback;
	}
	params[0] = db_param_int(a, m->version);
	params[1] = m->name;
	params[2] = m->sql;
	if (db_exec(db, a, &stmt_record_version, 3, params, err) == NULL)
		goto rollback;
	if (db_exec_simple(db, "COMMIT", err) < 0)
		goto fail;
	log_info(NULL, "applied migration", "migration", m->name);
	rc = 0;
	goto fail;
rollback : {
	struct gp_error ignored;

	(void)db_exec_simple(db, "ROLLBACK", &ignored);
}
fail:
	arena_destroy(a);
	return rc;
}

int
migrate_verify(struct db *db, struct gp_error *err)
{
	struct arena *a = arena_create();
	int current = 0, rc = -1;

	if (migrate_current_version(db, &current, err) < 0)
		goto fail;
	for (int i = 0; i < gp_nmigrations && gp_migrations[i].version <= current; i++) {
		const char *params[2] = { db_param_int(a, gp_migrations[i].version),
			gp_migrations[i].sql };
		PGresult *r = db_exec(db, a, &stmt_check_version, 2, params, err);

		if (r == NULL)
			goto fail;
		if (PQntuples(r) == 1 && db_bool(r, 0, 0)) {
			gp_error_set(err, 500, "migration_changed",
			    "migration %s differs from the one applied to this database; "
			    "migrations must never change once applied",
			    gp_migrations[i].name);
			goto fail;
		}
		if (db_exec(db, a, &stmt_fill_checksum, 2, params, err) == NULL)
			goto fail;
	}
	rc = 0;
fail:
	arena_destroy(a);
	return rc;
}

int
migrate_apply(struct db *db, struct gp_error *err)
{
	int current = 0, rc = -1;
	struct gp_error ignored;

	/* a replica waits here while another migrates; migrations may be slow */
	if (db_exec_simple(db, "SET statement_timeout = 0", err) < 0 ||
	    db_exec_simple(db, "SET client_min_messages = warning", err) < 0)
		return -1;
	if (db_exec_simple(db, "SELECT pg_advisory_lock(x'" MIGRATE_LOCK_KEY "'::int8)", err) < 0)
		return -1;
	if (db_exec_simple(db, create_table_sql, err) < 0 ||
	    db_exec_simple(db, add_checksum_sql, err) < 0)
		goto fail;
	if (migrate_verify(db, err) < 0)
		goto fail;
	if (migrate_current_version(db, &current, err) < 0)
		goto fail;
	if (current > migrate_latest_version()) {
		gp_error_set(err, 500, "schema_too_new",
		    "the database schema is at version %d, newer than this binary's %d", current,
		    migrate_latest_version());
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
	(void)db_exec_simple(db, "SELECT pg_advisory_unlock(x'" MIGRATE_LOCK_KEY "'::int8)",
	    &ignored);
	(void)db_exec_simple(db, "RESET statement_timeout", &ignored);
	(void)db_exec_simple(db, "RESET client_min_messages", &ignored);
	return rc;
}
