/*
 * health.h - what health.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_HEALTH_H
#define GP_API_HEALTH_H

#include "api.h"

int api_healthz(struct request *req, struct response *res, struct gp_error *err);
int api_readyz(struct request *req, struct response *res, struct gp_error *err);
int api_metrics(struct request *req, struct response *res, struct gp_error *err);
int api_openapi(struct request *req, struct response *res, struct gp_error *err);

#endif
