/*
 * slicebar.c - the memory-slice bar of a GPU (see slicebar.h). Pure: no
 * I/O, no allocation, so tests/unit/test_slicebar.c covers it whole.
 */
#include "slicebar.h"

#include <string.h>

static void
slicebar_fail(char *buf, size_t len)
{
	if (len >= 2) {
		buf[0] = '?';
		buf[1] = '\0';
	} else if (len == 1) {
		buf[0] = '\0';
	}
}

/* Write width columns of an instance's label at p: its name cut to fit, then spaces. */
static void
slicebar_label(char *p, int width, const char *name)
{
	int i = 0;

	for (; name != NULL && name[i] != '\0' && i < width; i++) {
		unsigned char ch = (unsigned char)name[i];

		p[i] = (ch <= 0x20 || ch >= 0x7f) ? '?' : (char)ch;
	}
	for (; i < width; i++)
		p[i] = ' ';
}

int
slicebar_render(int slices, const struct slicebar_instance *inst, int n, char *buf, size_t len)
{
	int owner[SLICEBAR_SLICES_MAX];
	int cell, used = 0;
	char *p = buf;

	if (slices < 1 || slices > SLICEBAR_SLICES_MAX || n < 0 || len < SLICEBAR_LEN ||
	    (n > 0 && inst == NULL))
		goto fail;
	for (int k = 0; k < slices; k++)
		owner[k] = -1;
	for (int i = 0; i < n; i++) {
		if (inst[i].start < 0 || inst[i].size < 1 || inst[i].start >= slices ||
		    inst[i].size > slices - inst[i].start)
			goto fail;
		for (int k = inst[i].start; k < inst[i].start + inst[i].size; k++) {
			if (owner[k] != -1)
				goto fail;
			owner[k] = i;
		}
	}
	cell = (SLICEBAR_INNER + 1) / slices - 1;
	*p++ = '[';
	for (int k = 0; k < slices;) {
		int i = owner[k], span = i < 0 ? 1 : inst[i].size;
		int width = span * cell + (span - 1);

		if (k > 0)
			*p++ = (i < 0 && owner[k - 1] < 0) ? ' ' : '|';
		if (i < 0)
			memset(p, '.', (size_t)width);
		else
			slicebar_label(p, width, inst[i].profile);
		p += width;
		used += width + (k > 0);
		k += span;
	}
	/* slice counts that do not divide the width leave a remainder: pad */
	for (; used < SLICEBAR_INNER; used++)
		*p++ = ' ';
	*p++ = ']';
	*p = '\0';
	return 0;
fail:
	slicebar_fail(buf, len);
	return -1;
}
