/*
 * test_ui.c - the dashboard's files as gpupoold serves them under /ui/
 * (server/api/ui.c), over raw HTTP so every header is seen: the CSP and
 * the other security headers on every answer, index.html revalidated
 * (no-cache + ETag, RFC 9110 13.1.2 If-None-Match -> 304), hashed assets
 * cached for a year (immutable), gzip only when accepted (RFC 9110
 * 12.5.3, q=0 refuses), HEAD without a body (RFC 9110 9.3.2), /ui -> /ui/
 * (308), read-only (405 with Allow), unknown file 404 problem+json, and
 * no token needed: the page signs in itself.
 */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "rawhttp.h"

static struct raw_response
ui_get(struct fixture *fx, const char *method, const char *path, const char *h1, const char *h2)
{
	const char *h[] = { h1, h2, NULL };
	size_t len;
	struct raw_response r;
	char *req = raw_build(fx->arena, method, path, h, NULL, 0, &len);

	assert_int_equal(raw_exchange(fx->arena, fx->server->port, req, len, 5000, &r), 0);
	return r;
}

/* the first file index.html links to with this prefix ("assets/app-") and suffix */
static const char *
linked_asset(struct fixture *fx, const char *html, const char *suffix)
{
	for (const char *p = html; (p = strstr(p, "assets/app-")) != NULL; p++) {
		const char *q = strchr(p, '"');
		if (q != NULL && (size_t)(q - p) > strlen(suffix) &&
		    strncmp(q - strlen(suffix), suffix, strlen(suffix)) == 0)
			return fx_str(fx, "/ui/%.*s", (int)(q - p), p);
	}
	fail_msg("index.html links no %s asset", suffix);
	return NULL;
}

static void
assert_security_headers(struct fixture *fx, const struct raw_response *r)
{
	const char *csp = raw_header(fx->arena, r, "Content-Security-Policy");
	assert_non_null(csp);
	/* scripts from this origin only: no inline script, no eval */
	assert_non_null(strstr(csp, "script-src 'self'"));
	assert_null(strstr(csp, "unsafe-inline"));
	assert_null(strstr(csp, "unsafe-eval"));
	assert_non_null(strstr(csp, "frame-ancestors 'none'"));
	assert_string_equal(raw_header(fx->arena, r, "X-Content-Type-Options"), "nosniff");
	assert_string_equal(raw_header(fx->arena, r, "Referrer-Policy"), "no-referrer");
}

static void
test_index_revalidated_rfc9110_13_1_2(void **state)
{
	struct fixture *fx = *state;
	struct raw_response r = ui_get(fx, "GET", "/ui/", NULL, NULL);

	assert_int_equal(r.status, 200);
	assert_security_headers(fx, &r);
	assert_string_equal(raw_header(fx->arena, &r, "Content-Type"), "text/html; charset=utf-8");
	assert_string_equal(raw_header(fx->arena, &r, "Cache-Control"), "no-cache");
	assert_non_null(strstr(r.body, "<div id=\"app\">"));
	/* no inline script: every <script> has a src */
	for (const char *p = r.body; (p = strstr(p, "<script")) != NULL; p++)
		assert_non_null(strstr(p, "src=\"assets/"));
	const char *etag = raw_header(fx->arena, &r, "ETag");
	assert_non_null(etag);
	assert_int_equal(etag[0], '"');
	struct raw_response again =
	    ui_get(fx, "GET", "/ui/index.html", fx_str(fx, "If-None-Match: %s", etag), NULL);
	assert_int_equal(again.status, 304);
	assert_int_equal(again.body_len, 0);
	struct raw_response other =
	    ui_get(fx, "GET", "/ui/", "If-None-Match: \"something-else\"", NULL);
	assert_int_equal(other.status, 200);
}

static void
test_hashed_assets_immutable_and_gzip_rfc9110_12_5_3(void **state)
{
	struct fixture *fx = *state;
	struct raw_response idx = ui_get(fx, "GET", "/ui/", NULL, NULL);
	const char *js = linked_asset(fx, idx.body, ".js");
	const char *css = linked_asset(fx, idx.body, ".css");

	struct raw_response r = ui_get(fx, "GET", js, NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_security_headers(fx, &r);
	assert_string_equal(raw_header(fx->arena, &r, "Content-Type"),
	    "text/javascript; charset=utf-8");
	assert_string_equal(raw_header(fx->arena, &r, "Cache-Control"),
	    "public, max-age=31536000, immutable");
	assert_null(raw_header(fx->arena, &r, "Content-Encoding"));
	size_t plain = r.body_len;
	assert_true(plain > 1000);

	struct raw_response z = ui_get(fx, "GET", js, "Accept-Encoding: br, gzip;q=0.8", NULL);
	assert_int_equal(z.status, 200);
	assert_string_equal(raw_header(fx->arena, &z, "Content-Encoding"), "gzip");
	assert_string_equal(raw_header(fx->arena, &z, "Vary"), "Accept-Encoding");
	assert_true(z.body_len < plain);
	assert_int_equal((unsigned char)z.body[0], 0x1f); /* gzip magic */
	assert_int_equal((unsigned char)z.body[1], 0x8b);

	/* RFC 9110 8.8.3: the gzip coding is another representation, with its own strong tag */
	const char *tag = raw_header(fx->arena, &r, "ETag");
	const char *ztag = raw_header(fx->arena, &z, "ETag");
	assert_non_null(tag);
	assert_non_null(ztag);
	assert_string_not_equal(tag, ztag);
	struct raw_response z304 =
	    ui_get(fx, "GET", js, "Accept-Encoding: gzip", fx_str(fx, "If-None-Match: %s", ztag));
	assert_int_equal(z304.status, 304);
	/* the plain copy's tag does not validate the gzip one */
	struct raw_response z200 =
	    ui_get(fx, "GET", js, "Accept-Encoding: gzip", fx_str(fx, "If-None-Match: %s", tag));
	assert_int_equal(z200.status, 200);

	struct raw_response no = ui_get(fx, "GET", js, "Accept-Encoding: gzip;q=0, identity", NULL);
	assert_null(raw_header(fx->arena, &no, "Content-Encoding"));
	assert_int_equal(no.body_len, plain);
	/* parameter names are case-insensitive: Q=0 refuses too */
	no = ui_get(fx, "GET", js, "Accept-Encoding: GZIP;Q=0", NULL);
	assert_null(raw_header(fx->arena, &no, "Content-Encoding"));

	struct raw_response c = ui_get(fx, "GET", css, NULL, NULL);
	assert_int_equal(c.status, 200);
	assert_string_equal(raw_header(fx->arena, &c, "Content-Type"), "text/css; charset=utf-8");
}

static void
test_head_redirect_readonly_notfound(void **state)
{
	struct fixture *fx = *state;

	/* RFC 9110 9.3.2: HEAD is GET without the body */
	struct raw_response h = ui_get(fx, "HEAD", "/ui/", NULL, NULL);
	assert_int_equal(h.status, 200);
	assert_int_equal(h.body_len, 0);
	assert_non_null(raw_header(fx->arena, &h, "ETag"));

	/* relative asset names need the slash: RFC 9110 15.4.9 308 */
	struct raw_response red = ui_get(fx, "GET", "/ui", NULL, NULL);
	assert_int_equal(red.status, 308);
	assert_string_equal(raw_header(fx->arena, &red, "Location"), "/ui/");

	/* the server's root leads to the dashboard (RFC 9110 15.4.3 302), for HEAD too */
	red = ui_get(fx, "GET", "/", NULL, NULL);
	assert_int_equal(red.status, 302);
	assert_string_equal(raw_header(fx->arena, &red, "Location"), "/ui/");
	assert_int_equal(red.body_len, 0);
	red = ui_get(fx, "HEAD", "/", NULL, NULL);
	assert_int_equal(red.status, 302);
	assert_string_equal(raw_header(fx->arena, &red, "Location"), "/ui/");
	red = ui_get(fx, "POST", "/", NULL, NULL);
	assert_int_equal(red.status, 405);
	assert_string_equal(raw_header(fx->arena, &red, "Allow"), "GET, HEAD");

	/* RFC 9110 15.5.6: 405 names what is allowed */
	struct raw_response post = ui_get(fx, "POST", "/ui/", NULL, NULL);
	assert_int_equal(post.status, 405);
	assert_string_equal(raw_header(fx->arena, &post, "Allow"), "GET, HEAD");
	assert_non_null(strstr(raw_header(fx->arena, &post, "Content-Type"), "problem+json"));

	struct raw_response nf = ui_get(fx, "GET", "/ui/assets/../../etc/passwd", NULL, NULL);
	assert_int_equal(nf.status, 404);
	nf = ui_get(fx, "GET", "/ui/nope.js", NULL, NULL);
	assert_int_equal(nf.status, 404);
	assert_security_headers(fx, &nf);
	assert_string_equal(fx_json_str(nf.json, "code"), "not_found");
	/* the server is still there, and the API still wants a token */
	struct raw_response me = ui_get(fx, "GET", "/v1/me", NULL, NULL);
	assert_int_equal(me.status, 401);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_revalidated_rfc9110_13_1_2),
		cmocka_unit_test(test_hashed_assets_immutable_and_gzip_rfc9110_12_5_3),
		cmocka_unit_test(test_head_redirect_readonly_notfound),
	};
	return fixture_exit_status(
	    cmocka_run_group_tests(tests, fixture_group_setup, fixture_group_teardown));
}
