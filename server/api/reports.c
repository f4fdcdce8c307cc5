/*
 * reports.c - GET /v1/reports/utilization (docs/billing.md
 * "Utilization"): allocated whole-GPU hours, average SM activity, idle
 * hours and the idle share of the billed amount, by project or pool.
 * Project users see only the projects they are members of.
 */
#include "reports.h"
#include "projects.h"

#include "core/problem.h"
#include "db/db_billing_export.h"
#include "db/db_projects.h"

#include <stdlib.h>
#include <string.h>

#define MAX_RANGE_US (400LL * 24 * 3600 * 1000000)

/* an exact decimal string as a JSON number (its digits kept as they are) */
static struct json_object *
decimal(const char *s)
{
	if (s == NULL)
		return NULL;
	return json_object_new_double_s(strtod(s, NULL), s);
}

int
api_reports_utilization(struct request *req, struct response *res, struct gp_error *err)
{
	const char *group_by = req->query(req, "group_by");
	const char *project = req->query(req, "project");
	struct billing_util_row *rows;
	struct json_object *o, *items;
	int64_t from_us = 0, to_us = 0, project_id = 0, member = 0, billed = 0, idle = 0;
	const char *currency = NULL;
	bool mixed = false;
	int n;

	if (api_query_time(req, "from", &from_us, err) < 0 ||
	    api_query_time(req, "to", &to_us, err) < 0)
		return -1;
	if (from_us == 0)
		gp_error_field(err, "from", "is required (RFC 3339)");
	if (to_us == 0)
		gp_error_field(err, "to", "is required (RFC 3339)");
	else if (from_us != 0 && to_us <= from_us)
		gp_error_field(err, "to", "must be after from");
	else if (from_us != 0 && to_us - from_us > MAX_RANGE_US)
		gp_error_field(err, "to", "the range may span at most 400 days");
	if (group_by == NULL)
		group_by = "project";
	else if (strcmp(group_by, "project") != 0 && strcmp(group_by, "pool") != 0)
		gp_error_field(err, "group_by", "must be project or pool");
	if (gp_error_isset(err))
		return -1;
	if (project != NULL) {
		struct project_row p;

		if (api_project_access(db_thread(), req, project, PROJECT_READ, &p, NULL, err) < 0)
			return -1;
		project_id = p.id;
	}
	if (!api_sees_all_projects(req))
		member = req->principal.user_id;
	if (db_billing_utilization(db_thread(), req->arena, from_us, to_us, group_by, project_id,
		member, &rows, &n, err) < 0)
		return -1;
	o = json_object_new_object();
	items = json_object_new_array();
	for (int i = 0; i < n; i++) {
		struct billing_util_row *u = &rows[i];
		struct json_object *it = json_object_new_object();

		json_add_str(it, "project", u->project);
		if (strcmp(group_by, "pool") == 0) {
			json_add_str(it, "pool", u->pool);
			json_add_int(it, "pool_id", u->pool_id);
		}
		json_object_object_add(it, "allocated_gpu_hours", decimal(u->allocated_gpu_hours));
		json_object_object_add(it, "measured_gpu_hours", decimal(u->measured_gpu_hours));
		json_object_object_add(it, "idle_gpu_hours", decimal(u->idle_gpu_hours));
		json_object_object_add(it, "average_activity", decimal(u->average_activity));
		json_add_str(it, "currency", u->currency);
		json_add_int(it, "billed_micro", u->billed_micro);
		json_add_int(it, "idle_cost_micro", u->idle_cost_micro);
		json_object_array_add(items, it);
		if (u->currency != NULL) {
			if (currency != NULL && strcmp(currency, u->currency) != 0)
				mixed = true;
			currency = u->currency;
		}
		billed += u->billed_micro;
		idle += u->idle_cost_micro;
	}
	json_add_str(o, "group_by", group_by);
	json_add_time(o, "from", from_us);
	json_add_time(o, "to", to_us);
	json_object_object_add(o, "rows", items);
	if (!mixed) {
		struct json_object *t = json_object_new_object();

		json_add_str(t, "currency", currency);
		json_add_int(t, "billed_micro", billed);
		json_add_int(t, "idle_cost_micro", idle);
		json_object_object_add(o, "totals", t);
	} else {
		json_object_object_add(o, "totals", NULL);
	}
	response_json(req, res, 200, o);
	return 0;
}
