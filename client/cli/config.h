/*
 * config.h - the gpupool CLI config file: "key = value" lines in
 * $XDG_CONFIG_HOME/gpupool/config (or ~/.config/gpupool/config).
 *
 * Lines starting with '#' and blank lines are kept as they are; keys the
 * CLI does not know are preserved on save. The file holds a token, so it
 * is written with mode 0600 in a 0700 directory, atomically (temporary
 * file + rename).
 */
#ifndef GP_CLI_CONFIG_H
#define GP_CLI_CONFIG_H

#include <stddef.h>

struct config_line {
	char *key;   /* NULL for a comment or blank line */
	char *value; /* the value, or the raw text of a comment line */
};

struct config {
	char path[4096];
	struct config_line *lines;
	size_t nlines;
};

/*
 * Resolve the path and read the file; a missing file is an empty
 * config. On failure writes a message to errbuf and returns -1.
 */
int config_load(struct config *cfg, char *errbuf, size_t errlen)
    __attribute__((warn_unused_result));

/* The value of key, NULL when absent. */
const char *config_get(const struct config *cfg, const char *key);

/* Set key (adding it when absent). Returns -1 when out of memory. */
int config_set(struct config *cfg, const char *key, const char *value)
    __attribute__((warn_unused_result));

/* Write the file back (creating its directory). -1 with errbuf set on failure. */
int config_save(const struct config *cfg, char *errbuf, size_t errlen)
    __attribute__((warn_unused_result));

/* Free the lines, wiping values (they may hold a token). */
void config_free(struct config *cfg);

#endif
