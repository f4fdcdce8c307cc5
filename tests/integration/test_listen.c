/*
 * test_listen.c - a second gpupoold on a port already served must fail
 * to start instead of silently sharing it (SO_REUSEPORT would let the
 * kernel split connections between the two processes), and say so in
 * one line that names the address and GPUPOOL_LISTEN (no libmicrohttpd
 * "Failed to bind to port 0" beside it).
 */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Lines of text that contain needle. */
static int
lines_with(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; p != NULL && *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);

		char line[2048];

		snprintf(line, sizeof(line), "%.*s", (int)len, p);
		if (strstr(line, needle) != NULL)
			n++;
		p = nl != NULL ? nl + 1 : NULL;
	}
	return n;
}

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

/* gpupoold serve on a busy port: exit 1 and one clear line, nothing else about it. */
static void
test_port_in_use_message(void **state)
{
	struct fixture *fx = *state;
	const char *addr = fx_str(fx, "127.0.0.1:%d", fx->server->port);
	struct fx_proc *p;
	const char *all;

	assert_int_equal(setenv("GPUPOOL_LISTEN", addr, 1), 0);
	p = fx_gpupoold(fx, NULL, "serve", NULL);
	assert_int_equal(unsetenv("GPUPOOL_LISTEN"), 0);
	all = fx_str(fx, "%s%s", p->out, p->err);
	fprintf(stderr, "gpupoold said:\n%s", all);
	assert_int_equal(p->status, 1);
	/* one line names the address, the cause and the setting */
	assert_int_equal(lines_with(all, addr), 1);
	assert_int_equal(lines_with(all, "GPUPOOL_LISTEN"), 1);
	assert_int_equal(lines_with(all, "Address already in use"), 1);
	assert_int_equal(lines_with(all, "could not listen on"), 1);
	/* and nothing from libmicrohttpd about it */
	assert_int_equal(lines_with(all, "port 0"), 0);
	assert_int_equal(lines_with(all, "Failed to bind"), 0);
	assert_int_equal(lines_with(all, "libmicrohttpd"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_port_in_use),
		cmocka_unit_test(test_port_in_use_message),
	};

	return fixture_run_tests(tests);
}
