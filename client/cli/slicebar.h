/*
 * slicebar.h - a GPU's memory-slice layout drawn as one line of text,
 * for gpupool gpus list|get:
 *
 *	[3g.40gb    |2g.20|1g|..]    3g.40gb at 0, 2g.20gb at 4, 1g.10gb at 6, slice 7 free
 *	[full                   ]    the whole GPU
 *	[.. .. .. .. .. .. .. ..]    empty
 *
 * Every bar has the same width whatever the model: SLICEBAR_INNER
 * columns between the brackets, each of the model's memory slices a cell
 * of (SLICEBAR_INNER + 1) / slices - 1 columns (2 for 8 slices, 5 for the
 * A30's 4, 23 for a GPU without MIG), cells joined by one column. An
 * instance covers its cells and the joins between them, so its width is
 * proportional to its size; it shows its profile name, cut to fit. Free
 * cells are dots, joined by a space; '|' marks where an instance begins
 * or ends.
 */
#ifndef GP_CLI_SLICEBAR_H
#define GP_CLI_SLICEBAR_H

#include <stddef.h>

#define SLICEBAR_INNER 23
#define SLICEBAR_SLICES_MAX 8
/* a buffer that always fits: brackets, SLICEBAR_INNER columns and the NUL */
#define SLICEBAR_LEN (SLICEBAR_INNER + 3)

struct slicebar_instance {
	const char *profile; /* "3g.40gb", "full"; NULL draws an unnamed instance */
	int start;           /* first memory slice */
	int size;            /* memory slices held */
};

/*
 * Draw a GPU of `slices` memory slices (1 to SLICEBAR_SLICES_MAX) holding
 * the n instances (any order) into buf. Profile names are written as
 * ASCII: other bytes and control characters become '?'.
 *
 * Returns 0, or -1 when the layout cannot be drawn: slices out of range,
 * an instance outside the GPU or overlapping another, or len <
 * SLICEBAR_LEN; buf (when len > 0) then holds "?" or as much of it as
 * fits.
 */
int slicebar_render(int slices, const struct slicebar_instance *inst, int n, char *buf, size_t len)
    __attribute__((warn_unused_result));

#endif
