/*
 * defrag.h - what defrag.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_DEFRAG_H
#define GP_API_DEFRAG_H

#include "api.h"

int api_defrag_plans_create(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_get(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_list(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_apply(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_cancel(struct request *req, struct response *res, struct gp_error *err);

#endif
