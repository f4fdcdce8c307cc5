/*
 * users.h - what users.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_USERS_H
#define GP_API_USERS_H

#include "api.h"

int api_users_create(struct request *req, struct response *res, struct gp_error *err);
int api_users_list(struct request *req, struct response *res, struct gp_error *err);
int api_users_get(struct request *req, struct response *res, struct gp_error *err);
int api_users_patch(struct request *req, struct response *res, struct gp_error *err);

#endif
