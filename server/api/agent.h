/*
 * agent.h - what the node agents' handlers (agent.c, agent_status.c)
 * share: the limits of a report and the checks of its texts.
 */
#ifndef GP_API_AGENT_H
#define GP_API_AGENT_H

#include <stdbool.h>

#define AGENT_MAX_GPUS 16
#define AGENT_MAX_INSTANCES 8

/* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in lower-case hex. */
bool agent_gpu_uuid_valid(const char *s);

/* No control character. */
bool agent_printable(const char *s);

#endif
