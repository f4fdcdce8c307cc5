/*
 * cmd_nodes.h - gpupool clusters (list, get, create) and gpupool nodes
 * (list, get, create, cordon, uncordon, drain).
 */
#ifndef GP_CLI_CMD_NODES_H
#define GP_CLI_CMD_NODES_H

#include "cli.h"

/* The "clusters" and "nodes" groups, NULL-terminated. */
extern const struct cli_command cmd_nodes_commands[];

#endif
