/*
 * output.h - printing server answers as aligned tables or pretty JSON.
 *
 * Columns name a dotted path into each row ("owner.name", "namespaces");
 * strings print as they are, null or missing values as "-", arrays of
 * scalars joined by commas, anything else as compact JSON.
 */
#ifndef GP_CLI_OUTPUT_H
#define GP_CLI_OUTPUT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>

struct output_column {
	const char *header; /* "DISPLAY NAME" */
	const char *path;   /* "display_name" */
};

/*
 * In a column list, the columns after this marker show only with -o wide
 * (kubectl's extra columns): { "NAME", "name" }, OUTPUT_WIDE, { "ID", "id" }.
 */
#define OUTPUT_WIDE      \
	{                \
		"", NULL \
	}

/* Pretty-print obj (2-space indent) and a newline to out. */
enum output_format {
	OUTPUT_PLAIN,      /* tables as tables, JSON as JSON */
	OUTPUT_YAML,       /* output_json writes YAML */
	OUTPUT_NAME,       /* tables: the first column only, no header */
	OUTPUT_WIDE_TABLE, /* tables with their OUTPUT_WIDE columns too */
};

/* Process-wide rendering choices (-o, --no-headers). */
void output_set_format(enum output_format f);
void output_set_no_headers(bool on);

void output_json(FILE *out, struct json_object *obj);

/*
 * An aligned table of the objects in rows (a JSON array; non-objects are
 * skipped), columns ending with header == NULL. Prints the header line
 * even when rows is empty.
 */
void output_table(FILE *out, struct json_object *rows, const struct output_column *cols);

/* output_table() for a single object. */
void output_row(FILE *out, struct json_object *obj, const struct output_column *cols);

#endif
