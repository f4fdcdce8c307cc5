/*
 * ui_assets.h - the dashboard's files, embedded in gpupoold at build time
 * (scripts/embed_ui.cmake over dashboard/dist, which dashboard/build.mjs makes).
 */
#ifndef GP_API_UI_ASSETS_H
#define GP_API_UI_ASSETS_H

#include <stdbool.h>
#include <stddef.h>

struct ui_asset {
	const char *path;         /* under /ui/, such as "assets/app-3KJ2.js" */
	const char *content_type; /* with charset for text */
	const char *etag;         /* quoted, strong */
	bool immutable;           /* a content-hashed name: cached for a year */
	const unsigned char *data;
	size_t len;
	const unsigned char *gzip; /* the same, gzip-compressed; NULL when not smaller */
	size_t gzip_len;
};

extern const struct ui_asset gp_ui_assets[];
extern const size_t gp_ui_assets_count;

#endif
