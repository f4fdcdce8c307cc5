/*
 * billing_export.h - what billing_export.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_BILLING_EXPORT_H
#define GP_API_BILLING_EXPORT_H

#include "api.h"

int api_billing_exports_create(struct request *req, struct response *res, struct gp_error *err);
int api_billing_exports_list(struct request *req, struct response *res, struct gp_error *err);
int api_billing_exports_get(struct request *req, struct response *res, struct gp_error *err);
int api_billing_exports_download(struct request *req, struct response *res, struct gp_error *err);

#endif
