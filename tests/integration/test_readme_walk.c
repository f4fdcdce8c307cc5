/*
 * test_readme_walk.c - the README's walkthrough, run verbatim against a
 * real gpupoold, so that the walkthrough cannot drift from the product.
 *
 * The fenced block after "Try it once `scripts/run` is up" is taken from
 * README.md as it is. Its only change: the server address in the alias
 * line becomes this fixture's (the alias's path, build/run/client/cli/
 * gpupool, is made to exist in a scratch directory). Each command (lines
 * joined at a trailing backslash) runs in one bash, stopping at the first
 * failure; `gpupool login` reads the admin password from stdin.
 *
 * What the README says the operator sees is checked too: a comment
 * "# => TEXT" on a command names TEXT that its output contains (runs of
 * spaces compared as one). Then the database: the walkthrough's pool is
 * active with every allocation ready, and billed.
 *
 * Run with GP_WALK_SERVER (a base URL), GP_WALK_PASSWORD_FILE (the first
 * admin password) and GP_WALK_DATABASE_URL set, it walks against that
 * server instead of the fixture's: tests/scripts/test_readme_run.sh runs
 * it so against a fresh `scripts/run`, as the README tells a newcomer.
 */
#include "fixture.h"

#include <libpq-fe.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_MAX 64

struct walk_cmd {
	char *text;   /* the command, continuation lines joined */
	char *expect; /* "# => ..." text, or NULL */
	char *output; /* what it printed (stdout and stderr) */
};

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return NULL;
	}
	buf = calloc(1, (size_t)n + 1);
	if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* The walkthrough block of the README (a copy), or NULL. */
static char *
readme_block(const char *readme)
{
	const char *at = strstr(readme, "Try it once `scripts/run` is up");
	const char *start, *end;

	if (at == NULL || (start = strstr(at, "```sh\n")) == NULL)
		return NULL;
	start += strlen("```sh\n");
	if ((end = strstr(start, "\n```")) == NULL)
		return NULL;
	return strndup(start, (size_t)(end - start + 1));
}

/* Collapse runs of blanks to one space, in place. */
static void
squeeze(char *s)
{
	char *o = s;
	bool blank = false;

	for (; *s != '\0'; s++) {
		if (*s == ' ' || *s == '\t') {
			if (!blank)
				*o++ = ' ';
			blank = true;
			continue;
		}
		blank = false;
		*o++ = *s;
	}
	*o = '\0';
}

/* Split the block into commands; returns how many. */
static int
split_commands(char *block, struct walk_cmd *cmds)
{
	int n = 0;
	char *save = NULL;
	char cur[4096] = "";

	for (char *line = strtok_r(block, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t len = strlen(line);
		bool more = len > 0 && line[len - 1] == '\\';
		char *mark = strstr(line, "# => ");

		assert_true(strlen(cur) + len + 2 < sizeof(cur));
		strcat(cur, line);
		strcat(cur, "\n");
		if (mark != NULL) {
			assert_true(n < WALK_MAX);
			cmds[n].expect = strdup(mark + strlen("# => "));
			squeeze(cmds[n].expect);
		}
		if (more)
			continue;
		assert_true(n < WALK_MAX);
		cmds[n].text = strdup(cur);
		n++;
		cur[0] = '\0';
	}
	assert_string_equal(cur, "");
	return n;
}

static char *
replace_once(const char *s, const char *from, const char *to)
{
	const char *at = strstr(s, from);
	char *out;

	if (at == NULL)
		return NULL;
	out = calloc(1, strlen(s) - strlen(from) + strlen(to) + 1);
	memcpy(out, s, (size_t)(at - s));
	strcat(out, to);
	strcat(out, at + strlen(from));
	return out;
}

/* The one value of sql on conn as text ("" for NULL); fails the test on error. */
static char *
walk_sql(PGconn *conn, const char *sql)
{
	PGresult *r = PQexec(conn, sql);
	char *v;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		fail_msg("`%s`: %s", sql, PQerrorMessage(conn));
	v = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

static long long
walk_sql_int(PGconn *conn, const char *sql)
{
	char *v = walk_sql(conn, sql);
	long long n = strtoll(v, NULL, 10);

	free(v);
	return n;
}

/*
 * Walk the README against base_url (the admin's password in password),
 * in the scratch directory dir; then check the database at db_url.
 */
static void
walk(const char *base_url, const char *password, const char *dir, const char *db_url)
{
	char *readme = slurp(GP_README_PATH), *block, *out, *p, *v;
	struct walk_cmd cmds[WALK_MAX];
	char script[1024], outp[1024], pwpath[1024], cmd[8192], mark[64];
	PGconn *conn;
	int n, rc;
	FILE *f;

	memset(cmds, 0, sizeof(cmds));
	assert_non_null(readme);
	block = readme_block(readme);
	assert_non_null(block);
	n = split_commands(block, cmds);
	assert_true(n > 10);
	/* the alias: this fixture's server; its path made to exist */
	assert_non_null(strstr(cmds[0].text,
	    "alias gpupool=\"build/run/client/cli/gpupool "
	    "--server http://127.0.0.1:8080\""));
	cmds[0].text = replace_once(cmds[0].text, "http://127.0.0.1:8080", base_url);
	snprintf(script, sizeof(script), "%s/walk.sh", dir);
	snprintf(outp, sizeof(outp), "%s/walk.out", dir);
	snprintf(pwpath, sizeof(pwpath), "%s/password", dir);
	snprintf(cmd, sizeof(cmd),
	    "mkdir -p '%s/build/run/client/cli' && ln -sf '%s' '%s/build/run/client/cli/gpupool'",
	    dir, GPUPOOL_CLI_PATH, dir);
	assert_int_equal(system(cmd), 0);
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "set -eo pipefail\nshopt -s expand_aliases\ncd '%s'\n", dir);
	for (int i = 0; i < n; i++) {
		/* a person takes more than a second from the approval to the
		 * accrual: the first billed second exists by then */
		if (strstr(cmds[i].text, "billing accrue") != NULL)
			fprintf(f, "sleep 1.5\n");
		fprintf(f, "printf '\\n@@walk %d\\n'\n%s", i, cmds[i].text);
	}
	fprintf(f, "printf '\\n@@walk end\\n'\n");
	assert_int_equal(fclose(f), 0);
	f = fopen(pwpath, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", password);
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd),
	    "cd '%s' && env -u GPUPOOL_SERVER -u GPUPOOL_TOKEN HOME='%s' XDG_CONFIG_HOME='%s/.config' "
	    "timeout 120 bash '%s' <'%s' >'%s' 2>&1",
	    dir, dir, dir, script, pwpath, outp);
	rc = system(cmd);
	out = slurp(outp);
	assert_non_null(out);
	if (rc != 0 || strstr(out, "@@walk end") == NULL)
		fail_msg("the README walkthrough failed (status %d):\n%s", rc, out);
	if (getenv("GP_WALK_VERBOSE") != NULL)
		fprintf(stderr, "%s", out);
	/* each command's output, and what the README says it shows */
	for (int i = n - 1; i >= 0; i--) {
		char *m, *end;

		snprintf(mark, sizeof(mark), "\n@@walk %d\n", i);
		m = strstr(out, mark);
		assert_non_null(m);
		*m = '\0';
		p = m + strlen(mark);
		end = strstr(p, "\n@@walk ");
		cmds[i].output = strndup(p, end != NULL ? (size_t)(end - p) : strlen(p));
		squeeze(cmds[i].output);
		if (cmds[i].expect != NULL && strstr(cmds[i].output, cmds[i].expect) == NULL)
			fail_msg("README: `%s` should show \"%s\"; it printed:\n%s", cmds[i].text,
			    cmds[i].expect, cmds[i].output);
	}
	/* the walkthrough's pool: active, every allocation ready, billed */
	conn = PQconnectdb(db_url);
	if (PQstatus(conn) != CONNECTION_OK)
		fail_msg("cannot connect to %s: %s", db_url, PQerrorMessage(conn));
	v = walk_sql(conn,
	    "SELECT p.status FROM pools p JOIN projects j ON j.id = p.project_id "
	    "WHERE j.name = 'ml' AND p.name = 'train'");
	assert_string_equal(v, "active");
	free(v);
	assert_int_equal(walk_sql_int(conn,
			     "SELECT count(*) FILTER (WHERE a.state = 'ready') * 100 + count(*) "
			     "FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'train'"),
	    202);
	assert_int_equal(walk_sql_int(conn,
			     "SELECT count(*) FROM audit_log WHERE action = 'pool.active' "
			     "AND after->>'reason' LIKE '%operator realises%'"),
	    1);
	assert_true(walk_sql_int(conn,
			"SELECT count(*) FROM billing_usage u JOIN projects j "
			"ON j.id = u.project_id WHERE j.name = 'ml' AND u.currency = 'EUR'") > 0);
	PQfinish(conn);
	for (int i = 0; i < n; i++) {
		free(cmds[i].text);
		free(cmds[i].expect);
		free(cmds[i].output);
	}
	free(block);
	free(readme);
	free(out);
}

static void
test_readme_walkthrough(void **state)
{
	struct fixture *fx = *state;

	walk(fx->server->base_url, FIXTURE_ADMIN_PASSWORD, fx_str(fx, "%s/walk", fx_cli_home(fx)),
	    fx->db_url);
}

/* Against a server someone else started (GP_WALK_SERVER and the rest). */
static void
test_readme_walkthrough_external(void **state)
{
	const char *pwfile = getenv("GP_WALK_PASSWORD_FILE");
	char *pw = pwfile != NULL ? slurp(pwfile) : NULL;
	char dir[] = "/tmp/gp-walk.XXXXXX";
	char cmd[256];

	(void)state;
	if (pw == NULL)
		fail_msg("GP_WALK_PASSWORD_FILE is not set or unreadable");
	pw[strcspn(pw, "\n")] = '\0';
	if (getenv("GP_WALK_DATABASE_URL") == NULL)
		fail_msg("GP_WALK_DATABASE_URL is not set");
	assert_non_null(mkdtemp(dir));
	walk(getenv("GP_WALK_SERVER"), pw, dir, getenv("GP_WALK_DATABASE_URL"));
	explicit_bzero(pw, strlen(pw));
	free(pw);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readme_walkthrough),
	};
	const struct CMUnitTest external[] = {
		cmocka_unit_test(test_readme_walkthrough_external),
	};

	if (getenv("GP_WALK_SERVER") != NULL)
		return cmocka_run_group_tests(external, NULL, NULL);
	return fixture_run_tests(tests);
}
