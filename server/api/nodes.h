/*
 * nodes.h - what nodes.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_NODES_H
#define GP_API_NODES_H

#include "api.h"

int api_nodes_create(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_list(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_get(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_patch(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_cordon(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_uncordon(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_drain(struct request *req, struct response *res, struct gp_error *err);

#endif
