/*
 * billing.h - what billing.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_BILLING_H
#define GP_API_BILLING_H

#include "api.h"

int api_billing_rates_create(struct request *req, struct response *res, struct gp_error *err);
int api_billing_rates_list(struct request *req, struct response *res, struct gp_error *err);
int api_billing_accrual_run(struct request *req, struct response *res, struct gp_error *err);
int api_billing_usage(struct request *req, struct response *res, struct gp_error *err);
int api_billing_periods_list(struct request *req, struct response *res, struct gp_error *err);
int api_billing_periods_close(struct request *req, struct response *res, struct gp_error *err);
int api_billing_adjustments_create(struct request *req, struct response *res, struct gp_error *err);

#endif
