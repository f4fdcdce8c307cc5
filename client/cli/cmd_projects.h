/*
 * cmd_projects.h - the "projects" and "members" command groups.
 */
#ifndef GP_CLI_CMD_PROJECTS_H
#define GP_CLI_CMD_PROJECTS_H

#include "cli.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_projects_commands[];

#endif
