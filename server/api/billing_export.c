/*
 * billing_export.c - billing export jobs (docs/billing.md "Exports"):
 * admin and billing queue a job, staff read it and download the file,
 * streamed chunk by chunk from the database by whichever replica serves
 * the request (memory flat in the file's size).
 */
#include "billing_export.h"

#include "core/problem.h"
#include "core/timeutil.h"
#include "db/db_billing_export.h"
#include "service/billing.h"
#include "workers/billing_export.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOUR_US 3600000000LL
#define MAX_RANGE_US (400LL * 24 * HOUR_US)

static struct json_object *
export_json(const struct billing_export_row *e)
{
	struct json_object *o = json_object_new_object();

	json_add_int(o, "id", e->id);
	json_add_str(o, "state", e->state);
	json_add_str(o, "format", e->format);
	json_add_str(o, "period", e->period);
	json_add_time(o, "from", e->from_us);
	json_add_time(o, "to", e->to_us);
	if (e->rows >= 0) {
		json_add_int(o, "rows", e->rows);
		json_add_int(o, "bytes", e->bytes);
	} else {
		json_object_object_add(o, "rows", NULL);
		json_object_object_add(o, "bytes", NULL);
	}
	json_add_str(o, "sha256", e->sha256);
	json_add_str(o, "error", e->error);
	json_add_int(o, "attempts", e->attempts);
	json_add_str(o, "created_by", e->created_by);
	json_add_time(o, "created_at", e->created_us);
	if (e->started_us != 0)
		json_add_time(o, "started_at", e->started_us);
	else
		json_object_object_add(o, "started_at", NULL);
	if (e->finished_us != 0)
		json_add_time(o, "finished_at", e->finished_us);
	else
		json_object_object_add(o, "finished_at", NULL);
	return o;
}

/* The audit row of a new export job (service_billing_audit_fn; after: the job). */
static int
export_audit(struct db *db, void *ctx, const void *before, const void *after, struct gp_error *err)
{
	struct request *req = ctx;
	const struct billing_export_row *row = after;

	(void)before;
	return api_audit(db, req, "billing.export.create", "billing_export",
	    arena_printf(req->arena, "%lld", (long long)row->id), 0, NULL,
	    json_own(req->arena, export_json(row)), err);
}

/* What an export job asks for. */
struct export_create {
	const char *format, *period;
	int64_t from_us, to_us;
	struct billing_export_row row;
};

int
api_billing_exports_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct export_create c;
	bool has_from = false, has_to = false;

	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "format", true, 16, &c.format) == 0 && c.format != NULL &&
	    strcmp(c.format, "csv") != 0 && strcmp(c.format, "jsonl") != 0 &&
	    strcmp(c.format, "focus") != 0)
		gp_error_field(err, "format", "must be one of csv, jsonl, focus");
	if (jf_string(&f, "period", false, 7, &c.period) == 0 && c.period != NULL &&
	    !time_period_valid(c.period))
		gp_error_field(err, "period", "must be a UTC month YYYY-MM");
	jf_time(&f, "from", false, &c.from_us, &has_from);
	jf_time(&f, "to", false, &c.to_us, &has_to);
	if (jf_finish(&f) < 0)
		return -1;
	if (c.period != NULL && (has_from || has_to))
		return gp_error_field(err, "period", "give either period or from and to, not both");
	if (c.period == NULL) {
		if (!has_from || !has_to)
			return gp_error_field(err, has_from ? "to" : "from",
			    "is required without period (or give period)");
		if (c.from_us % HOUR_US != 0)
			gp_error_field(err, "from", "must be a whole UTC hour");
		if (c.to_us % HOUR_US != 0)
			gp_error_field(err, "to", "must be a whole UTC hour");
		if (c.from_us <= 0)
			gp_error_field(err, "from", "must be after 1970");
		if (c.to_us <= c.from_us)
			gp_error_field(err, "to", "must be after from");
		else if (c.to_us - c.from_us > MAX_RANGE_US)
			gp_error_field(err, "to", "the range may span at most 400 days");
		if (gp_error_isset(err))
			return -1;
	}
	if (service_billing_export_create(db_thread(), req->arena, c.format, c.period, c.from_us,
		c.to_us, req->principal.user_id, export_audit, req, &c.row, err) < 0)
		return -1;
	billing_export_kick();
	response_header(res, "Location",
	    arena_printf(req->arena, "/v1/billing/exports/%lld", (long long)c.row.id));
	response_json(req, res, 202, export_json(&c.row));
	return 0;
}

int
api_billing_exports_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct billing_export_row *rows;
	struct json_object *items, *o;
	int64_t cursor;
	int limit, n;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (db_billing_export_list(db_thread(), req->arena, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, export_json(&rows[i]));
	o = json_object_new_object();
	json_object_object_add(o, "items", items);
	if (n > limit)
		json_add_str(o, "next_cursor", api_cursor_encode(req, rows[limit - 1].id));
	else
		json_object_object_add(o, "next_cursor", NULL);
	response_json(req, res, 200, o);
	return 0;
}

static int
load(struct request *req, struct billing_export_row *e, struct gp_error *err)
{
	int64_t id;
	bool found;

	if (api_param_id(req, 0, &id, err) < 0)
		return -1;
	if (db_billing_export_get(db_thread(), req->arena, id, e, &found, err) < 0)
		return -1;
	if (!found)
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such billing export: %lld",
		    (long long)id);
	return 0;
}

int
api_billing_exports_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct billing_export_row e;

	if (load(req, &e, err) < 0)
		return -1;
	response_json(req, res, 200, export_json(&e));
	return 0;
}

/* a download in progress: one chunk in memory at a time, in its own arena */
struct download {
	int64_t id;
	int seq, chunks;
	struct arena *a; /* the current chunk's (its query result) */
	const char *buf;
	size_t len, off;
};

static long
download_read(void *arg, char *out, size_t max)
{
	struct download *d = arg;
	size_t n;

	if (d->off == d->len) {
		struct arena *a;
		struct gp_error err;
		const char *data;
		bool found = false;
		int rc;

		if (d->seq >= d->chunks)
			return 0;
		a = arena_create();
		gp_error_clear(&err);
		rc = db_billing_export_chunk_get(db_thread(), a, d->id, d->seq, &data, &d->len,
		    &found, &err);
		if (rc < 0 || !found || d->len == 0) {
			arena_destroy(a);
			d->len = d->off = 0;
			return -1;
		}
		if (d->a != NULL)
			arena_destroy(d->a);
		d->a = a;
		d->buf = data;
		d->off = 0;
		d->seq++;
	}
	n = d->len - d->off;
	if (n > max)
		n = max;
	memcpy(out, d->buf + d->off, n);
	d->off += n;
	return (long)n;
}

static void
download_done(void *arg)
{
	struct download *d = arg;

	if (d->a != NULL)
		arena_destroy(d->a);
	free(d);
}

int
api_billing_exports_download(struct request *req, struct response *res, struct gp_error *err)
{
	struct billing_export_row e;
	struct download *d;
	const char *inm = req->header(req, "If-None-Match");
	const char *etag, *ext, *type, *name;

	if (load(req, &e, err) < 0)
		return -1;
	if (strcmp(e.state, "done") != 0)
		return gp_problem_set(err, GP_PROBLEM_CONFLICT,
		    "billing export %lld is %s: download it once done", (long long)e.id, e.state);
	etag = arena_printf(req->arena, "\"%s\"", e.sha256);
	response_header(res, "ETag", etag);
	if (inm != NULL && (strcmp(inm, etag) == 0 || strcmp(inm, "*") == 0)) {
		response_empty(res, 304);
		return 0;
	}
	if (strcmp(e.format, "jsonl") == 0) {
		ext = "jsonl";
		type = "application/jsonl";
	} else {
		ext = "csv";
		type = "text/csv; charset=utf-8";
	}
	name = arena_printf(req->arena, "gpupool-billing-%s-%s.%s",
	    e.period != NULL ? e.period : arena_printf(req->arena, "%lld", (long long)e.id),
	    strcmp(e.format, "focus") == 0 ? "focus" : e.format, ext);
	response_header(res, "Content-Disposition",
	    arena_printf(req->arena, "attachment; filename=\"%s\"", name));
	response_header(res, "X-Checksum-Sha256", e.sha256);
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "out of memory");
	d->id = e.id;
	d->chunks = e.chunks;
	response_stream(res, 200, type, e.bytes, download_read, download_done, d);
	return 0;
}
