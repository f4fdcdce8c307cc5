/*
 * cmd_billing_export.h - gpupool billing export, gpupool reports
 * utilization (docs/billing.md "Exports", "Utilization").
 */
#ifndef GP_CLI_CMD_BILLING_EXPORT_H
#define GP_CLI_CMD_BILLING_EXPORT_H

#include "cli.h"

/* Options of "billing export", NULL-terminated. */
extern const struct cli_option cmd_billing_export_options[];

/* gpupool billing export: create the job, wait, download, verify. */
int cmd_billing_export(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args);

/* gpupool billing exports list|get: the export jobs (state, rows, bytes, SHA-256). */
int cmd_billing_exports_list(struct cli *cli, const struct cli_command *cmd,
    const struct cli_args *args);
int cmd_billing_exports_get(struct cli *cli, const struct cli_command *cmd,
    const struct cli_args *args);

/* The "reports" group, NULL-terminated. */
extern const struct cli_command cmd_reports_commands[];

#endif
