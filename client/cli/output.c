/*
 * output.c - table and JSON rendering for the CLI. Cells are sanitized
 * (control characters become '?') so server data cannot drive the
 * terminal, and columns are aligned by code points, not bytes.
 */
#include "output.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp_client.h"

#define OUTPUT_MAX_COLUMNS 16
#define OUTPUT_GAP 3

static enum output_format output_format_set = OUTPUT_PLAIN;
static bool output_no_headers;

void
output_set_format(enum output_format f)
{
	output_format_set = f;
}

void
output_set_no_headers(bool on)
{
	output_no_headers = on;
}

/*
 * A string YAML reads back as that string when written plain: a letter or
 * '_' first (so no number, date or time), then letters, digits and _ . / -
 * (no ':', '#', quote or blank), and none of YAML 1.1's words for
 * booleans and null (PyYAML reads those in any case).
 */
static bool
output_yaml_plain(const char *s)
{
	static const char *const words[] = { "y", "n", "yes", "no", "on", "off", "true", "false",
		"null", NULL };

	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return false;
	for (const char *p = s; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '/' ||
			*p == '-'))
			return false;
	for (int i = 0; words[i] != NULL; i++)
		if (strcasecmp(s, words[i]) == 0)
			return false;
	return true;
}

/* Plain where that reads back the same; else a JSON string, a valid YAML double-quoted scalar. */
static void
output_yaml_scalar(FILE *out, struct json_object *v)
{
	if (v == NULL)
		fputs("null", out);
	else if (json_object_is_type(v, json_type_string) &&
	    output_yaml_plain(json_object_get_string(v)))
		fputs(json_object_get_string(v), out);
	else
		fputs(json_object_to_json_string_ext(v, JSON_C_TO_STRING_NOSLASHESCAPE), out);
}

static void
output_yaml(FILE *out, struct json_object *v, int indent, bool in_list)
{
	if (json_object_is_type(v, json_type_object) && json_object_object_length(v) > 0) {
		bool first = true;

		json_object_object_foreach(v, k, val)
		{
			struct json_object *key = json_object_new_string(k);

			if (!(first && in_list))
				fprintf(out, "%*s", indent, "");
			first = false;
			output_yaml_scalar(out, key);
			json_object_put(key);
			fputc(':', out);
			if ((json_object_is_type(val, json_type_object) &&
				json_object_object_length(val) > 0) ||
			    (json_object_is_type(val, json_type_array) &&
				json_object_array_length(val) > 0)) {
				fputc('\n', out);
				output_yaml(out, val, indent + 2, false);
			} else {
				fputc(' ', out);
				output_yaml(out, val, 0, false);
			}
		}
		return;
	}
	if (json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0) {
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			struct json_object *e = json_object_array_get_idx(v, i);

			/* a list in a list starts on its parent's "- " line */
			fprintf(out, "%*s- ", i == 0 && in_list ? 0 : indent, "");
			if ((json_object_is_type(e, json_type_object) &&
				json_object_object_length(e) > 0) ||
			    (json_object_is_type(e, json_type_array) &&
				json_object_array_length(e) > 0))
				output_yaml(out, e, indent + 2, true);
			else {
				output_yaml_scalar(out, e);
				fputc('\n', out);
			}
		}
		return;
	}
	if (json_object_is_type(v, json_type_object))
		fputs("{}\n", out);
	else if (json_object_is_type(v, json_type_array))
		fputs("[]\n", out);
	else {
		output_yaml_scalar(out, v);
		fputc('\n', out);
	}
}

/*
 * One timestamp format, RFC 3339 in UTC with "Z": the API writes its own
 * times so, but documents it stores (audit before/after, agent reports)
 * may carry PostgreSQL's "+00:00"; rewrite those, everywhere in v.
 */
static void
output_times_utc(struct json_object *v)
{
	if (json_object_is_type(v, json_type_object)) {
		json_object_object_foreach(v, k, val)
		{
			(void)k;
			output_times_utc(val);
		}
	} else if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++)
			output_times_utc(json_object_array_get_idx(v, i));
	} else if (json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		size_t n = (size_t)json_object_get_string_len(v);
		char buf[64];

		/* 2026-01-01T00:00:00[.frac]+00:00 */
		if (n < 25 || n >= sizeof(buf) || strcmp(s + n - 6, "+00:00") != 0 || s[4] != '-' ||
		    s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
		    strspn(s, "0123456789") != 4)
			return;
		snprintf(buf, sizeof(buf), "%.*sZ", (int)(n - 6), s);
		json_object_set_string(v, buf);
	}
}

void
output_json(FILE *out, struct json_object *obj)
{
	output_times_utc(obj);
	if (output_format_set == OUTPUT_YAML) {
		output_yaml(out, obj, 0, false);
		return;
	}
	fputs(json_object_to_json_string_ext(obj,
		  JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
		      JSON_C_TO_STRING_NOSLASHESCAPE),
	    out);
	fputc('\n', out);
}

static bool
output_is_scalar(struct json_object *v)
{
	return v == NULL ||
	    (!json_object_is_type(v, json_type_object) && !json_object_is_type(v, json_type_array));
}

/* The elements of an array of scalars joined by commas (malloc'd); NULL otherwise. */
static char *
output_join(struct json_object *v)
{
	size_t len = json_object_array_length(v), total = 1, n = 0;
	char *d;

	for (size_t i = 0; i < len; i++) {
		struct json_object *e = json_object_array_get_idx(v, i);

		if (!output_is_scalar(e))
			return NULL;
		total += strlen(e ? json_object_get_string(e) : "null") + 1;
	}
	d = malloc(total);
	if (d == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		struct json_object *e = json_object_array_get_idx(v, i);
		const char *s = e ? json_object_get_string(e) : "null";
		size_t sl = strlen(s);

		if (i > 0)
			d[n++] = ',';
		memcpy(d + n, s, sl);
		n += sl;
	}
	d[n] = '\0';
	return d;
}

/* A malloc'd, sanitized rendering of v. NULL only when out of memory. */
static char *
output_cell(struct json_object *v)
{
	const char *text;
	char *d = NULL;

	if (v == NULL) {
		text = "-";
	} else if (json_object_is_type(v, json_type_string)) {
		text = json_object_get_string(v);
		if (text[0] == '\0')
			text = "-";
	} else if (json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0) {
		text = "-";
	} else if (json_object_is_type(v, json_type_array) ||
	    json_object_is_type(v, json_type_object)) {
		if (json_object_is_type(v, json_type_array))
			d = output_join(v);
		text = json_object_to_json_string_ext(v,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	} else {
		text = json_object_get_string(v);
	}
	if (d == NULL) {
		size_t n = strlen(text);

		d = malloc(n + 1);
		if (d == NULL)
			return NULL;
		memcpy(d, text, n + 1);
	}
	for (char *p = d; *p != '\0'; p++) {
		unsigned char ch = (unsigned char)*p;

		if (ch < 0x20 || ch == 0x7f)
			*p = '?';
	}
	return d;
}

/* Display width: code points, not bytes. */
static size_t
output_width(const char *s)
{
	size_t w = 0;

	for (; *s != '\0'; s++) {
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	}
	return w;
}

static void
output_pad(FILE *out, size_t n)
{
	while (n-- > 0)
		fputc(' ', out);
}

void
output_table(FILE *out, struct json_object *rows, const struct output_column *cols)
{
	size_t ncols = 0, nrows = 0, width[OUTPUT_MAX_COLUMNS];
	struct output_column shown[OUTPUT_MAX_COLUMNS + 1];
	char **cells = NULL;

	output_times_utc(rows);
	for (size_t i = 0; cols[i].header != NULL && ncols < OUTPUT_MAX_COLUMNS; i++) {
		if (cols[i].path == NULL) { /* OUTPUT_WIDE: the rest only with -o wide */
			if (output_format_set != OUTPUT_WIDE_TABLE)
				break;
			continue;
		}
		shown[ncols++] = cols[i];
	}
	shown[ncols].header = NULL;
	cols = shown;
	if (output_format_set == OUTPUT_NAME && ncols > 1)
		ncols = 1; /* -o name: the identifying first column */
	if (rows != NULL && json_object_is_type(rows, json_type_array))
		nrows = json_object_array_length(rows);
	if (nrows > 0) {
		cells = calloc(nrows * ncols, sizeof(*cells));
		if (cells == NULL) {
			fputs("out of memory\n", stderr);
			return;
		}
	}
	for (size_t c = 0; c < ncols; c++)
		width[c] = output_width(cols[c].header);
	for (size_t r = 0; r < nrows; r++) {
		struct json_object *row = json_object_array_get_idx(rows, r);

		if (row == NULL || !json_object_is_type(row, json_type_object))
			continue;
		for (size_t c = 0; c < ncols; c++) {
			char *cell = output_cell(gp_client_json_get(row, cols[c].path));
			size_t w;

			if (cell == NULL)
				goto done;
			cells[r * ncols + c] = cell;
			w = output_width(cell);
			if (w > width[c])
				width[c] = w;
		}
	}
	for (size_t c = 0; !output_no_headers && output_format_set != OUTPUT_NAME && c < ncols;
	     c++) {
		fputs(cols[c].header, out);
		fputc(c + 1 < ncols ? ' ' : '\n', out);
		if (c + 1 < ncols)
			output_pad(out, width[c] - output_width(cols[c].header) + OUTPUT_GAP - 1);
	}
	for (size_t r = 0; r < nrows; r++) {
		if (cells[r * ncols] == NULL)
			continue;
		for (size_t c = 0; c < ncols; c++) {
			const char *cell = cells[r * ncols + c];

			fputs(cell, out);
			if (c + 1 < ncols)
				output_pad(out, width[c] - output_width(cell) + OUTPUT_GAP);
		}
		fputc('\n', out);
	}
done:
	for (size_t i = 0; i < nrows * ncols; i++)
		free(cells[i]);
	free(cells);
}

void
output_row(FILE *out, struct json_object *obj, const struct output_column *cols)
{
	struct json_object *rows = json_object_new_array();

	if (rows == NULL)
		return;
	if (obj != NULL && json_object_array_add(rows, json_object_get(obj)) != 0)
		json_object_put(obj);
	output_table(out, rows, cols);
	json_object_put(rows);
}
