/*
 * test_backoff.c - time_backoff (core/timeutil.c), the one back-off of
 * the pusher, the agent and the database reconnects, against the three
 * formulas it replaced.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/timeutil.h"

/* The pusher's before: base doubled per attempt after the first, 5 min cap. */
static int64_t
old_pusher(int64_t base, int attempts, uint32_t r)
{
	int64_t d = base;

	for (int i = 1; i < attempts && d < 300000; i++)
		d *= 2;
	if (d > 300000)
		d = 300000;
	return d / 2 + (int64_t)(r % (uint32_t)(d / 2 + 1));
}

/* The agent's before: 1 s << fails (at most 5), 30 s cap. */
static int64_t
old_agent(int fails, uint32_t r)
{
	long long d = 1000LL << (fails < 5 ? fails : 5);

	if (d > 30000)
		d = 30000;
	return d / 2 + (long long)(r % (unsigned)(d / 2 + 1));
}

static void
test_same_as_before(void **state)
{
	uint32_t r = 12345;

	(void)state;
	for (int i = 0; i < 20000; i++) {
		int attempts = 1 + i % 40;
		int64_t base = 10 + (i * 7919) % 600000;

		r = r * 1103515245u + 12345u;
		assert_int_equal(time_backoff(base, attempts - 1, 300000, r),
		    old_pusher(base, attempts, r));
		assert_int_equal(time_backoff(1000, attempts - 1, 30000, r),
		    old_agent(attempts - 1, r));
	}
}

/* The database's: 1-2 ms doubling to 64-128 ms (in microseconds). */
static void
test_db_range(void **state)
{
	(void)state;
	for (int attempt = 0; attempt < 12; attempt++) {
		int s = attempt < 6 ? attempt : 6;

		assert_int_equal(time_backoff(2000, attempt, 128000, 0), 1000 << s);
		assert_int_equal(time_backoff(2000, attempt, 128000, UINT32_MAX) <= 2000 << s, 1);
		assert_int_equal(time_backoff(2000, attempt, 128000, (1000u << s)), 2000 << s);
	}
	/* huge attempt counts stop at the cap, no overflow */
	assert_int_equal(time_backoff(1000, 1000000, 300000, 0), 150000);
	assert_int_equal(time_backoff(0, 0, 10, 0), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_as_before),
		cmocka_unit_test(test_db_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
