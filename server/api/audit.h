/*
 * audit.h - what audit.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_AUDIT_H
#define GP_API_AUDIT_H

#include "api.h"

int api_audit_list(struct request *req, struct response *res, struct gp_error *err);

#endif
