/*
 * test_billing_export.c - billing exports (docs/billing.md "Exports"):
 * the CSV of the golden month compared byte for byte with a file built
 * here in C from the rows (independently of the server's SQL), its row
 * count, size and SHA-256 (also the ETag); a re-export is byte-identical;
 * JSON Lines; a range export with a hostile adjustment note (CSV
 * quoting); bad input answers 422 and creates nothing; who may do what;
 * and gpupoold killed (SIGKILL) in the middle of an export, the job then
 * completed by another replica with the same bytes; a file of several
 * chunks downloaded byte for byte.
 */
#include "billing_export_util.h"
#include "rawhttp.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT_ENV BILLING_SERVER_ENV, "GPUPOOL_BILLING_EXPORT_INTERVAL_MS=200"

static int
group_setup(void **state)
{
	static const char *const env[] = { EXPORT_ENV, NULL };
	const struct fixture_options opts = { .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) != 0)
		return -1;
	*state = fx;
	seed_golden(fx);
	return 0;
}

/* growable text in fixture-independent heap memory */
struct text {
	char *s;
	size_t len, cap;
};

static void
text_add(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->s = realloc(t->s, t->cap);
		assert_non_null(t->s);
	}
	memcpy(t->s + t->len, s, n);
	t->len += n;
	t->s[t->len] = '\0';
}

static void
text_str(struct text *t, const char *s)
{
	text_add(t, s, strlen(s));
}

/* one CSV field, RFC 4180 */
static void
text_csv(struct text *t, const char *v)
{
	if (strpbrk(v, ",\"\r\n") == NULL) {
		text_str(t, v);
		return;
	}
	text_add(t, "\"", 1);
	for (const char *p = v; *p != '\0'; p++) {
		if (*p == '"')
			text_add(t, "\"", 1);
		text_add(t, p, 1);
	}
	text_add(t, "\"", 1);
}

static void
text_iso(struct text *t, long long epoch)
{
	time_t tt = (time_t)epoch;
	struct tm tm;
	char buf[32];

	gmtime_r(&tt, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	text_str(t, buf);
}

/*
 * The CSV the server must produce for rows with hour in [from, to),
 * built here: fields read raw, formatted in C.
 */
static char *
expected_csv(struct fixture *fx, const char *from, const char *to, long long *nrows)
{
	const char *raw = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(concat_ws(E'\\x1f', u.id, u.kind, u.period, "
	    "extract(epoch FROM u.hour)::int8, p.name, coalesce(po.name, ''), u.model, u.profile, "
	    "u.count, u.seconds, u.price_per_hour_micro, u.currency, u.amount_micro, "
	    "coalesce(u.adjusts::text, ''), coalesce(u.note, '')), E'\\x1e' ORDER BY u.hour, u.id), "
	    "'') FROM billing_usage u JOIN projects p ON p.id = u.project_id "
	    "LEFT JOIN pools po ON po.id = u.pool_id "
	    "WHERE u.hour >= $1::timestamptz AND u.hour < $2::timestamptz",
	    from, to);
	struct text t = { 0 };
	char *copy = strdup(raw), *save = NULL;

	*nrows = 0;
	text_str(&t,
	    "usage_id,kind,period,hour_start,hour_end,project,pool,model,profile,count,"
	    "seconds,price_per_hour_micro,currency,amount_micro,amount,adjusts,note\n");
	for (char *row = strtok_r(copy, "\x1e", &save); row != NULL;
	     row = strtok_r(NULL, "\x1e", &save)) {
		const char *f[15];
		char *p = row;
		long long amount, epoch;
		char buf[64];
		int n = 0;

		/* empty fields are kept: split by hand */
		f[n++] = p;
		for (; *p != '\0'; p++)
			if (*p == '\x1f') {
				*p = '\0';
				assert_true(n < 15);
				f[n++] = p + 1;
			}
		assert_int_equal(n, 15);
		epoch = atoll(f[3]);
		amount = atoll(f[12]);
		text_str(&t, f[0]);
		text_str(&t, ",");
		text_str(&t, f[1]);
		text_str(&t, ",");
		text_str(&t, f[2]);
		text_str(&t, ",");
		text_iso(&t, epoch);
		text_str(&t, ",");
		text_iso(&t, epoch + 3600);
		for (int i = 4; i <= 11; i++) {
			text_str(&t, ",");
			text_csv(&t, f[i]);
		}
		snprintf(buf, sizeof(buf), ",%lld,%s%lld.%06lld,", amount, amount < 0 ? "-" : "",
		    llabs(amount) / 1000000, llabs(amount) % 1000000);
		text_str(&t, buf);
		text_str(&t, f[13]);
		text_str(&t, ",");
		text_csv(&t, f[14]);
		text_str(&t, "\n");
		(*nrows)++;
	}
	free(copy);
	return t.s;
}

static const char *first_sha; /* the golden month's CSV, for the kill test */

static void
test_csv_golden_month(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *e;
	long long nrows;
	char *want;
	int64_t id, id2;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/periods/2026-03/close", NULL);
	assert_status(r, 200);

	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/exports",
	    "{\"format\":\"csv\",\"period\":\"2026-03\"}");
	assert_status(r, 202);
	assert_json_str(r->json, "state", "queued");
	assert_json_str(r->json, "period", "2026-03");
	assert_json_str(r->json, "from", "2026-03-01T00:00:00Z");
	assert_json_str(r->json, "to", "2026-04-01T00:00:00Z");
	assert_json_null(r->json, "sha256");
	id = fx_json_int(r->json, "id");
	e = exp_wait(fx, id, 20000);
	assert_json_str(e, "state", "done");

	want = expected_csv(fx, "2026-03-01 00:00:00+00", "2026-04-01 00:00:00+00", &nrows);
	assert_true(nrows >= 19); /* the golden March rows */
	assert_json_int(e, "rows", nrows);
	assert_json_int(e, "bytes", (int64_t)strlen(want));
	r = exp_download(fx, id);
	assert_int_equal(r->body_len, strlen(want));
	assert_text_equal(r->body, want);
	assert_string_equal(fx_json_str(e, "sha256"), exp_sha256(fx, want, strlen(want)));
	assert_string_equal(r->etag, fx_str(fx, "\"%s\"", fx_json_str(e, "sha256")));
	assert_string_equal(r->content_type, "text/csv; charset=utf-8");
	first_sha = fx_str(fx, "%s", fx_json_str(e, "sha256"));
	/* stored in chunks, the job's record in the database */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT sum(length(data)) FROM billing_export_chunks WHERE "
			     "export_id = $1::int8",
			     fx_str(fx, "%lld", (long long)id)),
	    (int64_t)strlen(want));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = "
			     "'billing.export.create' AND object_id = $1",
			     fx_str(fx, "%lld", (long long)id)),
	    1);

	/* the headers: Content-Disposition names the file; If-None-Match -> 304 */
	{
		struct arena *a = arena_create();
		const char *const hdr[] = { fx_str(fx, "Authorization: Bearer %s", fx->admin_token),
			NULL };
		const char *const hdr2[] = { hdr[0], fx_str(fx, "If-None-Match: \"%s\"", first_sha),
			NULL };
		struct raw_response rr;
		size_t len;
		char *req = raw_build(a, "GET",
		    fx_str(fx, "/v1/billing/exports/%lld/download", (long long)id), hdr, NULL, 0,
		    &len);

		assert_int_equal(raw_exchange(a, fx->server->port, req, len, 10000, &rr), 0);
		assert_int_equal(rr.status, 200);
		assert_string_equal(raw_header(a, &rr, "Content-Disposition"),
		    "attachment; filename=\"gpupool-billing-2026-03-csv.csv\"");
		assert_string_equal(raw_header(a, &rr, "Content-Length"),
		    fx_str(fx, "%zu", strlen(want)));
		req = raw_build(a, "GET",
		    fx_str(fx, "/v1/billing/exports/%lld/download", (long long)id), hdr2, NULL, 0,
		    &len);
		assert_int_equal(raw_exchange(a, fx->server->port, req, len, 10000, &rr), 0);
		assert_int_equal(rr.status, 304);
		arena_destroy(a);
	}

	/* again: byte-identical (no job data in the file) */
	id2 = exp_create(fx, fx->admin_token, "{\"format\":\"csv\",\"period\":\"2026-03\"}");
	assert_int_not_equal(id2, id);
	e = exp_wait(fx, id2, 20000);
	assert_json_str(e, "state", "done");
	assert_string_equal(fx_json_str(e, "sha256"), first_sha);
	r = exp_download(fx, id2);
	assert_text_equal(r->body, want);

	/* listed, newest first */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/exports", NULL);
	assert_status(r, 200);
	assert_true(fx_json_len(r->json, "items") >= 2);
	assert_int_equal(fx_json_int(json_object_array_get_idx(fx_json(r->json, "items"), 0), "id"),
	    id2);
	free(want);
}

static void
test_jsonl_and_range(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *e;
	const char *target, *from, *to, *month;
	long long nrows;
	char *want;
	int64_t id;
	size_t lines = 0;

	/* JSON Lines of the golden month: one object a row, the same rows */
	id = exp_create(fx, fx->admin_token, "{\"format\":\"jsonl\",\"period\":\"2026-03\"}");
	e = exp_wait(fx, id, 20000);
	assert_json_str(e, "state", "done");
	r = exp_download(fx, id);
	assert_string_equal(r->content_type, "application/jsonl");
	assert_string_equal(fx_json_str(e, "sha256"), exp_sha256(fx, r->body, r->body_len));
	for (char *p = r->body, *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		struct json_object *o;

		*nl = '\0';
		o = json_tokener_parse(p);
		assert_non_null(o);
		if (lines == 0) {
			/* the first row (by hour, id): mid's A100 at 09:00, 1000000 for 1200 s */
			assert_true(
			    strcmp(fx_json_str(o, "hour_start"), "2026-03-02T10:00:00Z") == 0);
			assert_json_str(o, "project", "acme");
			assert_json_str(o, "pool", "wx");
		}
		assert_json_str(o, "period", "2026-03");
		assert_string_equal(fx_json_str(o, "amount"),
		    fx_str(fx, "%s%lld.%06lld", fx_json_int(o, "amount_micro") < 0 ? "-" : "",
			llabs((long long)fx_json_int(o, "amount_micro")) / 1000000,
			llabs((long long)fx_json_int(o, "amount_micro")) % 1000000));
		json_object_put(o);
		lines++;
	}
	assert_int_equal((int64_t)lines, fx_json_int(e, "rows"));
	assert_int_equal(fx_json_int(e, "rows"),
	    fx_sql_int64(fx, "SELECT count(*) FROM billing_usage WHERE period = '2026-03'"));

	/* an adjustment in the open period with a hostile note: CSV quoting */
	target = fx_sql_text(fx,
	    "SELECT min(id)::text FROM billing_usage WHERE kind = 'usage' AND amount_micro > 0");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/adjustments",
	    "{\"adjusts\":%s,\"amount_micro\":-1250000,\"note\":\"goodwill, \\\"sorry\\\"; "
	    "see ticket\"}",
	    target);
	assert_status(r, 201);
	month = fx_sql_text(fx, "SELECT period FROM billing_usage WHERE kind = 'adjustment'");
	from = fx_sql_text(fx,
	    "SELECT to_char(date_trunc('month', now() AT TIME ZONE 'UTC'), "
	    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
	to = fx_sql_text(fx,
	    "SELECT to_char(date_trunc('month', now() AT TIME ZONE 'UTC') + "
	    "interval '1 month', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
	id = exp_create(fx, fx->admin_token,
	    fx_str(fx, "{\"format\":\"csv\",\"from\":\"%s\",\"to\":\"%s\"}", from, to));
	e = exp_wait(fx, id, 20000);
	assert_json_str(e, "state", "done");
	assert_json_null(e, "period");
	want = expected_csv(fx, from, to, &nrows);
	assert_true(nrows >= 1);
	r = exp_download(fx, id);
	assert_text_equal(r->body, want);
	assert_non_null(strstr(r->body, ",-1250000,-1.250000,"));
	assert_non_null(strstr(r->body, ",\"goodwill, \"\"sorry\"\"; see ticket\"\n"));
	assert_non_null(strstr(r->body, fx_str(fx, ",adjustment,%s,", month)));
	free(want);

	/* a range with nothing in it: the header alone */
	id = exp_create(fx, fx->admin_token,
	    "{\"format\":\"csv\",\"from\":\"2020-01-01T00:00:00Z\",\"to\":\"2020-01-01T01:00:00Z\"}");
	e = exp_wait(fx, id, 20000);
	assert_json_int(e, "rows", 0);
	r = exp_download(fx, id);
	assert_non_null(strchr(r->body, '\n'));
	assert_int_equal((int64_t)r->body_len, fx_json_int(e, "bytes"));
	assert_int_equal(strchr(r->body, '\n') - r->body + 1, (long)r->body_len);
}

static void
test_bad_input(void **state)
{
	struct fixture *fx = *state;
	static const char *const bad[] = {
		"{\"format\":\"csv\",\"period\":\"2026-13\"}",
		"{\"format\":\"csv\",\"period\":\"2026-3\"}",
		"{\"format\":\"csv\",\"period\":\"26-03-01\"}",
		"{\"format\":\"csv\",\"period\":\"2026-00\"}",
		"{\"format\":\"csv\",\"period\":\"1969-12\"}",
		"{\"format\":\"csv\",\"period\":\"\"}",
		"{\"format\":\"csv\",\"period\":3}",
		"{\"format\":\"xml\",\"period\":\"2026-03\"}",
		"{\"format\":\"CSV\",\"period\":\"2026-03\"}",
		"{\"period\":\"2026-03\"}",
		"{\"format\":\"csv\"}",
		"{\"format\":\"csv\",\"period\":\"2026-03\",\"from\":\"2026-03-01T00:00:00Z\"}",
		"{\"format\":\"csv\",\"from\":\"2026-03-01T00:00:00Z\"}",
		"{\"format\":\"csv\",\"from\":\"2026-03-01T00:30:00Z\",\"to\":\"2026-03-02T00:00:00Z\"}",
		"{\"format\":\"csv\",\"from\":\"2026-03-02T00:00:00Z\",\"to\":\"2026-03-01T00:00:00Z\"}",
		"{\"format\":\"csv\",\"from\":\"2026-03-01T00:00:00Z\",\"to\":\"2026-03-01T00:00:00Z\"}",
		"{\"format\":\"csv\",\"from\":\"2020-01-01T00:00:00Z\",\"to\":\"2026-01-01T00:00:00Z\"}",
		"{\"format\":\"csv\",\"from\":\"yesterday\",\"to\":\"2026-01-01T00:00:00Z\"}",
		"{\"format\":\"csv\",\"period\":\"2026-03\",\"project\":\"acme\"}",
	};
	int64_t before = fx_sql_int64(fx, "SELECT count(*) FROM billing_exports");
	struct gp_client_response *r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/exports", "%s", bad[i]);
		if (r->status != 422)
			fail_msg("%s: HTTP %ld %s", bad[i], r->status, r->body);
		assert_problem(r, 422, "validation_failed");
	}
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/exports", "{\"format\":");
	assert_status(r, 400);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/exports", "[]");
	assert_true(r->status == 400 || r->status == 422);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM billing_exports"), before);
	/* the same period rule as the billing endpoints (time_period_valid): any year 1970-9999 */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/exports",
	    "{\"format\":\"csv\",\"period\":\"3000-01\"}");
	assert_status(r, 202);
	/* ids that are not there */
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/billing/exports/999999", NULL),
	    404, "not_found");
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/billing/exports/abc", NULL), 404,
	    "not_found");
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/billing/exports/999999/download",
			   NULL),
	    404, "not_found");
}

static void
test_access(void **state)
{
	struct fixture *fx = *state;
	const char *billing = fixture_create_user(fx, "xbill", "billing");
	const char *oper = fixture_create_user(fx, "xoper", "operator");
	const char *user = fixture_create_user(fx, "xusr", "none");
	const char *body = "{\"format\":\"csv\",\"period\":\"2026-03\"}";
	struct gp_client_response *r;
	int64_t before, id;
	const char *path;

	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/acme/members/xusr",
			  "{\"role\":\"owner\"}"),
	    201);
	before = fx_sql_int64(fx, "SELECT count(*) FROM billing_exports");
	/* a project user, even an owner, and an operator may not export */
	assert_problem(fx_request(fx, user, "POST", "/v1/billing/exports", "%s", body), 403,
	    "forbidden");
	assert_problem(fx_request(fx, oper, "POST", "/v1/billing/exports", "%s", body), 403,
	    "forbidden");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM billing_exports"), before);
	/* billing may */
	id = exp_create(fx, billing, body);
	exp_wait(fx, id, 20000);
	path = fx_str(fx, "/v1/billing/exports/%lld", (long long)id);
	/* staff read; a project user reads nothing */
	assert_status(fx_request(fx, oper, "GET", path, NULL), 200);
	assert_status(fx_request(fx, billing, "GET", fx_str(fx, "%s/download", path), NULL), 200);
	assert_problem(fx_request(fx, user, "GET", path, NULL), 403, "forbidden");
	assert_problem(fx_request(fx, user, "GET", fx_str(fx, "%s/download", path), NULL), 403,
	    "forbidden");
	assert_problem(fx_request(fx, user, "GET", "/v1/billing/exports", NULL), 403, "forbidden");
	r = fx_request(fx, oper, "GET", path, NULL);
	assert_json_str(r->json, "created_by", "xbill");
	/* without a token */
	assert_status(fx_request(fx, NULL, "GET", path, NULL), 401);

	/* a retried POST with the same Idempotency-Key: one job, the same answer */
	{
		static const char *const key[] = { "Idempotency-Key: export-nov-1", NULL };
		int64_t n0 = fx_sql_int64(fx, "SELECT count(*) FROM billing_exports"), first;

		r = fx_request_h(fx, billing, "POST", "/v1/billing/exports", key, "%s", body);
		assert_status(r, 202);
		first = fx_json_int(r->json, "id");
		r = fx_request_h(fx, billing, "POST", "/v1/billing/exports", key, "%s", body);
		assert_status(r, 202);
		assert_int_equal(fx_json_int(r->json, "id"), first);
		assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM billing_exports"), n0 + 1);
		exp_wait(fx, first, 20000);
	}
}

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* gpupool billing export: create, wait, download, verify; a corrupt file exits non-zero */
static void
test_cli(void **state)
{
	struct fixture *fx = *state;
	const char *env[3] = { fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url),
		fx_str(fx, "GPUPOOL_TOKEN=%s", fx->admin_token), NULL };
	const char *file = fx_str(fx, "%s/mar.csv", fx->tmpdir);
	const char *bad = fx_str(fx, "%s/bad.csv", fx->tmpdir);
	struct fx_proc *p;
	size_t len;
	char *got;
	const char *id;

	assert_non_null(first_sha);
	p = fx_cli(fx, env, NULL, "billing", "export", "--period", "2026-03", "--format", "csv",
	    "-o", file, NULL);
	if (p->status != 0)
		fail_msg("gpupool billing export: %d\n%s%s", p->status, p->out, p->err);
	assert_non_null(strstr(p->out, first_sha));
	got = slurp(file, &len);
	assert_non_null(got);
	assert_string_equal(exp_sha256(fx, got, len), first_sha);
	free(got);
	assert_int_equal(access(fx_str(fx, "%s.part", file), F_OK), -1);

	/* the stored file corrupted (a byte flipped in a chunk): mismatch, exit 1, no file */
	id = fx_sql_text(fx,
	    "SELECT max(id)::text FROM billing_exports WHERE state = 'done' AND "
	    "format = 'csv' AND period = '2026-03'");
	fx_sql_exec(fx,
	    "UPDATE billing_export_chunks SET data = set_byte(data, 10, get_byte(data, 10) # 1) "
	    "WHERE export_id = $1::int8 AND seq = 0",
	    id);
	p = fx_cli(fx, env, NULL, "billing", "export", "--id", id, "-o", bad, NULL);
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "checksum mismatch"));
	assert_int_equal(access(bad, F_OK), -1);
	assert_int_equal(access(fx_str(fx, "%s.part", bad), F_OK), -1);

	/* bad input is the server's 422, exit 1; no -o is a usage error */
	p = fx_cli(fx, env, NULL, "billing", "export", "--period", "2026-13", "--format", "csv",
	    "-o", bad, NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "period"));
	p = fx_cli(fx, env, NULL, "billing", "export", "--period", "2026-03", "--format", "csv",
	    NULL);
	assert_int_equal(p->status, 2);
	/* -o keeps its meaning elsewhere */
	p = fx_cli(fx, env, NULL, "-o", "json", "billing", "periods", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "\"2026-03\""));
	/* reports utilization */
	p = fx_cli(fx, env, NULL, "reports", "utilization", "--from", "2026-03-01T00:00:00Z",
	    "--to", "2026-04-01T00:00:00Z", "--group-by", "pool", NULL);
	if (p->status != 0)
		fail_msg("gpupool reports utilization: %d\n%s%s", p->status, p->out, p->err);
	assert_non_null(strstr(p->out, "GPU-HOURS"));
	assert_non_null(strstr(p->out, "wx"));
}

/* three replicas' workers on eight jobs: each job runs once, the same period the same bytes */
static void
test_replicas(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { EXPORT_ENV, NULL };
	struct fx_server *main_srv = fx->server, *b, *c;
	int64_t ids[8];

	b = fixture_server_start(fx, env);
	c = fixture_server_start(fx, env);
	assert_non_null(b);
	assert_non_null(c);
	for (int i = 0; i < 8; i++) {
		fx->server = i % 3 == 0 ? main_srv : i % 3 == 1 ? b : c;
		ids[i] = exp_create(fx, fx->admin_token,
		    i % 2 == 0 ? "{\"format\":\"csv\",\"period\":\"2026-03\"}"
			       : "{\"format\":\"focus\",\"period\":\"2026-03\"}");
	}
	fx->server = main_srv;
	for (int i = 0; i < 8; i++) {
		struct json_object *e = exp_wait(fx, ids[i], 30000);

		assert_json_str(e, "state", "done");
		assert_json_int(e, "attempts", 1);
		if (i % 2 == 0)
			assert_string_equal(fx_json_str(e, "sha256"), first_sha);
	}
	/* the FOCUS files are the same bytes too, each stored once */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT sha256) FROM billing_exports WHERE format = "
			     "'focus' AND period = '2026-03'"),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_exports e WHERE e.state = 'done' AND "
			     "e.chunks <> (SELECT count(*) FROM billing_export_chunks k WHERE "
			     "k.export_id = e.id)"),
	    0);
	assert_int_equal(fixture_server_stop(fx, b), 0);
	assert_int_equal(fixture_server_stop(fx, c), 0);
}

/* gpupoold killed while it writes an export; another replica completes it, same bytes */
static void
test_kill_during_export(void **state)
{
	struct fixture *fx = *state;
	static const char *const slow_env[] = { BILLING_SERVER_ENV,
		"GPUPOOL_BILLING_EXPORT_INTERVAL_MS=600000", "GPUPOOL_BILLING_EXPORT_LEASE=2",
		"GPUPOOL_TEST_EXPORT_PAGE_DELAY_MS=60000", NULL };
	static const char *const env[] = { EXPORT_ENV, NULL };
	struct fx_server *victim, *next;
	struct json_object *e;
	const char *ids;
	int64_t id;
	bool running = false;

	assert_non_null(first_sha);
	/* the only replica: its worker (kicked by the POST it serves) takes the job */
	for (int i = 0; i < FIXTURE_MAX_SERVERS; i++)
		if (fx->servers[i].pid != 0)
			assert_int_equal(fixture_server_stop(fx, &fx->servers[i]), 0);
	victim = fixture_server_start(fx, slow_env);
	assert_non_null(victim);
	fx->server = victim;
	id = exp_create(fx, fx->admin_token, "{\"format\":\"csv\",\"period\":\"2026-03\"}");
	ids = fx_str(fx, "%lld", (long long)id);
	/* running, its transaction open (asleep after its first page) */
	for (int i = 0; i < 200 && !running; i++) {
		running = fx_sql_int64(fx,
			      "SELECT count(*) FROM billing_exports WHERE id = $1::int8 AND "
			      "state = 'running'",
			      ids) == 1 &&
		    fx_sql_int64(fx,
			"SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in "
			"transaction' AND query LIKE 'INSERT INTO billing_export_chunks%'") > 0;
		if (!running)
			exp_sleep_ms(50);
	}
	assert_true(running);
	fixture_server_kill(fx, victim);
	/* nothing of the dead attempt is visible */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_export_chunks WHERE export_id = $1::int8",
			     ids),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT attempts FROM billing_exports WHERE id = $1::int8", ids),
	    1);
	/* another replica takes it over once the lease (2 s) is past */
	next = fixture_server_start(fx, env);
	assert_non_null(next);
	fx->server = next;
	e = exp_wait(fx, id, 30000);
	assert_json_str(e, "state", "done");
	assert_json_int(e, "attempts", 2);
	assert_string_equal(fx_json_str(e, "sha256"), first_sha);
	assert_string_equal(exp_sha256(fx, exp_download(fx, id)->body,
				(size_t)fx_json_int(e, "bytes")),
	    first_sha);
}

/*
 * A file of several chunks (BILLING_EXPORT_CHUNK_BYTES, 256 KiB, each):
 * downloaded byte for byte as built here from the rows, multi-byte UTF-8
 * across the chunks' boundaries included (each chunk is read in binary
 * and sent as read, not hex-decoded). Last: its rows stay.
 */
static void
test_large_download(void **state)
{
	struct fixture *fx = *state;
	const char *from = "2026-07-01T00:00:00Z", *to = "2026-07-04T00:00:00Z";
	struct gp_client_response *r;
	struct json_object *e;
	long long nrows;
	char *want;
	int64_t id;

	fx_sql_exec(fx,
	    "INSERT INTO pools (project_id, name, status) SELECT p.id, 'big-' || i, 'released' "
	    "FROM projects p, generate_series(1, 100) AS i WHERE p.name = 'acme'");
	fx_sql_exec(fx,
	    "INSERT INTO billing_usage (kind, project_id, pool_id, model, profile, hour, period, "
	    "price_per_hour_micro, currency, seconds, count, amount_micro, note) "
	    "SELECT 'usage', po.project_id, po.id, 'H100-80GB', 'full', "
	    "'2026-07-01 00:00:00+00'::timestamptz + h * interval '1 hour', '2026-07', 2500000, "
	    "'EUR', 3600, 1 + po.id % 4, 2500000 * (1 + po.id % 4), "
	    "'Größe ✓ 日本語 ' || po.name || ' ' || h "
	    "FROM pools po, generate_series(0, 71) AS h WHERE po.name LIKE 'big-%'");
	id = exp_create(fx, fx->admin_token,
	    fx_str(fx, "{\"format\":\"csv\",\"from\":\"%s\",\"to\":\"%s\"}", from, to));
	e = exp_wait(fx, id, 60000);
	assert_json_str(e, "state", "done");
	assert_true(fx_sql_int64(fx,
			"SELECT count(*) FROM billing_export_chunks WHERE export_id = $1::int8",
			fx_str(fx, "%lld", (long long)id)) >= 4);
	want = expected_csv(fx, from, to, &nrows);
	assert_int_equal(nrows, 7200);
	r = exp_download(fx, id);
	assert_int_equal((int64_t)r->body_len, fx_json_int(e, "bytes"));
	assert_string_equal(exp_sha256(fx, r->body, r->body_len), fx_json_str(e, "sha256"));
	assert_text_equal(r->body, want);
	free(want);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csv_golden_month),
		cmocka_unit_test(test_jsonl_and_range),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_access),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_replicas),
		cmocka_unit_test(test_kill_during_export),
		cmocka_unit_test(test_large_download),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
