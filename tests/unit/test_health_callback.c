/*
 * test_health_callback.c - the pure decisions of the agent plane (issue
 * 19): GPU health per fault class from the embedded Xid catalog
 * (domain/health.c) and where pushes may go (domain/callback.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "domain/callback.h"
#include "domain/health.h"

static struct xid_catalog *xc;

static int
setup(void **state)
{
	struct gp_error err;

	(void)state;
	gp_error_clear(&err);
	return xid_catalog_load_builtin(&xc, &err);
}

static int
teardown(void **state)
{
	(void)state;
	xid_catalog_free(xc);
	return 0;
}

static void
assess(const int *xids, int n, int64_t ecc, bool pending, const char *action,
    struct gpu_health_verdict *v, struct arena *a)
{
	struct gpu_health_report r = { .ecc_uncorrected = ecc,
		.remapped_rows_pending = pending,
		.recovery_action = action,
		.xids = xids,
		.nxids = n };

	health_assess(xc, &r, a, v);
}

static void
test_xid_decisions(void **state)
{
	struct arena *a = arena_create();
	struct gpu_health_verdict v;

	(void)state;
	/* NVIDIA: 38 ignore, 109/110/156/158 reset, 154 as the recovery action says */
	assert_int_equal(xid_lookup(xc, 38, NULL), XID_IGNORE);
	assert_int_equal(xid_lookup(xc, 109, NULL), XID_RESET_GPU);
	assert_int_equal(xid_lookup(xc, 110, NULL), XID_RESET_GPU);
	assert_int_equal(xid_lookup(xc, 156, NULL), XID_RESET_GPU);
	assert_int_equal(xid_lookup(xc, 158, NULL), XID_RESET_GPU);
	assert_int_equal(xid_lookup(xc, 154, NULL), XID_RECOVERY);
	assert_int_equal(xid_lookup(xc, 94, NULL), XID_CONTAINED);
	assert_int_equal(xid_lookup(xc, 95, NULL), XID_RESET_GPU);
	assert_int_equal(xid_lookup(xc, 79, NULL), XID_REBOOT);
	assert_int_equal(xid_lookup(xc, 999, NULL), XID_UNKNOWN);

	assess((const int[]){ 38 }, 1, -1, false, NULL, &v, a);
	assert_null(v.fail);
	assert_null(v.degrade);
	/* contained: degraded, its ECC count goes with it */
	assess((const int[]){ 94 }, 1, 3, false, NULL, &v, a);
	assert_null(v.fail);
	assert_null(v.ecc);
	assert_non_null(strstr(v.degrade, "Xid 94"));
	assert_non_null(strstr(v.degrade, "3 uncorrectable"));
	/* an ECC count alone: the SQL fails an ok GPU, keeps a degraded one */
	assess(NULL, 0, 3, false, NULL, &v, a);
	assert_null(v.fail);
	assert_non_null(v.ecc);
	/* uncontained beats contained */
	assess((const int[]){ 94, 95 }, 2, 1, false, NULL, &v, a);
	assert_non_null(strstr(v.fail, "Xid 95"));
	/* a storm of application Xids then the fatal one */
	assess((const int[]){ 13, 13, 13, 79 }, 4, -1, false, NULL, &v, a);
	assert_non_null(strstr(v.fail, "Xid 79"));
	/* 154 with a reset action fails, without one degrades */
	assess((const int[]){ 154 }, 1, -1, false, "gpu_reset", &v, a);
	assert_non_null(strstr(v.fail, "GPU_RESET"));
	assess((const int[]){ 154 }, 1, -1, false, "none", &v, a);
	assert_null(v.fail);
	assert_non_null(strstr(v.degrade, "Xid 154"));
	assess(NULL, 0, -1, true, NULL, &v, a);
	assert_non_null(strstr(v.degrade, "pending"));
	assess(NULL, 0, -1, false, "drain_p2p", &v, a);
	assert_null(v.fail);
	assert_non_null(strstr(v.degrade, "DRAIN_P2P"));
	arena_destroy(a);
}

static enum callback_verdict
check(const char *allow, const char *addr, const char *peer)
{
	struct callback_addr x, p;

	assert_true(callback_parse_addr(addr, &x));
	if (peer != NULL)
		assert_true(callback_parse_addr(peer, &p));
	return callback_check_addr(allow, &x, peer ? &p : NULL);
}

static void
test_callback_policy(void **state)
{
	char host[64];

	(void)state;
	/* the peer's own address, nothing else, by default */
	assert_int_equal(check(NULL, "127.0.0.1", "127.0.0.1"), CALLBACK_ALLOWED);
	assert_int_equal(check(NULL, "::1", "127.0.0.1"), CALLBACK_NOT_LISTED);
	assert_int_equal(check(NULL, "::ffff:127.0.0.1", "127.0.0.1"), CALLBACK_ALLOWED);
	assert_int_equal(check(NULL, "10.0.0.5", "127.0.0.1"), CALLBACK_NOT_LISTED);
	/* restricted even from the peer itself, unless listed narrowly */
	assert_int_equal(check(NULL, "169.254.169.254", "169.254.169.254"), CALLBACK_RESTRICTED);
	assert_int_equal(check("0.0.0.0/0", "169.254.169.254", NULL), CALLBACK_RESTRICTED);
	assert_int_equal(check("169.254.0.0/16", "169.254.169.254", NULL), CALLBACK_ALLOWED);
	assert_int_equal(check("169.254.169.254", "169.254.169.254", NULL), CALLBACK_ALLOWED);
	assert_int_equal(check(NULL, "fe80::1", NULL), CALLBACK_RESTRICTED);
	assert_int_equal(check("::/0", "fd00:ec2::254", NULL), CALLBACK_RESTRICTED);
	assert_int_equal(check(NULL, "0.0.0.0", "0.0.0.0"), CALLBACK_RESTRICTED);
	assert_int_equal(check(NULL, "::", NULL), CALLBACK_RESTRICTED);
	assert_int_equal(check(NULL, "::ffff:169.254.169.254", NULL), CALLBACK_RESTRICTED);
	/* listed networks */
	assert_int_equal(check("10.0.0.0/8, 192.0.2.7", "10.200.1.1", NULL), CALLBACK_ALLOWED);
	assert_int_equal(check("10.0.0.0/8, 192.0.2.7", "192.0.2.7", NULL), CALLBACK_ALLOWED);
	assert_int_equal(check("10.0.0.0/8, 192.0.2.7", "192.0.2.8", NULL), CALLBACK_NOT_LISTED);
	assert_int_equal(check("2001:db8::/32", "2001:db8::9", NULL), CALLBACK_ALLOWED);
	assert_int_equal(check("10.1.2.0/23", "10.1.3.255", NULL), CALLBACK_ALLOWED);
	assert_int_equal(check("10.1.2.0/23", "10.1.4.0", NULL), CALLBACK_NOT_LISTED);
	/* names */
	assert_true(callback_host_listed("10.0.0.0/8,agents.example", "AGENTS.example"));
	assert_false(callback_host_listed("10.0.0.0/8,agents.example", "evil.example"));
	assert_false(callback_host_listed(NULL, "agents.example"));
	/* the list itself */
	assert_true(callback_allow_valid("10.0.0.0/8, 169.254.169.254/32,agents.example,::1"));
	assert_false(callback_allow_valid("10.0.0.0/33"));
	assert_false(callback_allow_valid("bad host"));
	assert_false(callback_allow_valid("a/b"));
	assert_false(callback_allow_valid(""));
	/* hosts of URLs */
	assert_int_equal(callback_url_host("http://[::1]:9/x", host, sizeof(host)), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(callback_url_host("https://Node-1.Example:8443", host, sizeof(host)), 0);
	assert_string_equal(host, "node-1.example");
	assert_int_equal(callback_url_host("http://user@127.0.0.1/", host, sizeof(host)), -1);
	assert_int_equal(callback_url_host("http:///x", host, sizeof(host)), -1);
	assert_int_equal(callback_url_host("ftp://h/", host, sizeof(host)), -1);
	assert_int_equal(callback_url_host("http://[::1/", host, sizeof(host)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xid_decisions),
		cmocka_unit_test(test_callback_policy),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
