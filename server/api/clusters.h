/*
 * clusters.h - what clusters.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_CLUSTERS_H
#define GP_API_CLUSTERS_H

#include "api.h"

int api_clusters_create(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_list(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_get(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_patch(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_delete(struct request *req, struct response *res, struct gp_error *err);

#endif
