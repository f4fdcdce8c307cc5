/*
 * cmd_requests.h - the "request" and "requests" command groups (the
 * pool-request workflow).
 */
#ifndef GP_CLI_CMD_REQUESTS_H
#define GP_CLI_CMD_REQUESTS_H

#include "cli.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_requests_commands[];

#endif
