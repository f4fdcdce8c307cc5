/*
 * cmd_defrag.c - gpupool capacity defrag: compute a defragmentation plan
 * (POST /v1/capacity/defrag-plans), read one back or list them, apply
 * or cancel one, and follow a plan being applied until it ends
 * (docs/capacity.md, "Fragmentation and defragmentation plans" and
 * "Applying a plan").
 *
 * A plan prints as a short summary (goal, limits, placeable before and
 * after, free GPUs, tenants, progress) and a table of its moves, each
 * FROM -> TO as NODE/gpuINDEX@START (the first memory slice), with the
 * move's state once the plan is applied. Following a plan prints one line
 * per change of a move's or the plan's state; the exit status says how it
 * ended: 0 applied, CMD_DEFRAG_EXIT_NOT_APPLIED failed, cancelled or
 * expired.
 */
#include "cmd_defrag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd_capacity.h"
#include "output.h"

#define DEFRAG_PATH_MAX 1024
#define DEFRAG_TEXT_MAX 256
#define DEFRAG_MAX_NODES 256 /* the server's limit (DefragPlanRequest.nodes) */
#define DEFRAG_POLL_MS 1000
#define DEFRAG_MAX_ITEMS 64

static const struct output_column move_columns[] = {
	{ "#", "_n" },
	{ "ALLOCATION", "allocation" },
	{ "POOL", "_pool" },
	{ "PROFILE", "profile" },
	{ "FROM", "_from" },
	{ "→", "_arrow" },
	{ "TO", "_to" },
	{ "MODE", "_mode" },
	OUTPUT_WIDE,
	{ "FROM GPU", "from.gpu_uuid" },
	{ "TO GPU", "to.gpu_uuid" },
	{ NULL, NULL },
};

/* the same once the server reports each move's progress */
static const struct output_column move_state_columns[] = {
	{ "#", "_n" },
	{ "ALLOCATION", "allocation" },
	{ "POOL", "_pool" },
	{ "PROFILE", "profile" },
	{ "FROM", "_from" },
	{ "→", "_arrow" },
	{ "TO", "_to" },
	{ "MODE", "_mode" },
	{ "STATE", "state" },
	{ "REASON", "reason" },
	OUTPUT_WIDE,
	{ "NEW ALLOCATION", "new_allocation" },
	{ "OLD UUID", "old_uuid" },
	{ "NEW UUID", "new_uuid" },
	{ "UPDATED", "updated_at" },
	{ NULL, NULL },
};

static const struct output_column list_columns[] = {
	{ "ID", "id" },
	{ "STATE", "state" },
	{ "GOAL", "goal" },
	{ "ITEMS", "items" },
	{ "CLUSTER", "cluster" },
	{ "MOVES", "moves_total" },
	{ "DONE", "progress.done" },
	{ "SKIPPED", "progress.skipped" },
	{ "FAILED", "progress.failed" },
	{ "CREATED BY", "created_by" },
	OUTPUT_WIDE,
	{ "CREATED", "created_at" },
	{ NULL, NULL },
};

static void
defrag_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The string at path made safe for a terminal into buf; dflt when absent or null. */
static const char *
defrag_text(struct json_object *o, const char *path, const char *dflt, char *buf, size_t len)
{
	struct json_object *v = gp_client_json_get(o, path);
	const char *s = dflt;
	size_t i = 0;

	if (v != NULL && json_object_is_type(v, json_type_string))
		s = json_object_get_string(v);
	for (; s[i] != '\0' && i + 1 < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		buf[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	buf[i] = '\0';
	return buf;
}

/* The string at key of o, NULL when absent or not a string. */
static const char *
defrag_str(struct json_object *o, const char *key)
{
	struct json_object *v = gp_client_json_get(o, key);

	return v != NULL && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
								     : NULL;
}

/* The integer at path; -1 when absent. */
static long long
defrag_int(struct json_object *o, const char *path)
{
	struct json_object *v = gp_client_json_get(o, path);

	return v != NULL && json_object_is_type(v, json_type_int)
	    ? (long long)json_object_get_int64(v)
	    : -1;
}

/* "yes", "no" or "-" for a boolean that may be null. */
static const char *
defrag_yesno(struct json_object *o, const char *path)
{
	struct json_object *v = gp_client_json_get(o, path);

	if (v == NULL || !json_object_is_type(v, json_type_boolean))
		return "-";
	return json_object_get_boolean(v) ? "yes" : "no";
}

/* The strings of the array at path joined by ", " into buf ("-" when empty). */
static const char *
defrag_join(struct json_object *o, const char *path, char *buf, size_t len)
{
	struct json_object *a = gp_client_json_get(o, path);
	size_t n =
	    a != NULL && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
	size_t used = 0;

	snprintf(buf, len, "-");
	for (size_t i = 0; i < n && used + 1 < len; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		char t[DEFRAG_TEXT_MAX];
		int w;

		if (e == NULL || !json_object_is_type(e, json_type_string))
			continue;
		snprintf(t, sizeof(t), "%s", json_object_get_string(e));
		for (char *p = t; *p != '\0'; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
		w = snprintf(buf + used, len - used, "%s%s", used > 0 ? ", " : "", t);
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
	return buf;
}

/* A place of a move as NODE/gpuINDEX@START into buf. */
static const char *
defrag_place(struct json_object *mv, const char *which, char *buf, size_t len)
{
	char key[32], node[DEFRAG_TEXT_MAX];

	snprintf(key, sizeof(key), "%s.node", which);
	defrag_text(mv, key, "?", node, sizeof(node));
	snprintf(key, sizeof(key), "%s.gpu_index", which);
	{
		long long idx = defrag_int(mv, key);

		snprintf(key, sizeof(key), "%s.start", which);
		snprintf(buf, len, "%s/gpu%lld@%lld", node, idx, defrag_int(mv, key));
	}
	return buf;
}

/* Add the derived columns of the moves table to each move. */
static void
defrag_decorate_moves(struct json_object *moves)
{
	size_t n = moves != NULL && json_object_is_type(moves, json_type_array)
	    ? json_object_array_length(moves)
	    : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *mv = json_object_array_get_idx(moves, i);
		char project[DEFRAG_TEXT_MAX], pool[DEFRAG_TEXT_MAX], buf[2 * DEFRAG_TEXT_MAX + 2];
		struct json_object *mbb;

		if (mv == NULL || !json_object_is_type(mv, json_type_object))
			continue;
		json_object_object_add(mv, "_n", json_object_new_int64((int64_t)i + 1));
		defrag_text(mv, "project", "-", project, sizeof(project));
		defrag_text(mv, "pool", "-", pool, sizeof(pool));
		snprintf(buf, sizeof(buf), "%s/%s", project, pool);
		json_object_object_add(mv, "_pool", json_object_new_string(buf));
		json_object_object_add(mv, "_from",
		    json_object_new_string(defrag_place(mv, "from", buf, sizeof(buf))));
		json_object_object_add(mv, "_arrow", json_object_new_string("→"));
		json_object_object_add(mv, "_to",
		    json_object_new_string(defrag_place(mv, "to", buf, sizeof(buf))));
		mbb = gp_client_json_get(mv, "make_before_break");
		json_object_object_add(mv, "_mode",
		    json_object_new_string(mbb != NULL && json_object_get_boolean(mbb)
			    ? "make before break"
			    : "break before make"));
	}
}

/* Whether any move carries its state (a server that applies plans). */
static bool
defrag_has_states(struct json_object *moves)
{
	size_t n = moves != NULL && json_object_is_type(moves, json_type_array)
	    ? json_object_array_length(moves)
	    : 0;

	for (size_t i = 0; i < n; i++)
		if (gp_client_json_get(json_object_array_get_idx(moves, i), "state") != NULL)
			return true;
	return false;
}

/* The capacity entry of model in the array at path, NULL when none. */
static struct json_object *
defrag_capacity_of(struct json_object *plan, const char *path, const char *model)
{
	struct json_object *a = gp_client_json_get(plan, path);
	size_t n =
	    a != NULL && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *m = json_object_array_get_idx(a, i);
		struct json_object *name = gp_client_json_get(m, "model");

		if (name != NULL && json_object_is_type(name, json_type_string) &&
		    strcmp(json_object_get_string(name), model) == 0)
			return m;
	}
	return NULL;
}

/* placeable of profile in a DefragCapacity entry; -1 when absent. */
static long long
defrag_placeable(struct json_object *cap, const char *profile)
{
	struct json_object *a = gp_client_json_get(cap, "profiles");
	size_t n =
	    a != NULL && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(a, i);
		struct json_object *name = gp_client_json_get(p, "profile");

		if (name != NULL && json_object_is_type(name, json_type_string) &&
		    strcmp(json_object_get_string(name), profile) == 0)
			return defrag_int(p, "placeable");
	}
	return -1;
}

/*
 * Per model, before and after the moves:
 *
 *   H100-80GB            before   after
 *     empty GPUs              1       2
 *     free compute           20      20
 *     stranded                3       0
 *     7g.80gb placeable       1       2
 */
static void
defrag_print_capacity(struct json_object *plan)
{
	struct json_object *before = gp_client_json_get(plan, "capacity.before");
	size_t n = before != NULL && json_object_is_type(before, json_type_array)
	    ? json_object_array_length(before)
	    : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *b = json_object_array_get_idx(before, i), *a, *profiles;
		char model[DEFRAG_TEXT_MAX], label[DEFRAG_TEXT_MAX + 16];
		size_t np;

		defrag_text(b, "model", "?", model, sizeof(model));
		a = defrag_capacity_of(plan, "capacity.after", model);
		printf("\n%-24s %8s %8s\n", model, "before", "after");
		printf("  %-22s %8lld %8lld\n", "empty GPUs", defrag_int(b, "empty_gpus"),
		    defrag_int(a, "empty_gpus"));
		printf("  %-22s %8lld %8lld\n", "free compute", defrag_int(b, "compute_free"),
		    defrag_int(a, "compute_free"));
		printf("  %-22s %8lld %8lld\n", "stranded", defrag_int(b, "compute_stranded"),
		    defrag_int(a, "compute_stranded"));
		profiles = gp_client_json_get(b, "profiles");
		np = profiles != NULL && json_object_is_type(profiles, json_type_array)
		    ? json_object_array_length(profiles)
		    : 0;
		for (size_t j = 0; j < np; j++) {
			struct json_object *p = json_object_array_get_idx(profiles, j);
			char prof[DEFRAG_TEXT_MAX];

			defrag_text(p, "profile", "?", prof, sizeof(prof));
			snprintf(label, sizeof(label), "%s placeable", prof);
			printf("  %-22s %8lld %8lld\n", label, defrag_int(p, "placeable"),
			    defrag_placeable(a, prof));
		}
	}
}

/* The plan as text: its summary, its moves, the capacity before and after. */
static void
defrag_print_plan(struct json_object *plan)
{
	char a[DEFRAG_TEXT_MAX], b[DEFRAG_TEXT_MAX], c[DEFRAG_TEXT_MAX], items[1024];
	struct json_object *moves = gp_client_json_get(plan, "moves");
	/* a plan not applied has its moves pending: the states say nothing yet */
	bool states = defrag_has_states(moves) && defrag_str(plan, "state") != NULL &&
	    strcmp(defrag_str(plan, "state"), "planned") != 0;
	size_t nmoves = moves != NULL && json_object_is_type(moves, json_type_array)
	    ? json_object_array_length(moves)
	    : 0;

	printf("plan %lld: %s\n", defrag_int(plan, "id"),
	    defrag_text(plan, "state", "?", a, sizeof(a)));
	printf("goal:        %s", defrag_text(plan, "goal", "?", a, sizeof(a)));
	if (strcmp(a, "items") == 0)
		printf(" %s", defrag_join(plan, "items", items, sizeof(items)));
	printf("\nscope:       cluster %s, nodes %s; idle for %lld min; at most %lld moves\n",
	    defrag_text(plan, "cluster", "any", b, sizeof(b)),
	    defrag_join(plan, "nodes", items, sizeof(items)), defrag_int(plan, "idle_minutes"),
	    defrag_int(plan, "max_moves"));
	printf("created:     %s by %s\n", defrag_text(plan, "created_at", "-", c, sizeof(c)),
	    defrag_text(plan, "created_by", "-", b, sizeof(b)));
	printf("instances:   %lld on %lld GPUs, %lld idle (may move)\n",
	    defrag_int(plan, "instances"), defrag_int(plan, "gpus"),
	    defrag_int(plan, "idle_instances"));
	printf("moves:       %zu%s\n", nmoves,
	    json_object_get_boolean(gp_client_json_get(plan, "moves_exhausted"))
		? " (a useful move was left out for want of --max-moves)"
		: "");
	if (strcmp(a, "items") == 0) {
		printf("placeable:   before %s, after %s", defrag_yesno(plan, "placeable_before"),
		    defrag_yesno(plan, "placeable_after"));
		printf("; made placeable: %s\n",
		    defrag_join(plan, "items_made_placeable", items, sizeof(items)));
	}
	printf("free GPUs:   before %lld, after %lld\n", defrag_int(plan, "free_gpus_before"),
	    defrag_int(plan, "free_gpus_after"));
	printf("tenants:     %s\n", defrag_join(plan, "tenants", items, sizeof(items)));
	if (gp_client_json_get(plan, "progress") != NULL)
		printf("progress:    %lld pending, %lld running, %lld done, %lld skipped, %lld "
		       "failed\n",
		    defrag_int(plan, "progress.pending"), defrag_int(plan, "progress.running"),
		    defrag_int(plan, "progress.done"), defrag_int(plan, "progress.skipped"),
		    defrag_int(plan, "progress.failed"));
	if (gp_client_json_get(plan, "error") != NULL)
		printf("error:       %s\n", defrag_text(plan, "error", "-", b, sizeof(b)));
	if (nmoves > 0) {
		fputc('\n', stdout);
		defrag_decorate_moves(moves);
		output_table(stdout, moves, states ? move_state_columns : move_columns);
	}
	defrag_print_capacity(plan);
}

/* Print the answer: -o json as it came, else as text. */
static void
defrag_show(struct cli *cli, struct json_object *plan)
{
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, plan);
	else
		defrag_print_plan(plan);
}

static bool
defrag_final(const char *state)
{
	return state != NULL &&
	    (strcmp(state, "applied") == 0 || strcmp(state, "failed") == 0 ||
		strcmp(state, "cancelled") == 0 || strcmp(state, "expired") == 0);
}

/* Ended, and no move still under way (one in flight when a plan is cancelled finishes). */
static bool
defrag_settled(struct json_object *plan)
{
	return defrag_final(defrag_str(plan, "state")) && defrag_int(plan, "progress.running") <= 0;
}

/* The path of plan id (with suffix, "" or "/apply") into buf. */
static void
defrag_path(char *buf, size_t len, long long id, const char *suffix)
{
	snprintf(buf, len, "/v1/capacity/defrag-plans/%lld%s", id, suffix);
}

static int
defrag_parse_id(struct cli *cli, const struct cli_command *cmd, const char *s, long long *id)
{
	char *end = NULL;
	long long v = 0;

	if (s[0] >= '1' && s[0] <= '9')
		v = strtoll(s, &end, 10);
	if (v <= 0 || *end != '\0')
		return cli_usage_error(cli, cmd,
		    "the plan ID must be a positive integer, not \"%s\"", s);
	*id = v;
	return CLI_EXIT_OK;
}

/* A move's state, "" when it has none. */
static const char *
defrag_move_state(struct json_object *moves, size_t i)
{
	const char *s = defrag_str(json_object_array_get_idx(moves, i), "state");

	return s != NULL ? s : "";
}

/*
 * Print what changed between the plan old (may be NULL) and now: one
 * line per move whose state changed, then the plan's state.
 */
static void
defrag_print_changes(struct json_object *old, struct json_object *now)
{
	struct json_object *om = gp_client_json_get(old, "moves");
	struct json_object *nm = gp_client_json_get(now, "moves");
	size_t n = nm != NULL && json_object_is_type(nm, json_type_array)
	    ? json_object_array_length(nm)
	    : 0;
	size_t on = om != NULL && json_object_is_type(om, json_type_array)
	    ? json_object_array_length(om)
	    : 0;
	const char *os = defrag_str(old, "state"), *ns = defrag_str(now, "state");
	char a[DEFRAG_TEXT_MAX], b[DEFRAG_TEXT_MAX], c[DEFRAG_TEXT_MAX], d[DEFRAG_TEXT_MAX];

	for (size_t i = 0; i < n; i++) {
		struct json_object *mv = json_object_array_get_idx(nm, i);
		const char *st = defrag_move_state(nm, i);

		/* every move starts pending: a line for each step after that */
		if (st[0] == '\0' || strcmp(st, "pending") == 0 ||
		    (i < on && strcmp(defrag_move_state(om, i), st) == 0))
			continue;
		printf("move %zu (allocation %lld, %s/%s %s): %s", i + 1,
		    defrag_int(mv, "allocation"), defrag_text(mv, "project", "-", a, sizeof(a)),
		    defrag_text(mv, "pool", "-", b, sizeof(b)),
		    defrag_text(mv, "profile", "?", c, sizeof(c)),
		    defrag_text(mv, "state", "?", d, sizeof(d)));
		if (defrag_str(mv, "reason") != NULL)
			printf(" (%s)", defrag_text(mv, "reason", "", a, sizeof(a)));
		fputc('\n', stdout);
	}
	if (ns != NULL && (os == NULL || strcmp(os, ns) != 0)) {
		printf("plan %lld: %s", defrag_int(now, "id"),
		    defrag_text(now, "state", "?", a, sizeof(a)));
		if (gp_client_json_get(now, "progress") != NULL)
			printf(" (%lld done, %lld skipped, %lld failed of %zu)",
			    defrag_int(now, "progress.done"), defrag_int(now, "progress.skipped"),
			    defrag_int(now, "progress.failed"), n);
		if (defrag_str(now, "error") != NULL)
			printf(": %s", defrag_text(now, "error", "", a, sizeof(a)));
		fputc('\n', stdout);
	}
	fflush(stdout);
}

/*
 * Follow plan id from first (the caller's, consumed) until it reaches a
 * final state with no move still running, or timeout seconds pass; prints each change unless -o
 * json, then the plan. Returns 0 when it ended applied,
 * CMD_DEFRAG_EXIT_NOT_APPLIED when it ended otherwise, or the failure.
 */
static int
defrag_follow(struct cli *cli, long long id, struct json_object *first, long long timeout)
{
	struct json_object *last = first;
	time_t start = time(NULL);
	char path[DEFRAG_PATH_MAX];
	int rc;

	defrag_path(path, sizeof(path), id, "");
	if (cli->output != CLI_OUTPUT_JSON)
		defrag_print_changes(NULL, last);
	while (!defrag_settled(last)) {
		struct gp_client_response r;
		struct json_object *now;

		if (time(NULL) - start >= timeout) {
			json_object_put(last);
			return cli_fail(cli, "plan %lld did not end within %lld s", id, timeout);
		}
		defrag_sleep_ms(DEFRAG_POLL_MS);
		rc = cli_call(cli, "GET", path, NULL, &r);
		if (rc != CLI_EXIT_OK) {
			json_object_put(last);
			return rc;
		}
		now = json_object_get(r.json);
		gp_client_response_free(&r);
		if (cli->output != CLI_OUTPUT_JSON)
			defrag_print_changes(last, now);
		json_object_put(last);
		last = now;
	}
	if (cli->output != CLI_OUTPUT_JSON)
		fputc('\n', stdout);
	defrag_show(cli, last);
	rc = strcmp(defrag_str(last, "state"), "applied") == 0 ? CLI_EXIT_OK
							       : CMD_DEFRAG_EXIT_NOT_APPLIED;
	json_object_put(last);
	return rc;
}

static int
defrag_timeout_opt(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    long long *timeout)
{
	*timeout = 3600;
	if (cli_opt(args, "timeout") != NULL &&
	    cli_parse_int64(cli, cmd, "timeout", cli_opt(args, "timeout"), 1, 86400 * 7, timeout) !=
		0)
		return CLI_EXIT_USAGE;
	return CLI_EXIT_OK;
}

static int
defrag_plan(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *nodes[DEFRAG_MAX_NODES + 1];
	bool free_gpus = cli_opt(args, "free-gpus") != NULL;
	struct json_object *body = NULL, *items = NULL, *arr;
	struct gp_client_response r;
	long long max_moves = -1, idle = -1;
	int nnodes, rc;

	if (free_gpus && (args->npos > 0 || cli_opt(args, "items") != NULL))
		return cli_usage_error(cli, cmd, "--free-gpus takes no items");
	if (!free_gpus && args->npos == 0)
		return cli_usage_error(cli, cmd,
		    "give the items to make room for (MODEL/PROFILE=COUNT ...) or --free-gpus");
	nnodes = cli_opt_all(args, "node", nodes, DEFRAG_MAX_NODES + 1);
	if (nnodes > DEFRAG_MAX_NODES)
		return cli_usage_error(cli, cmd, "at most %d --node", DEFRAG_MAX_NODES);
	if (cli_opt(args, "max-moves") != NULL &&
	    cli_parse_int64(cli, cmd, "max-moves", cli_opt(args, "max-moves"), 0, 100000,
		&max_moves) != 0)
		return CLI_EXIT_USAGE;
	if (cli_opt(args, "idle-minutes") != NULL &&
	    cli_parse_int64(cli, cmd, "idle-minutes", cli_opt(args, "idle-minutes"), 0, 10080,
		&idle) != 0)
		return CLI_EXIT_USAGE;
	if (!free_gpus) {
		rc = cmd_capacity_items(cli, cmd, args, &items);
		if (rc != CLI_EXIT_OK)
			return rc;
	}
	body = json_object_new_object();
	if (body == NULL) {
		json_object_put(items);
		return cli_fail(cli, "out of memory");
	}
	json_object_object_add(body, "goal",
	    json_object_new_string(free_gpus ? "free_gpus" : "items"));
	if (items != NULL)
		json_object_object_add(body, "items", items);
	if (cli_opt(args, "cluster") != NULL)
		json_object_object_add(body, "cluster",
		    json_object_new_string(cli_opt(args, "cluster")));
	if (nnodes > 0) {
		arr = json_object_new_array();
		json_object_object_add(body, "nodes", arr);
		for (int i = 0; i < nnodes; i++)
			json_object_array_add(arr, json_object_new_string(nodes[i]));
	}
	if (max_moves >= 0)
		json_object_object_add(body, "max_moves", json_object_new_int64(max_moves));
	if (idle >= 0)
		json_object_object_add(body, "idle_minutes", json_object_new_int64(idle));
	rc = cli_call(cli, "POST", "/v1/capacity/defrag-plans", body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	defrag_show(cli, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
defrag_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[DEFRAG_PATH_MAX];
	struct gp_client_response r;
	long long id, timeout;
	int rc;

	if (defrag_parse_id(cli, cmd, args->pos[0], &id) != CLI_EXIT_OK ||
	    defrag_timeout_opt(cli, cmd, args, &timeout) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if (cli_opt(args, "timeout") != NULL && cli_opt(args, "watch") == NULL)
		return cli_usage_error(cli, cmd, "--timeout goes with --watch");
	defrag_path(path, sizeof(path), id, "");
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli_opt(args, "watch") != NULL) {
		struct json_object *plan = json_object_get(r.json);

		gp_client_response_free(&r);
		if (cli->output != CLI_OUTPUT_JSON && !defrag_settled(plan)) {
			defrag_print_plan(plan);
			fputc('\n', stdout);
		}
		return defrag_follow(cli, id, plan, timeout);
	}
	defrag_show(cli, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
defrag_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[DEFRAG_PATH_MAX] = "/v1/capacity/defrag-plans";
	struct json_object *doc;
	int rc;

	(void)cmd;
	if (cli_query_add(cli, path, sizeof(path), "state", cli_opt(args, "state")) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_list(cli, path, args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	return cli_print_list(cli, doc, NULL, list_columns);
}

/* POST the plan's action (apply, cancel) and show the answer; --wait follows it. */
static int
defrag_act(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    const char *action)
{
	char path[DEFRAG_PATH_MAX], suffix[32];
	struct gp_client_response r;
	struct json_object *body, *plan;
	long long id, timeout;
	int rc;

	if (defrag_parse_id(cli, cmd, args->pos[0], &id) != CLI_EXIT_OK ||
	    defrag_timeout_opt(cli, cmd, args, &timeout) != CLI_EXIT_OK)
		return CLI_EXIT_USAGE;
	if (cli_opt(args, "timeout") != NULL && cli_opt(args, "wait") == NULL)
		return cli_usage_error(cli, cmd, "--timeout goes with --wait");
	snprintf(suffix, sizeof(suffix), "/%s", action);
	defrag_path(path, sizeof(path), id, suffix);
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	/* a POST: cli_call sends a fresh Idempotency-Key, kept across its retries */
	rc = cli_call(cli, "POST", path, body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	plan = json_object_get(r.json);
	gp_client_response_free(&r);
	if (cli_opt(args, "wait") != NULL)
		return defrag_follow(cli, id, plan, timeout);
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, plan);
	} else {
		struct json_object *moves = gp_client_json_get(plan, "moves");
		char st[DEFRAG_TEXT_MAX];

		printf("plan %lld: %s (%zu moves)\n", id,
		    defrag_text(plan, "state", "?", st, sizeof(st)),
		    moves != NULL && json_object_is_type(moves, json_type_array)
			? json_object_array_length(moves)
			: 0);
	}
	json_object_put(plan);
	return CLI_EXIT_OK;
}

static int
defrag_apply(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return defrag_act(cli, cmd, args, "apply");
}

static int
defrag_cancel(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return defrag_act(cli, cmd, args, "cancel");
}

static const struct cli_option plan_options[] = {
	{ "items", NULL, "the arguments are items to make placeable (the default)", false },
	{ "free-gpus", NULL, "instead: empty as many whole GPUs as the moves allow", false },
	{ "cluster", "C", "only the GPUs of this cluster", false },
	{ "node", "N", "only the GPUs of this node (moves stay among them)", true },
	{ "max-moves", "N", "at most N moves (default 1 % of the instances in scope)", false },
	{ "idle-minutes", "M", "move only instances idle for M minutes (default the server's)",
	    false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option get_options[] = {
	{ "watch", NULL, "follow the plan: a line per change until it ends", false },
	{ "timeout", "S", "with --watch: give up after S seconds (default 3600)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option list_options[] = {
	{ "state", "S", "only plans in this state (planned, applying, applied, ...)", false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option apply_options[] = {
	{ "wait", NULL, "follow the moves until the plan ends; exit 8 unless applied", false },
	{ "timeout", "S", "with --wait: give up after S seconds (default 3600)", false },
	{ NULL, NULL, NULL, false },
};

const struct cli_command cmd_defrag_commands[] = {
	{
	    .name = "plan",
	    .usage = "[--items] MODEL/PROFILE=COUNT ... | --free-gpus [--cluster C] [--node N]... "
		     "[--max-moves N] [--idle-minutes M]",
	    .summary = "plan moves of idle MIG instances (changes nothing in the fleet)",
	    .help = "Compute a defragmentation plan from the fleet as it is: moves of idle MIG\n"
		    "instances (no workload profile and no activity for --idle-minutes) that\n"
		    "make the items placeable, or with --free-gpus empty as many whole GPUs\n"
		    "as the moves allow. Nothing in the fleet changes; the plan is stored\n"
		    "(state planned) for 'capacity defrag apply'. Operators and admins.\n"
		    "\n"
		    "  gpupool capacity defrag plan --items H100-80GB/7g.80gb=2 --cluster eu1\n"
		    "  gpupool capacity defrag plan --free-gpus --max-moves 20 --idle-minutes 120\n"
		    "\n"
		    "Prints the plan: whether the items are placeable before and after, the\n"
		    "empty GPUs before and after, the projects whose instances move, and the\n"
		    "moves in order, each FROM -> TO as NODE/gpuINDEX@START (START the first\n"
		    "memory slice), \"make before break\" when the new instance is created\n"
		    "before the old one is destroyed (another GPU), else \"break before make\";\n"
		    "then per model the capacity before and after.\n"
		    "\n"
		    "exit status: 0 a plan was made (maybe with no moves), 2 usage error\n"
		    "(malformed item text), 3 refused (an unknown model, profile, cluster or\n"
		    "node is the server's 422; 403 for other roles).",
	    .min_args = 0,
	    .max_args = DEFRAG_MAX_ITEMS,
	    .options = plan_options,
	    .run = defrag_plan,
	},
	{
	    .name = "get",
	    .usage = "ID [--watch] [--timeout S]",
	    .summary = "a plan, its moves and (once applied) each move's state",
	    .help = "Print a stored plan as 'capacity defrag plan' does; once it is applied,\n"
		    "each move's state (pending, reserving, creating, destroying, done,\n"
		    "skipped, failed) and reason. --watch follows the plan, a line per\n"
		    "change of a move or of the plan, until it is applied, failed,\n"
		    "cancelled or expired, then prints it again; the exit status is then\n"
		    "0 only when it was applied (8 otherwise).",
	    .min_args = 1,
	    .max_args = 1,
	    .options = get_options,
	    .run = defrag_get,
	},
	{
	    .name = "list",
	    .usage = "[--state S] [--limit N] [--cursor C]",
	    .summary = "the plans, newest first",
	    .help = "List the defragmentation plans, newest first: state, goal, items,\n"
		    "cluster, moves and how many are done, skipped or failed.",
	    .max_args = 0,
	    .options = list_options,
	    .run = defrag_list,
	},
	{
	    .name = "apply",
	    .usage = "ID [--wait] [--timeout S]",
	    .summary = "apply a planned plan: the server runs its moves in order",
	    .help = "Start applying a plan (planned -> applying); the server runs its moves\n"
		    "one by one: the target slices reserved, the new instance created and\n"
		    "ready, then the old one destroyed; a move whose instance became busy is\n"
		    "skipped. Applying a plan that is already applying or applied changes\n"
		    "nothing. The request carries an Idempotency-Key, so a retry acts once.\n"
		    "--wait follows the moves until the plan ends.\n"
		    "\n"
		    "exit status: 0 started (with --wait: applied), 8 with --wait: the plan\n"
		    "failed, was cancelled or expired, 5 the plan cannot be applied now\n"
		    "(expired, failed, cancelled: 409), 4 no such plan.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = apply_options,
	    .run = defrag_apply,
	},
	{
	    .name = "cancel",
	    .usage = "ID",
	    .summary = "cancel a plan: moves not yet started are skipped",
	    .help = "Cancel a planned or applying plan: the moves not yet started are\n"
		    "skipped (reason cancelled); a move under way finishes. 5 (conflict)\n"
		    "when the plan has already ended.",
	    .min_args = 1,
	    .max_args = 1,
	    .run = defrag_cancel,
	},
	{ .name = NULL },
};
