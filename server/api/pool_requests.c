/*
 * pool_requests.c - the pool-request handlers: submit, list, get, and
 * the decisions approve / reject / cancel. Each parses, authorizes and
 * calls the workflow in service/pool_service.c, which the expiry worker
 * shares; submissions and approvals go through the group-commit queues
 * (batch.c), whose workers run service_submits_run and
 * service_approvals_run, and the handler answers once woken.
 */
#include "pool_requests.h"
#include "dispatch.h"
#include "projects.h"
#include "pools.h"
#include "workers/pool_queues.h"
#include "capacity.h"
#include "core/problem.h"

#include "core/strbuf.h"
#include "core/timeutil.h"
#include "db/db_projects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JUSTIFICATION_MAX 2000
#define NOTE_MAX 2000

/* The caller, for the workflow's history and audit rows. */
static struct service_actor
request_actor(const struct request *req)
{
	struct service_actor a = { req->principal.user_id, req->principal.username,
		req->request_id };

	return a;
}

/* ---- shared pieces ---- */

static int
request_load_visible(struct db *db, struct request *req, int64_t id, struct pool_request_row *out,
    enum project_role *prole, struct gp_error *err)
{
	struct project_row proj;
	struct gp_error e;
	bool found;

	if (db_request_get(db, req->arena, id, out, &found, err) < 0)
		return -1;
	gp_error_clear(&e);
	if (!found ||
	    api_project_access(db, req, out->project, PROJECT_READ, &proj, prole, &e) < 0) {
		if (found && e.status >= 500) {
			*err = e;
			return -1;
		}
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such pool request: %lld",
		    (long long)id);
	}
	return 0;
}

/* ---- submit ---- */

struct submit {
	enum pool_action action;
	const char *action_name;
	const char *pool;
	const char *justification;
	const char *cluster;
	int64_t ends_us;
	bool has_ends;
	struct spec_count items[POOL_MAX_ITEMS];
	int nitems;
};

static int
submit_parse(struct request *req, struct submit *s, struct gp_error *err)
{
	struct json_object *body, *arr = NULL;
	struct jfields f;

	memset(s, 0, sizeof(*s));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "action", true, 16, &s->action_name) == 0 &&
	    pool_action_parse(s->action_name, &s->action) < 0)
		gp_error_field(err, "action", "must be one of create, expand, shrink, release");
	if (jf_string(&f, "pool", true, 63, &s->pool) == 0 && !api_dns_label(s->pool))
		gp_error_field(err, "pool",
		    "must be a DNS label: lower-case letters, digits and '-'");
	jf_array(&f, "items", false, &arr);
	jf_string(&f, "justification", false, JUSTIFICATION_MAX, &s->justification);
	jf_time(&f, "ends_at", false, &s->ends_us, &s->has_ends);
	if (jf_string(&f, "cluster", false, 63, &s->cluster) == 0 && s->cluster != NULL &&
	    !api_dns_label(s->cluster))
		gp_error_field(err, "cluster",
		    "must be a DNS label: lower-case letters, digits and '-'");
	if (gp_error_isset(err)) {
		(void)jf_finish(&f);
		return -1;
	}
	if (s->action == POOL_ACTION_RELEASE) {
		if (arr != NULL && json_object_array_length(arr) > 0)
			gp_error_field(err, "items",
			    "a release names no items: it frees the whole pool");
	} else if (arr == NULL) {
		gp_error_field(err, "items", "is required for %s", s->action_name);
	} else if (pools_items_read(req, arr, s->items, &s->nitems, err) < 0) {
		s->nitems = 0;
	}
	if (s->cluster != NULL && s->action != POOL_ACTION_CREATE)
		gp_error_field(err, "cluster",
		    "only a create request binds the pool to a cluster (its expands follow it)");
	if (s->has_ends && s->action != POOL_ACTION_CREATE)
		gp_error_field(err, "ends_at", "only a create request sets the pool's end time");
	else if (s->has_ends && s->ends_us <= time_now_us())
		gp_error_field(err, "ends_at", "must be in the future");
	if (jf_finish(&f) < 0)
		return -1;
	if (s->justification == NULL)
		s->justification = "";
	return 0;
}

/*
 * An error answer with extra members: the problem document of err plus
 * key: val (ownership of val passes here).
 */
static int
reply_problem_with(struct request *req, struct response *res, const struct gp_error *err,
    const char *key, struct json_object *val)
{
	struct json_object *o;

	response_problem(req, res, err);
	o = json_tokener_parse(res->body);
	if (o == NULL) {
		json_object_put(val);
		return 0;
	}
	json_object_object_add(o, key, val);
	response_json(req, res, err->status, o);
	res->content_type = "application/problem+json";
	return 0;
}

/*
 * Submissions are group-committed like approvals: the handler validates
 * (project access, the pool for expand / shrink / release) and queues the
 * insert; a submissions worker inserts everything queued in one
 * statement sent with COMMIT (db_requests_submit_many). A create whose
 * pool name is taken is refused alone; a project with a quota is checked
 * and inserted alone, by the handler, after the batch.
 */
struct submit_job {
	struct request *req;
	struct pool_job q; /* in the submissions queue (workers/pool_queues.c) */
	struct service_submit s;
};

/* A queued job's batch is done: its handler answers (submit_reply, approve_reply). */
static void
wake_request(void *req)
{
	api_wake(req);
}

/* A submission's answer: 201, the request, its ETag and Location. */
static void
submit_answer(struct request *req, struct response *res, const struct pool_request_row *out)
{
	response_json(req, res, 201, pools_request_json(out, NULL, 0));
	api_etag(req, res, out->generation);
	response_header(res, "Location",
	    arena_printf(req->arena, "/v1/pool-requests/%lld", (long long)out->id));
}

/* In the batch transaction: claim the Idempotency-Key, store the answer. */
static int
submit_claim(struct db *db, void *ctx, bool *dup, struct gp_error *err)
{
	return api_idem_claim(db, ((struct submit_job *)ctx)->req, dup, err);
}

static int
submit_keep(struct db *db, void *ctx, struct gp_error *err)
{
	struct submit_job *j = ctx;
	struct response answer;

	memset(&answer, 0, sizeof(answer));
	submit_answer(j->req, &answer, &j->s.res.out);
	return api_idem_keep(db, j->req, &answer, err);
}

/* The answer, on an HTTP thread once the batch inserted (or refused) it. */
static int
submit_reply(struct request *req, struct response *res, void *arg, struct gp_error *err)
{
	struct submit_job *j = arg;
	struct pool_request_row out;
	struct json_object *qitem = NULL;

	if (service_submit_finish(db_thread(), &j->s, &out, &qitem, err) < 0) {
		if (qitem != NULL)
			return reply_problem_with(req, res, err, "item", json_object_get(qitem));
		return -1;
	}
	submit_answer(req, res, &out);
	return 0;
}

int
api_pool_requests_submit(struct request *req, struct response *res, struct gp_error *err)
{
	struct db *db = db_thread();
	struct project_row proj;
	struct submit_job *j;
	struct submit s;

	if (submit_parse(req, &s, err) < 0)
		return -1;
	if (api_project_access(db, req, req->params[0], PROJECT_SUBMIT, &proj, NULL, err) < 0)
		return -1;
	j = arena_alloc(req->arena, sizeof(*j));
	memset(j, 0, sizeof(*j));
	j->req = req;
	j->s.arena = req->arena;
	j->s.actor = request_actor(req);
	j->s.project_id = proj.id;
	j->s.project = proj.name;
	j->s.action = s.action;
	j->s.pool = s.pool;
	j->s.justification = s.justification;
	j->s.cluster = s.cluster;
	j->s.ends_us = s.has_ends ? s.ends_us : 0;
	j->s.ttl_s = api_app(req)->request_ttl_s > 0 ? api_app(req)->request_ttl_s : 7 * 86400;
	memcpy(j->s.items, s.items, sizeof(s.items));
	j->s.nitems = s.nitems;
	j->s.hooks.claim = submit_claim;
	j->s.hooks.keep = submit_keep;
	j->s.hooks.ctx = j;
	if (service_submit_prepare(db, &j->s, err) < 0)
		return -1;
	/* the insert itself is group-committed with others (workers/pool_queues.c) */
	j->q.submit = &j->s;
	j->q.wake = wake_request;
	j->q.waiter = req;
	if (pool_queues_submit(api_app(req)->pool_queues, db, &j->q))
		return api_defer(req, submit_reply, j);
	/* shutting down: it was inserted on this thread */
	return submit_reply(req, res, j, err);
}

/* ---- list and get ---- */

int
api_pool_requests_list(struct request *req, struct response *res, struct gp_error *err)
{
	const char *state = req->query(req, "state");
	const char *project = req->query(req, "project");
	const char *pool = req->query(req, "pool");
	struct request_filter f;
	struct pool_request_row *rows;
	struct json_object *items;
	enum pool_request_state st;
	int64_t cursor;
	int limit, n;

	memset(&f, 0, sizeof(f));
	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (state != NULL && pool_request_state_parse(state, &st) < 0)
		return gp_error_field(err, "state",
		    "must be one of pending, approved, fulfilled, "
		    "failed, rejected, cancelled, expired");
	if (pool != NULL && project == NULL)
		return gp_error_field(err, "pool", "needs project: a pool's name is its project's");
	if (pool != NULL && (strlen(pool) > 63 || !api_dns_label(pool)))
		return gp_error_field(err, "pool",
		    "must be a DNS label: lower-case letters, digits and '-'");
	if (project != NULL) {
		struct project_row p;

		if (api_project_access(db_thread(), req, project, PROJECT_READ, &p, NULL, err) < 0)
			return -1;
		f.project_id = p.id;
	}
	if (!api_sees_all_projects(req))
		f.member_user_id = req->principal.user_id;
	f.pool_name = pool;
	f.has_state = state != NULL;
	if (f.has_state)
		f.state = st;
	if (db_requests_list(db_thread(), req->arena, &f, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, pools_request_json(&rows[i], NULL, 0));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

int
api_pool_requests_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct pool_request_row r;
	struct pool_request_event *ev;
	int64_t id;
	int nev;

	if (api_param_id(req, 0, &id, err) < 0)
		return -1;
	if (request_load_visible(db_thread(), req, id, &r, NULL, err) < 0)
		return -1;
	if (db_request_events(db_thread(), req->arena, id, &ev, &nev, err) < 0)
		return -1;
	response_json(req, res, 200, pools_request_json(&r, ev, nev));
	api_etag(req, res, r.generation);
	return 0;
}

/* ---- approve: group commit ---- */

struct approve_job {
	struct request *req;
	struct pool_job q; /* in the approvals queue (workers/pool_queues.c) */
	struct api_if_match if_match;
	struct service_approval c;
};

/* If-Match against the locked request's generation (its ETag). */
static int
request_if_match(const struct api_if_match *m, const struct pool_request_row *r,
    struct gp_error *err)
{
	int64_t guard;

	return api_if_match_check(m, r->generation, "pool request", &guard, err);
}

static int
approve_precondition(void *arg, const struct pool_request_row *r, struct gp_error *err)
{
	return request_if_match(&((struct approve_job *)arg)->if_match, r, err);
}

/* An approval's answer: the approved request, the audit row's "after". */
static void
approve_answer(struct request *req, struct response *res, const struct service_approval *c)
{
	response_raw(res, 200, "application/json", c->after, c->after_len);
	api_etag(req, res, c->ax.req.generation + 1);
}

/* In the batch transaction: claim the Idempotency-Key, store the answer. */
static int
approve_claim(struct db *db, void *ctx, bool *dup, struct gp_error *err)
{
	return api_idem_claim(db, ((struct approve_job *)ctx)->req, dup, err);
}

static int
approve_keep(struct db *db, void *ctx, struct gp_error *err)
{
	struct approve_job *j = ctx;
	struct response answer;

	memset(&answer, 0, sizeof(answer));
	approve_answer(j->req, &answer, &j->c);
	return api_idem_keep(db, j->req, &answer, err);
}

/* The answer, on an HTTP thread once the batch decided. */
static int
approve_reply(struct request *req, struct response *res, void *arg, struct gp_error *err)
{
	struct service_approval *c = &((struct approve_job *)arg)->c;

	if (c->outcome != SERVICE_APPROVAL_DONE) {
		*err = c->err;
		if (!gp_error_isset(err))
			gp_problem_set(err, GP_PROBLEM_INTERNAL, "the approval was not decided");
	}
	if (c->outcome == SERVICE_APPROVAL_DONE) {
		approve_answer(req, res, c);
		return 0;
	}
	if (gp_error_is(err, GP_PROBLEM_INSUFFICIENT_CAPACITY)) {
		struct json_object *sh = json_object_new_array();

		for (int i = 0; i < c->nitems; i++) {
			struct json_object *x;

			if (c->missing[i] == 0)
				continue;
			x = json_object_new_object();
			json_add_str(x, "model", c->items[i].model);
			json_add_str(x, "profile", c->items[i].profile);
			json_add_int(x, "missing", c->missing[i]);
			json_object_array_add(sh, x);
		}
		return reply_problem_with(req, res, err, "short", sh);
	}
	if (c->quota_item != NULL && gp_error_is(err, GP_PROBLEM_QUOTA_EXCEEDED))
		return reply_problem_with(req, res, err, "item", json_object_get(c->quota_item));
	return -1;
}

int
api_pool_requests_approve(struct request *req, struct response *res, struct gp_error *err)
{
	struct approve_job *j = arena_alloc(req->arena, sizeof(*j));
	struct service_approval *c = &j->c;
	struct json_object *body;
	struct jfields f;

	memset(j, 0, sizeof(*j));
	if (api_param_id(req, 0, &c->id, err) < 0 || api_if_match(req, &j->if_match, err) < 0)
		return -1;
	if (req->body_len > 0) {
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		jf_string(&f, "note", false, NOTE_MAX, &c->note);
		if (jf_finish(&f) < 0)
			return -1;
	}
	j->req = req;
	c->arena = req->arena;
	c->actor = request_actor(req);
	c->hooks.claim = approve_claim;
	c->hooks.keep = approve_keep;
	c->hooks.ctx = j;
	c->precondition = approve_precondition;
	c->precondition_arg = j;
	j->q.approval = c;
	j->q.wake = wake_request;
	j->q.waiter = req;
	if (pool_queues_approve(api_app(req)->pool_queues, db_thread(), &j->q))
		return api_defer(req, approve_reply, j);
	/* shutting down: it was decided on this thread, alone */
	return approve_reply(req, res, j, err);
}

/* ---- reject and cancel ---- */

/* Cancel: the caller sees the project and is the requester, an owner or an admin. */
static int
cancel_check(struct db *db, void *arg, const struct pool_request_row *r, struct gp_error *err)
{
	struct request *req = arg;
	enum project_role prole = PROJECT_ROLE_NONE;
	struct project_row proj;
	struct gp_error e;

	gp_error_clear(&e);
	if (api_project_access(db, req, r->project, PROJECT_READ, &proj, &prole, &e) < 0) {
		if (e.status >= 500) {
			*err = e;
			return -1;
		}
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such pool request: %lld",
		    (long long)r->id);
	}
	if (r->requested_by_id != req->principal.user_id && prole != PROJECT_ROLE_OWNER &&
	    api_role(req) != ROLE_ADMIN)
		return gp_problem_set(err, GP_PROBLEM_FORBIDDEN,
		    "only the requester or an owner "
		    "of project %s may cancel this request",
		    proj.name);
	return 0;
}

struct close_check {
	struct request *req;
	bool cancel;
	struct api_if_match if_match;
};

/* Who may (cancel only), then If-Match against the locked request. */
static int
close_check(struct db *db, void *arg, const struct pool_request_row *r, struct gp_error *err)
{
	struct close_check *k = arg;

	if (k->cancel && cancel_check(db, k->req, r, err) < 0)
		return -1;
	return request_if_match(&k->if_match, r, err);
}

static int
close_request(struct request *req, struct response *res, bool cancel, struct gp_error *err)
{
	struct close_check k = { .req = req, .cancel = cancel };
	struct service_actor actor = request_actor(req);
	struct pool_request_row out;
	struct json_object *body;
	const char *note = NULL;
	struct jfields f;
	int64_t id;

	if (api_param_id(req, 0, &id, err) < 0 || api_if_match(req, &k.if_match, err) < 0)
		return -1;
	if (req->body_len > 0 || !cancel) {
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		if (!cancel && jf_string(&f, "reason", true, NOTE_MAX, &note) == 0 &&
		    note[0] == '\0')
			gp_error_field(err, "reason", "must not be empty");
		if (jf_finish(&f) < 0)
			return -1;
	}
	if (service_request_close(db_thread(), req->arena, &actor, id, cancel, note, close_check,
		&k, &out, err) < 0)
		return -1;
	response_json(req, res, 200, pools_request_json(&out, NULL, 0));
	api_etag(req, res, out.generation);
	return 0;
}

int
api_pool_requests_reject(struct request *req, struct response *res, struct gp_error *err)
{
	return close_request(req, res, false, err);
}

int
api_pool_requests_cancel(struct request *req, struct response *res, struct gp_error *err)
{
	return close_request(req, res, true, err);
}
