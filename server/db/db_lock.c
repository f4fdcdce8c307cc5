/*
 * db_lock.c - leadership locks (see db_lock.h): two-key session advisory
 * locks in a space of their own (the idempotency claims use another
 * first key, the migration lock the one-key form).
 */
#include "db_lock.h"
#include "db_internal.h"

#define LEADER_SPACE "1768189029"

/*
 * CASE evaluates in order: a session that holds the lock does not take
 * it again (session advisory locks stack). In pg_locks a two-key lock
 * shows its keys as classid and objid, with objsubid 2.
 */
DB_STMT(stmt_leader_try,
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_locks "
    "WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() "
    "AND classid = " LEADER_SPACE "::oid AND objid = pg_catalog.hashtext($1)::oid "
    "AND objsubid = 2 AND granted) "
    "THEN true ELSE pg_catalog.pg_try_advisory_lock(" LEADER_SPACE
    ", pg_catalog.hashtext($1)) END");
DB_STMT(stmt_leader_release,
    "SELECT pg_catalog.pg_advisory_unlock(" LEADER_SPACE ", pg_catalog.hashtext($1))");

int
db_leader_try(struct db *db, const char *name, bool *leader, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { name };
	int rc = db_exec_bool(db, a, &stmt_leader_try, 1, p, leader, err);

	arena_destroy(a);
	return rc;
}

int
db_leader_release(struct db *db, const char *name, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { name };
	PGresult *r;

	r = db_exec(db, a, &stmt_leader_release, 1, p, err);
	arena_destroy(a);
	return r != NULL ? 0 : -1;
}
