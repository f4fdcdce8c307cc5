/*
 * reports.h - what reports.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_REPORTS_H
#define GP_API_REPORTS_H

#include "api.h"

int api_reports_utilization(struct request *req, struct response *res, struct gp_error *err);

#endif
