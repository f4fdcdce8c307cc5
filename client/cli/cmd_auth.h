/*
 * cmd_auth.h - the "login" and "me" commands.
 */
#ifndef GP_CLI_CMD_AUTH_H
#define GP_CLI_CMD_AUTH_H

#include "cli.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_auth_commands[];

#endif
