/*
 * prompt.h - reading a username or a secret from the terminal or stdin.
 *
 * On a terminal the prompt goes to stderr and a secret is read with echo
 * off; otherwise one line is read from stdin without a prompt, so scripts
 * can pipe a password in.
 */
#ifndef GP_CLI_PROMPT_H
#define GP_CLI_PROMPT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Read one line into buf (the newline removed). secret turns echo off
 * on a terminal. Returns -1 with errbuf set on end of input, an empty
 * line, a line that does not fit, or a read error. The caller wipes buf.
 */
int prompt_read(const char *prompt, bool secret, char *buf, size_t len, char *errbuf, size_t errlen)
    __attribute__((warn_unused_result));

#endif
