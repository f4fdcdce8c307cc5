/*
 * cmd_capacity.h - gpupool capacity (the per-model capacity view) and
 * gpupool capacity simulate (would these items fit now, and where).
 */
#ifndef GP_CLI_CMD_CAPACITY_H
#define GP_CLI_CMD_CAPACITY_H

#include "cli.h"

/* Exit status of "capacity simulate" when the items do not fit now. */
#define CMD_CAPACITY_EXIT_NOFIT 7

/*
 * The items given as positional arguments (SpecAndCount text,
 * MODEL/PROFILE=COUNT) as a JSON array of {model, profile, count},
 * parsed by the server's own spec_parse: a usage error for cmd naming
 * the first malformed one (nothing sent). *out is the caller's on
 * CLI_EXIT_OK, NULL otherwise.
 */
int cmd_capacity_items(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    struct json_object **out);

/* The "capacity" group, NULL-terminated. */
extern const struct cli_command cmd_capacity_commands[];

#endif
