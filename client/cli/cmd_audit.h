/*
 * cmd_audit.h - the "audit" command: the audit log (administrators).
 */
#ifndef GP_CLI_CMD_AUDIT_H
#define GP_CLI_CMD_AUDIT_H

#include "cli.h"

/* Top-level commands of this file; ends with name == NULL. */
extern const struct cli_command cmd_audit_commands[];

#endif
