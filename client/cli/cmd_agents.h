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

/* Shared with "gpupool nodes enroll-token" and "gpupool gpus metrics". */
int cmd_agents_enroll_create(struct cli *cli, const struct cli_command *cmd,
    const struct cli_args *args);
int cmd_agents_gpu_metrics(struct cli *cli, const struct cli_command *cmd,
    const struct cli_args *args);
extern const struct cli_option cmd_agents_enroll_options[];
extern const struct cli_option cmd_agents_metrics_options[];

#endif
