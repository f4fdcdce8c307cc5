/*
 * test_migrate.c - the migration runner: a replica waits for another's
 * migration however long it takes (no statement_timeout on the lock
 * wait), and a migration changed after it was applied stops both
 * "gpupoold migrate" and "gpupoold serve".
 */
#include "fixture.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIGRATE_LOCK "x'7461626c65677075'::int8"

/* Hold the migration lock for hold_s seconds in a child process. */
static pid_t
hold_migrate_lock(struct fixture *fx, int hold_s, int ready_fd)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	{
		PGconn *c = PQconnectdb(fx->db_url);
		PGresult *r;

		if (PQstatus(c) != CONNECTION_OK)
			_exit(2);
		r = PQexec(c, "SELECT pg_advisory_lock(" MIGRATE_LOCK ")");
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			_exit(3);
		PQclear(r);
		if (write(ready_fd, "x", 1) != 1)
			_exit(4);
		sleep((unsigned)hold_s);
		PQfinish(c);
		_exit(0);
	}
}

static void
test_waits_for_lock(void **state)
{
	struct fixture *fx = *state;
	struct fx_proc *p;
	int fds[2], status;
	char c;
	pid_t holder;

	assert_int_equal(pipe(fds), 0);
	/* longer than the default statement_timeout (5 s) */
	holder = hold_migrate_lock(fx, 7, fds[1]);
	assert_true(holder > 0);
	assert_int_equal(read(fds[0], &c, 1), 1);
	p = fx_gpupoold(fx, NULL, "migrate", NULL);
	if (p->status != 0)
		fprintf(stderr, "migrate failed:\n%s\n", p->err);
	assert_int_equal(p->status, 0);
	assert_int_equal(waitpid(holder, &status, 0), holder);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fds[0]);
	close(fds[1]);
}

static void
test_changed_migration(void **state)
{
	struct fixture *fx = *state;
	struct fx_proc *p;
	const char *sum;

	sum = fx_sql_text(fx, "SELECT checksum FROM schema_migrations WHERE version = 1");
	assert_non_null(sum);
	assert_int_equal(strlen(sum), 64);

	/* as if 0001 had been edited after this database applied it */
	fx_sql_exec(fx,
	    "UPDATE schema_migrations SET checksum = repeat('0', 64) WHERE version = 1");
	p = fx_gpupoold(fx, NULL, "migrate", NULL);
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "0001_foundation differs"));
	fprintf(stderr, "(a start failure and its log are expected below)\n");
	assert_null(fixture_server_start(fx, NULL));

	/* a version recorded before checksums existed gets its checksum filled in */
	fx_sql_exec(fx, "UPDATE schema_migrations SET checksum = NULL WHERE version = 1");
	p = fx_gpupoold(fx, NULL, "migrate", NULL);
	assert_int_equal(p->status, 0);
	assert_string_equal(fx_sql_text(fx,
				"SELECT checksum FROM schema_migrations WHERE version = 1"),
	    sum);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM schema_migrations WHERE checksum IS NULL"),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waits_for_lock),
		cmocka_unit_test(test_changed_migration),
	};

	signal(SIGPIPE, SIG_IGN);
	return fixture_run_tests(tests);
}
