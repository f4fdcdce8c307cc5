/*
 * test_slicebar.c - the CLI's slice bar (client/cli/slicebar.c): every
 * model geometry in the catalog (8, 4 and 1 memory slices), instances
 * in any order, names cut to fit, and the layouts it must refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "slicebar.h"

#define MAXI 8

struct bar_case {
	const char *what;
	int slices;
	int n;
	struct slicebar_instance inst[MAXI];
	const char *expected; /* NULL: must be refused */
};

static const struct bar_case cases[] = {
	{ "H100 empty", 8, 0, { { NULL, 0, 0 } }, "[.. .. .. .. .. .. .. ..]" },
	{ "H100 full", 8, 1, { { "full", 0, 8 } }, "[full                   ]" },
	{ "H100 7g", 8, 1, { { "7g.80gb", 0, 8 } }, "[7g.80gb                ]" },
	{ "H100 3g+2g+1g, slice 7 free", 8, 3,
	    { { "3g.40gb", 0, 4 }, { "2g.20gb", 4, 2 }, { "1g.10gb", 6, 1 } },
	    "[3g.40gb    |2g.20|1g|..]" },
	{ "the same given backwards", 8, 3,
	    { { "1g.10gb", 6, 1 }, { "2g.20gb", 4, 2 }, { "3g.40gb", 0, 4 } },
	    "[3g.40gb    |2g.20|1g|..]" },
	{ "H100 3g at 4, 1g.20gb at 0", 8, 2, { { "3g.40gb", 4, 4 }, { "1g.20gb", 0, 2 } },
	    "[1g.20|.. ..|3g.40gb    ]" },
	{ "H100 2x3g", 8, 2, { { "3g.40gb", 0, 4 }, { "3g.40gb", 4, 4 } },
	    "[3g.40gb    |3g.40gb    ]" },
	{ "H100 seven 1g", 8, 7,
	    { { "1g.10gb", 0, 1 }, { "1g.10gb", 1, 1 }, { "1g.10gb", 2, 1 }, { "1g.10gb", 3, 1 },
		{ "1g.10gb", 4, 1 }, { "1g.10gb", 5, 1 }, { "1g.10gb", 6, 1 } },
	    "[1g|1g|1g|1g|1g|1g|1g|..]" },
	{ "H100 one 1g in the middle", 8, 1, { { "1g.10gb+me", 3, 1 } },
	    "[.. .. ..|1g|.. .. .. ..]" },
	{ "H100 4g", 8, 1, { { "4g.40gb", 0, 4 } }, "[4g.40gb    |.. .. .. ..]" },
	{ "A30 empty", 4, 0, { { NULL, 0, 0 } }, "[..... ..... ..... .....]" },
	{ "A30 2g + 1g", 4, 2, { { "2g.12gb", 0, 2 }, { "1g.6gb", 3, 1 } },
	    "[2g.12gb    |.....|1g.6g]" },
	{ "A30 full", 4, 1, { { "full", 0, 4 } }, "[full                   ]" },
	{ "L40S empty", 1, 0, { { NULL, 0, 0 } }, "[.......................]" },
	{ "L40S full", 1, 1, { { "full", 0, 1 } }, "[full                   ]" },
	{ "a name too long for the bar", 1, 1, { { "abcdefghijklmnopqrstuvwxyz", 0, 1 } },
	    "[abcdefghijklmnopqrstuvw]" },
	{ "control bytes and spaces", 8, 1, { { "a\x1b[2J b", 0, 4 } },
	    "[a?[2J?b    |.. .. .. ..]" },
	{ "no name", 8, 1, { { NULL, 2, 2 } }, "[.. ..|     |.. .. .. ..]" },
	{ "overlap", 8, 2, { { "3g.40gb", 0, 4 }, { "2g.20gb", 2, 2 } }, NULL },
	{ "past the end", 8, 1, { { "3g.40gb", 6, 4 } }, NULL },
	{ "negative start", 8, 1, { { "1g.10gb", -1, 1 } }, NULL },
	{ "empty instance", 8, 1, { { "1g.10gb", 0, 0 } }, NULL },
	{ "no slices", 0, 0, { { NULL, 0, 0 } }, NULL },
	{ "more slices than a GPU has", 9, 0, { { NULL, 0, 0 } }, NULL },
};

static void
test_slicebar_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bar_case *c = &cases[i];
		char buf[SLICEBAR_LEN];
		int rc = slicebar_render(c->slices, c->inst, c->n, buf, sizeof(buf));

		if (c->expected == NULL) {
			if (rc != -1 || strcmp(buf, "?") != 0)
				fail_msg("%s: expected a refusal, got %d \"%s\"", c->what, rc, buf);
			continue;
		}
		if (rc != 0 || strcmp(buf, c->expected) != 0)
			fail_msg("%s:\n  expected \"%s\"\n  got      \"%s\" (%d)", c->what,
			    c->expected, buf, rc);
		assert_int_equal(strlen(buf), SLICEBAR_INNER + 2);
	}
}

/* Every legal H100 layout of whole instances has the same width and shape. */
static void
test_slicebar_widths(void **state)
{
	(void)state;
	/* every partition of 8 slices into runs of 1, 2 and 4 (aligned or not) */
	for (unsigned mask = 0; mask < 256; mask++) {
		struct slicebar_instance inst[8];
		char buf[SLICEBAR_LEN];
		int n = 0;

		/* bit k set: slice k held by a 1-slice instance */
		for (int k = 0; k < 8; k++) {
			if (mask & (1u << k))
				inst[n++] = (struct slicebar_instance){ "1g.10gb", k, 1 };
		}
		assert_int_equal(slicebar_render(8, inst, n, buf, sizeof(buf)), 0);
		assert_int_equal(strlen(buf), SLICEBAR_INNER + 2);
		assert_int_equal(buf[0], '[');
		assert_int_equal(buf[SLICEBAR_INNER + 1], ']');
		for (int k = 0; k < 8; k++) {
			const char *cell = buf + 1 + 3 * k;

			assert_memory_equal(cell, (mask & (1u << k)) ? "1g" : "..", 2);
			if (k > 0) {
				bool both_free = !(mask & (1u << k)) && !(mask & (1u << (k - 1)));

				assert_int_equal(cell[-1], both_free ? ' ' : '|');
			}
		}
	}
}

static void
test_slicebar_small_buffer(void **state)
{
	struct slicebar_instance full = { "full", 0, 8 };
	char buf[SLICEBAR_LEN];

	(void)state;
	assert_int_equal(slicebar_render(8, &full, 1, buf, SLICEBAR_LEN - 1), -1);
	assert_string_equal(buf, "?");
	buf[0] = 'x';
	assert_int_equal(slicebar_render(8, &full, 1, buf, 1), -1);
	assert_int_equal(buf[0], '\0');
	assert_int_equal(slicebar_render(8, &full, 1, buf, 0), -1);
	assert_int_equal(slicebar_render(8, NULL, 1, buf, sizeof(buf)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slicebar_cases),
		cmocka_unit_test(test_slicebar_widths),
		cmocka_unit_test(test_slicebar_small_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
