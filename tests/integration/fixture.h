/*
 * fixture.h - the integration test fixture: a throwaway PostgreSQL
 * database, one or more real gpupoold processes on port 0, an admin
 * user, and helpers to drive the server over HTTP (the shared gp_client
 * library), through the gpupool CLI, and to check database invariants
 * with SQL.
 *
 * Typical test file:
 *
 *	static void test_x(void **state)
 *	{
 *		struct fixture *fx = *state;
 *		struct gp_client_response *r;
 *
 *		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
 *			       "{\"name\":\"%s\",\"display_name\":\"X\"}", "p1");
 *		assert_status(r, 201);
 *		assert_json_str(r->json, "name", "p1");
 *		assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects"), 1);
 *	}
 *
 *	int main(void)
 *	{
 *		const struct CMUnitTest tests[] = { cmocka_unit_test(test_x) };
 *		return fixture_run_tests(tests);
 *	}
 *
 * Database: when the test runner exports GPUPOOL_TEST_PGHOST (socket
 * directory), GPUPOOL_TEST_PGPORT and GPUPOOL_TEST_PGUSER (a superuser)
 * the fixture uses that cluster; otherwise it starts its own with initdb
 * and pg_ctl in a temporary directory (unix socket only, fsync off, run
 * as the postgres user when the test runs as root) and stops it at
 * teardown. Either way each fixture gets a fresh database
 * gp_<random>, dropped at teardown.
 *
 * Memory: everything the helpers return (responses, strings, process
 * output) lives in fx->arena until teardown; tests free nothing.
 *
 * Failures: helpers that can fail call cmocka's fail with the caller's
 * file and line, print what they got and the tail of the server log.
 * Environment: GPUPOOL_TEST_KEEP=1 keeps the temporary directory (logs,
 * data); GPUPOOL_TEST_TMPDIR (else TMPDIR, else /tmp) is where it goes;
 * GPUPOOL_TEST_PGBIN names the directory of initdb and pg_ctl.
 */
#ifndef GP_TEST_FIXTURE_H
#define GP_TEST_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "core/arena.h"
#include "gp_client.h"

#define FIXTURE_MAX_SERVERS 4
#define FIXTURE_ADMIN_USER "admin"
#define FIXTURE_ADMIN_PASSWORD "admin-Passw0rd-for-tests"
/* the password fixture_create_user() gives every user */
#define FIXTURE_PASSWORD "user-Passw0rd-for-tests"

struct fx_server {
	pid_t pid; /* 0 when not running */
	int port;
	char base_url[64];        /* "http://127.0.0.1:NNNN" */
	int agent_port;           /* GPUPOOL_AGENT_LISTEN's port; 0 when off */
	char agent_url[64];       /* "http://127.0.0.1:NNNN" of it; "" when off */
	char log_path[512];       /* its stderr and stdout */
	struct gp_client *client; /* used by fx_request; token set per call */
};

/* A finished child process (CLI or gpupoold subcommand). */
struct fx_proc {
	int status;      /* exit status; 128 + N when killed by signal N */
	const char *out; /* stdout, NUL-terminated, arena memory */
	const char *err; /* stderr */
};

struct fx_private;

struct fixture {
	struct arena *arena; /* freed at teardown */
	char tmpdir[256];    /* private temp dir: logs, CLI $HOME */
	char db_name[64];
	char db_url[1024];       /* libpq URI, what GPUPOOL_DATABASE_URL gets */
	const char *admin_token; /* bearer token of FIXTURE_ADMIN_USER, NULL without a server */
	struct fx_server servers[FIXTURE_MAX_SERVERS];
	struct fx_server *server; /* the server fx_request talks to; tests may repoint it */
	struct fx_private *priv;
};

struct fixture_options {
	bool private_pg; /* own cluster even under the runner (for fixture_pg_stop) */
	bool no_server;  /* database only: no migrate, server or admin */
	const char *const
	    *server_env; /* extra "KEY=VALUE" for every gpupoold serve; NULL-terminated */
};

/* ---- lifecycle ---- */

/*
 * Database (migrated with "gpupoold migrate"), one server, the admin user
 * and its token. Returns -1 after printing why (and any server log).
 */
int fixture_create(const struct fixture_options *opts, struct fixture **out)
    __attribute__((warn_unused_result));

/*
 * Stop the servers (each must exit 0 on SIGTERM), drop the database,
 * stop a private cluster, remove the temp dir. Returns -1 when a server
 * exited otherwise (its log is printed) or cleanup failed.
 */
int fixture_destroy(struct fixture *fx);

/* cmocka group setup/teardown around fixture_create/fixture_destroy; *state is the fixture. */
int fixture_group_setup(void **state);
int fixture_group_setup_private_pg(void **state);
int fixture_group_teardown(void **state);

/*
 * cmocka 1.1 reports a failed group teardown yet exits 0; this turns
 * the result of cmocka_run_group_tests into a status that also fails
 * when a fixture teardown failed.
 */
int fixture_exit_status(int cmocka_result);

/* Run tests in one group with the default fixture; the value for main() to return. */
#define fixture_run_tests(tests) \
	fixture_exit_status(     \
	    cmocka_run_group_tests(tests, fixture_group_setup, fixture_group_teardown))

/* ---- servers ---- */

/*
 * Start another gpupoold serve against the same database (extra_env:
 * NULL-terminated "KEY=VALUE", may be NULL) and wait for its
 * "listening" log line. Returns NULL after printing the log on failure.
 */
struct fx_server *fixture_server_start(struct fixture *fx, const char *const *extra_env);

/*
 * SIGTERM and wait (30 s); 0 when the server exited with status 0,
 * otherwise -1 after printing its log (sanitizer reports included).
 */
int fixture_server_stop(struct fixture *fx, struct fx_server *srv);

/* SIGKILL and reap, no exit status check (crash tests). */
void fixture_server_kill(struct fixture *fx, struct fx_server *srv);

/* Print the last max_lines lines of the server's log to stderr (0: all). */
void fixture_server_dump_log(const struct fx_server *srv, int max_lines);

/* ---- PostgreSQL ---- */

/* Stop / start the private cluster (fast shutdown); -1 when the cluster is not private. */
int fixture_pg_stop(struct fixture *fx) __attribute__((warn_unused_result));
int fixture_pg_start(struct fixture *fx) __attribute__((warn_unused_result));

/*
 * SQL against the test database as the superuser. The variadic
 * arguments are text parameters for $1, $2 ... (strings; format numbers
 * with fx_str). A failed query fails the test.
 */
#define fx_sql_int64(fx, ...) \
	fx_sql_int64_at(fx, __FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)
#define fx_sql_text(fx, ...) fx_sql_text_at(fx, __FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)
#define fx_sql_exec(fx, ...) fx_sql_exec_at(fx, __FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)

/* The single integer value of a query that must return exactly one row and column. */
int64_t fx_sql_int64_at(struct fixture *fx, const char *file, int line, const char *sql, ...)
    __attribute__((sentinel));
/* The single text value (NULL for SQL NULL) of a one-row, one-column query. */
const char *fx_sql_text_at(struct fixture *fx, const char *file, int line, const char *sql, ...)
    __attribute__((sentinel));
/* Run a statement; returns the number of rows it affected (0 when none). */
int64_t fx_sql_exec_at(struct fixture *fx, const char *file, int line, const char *sql, ...)
    __attribute__((sentinel));

/* ---- users ---- */

/* POST /v1/auth/login; fails the test unless 200. Returns the token. */
const char *fixture_login(struct fixture *fx, const char *user, const char *password);

/*
 * Create a user with a global role (admin|operator|billing|none) and
 * FIXTURE_PASSWORD through POST /v1/users as the admin, then log in.
 * Returns the user's token; fails the test on any error.
 */
const char *fixture_create_user(struct fixture *fx, const char *name, const char *role);

/* ---- HTTP ---- */

/*
 * Send method path to fx->server with token (NULL: no Authorization).
 * body_fmt is a printf format for the JSON body, or NULL for none.
 * Returns the response (status, headers, body, parsed json); fails the
 * test only when no HTTP response arrived.
 */
#define fx_request(fx, token, method, path, ...) \
	fx_request_at(fx, __FILE__, __LINE__, token, method, path, NULL, __VA_ARGS__)
/* fx_request with extra "Name: value" headers (NULL-terminated array). */
#define fx_request_h(fx, token, method, path, headers, ...) \
	fx_request_at(fx, __FILE__, __LINE__, token, method, path, headers, __VA_ARGS__)

struct gp_client_response *fx_request_at(struct fixture *fx, const char *file, int line,
    const char *token, const char *method, const char *path, const char *const *headers,
    const char *body_fmt, ...) __attribute__((format(printf, 8, 9)));

/* ---- assertions on responses and JSON ---- */

/* The status must be expected; otherwise print the body and fail. */
#define assert_status(r, expected) fx_assert_status(r, expected, __FILE__, __LINE__)
/* A problem+json answer with this status and machine code. */
#define assert_problem(r, status, code) fx_assert_problem(r, status, code, __FILE__, __LINE__)
/* The string at a dotted path ("projects[0].name") equals expected. */
#define assert_json_str(obj, path, expected) \
	fx_assert_json_str(obj, path, expected, __FILE__, __LINE__)
/* The integer at path equals expected. */
#define assert_json_int(obj, path, expected) \
	fx_assert_json_int(obj, path, expected, __FILE__, __LINE__)
/* path is present and JSON null. */
#define assert_json_null(obj, path) fx_assert_json_null(obj, path, __FILE__, __LINE__)
/* path is absent (null does not count as absent). */
#define assert_json_absent(obj, path) fx_assert_json_absent(obj, path, __FILE__, __LINE__)

/* Getters that fail the test when the value is missing or of another type. */
#define fx_json_str(obj, path) fx_json_str_at(obj, path, __FILE__, __LINE__)
#define fx_json_int(obj, path) fx_json_int_at(obj, path, __FILE__, __LINE__)
#define fx_json_len(obj, path) fx_json_len_at(obj, path, __FILE__, __LINE__)

void fx_assert_status(const struct gp_client_response *r, long expected, const char *file,
    int line);
void fx_assert_problem(const struct gp_client_response *r, long status, const char *code,
    const char *file, int line);
void fx_assert_json_str(struct json_object *obj, const char *path, const char *expected,
    const char *file, int line);
void fx_assert_json_int(struct json_object *obj, const char *path, int64_t expected,
    const char *file, int line);
void fx_assert_json_null(struct json_object *obj, const char *path, const char *file, int line);
void fx_assert_json_absent(struct json_object *obj, const char *path, const char *file, int line);
const char *fx_json_str_at(struct json_object *obj, const char *path, const char *file, int line);
int64_t fx_json_int_at(struct json_object *obj, const char *path, const char *file, int line);
size_t fx_json_len_at(struct json_object *obj, const char *path, const char *file, int line);

/* The value at a dotted path, NULL when absent or null (never fails). */
struct json_object *fx_json(struct json_object *obj, const char *path);

/* True when every step of path exists (the last one may be null). */
bool fx_json_has(struct json_object *obj, const char *path);

/*
 * Lint a /metrics page with Prometheus's promtool ("check metrics") when
 * GPUPOOL_PROMTOOL names it (scripts/test does); fails the test on a
 * finding, does nothing without it.
 */
void fixture_promtool_check(struct fixture *fx, const char *body, size_t len);

/* ---- processes ---- */

/*
 * Run the gpupool CLI with the given arguments (NULL-terminated) and
 * wait for it (60 s). Its environment: HOME=<tmpdir>/home,
 * XDG_CONFIG_HOME, GPUPOOL_SERVER and GPUPOOL_TOKEN unset, then env
 * applied ("KEY=VALUE" sets, a bare "KEY" unsets; env may be NULL).
 * input (may be NULL) is its stdin.
 */
struct fx_proc *fx_cli(struct fixture *fx, const char *const *env, const char *input, ...)
    __attribute__((sentinel));

/* fx_cli() with the arguments in argv (NULL-terminated). */
struct fx_proc *fx_cli_argv(struct fixture *fx, const char *const *env, const char *input,
    const char *const *argv);

/* Run "gpupoold ARGS..." with GPUPOOL_DATABASE_URL set and wait (120 s). */
struct fx_proc *fx_gpupoold(struct fixture *fx, const char *input, ...) __attribute__((sentinel));

/* The CLI's $HOME for this fixture (holds .config/gpupool/config). */
const char *fx_cli_home(struct fixture *fx);

/* ---- strings ---- */

/* printf into fixture memory. */
const char *fx_str(struct fixture *fx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A name unique within the fixture: "<prefix>-<n>". */
const char *fx_unique(struct fixture *fx, const char *prefix);

/*
 * A cluster named prefix with nodes "<prefix>-n<i>", each with gpus GPUs
 * of model (unique UUIDs), registered through the API as the admin;
 * mig sets their MIG mode (with SQL: the registration API keeps it off).
 */
void fx_fleet(struct fixture *fx, const char *prefix, const char *model, int nodes, int gpus,
    bool mig);

/*
 * fx_fleet's cluster, nodes and GPUs, MIG off (every GPU as registered),
 * for a test that sets MIG modes itself.
 */
void fx_fleet_register(struct fixture *fx, const char *prefix, const char *model, int nodes,
    int gpus);

/*
 * The nodes named prefix-* as an agent manages them (docs/pools.md): their
 * allocations wait for the agent (reserved, the pool provisioning), which
 * a test then plays with SQL. The heartbeat lies a day ahead so that the
 * liveness sweep leaves them ready for the whole run. Nodes registered by
 * hand (fx_fleet) are unmanaged: their allocations are ready at once.
 */
void fx_agents_manage(struct fixture *fx, const char *prefix);

/*
 * The pool invariants, asserted in SQL: no two live allocations overlap
 * on a GPU; every pool's live allocations are its SpecAndCount; per pool
 * and kind the open usage-ledger intervals sum to the live allocations;
 * gpus.layout mirrors the allocations.
 */
void fx_assert_pool_invariants(struct fixture *fx);

/* ---- node agents ---- */

/* A fresh enrollment token of cluster (made by the admin; ten minutes). */
const char *fx_enroll_token(struct fixture *fx, const char *cluster);

/*
 * Enroll node name with one H100 80GB in MIG mode (GPU gpu_uuid, no
 * instances) through the agent API, no agent process, into cluster
 * (created in region eu-1 when absent); its node token, NULL on failure.
 */
const char *fx_enroll_mig_node(struct fixture *fx, const char *cluster, const char *name,
    const char *gpu_uuid);

/* The state directory of the agent of node name (its fake-faults.json lives there). */
const char *fx_agent_dir(struct fixture *fx, const char *name);

/*
 * Start a real gpupool-agent for node name with the fake backend
 * (gpus_spec, e.g. {"gpus":[{"model":"H100-80GB","count":2}]}), enrolling
 * into cluster with a fresh token, talking to server; fast intervals
 * (poll 2 s, heartbeat 1 s, metrics and profiles 2 s); extra: more
 * arguments, NULL-terminated, or NULL. Its output goes to
 * <tmpdir>/agent-<name>.log. The fixture kills it at teardown if the test
 * did not stop it. Returns its pid.
 */
pid_t fx_agent_spawn(struct fixture *fx, struct fx_server *server, const char *cluster,
    const char *name, const char *gpus_spec, const char *const *extra);

/*
 * SIGTERM to an agent, then wait up to 10 s (SIGKILL after); returns its
 * exit status (128 + N when killed by signal N).
 */
int fx_agent_stop(struct fixture *fx, pid_t pid);

#endif
