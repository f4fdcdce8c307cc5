/*
 * cmd_capacity.h - gpupool capacity (the per-model capacity view) and
 * gpupool capacity simulate (would these items fit now, and where).
 */
#ifndef GP_CLI_CMD_CAPACITY_H
#define GP_CLI_CMD_CAPACITY_H

#include "cli.h"

/* Exit status of "capacity simulate" when the items do not fit now. */
#define CMD_CAPACITY_EXIT_NOFIT 7

/* The "capacity" group, NULL-terminated. */
extern const struct cli_command cmd_capacity_commands[];

#endif
