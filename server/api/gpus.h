/*
 * gpus.h - what gpus.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_GPUS_H
#define GP_API_GPUS_H

#include "api.h"

int api_gpus_create(struct request *req, struct response *res, struct gp_error *err);
int api_node_gpus_list(struct request *req, struct response *res, struct gp_error *err);
int api_gpus_list(struct request *req, struct response *res, struct gp_error *err);
int api_gpus_get(struct request *req, struct response *res, struct gp_error *err);
int api_gpus_patch(struct request *req, struct response *res, struct gp_error *err);

#endif
