/*
 * telemetry.h - what telemetry.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_TELEMETRY_H
#define GP_API_TELEMETRY_H

#include "api.h"

int api_agent_metrics(struct request *req, struct response *res, struct gp_error *err);
int api_agent_profiles(struct request *req, struct response *res, struct gp_error *err);
int api_gpu_metrics(struct request *req, struct response *res, struct gp_error *err);
int api_alerts_list(struct request *req, struct response *res, struct gp_error *err);
int api_alerts_ack(struct request *req, struct response *res, struct gp_error *err);
int api_profiles_list(struct request *req, struct response *res, struct gp_error *err);
const char *alerts_metrics_text(struct arena *a);

#endif
