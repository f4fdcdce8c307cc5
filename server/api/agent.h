/*
 * agent.h - what the node agents' handlers (agent.c, agent_status.c)
 * share: the limits of a report and the checks of its texts.
 */
#ifndef GP_API_AGENT_H
#define GP_API_AGENT_H

#include "api.h"
#include <stdbool.h>

#define AGENT_MAX_GPUS 16
#define AGENT_MAX_INSTANCES 8

/* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in lower-case hex. */
bool agent_gpu_uuid_valid(const char *s);

/* No control character. */
bool agent_printable(const char *s);

/* handlers (routes.c routes to them) */
int api_enroll_tokens_create(struct request *req, struct response *res, struct gp_error *err);
int api_enroll_tokens_list(struct request *req, struct response *res, struct gp_error *err);
int api_enroll_tokens_delete(struct request *req, struct response *res, struct gp_error *err);
int api_agent_enroll(struct request *req, struct response *res, struct gp_error *err);
int api_agent_token_rotate(struct request *req, struct response *res, struct gp_error *err);
int api_node_agent_token_revoke(struct request *req, struct response *res, struct gp_error *err);
int api_agent_desired_state(struct request *req, struct response *res, struct gp_error *err);
int api_agent_heartbeat(struct request *req, struct response *res, struct gp_error *err);
int api_node_mig_config(struct request *req, struct response *res, struct gp_error *err);

#endif
