/*
 * cmd_defrag.h - gpupool capacity defrag: plan, get, list, apply and
 * cancel defragmentation plans (docs/capacity.md, "Fragmentation and
 * defragmentation plans").
 */
#ifndef GP_CLI_CMD_DEFRAG_H
#define GP_CLI_CMD_DEFRAG_H

#include "cli.h"

/*
 * Exit status of "capacity defrag apply --wait" and "get --watch" when
 * the plan ends in a state other than applied (failed, cancelled,
 * expired).
 */
#define CMD_DEFRAG_EXIT_NOT_APPLIED 8

/* The subcommands of "capacity defrag", NULL-terminated. */
extern const struct cli_command cmd_defrag_commands[];

#endif
