/*
 * ui.c - the dashboard under /ui/: its files are embedded in the binary
 * (ui_assets.h), so gpupoold serves it with no network and no files on
 * disk. The page talks to the same-origin REST API with a bearer token.
 *
 * Every answer carries a Content-Security-Policy that allows scripts and
 * styles from this origin only (no inline script, no eval), forbids
 * framing and sends no referrer. Content-hashed assets are cached for a
 * year (immutable); index.html is revalidated each time (ETag, 304).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ui.h"
#include "ui_assets.h"

#define UI_CSP                                                                            \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "     \
	"form-action 'none'; frame-ancestors 'none'"

bool
ui_path(const char *path)
{
	/* "/": a browser pointed at the server lands on the dashboard */
	return strcmp(path, "/") == 0 || strcmp(path, "/ui") == 0 || strncmp(path, "/ui/", 4) == 0;
}

static const struct ui_asset *
ui_find(const char *name)
{
	if (*name == '\0')
		name = "index.html";
	for (size_t i = 0; i < gp_ui_assets_count; i++)
		if (strcmp(gp_ui_assets[i].path, name) == 0)
			return &gp_ui_assets[i];
	return NULL;
}

/* Accept-Encoding names gzip with a weight above zero (RFC 9110 12.5.3). */
static bool
accepts_gzip(const char *ae)
{
	const char *p = ae;

	while (*p != '\0') {
		size_t n;
		const char *end;
		double q = 1.0;

		p += strspn(p, " \t,");
		end = p + strcspn(p, ",");
		n = strcspn(p, " \t;,");
		if (n == 4 && strncasecmp(p, "gzip", 4) == 0) {
			const char *w = strstr(p, "q=");

			if (w == NULL || w >= end)
				w = strstr(p, "Q=");
			if (w != NULL && w < end)
				q = strtod(w + 2, NULL);
			return q > 0.0;
		}
		p = end;
	}
	return false;
}

void
ui_serve(struct request *req, struct response *res)
{
	const struct ui_asset *a;
	struct gp_error err;
	const char *ae;

	gp_error_clear(&err);
	response_header(res, "Content-Security-Policy", UI_CSP);
	response_header(res, "X-Content-Type-Options", "nosniff");
	response_header(res, "Referrer-Policy", "no-referrer");
	response_header(res, "X-Frame-Options", "DENY");
	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
		response_header(res, "Allow", "GET, HEAD");
		gp_error_set(&err, 405, "method_not_allowed",
		    "the dashboard's files are read-only");
		response_problem(req, res, &err);
		return;
	}
	if (strcmp(req->path, "/") == 0) {
		/* 302: the root may serve something else one day, so not cached as 308 is */
		response_header(res, "Location", "/ui/");
		response_empty(res, 302);
		return;
	}
	if (strcmp(req->path, "/ui") == 0) {
		/* relative asset names need the trailing slash */
		response_header(res, "Location", "/ui/");
		response_empty(res, 308);
		return;
	}
	a = ui_find(req->path + 4);
	if (a == NULL) {
		gp_error_set(&err, 404, "not_found", "no such dashboard file");
		response_problem(req, res, &err);
		return;
	}
	ae = req->header_list != NULL ? req->header_list(req, "Accept-Encoding")
				      : req->header(req, "Accept-Encoding");
	if (a->gzip != NULL && ae != NULL && accepts_gzip(ae)) {
		response_raw(res, 200, a->content_type, (const char *)a->gzip, a->gzip_len);
		response_header(res, "Content-Encoding", "gzip");
		/* another coding is another representation: its own strong tag (RFC 9110 8.8.3) */
		response_header(res, "ETag",
		    arena_printf(req->arena, "%.*s-gz\"", (int)strlen(a->etag) - 1, a->etag));
	} else {
		response_raw(res, 200, a->content_type, (const char *)a->data, a->len);
		response_header(res, "ETag", a->etag);
	}
	if (a->gzip != NULL)
		response_header(res, "Vary", "Accept-Encoding");
	response_header(res, "Cache-Control",
	    a->immutable ? "public, max-age=31536000, immutable" : "no-cache");
}
