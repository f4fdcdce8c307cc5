/*
 * cmd_gpus.h - gpupool gpus (list, get, create): physical GPUs with
 * their MIG layout drawn as a slice bar.
 */
#ifndef GP_CLI_CMD_GPUS_H
#define GP_CLI_CMD_GPUS_H

#include "cli.h"

/* The "gpus" group, NULL-terminated. */
extern const struct cli_command cmd_gpus_commands[];

#endif
