/*
 * cmd_billing.h - gpupool billing: rates, usage, periods, adjust, accrue.
 */
#ifndef GP_CLI_CMD_BILLING_H
#define GP_CLI_CMD_BILLING_H

#include "cli.h"

/* The "billing" group, NULL-terminated. */
extern const struct cli_command cmd_billing_commands[];

#endif
