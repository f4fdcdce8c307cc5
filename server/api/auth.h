/*
 * auth.h - what auth.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_AUTH_H
#define GP_API_AUTH_H

#include "api.h"

int api_login(struct request *req, struct response *res, struct gp_error *err);
int api_me(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_create(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_list(struct request *req, struct response *res, struct gp_error *err);
int api_logout(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_get(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_delete(struct request *req, struct response *res, struct gp_error *err);

#endif
