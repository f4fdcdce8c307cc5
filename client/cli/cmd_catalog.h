/*
 * cmd_catalog.h - the "catalog" command group: the GPU models and their
 * MIG profiles (any user).
 */
#ifndef GP_CLI_CMD_CATALOG_H
#define GP_CLI_CMD_CATALOG_H

#include "cli.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_catalog_commands[];

#endif
