/*
 * test_paths.c - percent-encoding in paths and queries: an encoded '/'
 * or NUL never changes which endpoint or object a request reaches (a
 * proxy in front of gpupool must see the same route we run); ordinary
 * escapes still decode, in paths and in query values.
 */
#include "fixture.h"

static void
test_encoded_paths(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects", "{\"name\":\"proja\"}");
	assert_status(r, 201);

	/* plain escapes decode: "proj%61" is "proja" */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/proj%61", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "name", "proja");

	/* an encoded slash is part of the name, not a path separator */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/proja%2Fmembers", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/proja%2fmembers", NULL);
	assert_problem(r, 404, "not_found");
	/* an encoded NUL does not cut the name short */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/proja%00xyz", NULL);
	assert_problem(r, 404, "not_found");
	/* "%25" is a literal percent sign, never decoded twice */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/proja%252Fmembers", NULL);
	assert_problem(r, 404, "not_found");
}

static void
test_encoded_queries(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	/* '+' of an offset, '.' of an action, '/' in a value: all decoded */
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/audit?action=project%2Ecreate&since=2000-01-01T00:00:00%2B00:00", NULL);
	assert_status(r, 200);
	assert_true(fx_json_len(r->json, "items") >= 1);
	assert_json_str(r->json, "items[0].action", "project.create");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?object_id=proj%61", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "items[0].object_id", "proja");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?object_id=proja%2Fx", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	/* a value with an encoded NUL is no value at all: 422, as for "?limit=" */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit=1%00", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "limit");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encoded_paths),
		cmocka_unit_test(test_encoded_queries),
	};

	return fixture_run_tests(tests);
}
