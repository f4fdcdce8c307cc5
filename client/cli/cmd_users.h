/*
 * cmd_users.h - the "users" command group (administrators only).
 */
#ifndef GP_CLI_CMD_USERS_H
#define GP_CLI_CMD_USERS_H

#include "cli.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_users_commands[];

#endif
