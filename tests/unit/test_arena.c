/*
 * test_arena.c - the region allocator across its block sizes: a small
 * first block (a held long-poll keeps only it, issue 23), 8 KiB blocks
 * after it, dedicated blocks for allocations over 4 KiB. Every
 * allocation is zeroed, 16-byte aligned and keeps its bytes while later
 * ones land in other blocks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"

static void
test_blocks(void **state)
{
	static const size_t sizes[] = { 1, 400, 600, 1000, 24, 3000, 5000, 7, 9000, 100, 4096,
		4097 };
	unsigned char *p[sizeof(sizes) / sizeof(sizes[0]) * 20];
	size_t n = 0, total = 0;
	struct arena *a = arena_create();

	(void)state;
	for (int round = 0; round < 20; round++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++, n++) {
			size_t sz = sizes[i];

			p[n] = arena_alloc(a, sz);
			assert_non_null(p[n]);
			assert_int_equal((uintptr_t)p[n] % 16, 0);
			for (size_t k = 0; k < sz; k++)
				assert_int_equal(p[n][k], 0);
			memset(p[n], (int)(n & 0xff), sz);
			total += (sz + 15) & ~(size_t)15;
		}
	assert_int_equal(arena_used(a), total);
	n = 0;
	for (int round = 0; round < 20; round++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++, n++)
			for (size_t k = 0; k < sizes[i]; k++)
				assert_int_equal(p[n][k], n & 0xff);
	assert_string_equal(arena_printf(a, "%s-%d", "x", 7), "x-7");
	arena_destroy(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
