/*
 * billing.c - billing (docs/billing.md): rates (admin writes; billing
 * and operators read; a project user reads the rates of what their
 * projects hold), the accrual run, usage, periods and adjustments.
 */
#include "billing.h"
#include "projects.h"

#include "core/problem.h"
#include "core/timeutil.h"
#include "db/db_billing.h"
#include "service/billing.h"
#include "db/db_projects.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAX_PRICE_MICRO 1000000000000000LL /* 10^9 currency units an hour */

/* ---- rates ---- */

static struct json_object *
rate_json(const struct billing_rate_row *r)
{
	struct json_object *o = json_object_new_object();

	if (r->derived) {
		json_object_object_add(o, "id", NULL);
		json_add_int(o, "derived_from", r->id);
	} else {
		json_add_int(o, "id", r->id);
	}
	json_add_str(o, "model", r->model);
	json_add_str(o, "profile", r->profile);
	json_add_str(o, "currency", r->currency);
	json_add_int(o, "price_per_hour_micro", r->price_per_hour_micro);
	json_add_time(o, "effective_from", r->effective_from_us);
	if (r->effective_to_us != 0)
		json_add_time(o, "effective_to", r->effective_to_us);
	else
		json_object_object_add(o, "effective_to", NULL);
	json_add_bool(o, "derived", r->derived);
	if (!r->derived) {
		json_add_time(o, "created_at", r->created_us);
		json_add_str(o, "created_by", r->created_by);
	}
	return o;
}

static bool
currency_ok(const char *s)
{
	if (strlen(s) != 3)
		return false;
	for (int i = 0; i < 3; i++)
		if (s[i] < 'A' || s[i] > 'Z')
			return false;
	return true;
}

/* The audit row of a rate version (service_billing_audit_fn; after: the row). */
static int
rate_audit(struct db *db, void *ctx, const void *before, const void *after, struct gp_error *err)
{
	struct request *req = ctx;
	const struct billing_rate_row *row = after;

	(void)before;
	return api_audit(db, req, "billing.rate.create", "billing_rate",
	    arena_printf(req->arena, "%lld", (long long)row->id), 0, NULL,
	    json_own(req->arena, rate_json(row)), err);
}

int
api_billing_rates_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct billing_rate_new c;
	struct billing_rate_row row;
	bool has_from = false;

	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_string(&f, "model", true, 40, &c.model);
	jf_string(&f, "profile", true, 40, &c.profile);
	if (jf_string(&f, "currency", true, 3, &c.currency) == 0 && c.currency != NULL &&
	    !currency_ok(c.currency))
		gp_error_field(err, "currency", "must be an ISO 4217 code: three capital letters");
	jf_int(&f, "price_per_hour_micro", true, 0, MAX_PRICE_MICRO, &c.price, NULL);
	if (jf_time(&f, "effective_from", true, &c.from_us, &has_from) == 0 && has_from &&
	    c.from_us % 1000000 != 0)
		gp_error_field(err, "effective_from", "must be a whole second");
	if (jf_finish(&f) < 0)
		return -1;
	c.user_id = req->principal.user_id;
	if (service_billing_rate_create(db_thread(), req->arena, &c, rate_audit, req, &row, err) <
	    0)
		return -1;
	response_json(req, res, 201, rate_json(&row));
	response_header(res, "Location",
	    arena_printf(req->arena, "/v1/billing/rates?model=%s&profile=%s", c.model, c.profile));
	return 0;
}

int
api_billing_rates_list(struct request *req, struct response *res, struct gp_error *err)
{
	const char *model = req->query(req, "model");
	const char *profile = req->query(req, "profile");
	struct billing_rate_row *rows;
	struct json_object *items, *o;
	int64_t at_us;
	int n;

	if (api_query_time(req, "at", &at_us, err) < 0)
		return -1;
	if (model != NULL && strlen(model) > 40)
		return gp_error_field(err, "model", "at most 40 characters");
	if (profile != NULL && strlen(profile) > 40)
		return gp_error_field(err, "profile", "at most 40 characters");
	if (db_billing_rates_list(db_thread(), req->arena, model, profile,
		api_sees_all_projects(req) ? 0 : req->principal.user_id, at_us, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n; i++)
		json_object_array_add(items, rate_json(&rows[i]));
	o = json_object_new_object();
	json_object_object_add(o, "items", items);
	json_object_object_add(o, "next_cursor", NULL);
	response_json(req, res, 200, o);
	return 0;
}

/* ---- accrual ---- */

static struct json_object *
accrual_json(const struct billing_accrual_result *r)
{
	struct json_object *o = json_object_new_object();

	if (r->from_us != 0)
		json_add_time(o, "from", r->from_us);
	else
		json_object_object_add(o, "from", NULL);
	if (r->until_us != 0)
		json_add_time(o, "until", r->until_us);
	else
		json_object_object_add(o, "until", NULL);
	json_add_int(o, "upserted", r->upserted);
	json_add_int(o, "deleted", r->deleted);
	if (r->watermark_us != 0)
		json_add_time(o, "final_before", r->watermark_us);
	else
		json_object_object_add(o, "final_before", NULL);
	return o;
}

/* The audit row of an accrual run (service_billing_audit_fn; after: the result). */
static int
accrual_audit(struct db *db, void *ctx, const void *before, const void *after, struct gp_error *err)
{
	struct request *req = ctx;

	(void)before;
	return api_audit(db, req, "billing.accrue", "billing_accrual", "run", 0, NULL,
	    json_own(req->arena, accrual_json(after)), err);
}

int
api_billing_accrual_run(struct request *req, struct response *res, struct gp_error *err)
{
	struct billing_accrual_result r;

	memset(&r, 0, sizeof(r));
	if (req->body_len > 0) {
		struct json_object *body;
		struct jfields f;

		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		if (jf_finish(&f) < 0)
			return -1;
	}
	if (service_billing_accrue(db_thread(), req->arena, api_app(req)->billing_settle_s,
		api_app(req)->billing_test_hold_ms, 0, accrual_audit, req, &r, err) < 0)
		return -1;
	response_json(req, res, 200, accrual_json(&r));
	return 0;
}

/* ---- usage ---- */

static struct json_object *
usage_json(const struct billing_usage_row *u)
{
	struct json_object *o = json_object_new_object();

	json_add_int(o, "id", u->id);
	json_add_str(o, "kind", u->kind);
	json_add_str(o, "project", u->project);
	json_add_str(o, "pool", u->pool);
	json_add_str(o, "model", u->model);
	json_add_str(o, "profile", u->profile);
	json_add_time(o, "hour", u->hour_us);
	json_add_str(o, "period", u->period);
	json_add_int(o, "seconds", u->seconds);
	json_add_int(o, "count", u->count);
	json_add_int(o, "price_per_hour_micro", u->price_per_hour_micro);
	json_add_int(o, "amount_micro", u->amount_micro);
	json_add_str(o, "currency", u->currency);
	if (u->rate_id != 0)
		json_add_int(o, "rate_id", u->rate_id);
	else
		json_object_object_add(o, "rate_id", NULL);
	if (u->adjusts != 0)
		json_add_int(o, "adjusts", u->adjusts);
	else
		json_object_object_add(o, "adjusts", NULL);
	json_add_str(o, "note", u->note);
	return o;
}

static struct json_object *
group_json(const struct billing_usage_group *g, const char *group_by)
{
	struct json_object *o = json_object_new_object();

	if (strcmp(group_by, "project") == 0 || strcmp(group_by, "pool") == 0)
		json_add_str(o, "project", g->project);
	if (strcmp(group_by, "pool") == 0)
		json_add_str(o, "pool", g->pool);
	if (strcmp(group_by, "spec") == 0) {
		json_add_str(o, "model", g->model);
		json_add_str(o, "profile", g->profile);
	}
	if (strcmp(group_by, "day") == 0)
		json_add_time(o, "day", g->day_us);
	if (strcmp(group_by, "month") == 0)
		json_add_str(o, "period", g->period);
	json_add_str(o, "kind", g->kind);
	json_add_str(o, "currency", g->currency);
	json_add_int(o, "instance_seconds", g->instance_seconds);
	json_add_int(o, "amount_micro", g->amount_micro);
	json_add_int(o, "rows", g->rows);
	return o;
}

/*
 * totals: rows, and per currency usage/credit/adjustment/amount; when
 * all rows are in one currency also at the top (currency, amount_micro...).
 */
static struct json_object *
totals_json(const struct billing_usage_group *t, int n)
{
	struct json_object *o = json_object_new_object();
	struct json_object *cur = json_object_new_array();
	struct json_object *last = NULL;
	const char *last_cur = NULL;
	int64_t rows = 0;
	int ncur = 0;

	for (int i = 0; i < n; i++) {
		const char *key;

		if (last_cur == NULL || strcmp(last_cur, t[i].currency) != 0) {
			last = json_object_new_object();
			json_add_str(last, "currency", t[i].currency);
			json_add_int(last, "usage_micro", 0);
			json_add_int(last, "credit_micro", 0);
			json_add_int(last, "adjustment_micro", 0);
			json_add_int(last, "amount_micro", 0);
			json_add_int(last, "instance_seconds", 0);
			json_object_array_add(cur, last);
			last_cur = t[i].currency;
			ncur++;
		}
		key = strcmp(t[i].kind, "usage") == 0  ? "usage_micro"
		    : strcmp(t[i].kind, "credit") == 0 ? "credit_micro"
						       : "adjustment_micro";
		{
			struct json_object *v;
			int64_t amount = 0, secs = 0;

			if (json_object_object_get_ex(last, "amount_micro", &v))
				amount = json_object_get_int64(v);
			json_add_int(last, key, t[i].amount_micro);
			json_add_int(last, "amount_micro", amount + t[i].amount_micro);
			if (strcmp(t[i].kind, "usage") == 0) {
				if (json_object_object_get_ex(last, "instance_seconds", &v))
					secs = json_object_get_int64(v);
				json_add_int(last, "instance_seconds",
				    secs + t[i].instance_seconds);
			}
		}
		rows += t[i].rows;
	}
	json_add_int(o, "rows", rows);
	if (ncur == 1) {
		static const char *const keys[] = { "currency", "usage_micro", "credit_micro",
			"adjustment_micro", "amount_micro", "instance_seconds" };

		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			struct json_object *v;

			if (json_object_object_get_ex(last, keys[k], &v))
				json_object_object_add(o, keys[k], json_object_get(v));
		}
	} else if (ncur == 0) {
		json_add_int(o, "amount_micro", 0);
	}
	json_object_object_add(o, "currencies", cur);
	return o;
}

int
api_billing_usage(struct request *req, struct response *res, struct gp_error *err)
{
	const char *project = req->query(req, "project");
	const char *group_by = req->query(req, "group_by");
	struct billing_usage_filter f;
	struct billing_usage_group *tot;
	struct json_object *o, *rows;
	int64_t cursor = 0;
	int limit = 0, ntot;

	memset(&f, 0, sizeof(f));
	if (api_query_time(req, "from", &f.from_us, err) < 0 ||
	    api_query_time(req, "to", &f.to_us, err) < 0)
		return -1;
	if (f.from_us != 0 && f.to_us != 0 && f.to_us <= f.from_us)
		return gp_error_field(err, "to", "must be after from");
	if (group_by != NULL && strcmp(group_by, "project") != 0 && strcmp(group_by, "pool") != 0 &&
	    strcmp(group_by, "spec") != 0 && strcmp(group_by, "day") != 0 &&
	    strcmp(group_by, "month") != 0)
		return gp_error_field(err, "group_by",
		    "must be one of project, pool, spec, day, month");
	if (group_by == NULL && api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (project != NULL) {
		struct project_row p;

		if (api_project_access(db_thread(), req, project, PROJECT_READ, &p, NULL, err) < 0)
			return -1;
		f.project_id = p.id;
	}
	if (!api_sees_all_projects(req))
		f.member_user_id = req->principal.user_id;
	o = json_object_new_object();
	json_own(req->arena, o);
	rows = json_object_new_array();
	json_object_object_add(o, "rows", rows);
	if (group_by == NULL) {
		struct billing_usage_row *r;
		int n;

		if (db_billing_usage_list(db_thread(), req->arena, &f, cursor, limit + 1, &r, &n,
			err) < 0)
			return -1;
		for (int i = 0; i < n && i < limit; i++)
			json_object_array_add(rows, usage_json(&r[i]));
		if (n > limit)
			json_add_str(o, "next_cursor", api_cursor_encode(req, r[limit - 1].id));
		else
			json_object_object_add(o, "next_cursor", NULL);
	} else {
		struct billing_usage_group *g;
		int n;

		if (db_billing_usage_groups(db_thread(), req->arena, &f, group_by, &g, &n, err) < 0)
			return -1;
		for (int i = 0; i < n; i++)
			json_object_array_add(rows, group_json(&g[i], group_by));
		json_add_str(o, "group_by", group_by);
	}
	if (db_billing_usage_groups(db_thread(), req->arena, &f, "total", &tot, &ntot, err) < 0)
		return -1;
	json_object_object_add(o, "totals", totals_json(tot, ntot));
	response_json(req, res, 200, json_object_get(o));
	return 0;
}

/* ---- periods ---- */

static struct json_object *
period_json(const struct billing_period_row *p)
{
	struct json_object *o = json_object_new_object();

	json_add_str(o, "period", p->period);
	json_add_str(o, "state", p->state);
	if (p->closed_us != 0)
		json_add_time(o, "closed_at", p->closed_us);
	else
		json_object_object_add(o, "closed_at", NULL);
	json_add_str(o, "closed_by", p->closed_by);
	json_add_int(o, "rows", p->rows);
	return o;
}

int
api_billing_periods_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct billing_period_row *rows;
	struct json_object *items, *o;
	int n;

	if (db_billing_periods_list(db_thread(), req->arena, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n; i++)
		json_object_array_add(items, period_json(&rows[i]));
	o = json_object_new_object();
	json_object_object_add(o, "items", items);
	json_object_object_add(o, "next_cursor", NULL);
	response_json(req, res, 200, o);
	return 0;
}

/* The audit row of a closed period (service_billing_audit_fn; after: the period). */
static int
period_audit(struct db *db, void *ctx, const void *before, const void *after, struct gp_error *err)
{
	struct request *req = ctx;
	const struct billing_period_row *row = after;

	(void)before;
	return api_audit(db, req, "billing.period.close", "billing_period", row->period, 0, NULL,
	    json_own(req->arena, period_json(row)), err);
}

int
api_billing_periods_close(struct request *req, struct response *res, struct gp_error *err)
{
	struct app *app = api_app(req);
	struct billing_period_row row;

	if (!time_period_valid(req->params[0]))
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND,
		    "no such billing period: a period is a UTC month YYYY-MM");
	if (req->body_len > 0) {
		struct json_object *body;
		struct jfields f;

		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		if (jf_finish(&f) < 0)
			return -1;
	}
	if (service_billing_period_close(db_thread(), req->arena, req->params[0],
		app->billing_settle_s, app->billing_close_grace_s, req->principal.user_id,
		period_audit, req, &row, err) < 0)
		return -1;
	response_json(req, res, 200, period_json(&row));
	return 0;
}

/* ---- adjustments ---- */

/*
 * The audit row of an adjustment (service_billing_audit_fn; before: the
 * adjusted row, after: the adjustment).
 */
static int
adjust_audit(struct db *db, void *ctx, const void *before, const void *after, struct gp_error *err)
{
	struct request *req = ctx;
	const struct billing_usage_row *row = after;

	return api_audit(db, req, "billing.adjust", "billing_usage",
	    arena_printf(req->arena, "%lld", (long long)row->id), row->project_id,
	    json_own(req->arena, usage_json(before)), json_own(req->arena, usage_json(row)), err);
}

/* What an adjustment asks for. */
struct adjust {
	int64_t adjusts, amount;
	const char *note;
	struct billing_usage_row row;
};

int
api_billing_adjustments_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct adjust c;
	bool has_amount = false;

	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_int(&f, "adjusts", true, 1, INT64_MAX, &c.adjusts, NULL);
	if (jf_int(&f, "amount_micro", true, -MAX_PRICE_MICRO, MAX_PRICE_MICRO, &c.amount,
		&has_amount) == 0 &&
	    has_amount && c.amount == 0)
		gp_error_field(err, "amount_micro", "must not be zero");
	if (jf_string(&f, "note", true, 500, &c.note) == 0 && c.note != NULL) {
		if (c.note[0] == '\0')
			gp_error_field(err, "note", "must say why");
		for (const char *s = c.note; *s != '\0'; s++)
			if ((unsigned char)*s < 0x20 || *s == 0x7f) {
				gp_error_field(err, "note", "must not contain control characters");
				break;
			}
	}
	if (jf_finish(&f) < 0)
		return -1;
	if (service_billing_adjust(db_thread(), req->arena, c.adjusts, c.amount, c.note,
		adjust_audit, req, &c.row, err) < 0)
		return -1;
	response_json(req, res, 201, usage_json(&c.row));
	return 0;
}
