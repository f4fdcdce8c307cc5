/*
 * fuzz_query.c - libFuzzer harness for the query and header parsers:
 * limit/cursor paging (api_page, api_cursor_encode), RFC 3339 times
 * (time_parse_rfc3339, api_query_time, the formatters), If-Match lists
 * (api_if_match, api_if_match_check) and ids in paths (api_param_id).
 *
 * The input is split at newlines into limit, cursor, a time, If-Match
 * and an id. Invariants: an accepted limit is 1..500; an accepted cursor
 * encodes back to the same text; a cursor we issue is accepted as the
 * same position; a time in years 1970..9999 formats and parses back to
 * itself (to the millisecond); an If-Match that reads either matches a
 * generation (guarding the write with it; nothing for "*") or is 412;
 * refusals are 4xx with a field or a code.
 */
#include "api/api.h"
#include "core/arena.h"
#include "core/request.h"
#include "core/timeutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NPARTS 5
#define YEAR_10000_US 253402300800000000LL

/* req->ctx: the server context first (api_app, the cursor key), then the parts */
struct fake {
	struct app app;
	const char *part[NPARTS];
};

static const char *
fake_query(const struct request *req, const char *name)
{
	const struct fake *f = req->ctx;

	if (strcmp(name, "limit") == 0)
		return f->part[0];
	if (strcmp(name, "cursor") == 0)
		return f->part[1];
	if (strcmp(name, "since") == 0)
		return f->part[2];
	return NULL;
}

static const char *
fake_header(const struct request *req, const char *name)
{
	const struct fake *f = req->ctx;

	return strcmp(name, "If-Match") == 0 ? f->part[3] : NULL;
}

static void
check_time(struct arena *a, const char *s)
{
	char buf[40];
	int64_t us, again;

	if (time_parse_rfc3339(s, &us) < 0)
		return;
	if (us < 0 || us >= YEAR_10000_US)
		return;
	time_format_rfc3339_ms(us, buf, sizeof(buf));
	if (time_parse_rfc3339(buf, &again) < 0 || again != us - us % 1000)
		abort();
	time_format_rfc3339(us, buf, sizeof(buf));
	if (time_parse_rfc3339(buf, &again) < 0 || again != us - us % 1000000)
		abort();
	(void)a;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_create();
	char *text = arena_strndup(a, (const char *)data, size);
	struct request req;
	struct fake f;
	struct gp_error err;
	int limit;
	int64_t cursor, t, etag, id;
	struct api_if_match im;
	char *p = text;

	/* strndup stops at a NUL: the parts are NUL-free, as MHD hands them over */
	memset(&f, 0, sizeof(f));
	snprintf(f.app.cursor_key, sizeof(f.app.cursor_key), "%s", "fuzz-cursor-key");
	for (int i = 0; i < NPARTS && p != NULL; i++) {
		char *nl = strchr(p, '\n');

		if (nl != NULL)
			*nl++ = '\0';
		f.part[i] = p[0] == '-' && p[1] == '\0' ? NULL : p;
		p = nl;
	}
	memset(&req, 0, sizeof(req));
	req.arena = a;
	req.ctx = &f;
	req.query = fake_query;
	req.header = fake_header;
	req.route_pattern = "/v1/fuzz";

	memset(&err, 0, sizeof(err));
	if (api_page(&req, &limit, &cursor, &err) == 0) {
		if (limit < 1 || limit > 500 || cursor < 0)
			abort();
		/* a cursor the fuzzer made up cannot carry a valid signature */
		if (f.part[1] != NULL && strcmp(api_cursor_encode(&req, cursor), f.part[1]) != 0)
			abort();
	} else if (err.status != 422 || err.nfields < 1) {
		abort();
	}
	{
		/* any position round-trips; the same cursor with one byte changed does not */
		int64_t pos = (int64_t)(size * 7919u) & INT64_MAX, c2 = -1;
		char *cur = arena_strdup(a, api_cursor_encode(&req, pos));
		struct fake f2 = f;

		f2.part[0] = NULL;
		f2.part[1] = cur;
		req.ctx = &f2;
		memset(&err, 0, sizeof(err));
		if (api_page(&req, &limit, &c2, &err) < 0 || c2 != pos)
			abort();
		cur[strlen(cur) - 1] = cur[strlen(cur) - 1] == '0' ? '1' : '0';
		memset(&err, 0, sizeof(err));
		if (api_page(&req, &limit, &c2, &err) == 0)
			abort();
		req.ctx = &f;
	}

	memset(&err, 0, sizeof(err));
	if (api_query_time(&req, "since", &t, &err) < 0 && err.status != 422)
		abort();
	if (f.part[2] != NULL)
		check_time(a, f.part[2]);

	memset(&err, 0, sizeof(err));
	if (api_if_match(&req, &im, &err) == 0) {
		int64_t guard;

		if ((f.part[3] == NULL) != (im.value == NULL))
			abort();
		/* "*" matches anything; a tag list that matches guards the write with it */
		memset(&err, 0, sizeof(err));
		etag = (int64_t)(size % 5);
		if (api_if_match_check(&im, etag, "object", &guard, &err) == 0) {
			if (im.value != NULL && !im.any && guard != etag)
				abort();
			if ((im.value == NULL || im.any) && guard != 0)
				abort();
		} else if (err.status != 412 || im.value == NULL || im.any) {
			abort();
		}
	} else if (err.status != 412) {
		abort();
	}

	req.params[0] = f.part[4] != NULL ? f.part[4] : "";
	req.nparams = 1;
	memset(&err, 0, sizeof(err));
	if (api_param_id(&req, 0, &id, &err) == 0) {
		if (id < 1)
			abort();
	} else if (err.status != 404) {
		abort();
	}
	arena_destroy(a);
	return 0;
}
