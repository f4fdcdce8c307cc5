/*
 * cmd_pools.h - the "pools" and "quota" command groups, and the
 * SpecAndCount list helpers the "request" commands share.
 */
#ifndef GP_CLI_CMD_POOLS_H
#define GP_CLI_CMD_POOLS_H

#include "cli.h"
#include "output.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_pools_commands[];

/*
 * The positional arguments args->pos[first..npos) as a JSON array of
 * SpecAndCount objects, each parsed from its text form
 * (H100-80GB/3g.40gb=2) by the server's parser; a usage error for the
 * first malformed one. *out (owned by the caller) is NULL on failure.
 */
int pools_cli_items(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    int first, struct json_object **out);

/*
 * Give every object of rows (an array, or one object) a string member
 * "<key>_text" with the SpecAndCount list at key in text form
 * ("H100-80GB/3g.40gb=2, H100-80GB/1g.10gb=1"), for table columns.
 */
void pools_cli_items_text(struct json_object *rows, const char *key);

/*
 * List path (cli_list: paging options of args) and print it: the JSON
 * document, or a table of its items with cols (SpecAndCount lists as
 * text in "items_text").
 */
int pools_cli_list(struct cli *cli, const char *path, const struct cli_args *args,
    const struct output_column *cols);

/* Print the allocations array at key of obj as a table (or "none"). */
void pools_cli_print_allocations(struct json_object *obj, const char *key);

#endif
