/*
 * cmd_tokens.h - the "tokens" command group (personal API tokens).
 */
#ifndef GP_CLI_CMD_TOKENS_H
#define GP_CLI_CMD_TOKENS_H

#include "cli.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_tokens_commands[];

#endif
