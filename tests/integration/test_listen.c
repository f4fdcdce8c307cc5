/*
 * test_listen.c - a second gpupoold on a port already served must fail
 * to start instead of silently sharing it (SO_REUSEPORT would let the
 * kernel split connections between the two processes).
 */
#include "fixture.h"

#include <stdio.h>

static void
test_port_in_use(void **state)
{
	struct fixture *fx = *state;
	const char *env[] = { fx_str(fx, "GPUPOOL_LISTEN=127.0.0.1:%d", fx->server->port), NULL };
	struct gp_client_response *r;

	fprintf(stderr, "(a start failure and its log are expected below)\n");
	assert_null(fixture_server_start(fx, env));
	/* the first server still serves every request */
	for (int i = 0; i < 20; i++) {
		r = fx_request(fx, NULL, "GET", "/healthz", NULL);
		assert_status(r, 200);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_port_in_use),
	};

	return fixture_run_tests(tests);
}
