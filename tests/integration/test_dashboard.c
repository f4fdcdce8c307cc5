/*
 * test_dashboard.c - the dashboard in a real browser: PostgreSQL, a real
 * gpupoold serving /ui/, two simulated nodes (gpupool-agent processes,
 * fake backend) and Debian's Chromium driven by Playwright
 * (dashboard/tests/dashboard.test.mjs, run with node); first the
 * dashboard's unit tests of its request layer and views' logic
 * (dashboard/tests/unit/).
 *
 * This file sets the scene through the API (users of every role, two
 * projects, hostile names wherever the API takes free text, a pending
 * request, one that cannot fit, a pool of another project), runs the
 * browser walk, then checks in SQL that what was clicked happened: the
 * approval, the acknowledged alert, the user's requests (one for a double
 * click), the export; that
 * the refused approval changed nothing; and the pool invariants.
 * Screenshots go to $GPUPOOL_DASHBOARD_SHOTS when it is set (docs/).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "util.h"

/* what the browser must show as text, never run */
#define HOSTILE "<img src=x onerror=window.__xss=1><script>window.__xss=2</script>"
#define HOSTILE_JSON "<img src=x onerror=window.__xss=1><script>window.__xss=2<\\/script>"

static const char *op, *bill, *alice, *bob;

static const char *
enroll_token(struct fixture *fx)
{
	struct gp_client_response *r = fx_request(fx, op, "POST",
	    "/v1/clusters/dash/enrollment-tokens", "{\"expires_in_seconds\":600}");
	assert_status(r, 201);
	return fx_json_str(r->json, "token");
}

static pid_t
agent_spawn(struct fixture *fx, const char *name, const char *dir)
{
	const char *gpus = fx_str(fx, "%s/gpus-%s.json", fx->tmpdir, name);
	const char *spec = "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2}]}";
	const char *token = enroll_token(fx);
	const char *log = fx_str(fx, "%s/%s.log", fx->tmpdir, name);

	assert_int_equal(ag_write_file(gpus, spec, strlen(spec), 0644), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(AGENT_PATH, AGENT_PATH, "--server", fx->server->base_url, "--node-name", name,
		    "--state-dir", dir, "--backend", "fake", "--fake-gpus", gpus, "--enroll-token",
		    token, "--poll-interval", "2", "--heartbeat-interval", "1",
		    "--metrics-interval", "2", "--profiles-interval", "2", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void
wait_sql(struct fixture *fx, int64_t want, const char *sql)
{
	int64_t got = -1;
	for (int i = 0; i < 300; i++) {
		got = fx_sql_int64(fx, sql);
		if (got == want)
			return;
		usleep(100000);
	}
	fail_msg("timed out: %s gave %lld, want %lld", sql, (long long)got, (long long)want);
}

static int64_t
submit(struct fixture *fx, const char *token, const char *project, const char *body)
{
	struct gp_client_response *r = fx_request(fx, token, "POST",
	    fx_str(fx, "/v1/projects/%s/pool-requests", project), "%s", body);
	assert_status(r, 201);
	return fx_json_int(r->json, "id");
}

/* node dashboard/tests/dashboard.test.mjs with the scene in its environment */
static int
run_browser(struct fixture *fx, const char *fault_file, int64_t train, int64_t huge,
    int64_t hidden_pool, const char *mig_gpu, int64_t mig_devices, pid_t agent_a, pid_t agent_b)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (chdir(DASHBOARD_DIR) != 0)
			_exit(126);
		setenv("GP_URL", fx->server->base_url, 1);
		setenv("GP_ADMIN", FIXTURE_ADMIN_USER, 1);
		setenv("GP_ADMIN_PASSWORD", FIXTURE_ADMIN_PASSWORD, 1);
		setenv("GP_PASSWORD", FIXTURE_PASSWORD, 1);
		setenv("GP_FAULT_FILE", fault_file, 1);
		setenv("GP_TRAIN_REQUEST", fx_str(fx, "%lld", (long long)train), 1);
		setenv("GP_HUGE_REQUEST", fx_str(fx, "%lld", (long long)huge), 1);
		setenv("GP_HIDDEN_POOL", fx_str(fx, "%lld", (long long)hidden_pool), 1);
		setenv("GP_HOSTILE", HOSTILE, 1);
		setenv("GP_MIG_GPU", mig_gpu, 1);
		setenv("GP_MIG_DEVICES", fx_str(fx, "%lld", (long long)mig_devices), 1);
		/* the browser walk stops them (SIGSTOP) to see the nodes go unavailable */
		setenv("GP_AGENT_PIDS", fx_str(fx, "%ld %ld", (long)agent_a, (long)agent_b), 1);
		execlp("node", "node", "tests/dashboard.test.mjs", (char *)NULL);
		fprintf(stderr, "test_dashboard: node not found (scripts/test installs nodejs)\n");
		_exit(127);
	}
	int st = 0;
	for (int i = 0; i < 2400; i++) { /* 240 s */
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	fail_msg("the browser walk ran past 240 s");
	return -1;
}

/* the server applies plans (DEFRAG-APPLY): the walk applies the plan it made */
#define DEFRAG_APPLY true

/*
 * node dashboard/tests/defrag.test.mjs: the Defragmentation panel on the
 * fragmented cluster, where item is refused.
 */
static int
run_defrag_browser(struct fixture *fx, const char *item)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (chdir(DASHBOARD_DIR) != 0)
			_exit(126);
		setenv("GP_URL", fx->server->base_url, 1);
		setenv("GP_PASSWORD", FIXTURE_PASSWORD, 1);
		setenv("GP_DEFRAG_ITEM", item, 1);
		setenv("GP_DEFRAG_CLUSTER", "frag", 1);
		execlp("node", "node", "tests/defrag.test.mjs", (char *)NULL);
		fprintf(stderr, "test_dashboard: node not found (scripts/test installs nodejs)\n");
		_exit(127);
	}
	int st = 0;
	for (int i = 0; i < 1800; i++) { /* 180 s */
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	fail_msg("the defragmentation walk ran past 180 s");
	return -1;
}

/* alice submits to ml, the operator approves */
static void
submit_approve(struct fixture *fx, const char *body)
{
	int64_t id = submit(fx, alice, "ml", body);
	assert_status(fx_request(fx, op, "POST",
			  fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id), "{}"),
	    200);
}

/*
 * The Defragmentation panel (docs/dashboard.md) on a fragmented cluster
 * as test_defrag_plans builds it: four H100-80GB on a node without an
 * agent, a 4g.40gb released from each and a 1g.10gb left on each, so that
 * a 7g.80gb for every GPU but one holding a 1g.10gb is refused. The walk
 * plans from the form (one POST, one plan), counts the moves drawn against
 * the plan's, and checks the roles; here: one plan, by the operator, as
 * asked, audited, and the fleet unchanged by planning.
 */
static void
test_defrag_panel(void **state)
{
	struct fixture *fx = *state;
	/* every allocation as " id:state:gpu@start", but those of $1 */
	const char *alloc_sql =
	    "SELECT coalesce(string_agg(' ' || id || ':' || state || ':' || gpu_id || '@' || start, "
	    "'' ORDER BY id), '') FROM allocations WHERE NOT (id = ANY ($1::bigint[]))";
	struct gp_client_response *r;
	struct json_object *moves;
	const char *moved = "";

	fx_fleet(fx, "frag", "H100-80GB", 1, 4, true);
	submit_approve(fx,
	    "{\"action\":\"create\",\"pool\":\"fbig\",\"cluster\":\"frag\","
	    "\"items\":[\"H100-80GB/4g.40gb=4\"]}");
	submit_approve(fx,
	    "{\"action\":\"create\",\"pool\":\"fsmall\",\"cluster\":\"frag\","
	    "\"items\":[\"H100-80GB/1g.10gb=4\"]}");
	submit_approve(fx, "{\"action\":\"release\",\"pool\":\"fbig\"}");
	fx_sql_exec(fx, "SELECT pools_confirm_unmanaged_releases()");
	int64_t empty = fx_sql_int64(fx,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
	    "WHERE n.name LIKE 'frag-%' AND g.layout = ''");
	assert_true(empty >= 1 && empty <= 2);
	const char *item = fx_str(fx, "H100-80GB/7g.80gb=%lld", (long long)empty + 1);
	const char *before = fx_sql_text(fx, alloc_sql, "{}");
	int64_t plans0 = fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans");

	int rc = run_defrag_browser(fx, item);
	if (rc != 0)
		fixture_server_dump_log(fx->server, 60);
	assert_int_equal(rc, 0);
	/* one click, one plan: the operator's, as the form asked; then the second, cancelled */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans"), plans0 + 2);
	assert_string_equal(fx_sql_text(fx,
				"SELECT u.username || ' ' || p.state || ' ' || p.goal FROM defrag_plans p "
				"JOIN users u ON u.id = p.created_by ORDER BY p.id DESC LIMIT 1"),
	    "dash-op cancelled free_gpus");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'defrag_plan.cancel' "
			     "AND object_id = (SELECT max(id)::text FROM defrag_plans)"),
	    1);
	/* the first: applied */
	const char *applied = fx_sql_text(fx, "SELECT (max(id) - 1)::text FROM defrag_plans");
	assert_string_equal(fx_sql_text(fx,
				"SELECT u.username || ' ' || p.state || ' ' || p.goal || ' ' "
				"|| (p.body->>'max_moves') || ' ' || (p.body->>'idle_minutes') "
				"FROM defrag_plans p JOIN users u ON u.id = p.created_by "
				"WHERE p.id = $1::bigint",
				applied),
	    "dash-op applied items 10 0");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'defrag_plan.create' "
			     "AND object_id = $1",
			     applied),
	    1);
	/* applied from the dashboard, once (audited): each moved instance is
	 * where the plan put it, ready, its old one released; nothing else of
	 * the fleet moved; the request the plan was for fits now */
	r = fx_request(fx, op, "GET", fx_str(fx, "/v1/capacity/defrag-plans/%s", applied), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "state", "applied");
	moves = fx_json(r->json, "moves");
	assert_true(json_object_array_length(moves) >= 1);
	for (size_t i = 0; i < json_object_array_length(moves); i++) {
		struct json_object *mv = json_object_array_get_idx(moves, i);
		const char *old_id = fx_str(fx, "%lld", (long long)fx_json_int(mv, "allocation"));
		const char *new_id =
		    fx_str(fx, "%lld", (long long)fx_json_int(mv, "new_allocation"));

		assert_json_str(mv, "state", "done");
		assert_string_equal(fx_sql_text(fx,
					"SELECT a.state || ' ' || g.uuid || ' ' || a.start FROM allocations a "
					"JOIN gpus g ON g.id = a.gpu_id WHERE a.id = $1",
					new_id),
		    fx_str(fx, "ready %s %lld", fx_json_str(mv, "to.gpu_uuid"),
			(long long)fx_json_int(mv, "to.start")));
		assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
					old_id),
		    "released");
		moved = fx_str(fx, "%s%s%s,%s", moved, moved[0] ? "," : "", old_id, new_id);
		/* the old one as it was before the walk, left out of what must not change */
		{
			const char *tok = strstr(before, fx_str(fx, " %s:", old_id));
			const char *end = tok != NULL ? strchr(tok + 1, ' ') : NULL;

			assert_non_null(tok);
			before = fx_str(fx, "%.*s%s", (int)(tok - before), before, end ? end : "");
		}
	}
	/* nothing else in the fleet moved */
	assert_string_equal(fx_sql_text(fx, alloc_sql, fx_str(fx, "{%s}", moved)), before);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'defrag_plan.apply' "
			     "AND object_id = $1",
			     applied),
	    1);
	r = fx_request(fx, op, "POST", "/v1/capacity/simulate",
	    "{\"items\":[\"%s\"],\"cluster\":\"frag\"}", item);
	assert_status(r, 200);
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	fx_assert_pool_invariants(fx);
}

/*
 * The dashboard's request layer in Node (dashboard/tests/unit/, node --test,
 * fetch replaced): at most 6 requests in flight, an Idempotency-Key on every
 * change kept across a user action's retries, a double run acting once, an
 * export followed to its end.
 */
static void
test_dashboard_request_layer(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (chdir(DASHBOARD_DIR) != 0)
			_exit(126);
		execlp("node", "node", "--test", "--test-reporter=tap", "tests/unit/",
		    (char *)NULL);
		fprintf(stderr, "test_dashboard: node not found (scripts/test installs nodejs)\n");
		_exit(127);
	}
	int st = 0;
	for (int i = 0; i < 1200; i++) { /* 120 s */
		if (waitpid(pid, &st, WNOHANG) == pid) {
			assert_true(WIFEXITED(st));
			assert_int_equal(WEXITSTATUS(st), 0);
			return;
		}
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	fail_msg("the dashboard's unit tests ran past 120 s");
}

static void
test_dashboard_in_chromium(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *admin = fx->admin_token;

	/* two projects; alice owns ml, bob owns secret; hostile free text */
	r = fx_request(fx, admin, "POST", "/v1/projects",
	    "{\"name\":\"ml\",\"display_name\":\"" HOSTILE_JSON
	    "\",\"namespaces\":[\"ml-train\"]}");
	assert_status(r, 201);
	assert_status(fx_request(fx, admin, "PUT", "/v1/projects/ml/members/dash-alice",
			  "{\"role\":\"owner\"}"),
	    201);
	assert_status(fx_request(fx, admin, "POST", "/v1/projects",
			  "{\"name\":\"secret\",\"display_name\":\"Secret\"}"),
	    201);
	assert_status(fx_request(fx, admin, "PUT", "/v1/projects/secret/members/dash-bob",
			  "{\"role\":\"owner\"}"),
	    201);
	assert_status(fx_request(fx, admin, "POST", "/v1/billing/rates",
			  "{\"model\":\"H100-80GB\",\"profile\":\"full\",\"currency\":\"EUR\","
			  "\"price_per_hour_micro\":3000000,\"effective_from\":\"2020-01-01T00:00:00Z\"}"),
	    201);
	assert_status(fx_request(fx, op, "POST", "/v1/clusters",
			  "{\"name\":\"dash\",\"region\":\"eu-west\",\"description\":\"" HOSTILE_JSON
			  "\"}"),
	    201);

	/* two simulated nodes of two H100s each */
	const char *dir_a = fx_str(fx, "%s/agent-dash-a", fx->tmpdir);
	const char *dir_b = fx_str(fx, "%s/agent-dash-b", fx->tmpdir);
	pid_t a = agent_spawn(fx, "dash-a", dir_a);
	pid_t b = agent_spawn(fx, "dash-b", dir_b);
	wait_sql(fx, 4,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
	    "WHERE n.name IN ('dash-a','dash-b') AND g.health = 'ok'");

	/* bob's pool, which alice must never see */
	int64_t hid = submit(fx, bob, "secret",
	    "{\"action\":\"create\",\"pool\":\"hidden\",\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)hid),
	    "{}");
	assert_status(r, 200);
	int64_t hidden_pool = fx_sql_int64(fx, "SELECT id FROM pools WHERE name = 'hidden'");
	/* billed seconds of the hidden pool (its first second must pass): the
	 * usage view then has a billed row and hours billed later for secret */
	for (int i = 0; i < 100 &&
	     fx_sql_int64(fx,
		 "SELECT count(*) FROM billing_usage "
		 "WHERE amount_micro > 0") == 0;
	     i++) {
		assert_status(fx_request(fx, admin, "POST", "/v1/billing/accrual/run", NULL), 200);
		usleep(100000);
	}
	assert_true(
	    fx_sql_int64(fx, "SELECT count(*) FROM billing_usage WHERE amount_micro > 0") > 0);
	/* and a second pool of secret, not accrued yet: hours without a currency */
	int64_t later = submit(fx, bob, "secret",
	    "{\"action\":\"create\",\"pool\":\"later\",\"items\":[\"H100-80GB/1g.10gb=2\"]}");
	assert_status(fx_request(fx, op, "POST",
			  fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)later), "{}"),
	    200);
	/* alice's requests: one fits, one cannot (8 whole GPUs on 4) */
	int64_t train = submit(fx, alice, "ml",
	    "{\"action\":\"create\",\"pool\":\"train\",\"items\":[\"H100-80GB/3g.40gb=2\"],"
	    "\"justification\":\"" HOSTILE_JSON "\"}");
	int64_t huge = submit(fx, alice, "ml",
	    "{\"action\":\"create\",\"pool\":\"huge\",\"items\":[\"H100-80GB/full=8\"],"
	    "\"justification\":\"" HOSTILE_JSON "\"}");
	/* an operator marks a GPU degraded, with a hostile reason */
	const char *uuid = fx_sql_text(fx,
	    "SELECT g.uuid FROM gpus g JOIN nodes n ON n.id = g.node_id "
	    "WHERE n.name = 'dash-b' AND g.gpu_index = 1");
	r = fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%s", uuid),
	    "{\"health\":\"degraded\",\"health_reason\":\"" HOSTILE_JSON "\"}");
	assert_status(r, 200);
	int64_t requests_before = fx_sql_int64(fx, "SELECT count(*) FROM pool_requests");
	int64_t allocs_huge = fx_sql_int64(fx,
	    "SELECT count(*) FROM allocations al JOIN pools p ON p.id = al.pool_id "
	    "WHERE p.name = 'huge'");

	/*
	 * The GPU page of a MIG GPU charts one line per device: secret's
	 * 1g.10gb instances (one of hidden, two of later) put two on one GPU;
	 * the fake agent reports the whole GPU only (MIG devices' telemetry
	 * comes from dcgm-exporter), so their samples go in here, two per
	 * device in the last minute, values apart (no line hides another),
	 * and one 55 minutes ago: the 1-hour range full, its time labels
	 * checked for overlap.
	 */
	wait_sql(fx, 3,
	    "SELECT count(*) FROM allocations al JOIN pools p ON p.id = al.pool_id "
	    "WHERE p.name IN ('hidden','later') AND al.state = 'ready' AND al.device_uuid IS NOT NULL");
	const char *mig_gpu = fx_sql_text(fx,
	    "SELECT g.uuid FROM allocations al JOIN pools p ON p.id = al.pool_id "
	    "JOIN gpus g ON g.id = al.gpu_id WHERE p.name IN ('hidden','later') "
	    "AND al.state = 'ready' GROUP BY g.uuid ORDER BY count(*) DESC, g.uuid LIMIT 1");
	int64_t mig_devices = fx_sql_int64(fx,
	    "SELECT count(*) FROM allocations al JOIN gpus g ON g.id = al.gpu_id "
	    "WHERE g.uuid = $1 AND al.state = 'ready'",
	    mig_gpu);
	assert_true(mig_devices >= 2);
	assert_int_equal(fx_sql_exec(fx,
			     "INSERT INTO gpu_metric_samples (ts, gpu_id, device_uuid, power_w, "
			     "sm_active, memory_used_mib, memory_total_mib, temperature_c) "
			     "SELECT now() - make_interval(secs => CASE k WHEN 3 THEN 3300 ELSE k * 20 END), "
			     "al.gpu_id, al.device_uuid, 40 + k + 20 * (al.id % 4), 0.5, 1024, 10240, "
			     "40 + al.id % 4 FROM allocations al JOIN gpus g ON g.id = al.gpu_id "
			     "CROSS JOIN generate_series(1, 3) k "
			     "WHERE g.uuid = $1 AND al.state = 'ready'",
			     mig_gpu),
	    3 * mig_devices);
	/* and the whole GPU's own samples from its agent (every 2 s) */
	for (int i = 0; i < 300 &&
	     fx_sql_int64(fx,
		 "SELECT count(*) FROM gpu_metric_samples s "
		 "JOIN gpus g ON g.id = s.gpu_id "
		 "WHERE g.uuid = $1 AND s.device_uuid = g.uuid",
		 mig_gpu) == 0;
	     i++)
		usleep(100000);
	assert_true(fx_sql_int64(fx,
			"SELECT count(*) FROM gpu_metric_samples s JOIN gpus g ON g.id = s.gpu_id "
			"WHERE g.uuid = $1 AND s.device_uuid = g.uuid",
			mig_gpu) > 0);
	const char *before = fx_sql_text(fx, "SELECT now()::text");
	int rc = run_browser(fx, fx_str(fx, "%s/fake-faults.json", dir_a), train, huge, hidden_pool,
	    mig_gpu, mig_devices, a, b);
	if (rc != 0)
		fixture_server_dump_log(fx->server, 60);
	assert_int_equal(rc, 0);

	/* what the operator clicked: approved with the note typed */
	assert_string_equal(fx_sql_text(fx,
				"SELECT u.username || ' ' || r.note FROM pool_requests r "
				"JOIN users u ON u.id = r.decided_by WHERE r.id = $1 "
				"AND r.state IN ('approved', 'fulfilled')",
				fx_str(fx, "%lld", (long long)train)),
	    "dash-op approved from the dashboard");
	/* both instances were ready (the browser waited for it); an instance on
	 * the GPU the injected XID failed has failed with it */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations al JOIN pools p ON p.id = al.pool_id "
			     "JOIN gpus g ON g.id = al.gpu_id WHERE p.name = 'train' "
			     "AND al.state = CASE g.health WHEN 'failed' THEN 'failed' ELSE 'ready' END"),
	    2);
	/* the refused approval changed nothing */
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
				fx_str(fx, "%lld", (long long)huge)),
	    "pending");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations al JOIN pools p ON p.id = al.pool_id "
			     "WHERE p.name = 'huge'"),
	    allocs_huge);
	/* alice's requests from the form: one click, then a double click on
	 * Submit (one Idempotency-Key, the button busy until the answer): exactly
	 * two more requests, hers, pending, one for each pool */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM pool_requests"),
	    requests_before + 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r JOIN pools p ON p.id = r.pool_id "
			     "WHERE p.name = 'web2'"),
	    1);
	assert_string_equal(fx_sql_text(fx,
				"SELECT p.name || ' ' || r.state || ' ' || u.username FROM pool_requests r "
				"JOIN pools p ON p.id = r.pool_id JOIN users u ON u.id = r.requested_by "
				"WHERE p.name = 'web'"),
	    "web pending dash-alice");
	/* the injected fault: failed, alerted, acknowledged by the operator */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN users u ON u.id = al.acknowledged_by "
			     "WHERE al.type = 'gpu_failed' AND u.username = 'dash-op'"),
	    1);
	/* the export the billing user made and downloaded */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_exports e JOIN users u ON u.id = e.created_by "
			     "WHERE e.state = 'done' AND u.username = 'dash-bill'"),
	    1);
	/* the browser signed in as each role and out again: each session is revoked */
	assert_true(
	    fx_sql_int64(fx,
		"SELECT count(*) FROM tokens WHERE kind = 'session' AND created_at > $1::timestamptz",
		before) >= 4);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE kind = 'session' "
			     "AND created_at > $1::timestamptz AND revoked_at IS NULL",
			     before),
	    0);
	fx_assert_pool_invariants(fx);

	kill(a, SIGTERM);
	kill(b, SIGTERM);
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);
}

static int
group_setup(void **state)
{
	/* a short grace: the walk stops the agents and waits for their nodes to go
	 * unknown (the agents beat every second, so 8 s is never a false alarm) */
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", "GPUPOOL_AGENT_GRACE=8",
		NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	op = fixture_create_user(fx, "dash-op", "operator");
	bill = fixture_create_user(fx, "dash-bill", "billing");
	alice = fixture_create_user(fx, "dash-alice", "none");
	bob = fixture_create_user(fx, "dash-bob", "none");
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dashboard_request_layer),
		cmocka_unit_test(test_dashboard_in_chromium),
		cmocka_unit_test(test_defrag_panel),
	};
	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
