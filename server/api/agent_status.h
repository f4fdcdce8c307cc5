/*
 * agent_status.h - what agent_status.c offers: its handlers (routes.c routes to them).
 */
#ifndef GP_API_AGENT_STATUS_H
#define GP_API_AGENT_STATUS_H

#include "api.h"

int api_agent_status(struct request *req, struct response *res, struct gp_error *err);

#endif
