/*
 * test_defrag_cli.c - defragmentation plans through the gpupool CLI
 * (gpupool capacity defrag ...): the real binary against a real gpupoold
 * on the fragmented fleet of test_defrag_plans (4 H100-80GB in cluster
 * frag, a 4g.40gb released from each GPU, four idle 1g.10gb instances of
 * dp/small left scattered), as an operator:
 *
 *   - plan -o json: the refused 7g.80gb request becomes placeable, the
 *     plan is stored, nothing in the fleet changes;
 *   - get: the same plan as text, one table row per move with its
 *     allocation, pool and FROM -> TO as the database places it;
 *   - plan --free-gpus as text: the empty GPUs before and after;
 *   - usage errors (exit 2, nothing sent), a missing plan (4), a project
 *     user refused (3);
 *   - apply --wait with a real agent on a fragmented node: every move done,
 *     the request fits afterwards; apply again, cancel, list
 *     (test_apply_with_agents).
 */
#include "fixture.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"

static const char *op_env[3];
static const char *alice_env[3];
static const char *op, *alice;

#define CLI(fx, ...) fx_cli(fx, op_env, NULL, __VA_ARGS__, NULL)

static void
assert_cli_status(const struct fx_proc *p, int status, const char *file, int line)
{
	if (p->status != status) {
		print_error("%s:%d: exit status %d, expected %d\nstdout:\n%s\nstderr:\n%s\n", file,
		    line, p->status, status, p->out, p->err);
		_fail(file, line);
	}
}
#define assert_exit(p, status) assert_cli_status(p, status, __FILE__, __LINE__)

#define assert_contains(hay, needle)                                                             \
	do {                                                                                     \
		if (strstr((hay), (needle)) == NULL) {                                           \
			print_error("%s:%d: \"%s\" not in:\n%s\n", __FILE__, __LINE__, (needle), \
			    (hay));                                                              \
			_fail(__FILE__, __LINE__);                                               \
		}                                                                                \
	} while (0)

/* stdout of a -o json run, parsed; fails unless it is one JSON value. */
static struct json_object *
cli_json(struct fixture *fx, const struct fx_proc *p)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;

	assert_non_null(tok);
	o = json_tokener_parse_ex(tok, p->out, (int)strlen(p->out));
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success)
		print_error("not JSON: %s\n", p->out);
	assert_non_null(o);
	json_tokener_free(tok);
	return json_own(fx->arena, o);
}

static void
submit_approve(struct fixture *fx, const char *action, const char *pool, const char *items)
{
	struct gp_client_response *r;
	int64_t id;

	r = fx_request(fx, alice, "POST", "/v1/projects/dp/pool-requests",
	    "{\"action\":\"%s\",\"pool\":\"%s\"%s%s%s,\"justification\":\"t\"}", action, pool,
	    items ? ",\"items\":[" : "", items ? items : "", items ? "]" : "");
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
}

/* alice submits to dp (body as given), the operator approves */
static void
submit_approve_body(struct fixture *fx, const char *body)
{
	struct gp_client_response *r;
	int64_t id;

	r = fx_request(fx, alice, "POST", "/v1/projects/dp/pool-requests", "%s", body);
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
}

/* The fleet's layout and allocations as text: must not change while planning. */
static const char *
fleet_text(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT coalesce(string_agg(g.uuid || ':' || g.layout, ' ' ORDER BY g.id), '') || '|' "
	    "|| (SELECT coalesce(string_agg(a.id || a.state || a.gpu_id || '@' || a.start, ' ' "
	    "ORDER BY a.id), '') FROM allocations a) FROM gpus g");
}

/* How a move's place prints: NODE/gpuINDEX@START, from the database for from. */
static const char *
place_of_allocation(struct fixture *fx, int64_t allocation)
{
	return fx_sql_text(fx,
	    "SELECT n.name || '/gpu' || g.gpu_index || '@' || a.start FROM allocations a "
	    "JOIN gpus g ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id WHERE a.id = $1",
	    fx_str(fx, "%lld", (long long)allocation));
}

static const char *
place_of_json(struct fixture *fx, struct json_object *mv, const char *which)
{
	return fx_str(fx, "%s/gpu%lld@%lld", fx_json_str(mv, fx_str(fx, "%s.node", which)),
	    (long long)fx_json_int(mv, fx_str(fx, "%s.gpu_index", which)),
	    (long long)fx_json_int(mv, fx_str(fx, "%s.start", which)));
}

/* The number of lines of text that start with prefix. */
static int
lines_starting(const char *text, const char *prefix)
{
	int n = 0;

	for (const char *l = text; l != NULL && *l != '\0';) {
		if (strncmp(l, prefix, strlen(prefix)) == 0)
			n++;
		l = strchr(l, '\n');
		if (l != NULL)
			l++;
	}
	return n;
}

static void
test_plan_and_get(void **state)
{
	struct fixture *fx = *state;
	struct json_object *plan, *moves;
	const char *before, *item, *id;
	struct fx_proc *p;
	int64_t empty, plans0;
	size_t n;

	op = fixture_create_user(fx, "dcop", "operator");
	alice = fixture_create_user(fx, "dcalice", "none");
	op_env[0] = fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url);
	op_env[1] = fx_str(fx, "GPUPOOL_TOKEN=%s", op);
	alice_env[0] = op_env[0];
	alice_env[1] = fx_str(fx, "GPUPOOL_TOKEN=%s", alice);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"dp\",\"display_name\":\"dp\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/dp/members/dcalice",
			  "{\"role\":\"owner\"}"),
	    201);
	fx_fleet(fx, "frag", "H100-80GB", 1, 4, true);
	submit_approve(fx, "create", "big", "\"H100-80GB/4g.40gb=4\"");
	submit_approve(fx, "create", "small", "\"H100-80GB/1g.10gb=4\"");
	submit_approve(fx, "release", "big", NULL);
	fx_sql_exec(fx, "SELECT pools_confirm_unmanaged_releases()");
	empty = fx_sql_int64(fx, "SELECT count(*) FROM gpus WHERE layout = ''");
	assert_true(empty >= 1 && empty <= 2);
	item = fx_str(fx, "H100-80GB/7g.80gb=%lld", (long long)empty + 1);

	/* the request is refused as the fleet is */
	p = CLI(fx, "capacity", "simulate", "--cluster", "frag", item);
	assert_exit(p, 7);

	/* usage errors: nothing sent, nothing stored */
	plans0 = fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans");
	p = CLI(fx, "capacity", "defrag", "plan");
	assert_exit(p, 2);
	assert_contains(p->err, "give the items to make room for");
	p = CLI(fx, "capacity", "defrag", "plan", "--free-gpus", item);
	assert_exit(p, 2);
	assert_contains(p->err, "--free-gpus takes no items");
	p = CLI(fx, "capacity", "defrag", "plan", "--items", "H100-80GB/7g.80gb");
	assert_exit(p, 2);
	assert_contains(p->err, "item 1 \"H100-80GB/7g.80gb\": must look like");
	p = CLI(fx, "capacity", "defrag", "plan", "--free-gpus", "--max-moves", "-1");
	assert_exit(p, 2);
	p = CLI(fx, "capacity", "defrag", "plan", "--free-gpus", "--idle-minutes", "10081");
	assert_exit(p, 2);
	p = CLI(fx, "capacity", "defrag", "get", "0");
	assert_exit(p, 2);
	/* the server's refusals: an unknown node (422), a project user (403) */
	p = CLI(fx, "capacity", "defrag", "plan", "--free-gpus", "--node", "frag-n0", "--node",
	    "nowhere");
	assert_exit(p, 3);
	assert_contains(p->err, "nodes[1]");
	p = fx_cli(fx, alice_env, NULL, "capacity", "defrag", "plan", "--free-gpus", NULL);
	assert_exit(p, 3);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans"), plans0);

	/* the plan as JSON: placeable after its moves; nothing in the fleet changed */
	before = fleet_text(fx);
	p = CLI(fx, "-o", "json", "capacity", "defrag", "plan", "--items", item, "--cluster",
	    "frag", "--idle-minutes", "0", "--max-moves", "10");
	assert_exit(p, 0);
	plan = cli_json(fx, p);
	assert_json_str(plan, "state", "planned");
	assert_json_str(plan, "goal", "items");
	assert_json_str(plan, "created_by", "dcop");
	assert_json_str(plan, "cluster", "frag");
	assert_int_equal(fx_json_int(plan, "max_moves"), 10);
	assert_int_equal(fx_json_int(plan, "idle_minutes"), 0);
	assert_false(json_object_get_boolean(fx_json(plan, "placeable_before")));
	assert_true(json_object_get_boolean(fx_json(plan, "placeable_after")));
	assert_int_equal(fx_json_int(plan, "free_gpus_before"), empty);
	assert_int_equal(fx_json_int(plan, "free_gpus_after"), empty + 1);
	moves = fx_json(plan, "moves");
	n = json_object_array_length(moves);
	assert_true(n >= 1);
	assert_string_equal(fleet_text(fx), before);
	id = fx_str(fx, "%lld", (long long)fx_json_int(plan, "id"));
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans WHERE id = $1", id),
	    1);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans"), plans0 + 1);

	/* get: the stored plan as text, one row per move, FROM as the database has it */
	p = CLI(fx, "capacity", "defrag", "get", id);
	assert_exit(p, 0);
	assert_contains(p->out, fx_str(fx, "plan %s: planned\n", id));
	assert_contains(p->out, fx_str(fx, "goal:        items %s\n", item));
	assert_contains(p->out,
	    "scope:       cluster frag, nodes -; idle for 0 min; at most 10 moves\n");
	assert_contains(p->out, fx_str(fx, "moves:       %zu\n", n));
	assert_contains(p->out,
	    fx_str(fx, "placeable:   before no, after yes; made placeable: %s\n", item));
	assert_contains(p->out,
	    fx_str(fx, "free GPUs:   before %lld, after %lld\n", (long long)empty,
		(long long)empty + 1));
	assert_contains(p->out, "tenants:     dp\n");
	assert_contains(p->out, "#   ALLOCATION   POOL       PROFILE   FROM ");
	for (size_t i = 0; i < n; i++) {
		struct json_object *mv = json_object_array_get_idx(moves, i);
		int64_t aid = fx_json_int(mv, "allocation");
		const char *from = place_of_allocation(fx, aid);

		assert_string_equal(place_of_json(fx, mv, "from"), from);
		/* "1   17           dp/small   1g.10gb   frag-n0/gpu1@6   →   frag-n0/gpu0@7 ..." */
		assert_int_equal(lines_starting(p->out, fx_str(fx, "%zu   ", i + 1)), 1);
		assert_contains(p->out,
		    fx_str(fx, "   dp/small   1g.10gb   %s   →   %s   ", from,
			place_of_json(fx, mv, "to")));
		assert_contains(p->out, fx_str(fx, "%zu   %lld ", i + 1, (long long)aid));
	}
	/* the capacity per model, before and after: one more 7g.80gb placeable */
	assert_contains(p->out, "H100-80GB                  before    after\n");
	assert_contains(p->out,
	    fx_str(fx, "  empty GPUs             %8lld %8lld\n", (long long)empty,
		(long long)empty + 1));
	assert_contains(p->out,
	    fx_str(fx, "  7g.80gb placeable      %8lld %8lld\n", (long long)empty,
		(long long)empty + 1));
	/* -o json reads the same plan back */
	p = CLI(fx, "-o", "json", "capacity", "defrag", "get", id);
	assert_exit(p, 0);
	plan = cli_json(fx, p);
	assert_int_equal(fx_json_int(plan, "id"), fx_json_int(cli_json(fx, p), "id"));
	assert_int_equal(fx_json_len(plan, "moves"), n);

	/* free GPUs: the four idle 1g.10gb pack onto one GPU, three left empty */
	p = CLI(fx, "capacity", "defrag", "plan", "--free-gpus", "--cluster", "frag",
	    "--idle-minutes", "0");
	assert_exit(p, 0);
	assert_contains(p->out, "goal:        free_gpus\n");
	assert_contains(p->out,
	    fx_str(fx, "free GPUs:   before %lld, after 3\n", (long long)empty));
	assert_true(strstr(p->out, "placeable:") == NULL);
	assert_string_equal(fleet_text(fx), before);

	/* a plan that is not there: 4; a project user may not read one: 3 */
	p = CLI(fx, "capacity", "defrag", "get", "999999");
	assert_exit(p, 4);
	p = fx_cli(fx, alice_env, NULL, "capacity", "defrag", "get", id, NULL);
	assert_exit(p, 3);
	fx_assert_pool_invariants(fx);
}

/* Poll sql until it gives want (up to seconds); its last answer. */
static int64_t
wait_for(struct fixture *fx, int seconds, int64_t want, const char *sql)
{
	int64_t got = -1;

	for (int i = 0; i < seconds * 10; i++) {
		got = fx_sql_int64(fx, sql);
		if (got == want)
			break;
		usleep(100000);
	}
	if (got != want)
		print_error("%s: %lld, want %lld\n", sql, (long long)got, (long long)want);
	return got;
}

/*
 * Applying through the CLI with a real agent (fake backend) on the node:
 * the same fragmentation made by the agent (a 4g.40gb created on each GPU
 * and destroyed again, four 1g.10gb left), a plan, then "apply --wait":
 * each move printed as it ends, exit 0 when applied, and the request the
 * plan was for fits afterwards; applying again changes nothing, a plan
 * that ended cannot be cancelled (5); list shows the plans newest first
 * and by state; a second plan cancelled.
 */
static void
test_apply_with_agents(void **state)
{
	struct fixture *fx = *state;
	struct json_object *plan, *moves;
	const char *item, *id, *id2;
	struct fx_proc *p;
	int64_t empty;
	pid_t agent;
	size_t n;

	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"agt\"}"),
	    201);
	agent = fx_agent_spawn(fx, fx->server, "agt", "agt-n0",
	    "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":4}]}", NULL);
	assert_int_equal(wait_for(fx, 60, 4,
			     "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
			     "WHERE n.name = 'agt-n0' AND g.health = 'ok' AND n.status = 'ready'"),
	    4);
	submit_approve_body(fx,
	    "{\"action\":\"create\",\"pool\":\"abig\",\"cluster\":\"agt\","
	    "\"items\":[\"H100-80GB/4g.40gb=4\"],\"justification\":\"t\"}");
	submit_approve_body(fx,
	    "{\"action\":\"create\",\"pool\":\"asmall\",\"cluster\":\"agt\","
	    "\"items\":[\"H100-80GB/1g.10gb=4\"],\"justification\":\"t\"}");
	assert_int_equal(wait_for(fx, 60, 8,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name IN ('abig', 'asmall') AND a.state = 'ready'"),
	    8);
	submit_approve_body(fx,
	    "{\"action\":\"release\",\"pool\":\"abig\",\"justification\":\"t\"}");
	assert_int_equal(wait_for(fx, 60, 0,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'abig' AND a.state <> 'released'"),
	    0);
	empty = fx_sql_int64(fx,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
	    "WHERE n.name = 'agt-n0' AND g.layout = ''");
	assert_true(empty >= 1 && empty <= 2);
	item = fx_str(fx, "H100-80GB/7g.80gb=%lld", (long long)empty + 1);
	p = CLI(fx, "capacity", "simulate", "--cluster", "agt", item);
	assert_exit(p, 7);

	p = CLI(fx, "-o", "json", "capacity", "defrag", "plan", item, "--cluster", "agt",
	    "--idle-minutes", "0", "--max-moves", "10");
	assert_exit(p, 0);
	plan = cli_json(fx, p);
	assert_true(json_object_get_boolean(fx_json(plan, "placeable_after")));
	n = json_object_array_length(fx_json(plan, "moves"));
	assert_true(n >= 1);
	id = fx_str(fx, "%lld", (long long)fx_json_int(plan, "id"));

	/* apply --wait: each move as it ends, then the plan applied; exit 0 */
	p = CLI(fx, "capacity", "defrag", "apply", id, "--wait", "--timeout", "120");
	assert_exit(p, 0);
	assert_contains(p->out,
	    fx_str(fx, "plan %s: applied (%zu done, 0 skipped, 0 failed of %zu)\n", id, n, n));
	for (size_t i = 0; i < n; i++)
		assert_contains(p->out,
		    fx_str(fx, "move %zu (allocation %lld, dp/asmall 1g.10gb): done\n", i + 1,
			(long long)fx_json_int(json_object_array_get_idx(fx_json(plan, "moves"), i),
			    "allocation")));
	assert_contains(p->out, "STATE");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM defrag_plans WHERE id = $1", id),
	    "applied");
	/* each moved instance is where the plan put it, ready, its old one released */
	p = CLI(fx, "-o", "json", "capacity", "defrag", "get", id);
	assert_exit(p, 0);
	moves = fx_json(cli_json(fx, p), "moves");
	for (size_t i = 0; i < n; i++) {
		struct json_object *mv = json_object_array_get_idx(moves, i);

		assert_json_str(mv, "state", "done");
		assert_string_equal(place_of_allocation(fx, fx_json_int(mv, "new_allocation")),
		    place_of_json(fx, mv, "to"));
		assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
					fx_str(fx, "%lld",
					    (long long)fx_json_int(mv, "new_allocation"))),
		    "ready");
		assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
					fx_str(fx, "%lld",
					    (long long)fx_json_int(mv, "allocation"))),
		    "released");
	}
	/* the request the plan was for fits now */
	p = CLI(fx, "capacity", "simulate", "--cluster", "agt", item);
	assert_exit(p, 0);
	fx_assert_pool_invariants(fx);
	/* applying again changes nothing; a plan that ended cannot be cancelled */
	p = CLI(fx, "capacity", "defrag", "apply", id);
	assert_exit(p, 0);
	assert_contains(p->out, fx_str(fx, "plan %s: applied", id));
	p = CLI(fx, "capacity", "defrag", "cancel", id);
	assert_exit(p, 5);
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM defrag_plans WHERE id = $1", id),
	    "applied");

	/* a second plan, cancelled before it is applied; it cannot be applied then */
	p = CLI(fx, "-o", "json", "capacity", "defrag", "plan", "--free-gpus", "--cluster", "agt",
	    "--idle-minutes", "0");
	assert_exit(p, 0);
	id2 = fx_str(fx, "%lld", (long long)fx_json_int(cli_json(fx, p), "id"));
	p = CLI(fx, "capacity", "defrag", "cancel", id2);
	assert_exit(p, 0);
	assert_contains(p->out, fx_str(fx, "plan %s: cancelled", id2));
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM defrag_plans WHERE id = $1", id2),
	    "cancelled");
	p = CLI(fx, "capacity", "defrag", "apply", id2, "--wait");
	assert_exit(p, 5);
	/* get --watch: 0 for the applied plan, 8 for the cancelled one; -o json the plan alone */
	p = CLI(fx, "capacity", "defrag", "get", id, "--watch");
	assert_exit(p, 0);
	assert_contains(p->out,
	    fx_str(fx, "plan %s: applied (%zu done, 0 skipped, 0 failed of %zu)\n", id, n, n));
	p = CLI(fx, "-o", "json", "capacity", "defrag", "get", id2, "--watch");
	assert_exit(p, 8);
	assert_json_str(cli_json(fx, p), "state", "cancelled");
	p = CLI(fx, "capacity", "defrag", "cancel", "999999");
	assert_exit(p, 4);
	p = CLI(fx, "capacity", "defrag", "apply", id2, "--timeout", "5");
	assert_exit(p, 2);

	/* list: newest first, every plan; by state */
	p = CLI(fx, "-o", "json", "capacity", "defrag", "list");
	assert_exit(p, 0);
	plan = cli_json(fx, p);
	assert_int_equal(fx_json_len(plan, "items"),
	    fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans"));
	assert_int_equal(fx_json_int(json_object_array_get_idx(fx_json(plan, "items"), 0), "id"),
	    fx_sql_int64(fx, "SELECT max(id) FROM defrag_plans"));
	p = CLI(fx, "capacity", "defrag", "list", "--state", "applied");
	assert_exit(p, 0);
	assert_contains(p->out, "ID   STATE ");
	assert_int_equal(lines_starting(p->out, fx_str(fx, "%s ", id)), 1);
	assert_int_equal(lines_starting(p->out, fx_str(fx, "%s ", id2)), 0);
	assert_int_equal(fx_agent_stop(fx, agent), 0);
}

static int
group_setup(void **state)
{
	/* the fake agent reports 0.15 SM activity per instance: idle below 0.95 here */
	static const char *const env[] = { "GPUPOOL_IDLE_THRESHOLD=0.95", NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_and_get),
		cmocka_unit_test(test_apply_with_agents),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
