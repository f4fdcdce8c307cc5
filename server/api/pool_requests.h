/*
 * pool_requests.h - what pool_requests.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_POOL_REQUESTS_H
#define GP_API_POOL_REQUESTS_H

#include "api.h"

int api_pool_requests_submit(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_list(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_get(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_approve(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_reject(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_cancel(struct request *req, struct response *res, struct gp_error *err);

#endif
