/*
 * audit.c - GET /v1/audit: the audit log with filters, newest first.
 * A page holds at most `limit` rows and about AUDIT_PAGE_BYTES of
 * documents: a page the byte budget ended early still has a
 * next_cursor, so a client reads on as usual.
 */
#include "audit.h"

#include "db/db_audit.h"
#include "db/db_projects.h"

#define AUDIT_PAGE_BYTES (1024 * 1024)

int
api_audit_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct audit_filter flt = { 0 };
	struct audit_entry *rows;
	struct json_object *items;
	const char *project;
	bool cut;
	int64_t next;
	int n;

	if (api_page(req, &flt.limit, &flt.before_id, err) < 0)
		return -1;
	if (api_query_time(req, "since", &flt.since_us, err) < 0 ||
	    api_query_time(req, "until", &flt.until_us, err) < 0)
		return -1;
	flt.actor = req->query(req, "actor");
	flt.action = req->query(req, "action");
	flt.object_type = req->query(req, "object_type");
	flt.object_id = req->query(req, "object_id");
	project = req->query(req, "project");
	if (project != NULL) {
		struct project_row p;
		bool found;

		if (db_project_get(db_thread(), req->arena, project, &p, &found, err) < 0)
			return -1;
		if (!found) {
			api_reply_list(req, res, json_object_new_array(), 0);
			return 0;
		}
		flt.project_id = p.id;
	}
	flt.limit += 1;
	flt.max_bytes = AUDIT_PAGE_BYTES;
	if (db_audit_list(db_thread(), req->arena, &flt, &rows, &n, &cut, err) < 0)
		return -1;
	flt.limit -= 1;
	if (cut)
		next = rows[n - 1].id;
	else
		next = n > flt.limit ? rows[flt.limit - 1].id : 0;
	items = json_object_new_array();
	for (int i = 0; i < n && i < flt.limit; i++) {
		struct json_object *o = json_object_new_object();

		json_add_int(o, "id", rows[i].id);
		json_add_time(o, "at", rows[i].at_us);
		json_add_str(o, "actor", rows[i].actor);
		json_add_str(o, "action", rows[i].action);
		json_add_str(o, "object_type", rows[i].object_type);
		json_add_str(o, "object_id", rows[i].object_id);
		json_add_str(o, "project", rows[i].project);
		json_add_str(o, "request_id", rows[i].request_id);
		json_object_object_add(o, "before",
		    rows[i].before_json ? json_tokener_parse(rows[i].before_json) : NULL);
		json_object_object_add(o, "after",
		    rows[i].after_json ? json_tokener_parse(rows[i].after_json) : NULL);
		json_object_array_add(items, o);
	}
	api_reply_list(req, res, items, next);
	return 0;
}
