/*
 * catalog.h - what catalog.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_CATALOG_H
#define GP_API_CATALOG_H

#include "api.h"

int api_catalog_models_list(struct request *req, struct response *res, struct gp_error *err);
int api_catalog_models_get(struct request *req, struct response *res, struct gp_error *err);

#endif
