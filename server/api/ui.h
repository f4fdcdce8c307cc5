/*
 * ui.h - the dashboard (ui.c): a path under /ui, and its answer.
 */
#ifndef GP_API_UI_H
#define GP_API_UI_H

#include "api.h"

bool ui_path(const char *path);
void ui_serve(struct request *req, struct response *res);

#endif
