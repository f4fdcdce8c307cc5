/*
 * cmd_agents.h - gpupool agents (enrollment tokens, node tokens, the
 * mig-parted view), gpupool alerts (list, ack), gpupool profiles (list)
 * and gpupool metrics (a GPU's samples).
 */
#ifndef GP_CLI_CMD_AGENTS_H
#define GP_CLI_CMD_AGENTS_H

#include "cli.h"

/* The "agents", "alerts", "profiles" and "metrics" groups, NULL-terminated. */
extern const struct cli_command cmd_agents_commands[];

#endif
