/*
 * prompt.c - terminal prompts with echo control (termios), falling back
 * to plain stdin lines for scripts and tests.
 */
#include "prompt.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

int
prompt_read(const char *prompt, bool secret, char *buf, size_t len, char *errbuf, size_t errlen)
{
	struct termios saved, quiet;
	bool tty = isatty(STDIN_FILENO) == 1, restored = true;
	size_t n;
	int ret = -1;

	if (len < 2 || len > (size_t)INT_MAX) {
		snprintf(errbuf, errlen, "invalid buffer");
		return -1;
	}
	if (tty) {
		fprintf(stderr, "%s", prompt);
		fflush(stderr);
		if (secret && tcgetattr(STDIN_FILENO, &saved) == 0) {
			quiet = saved;
			quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
			quiet.c_lflag |= ICANON;
			if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0)
				restored = false;
		}
	}
	if (fgets(buf, (int)len, stdin) == NULL) {
		snprintf(errbuf, errlen, "%s",
		    ferror(stdin) ? "could not read from stdin"
				  : "no input: expected one line on stdin");
		buf[0] = '\0';
		goto fail;
	}
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '\n') {
		buf[--n] = '\0';
	} else if (!feof(stdin)) {
		snprintf(errbuf, errlen, "the input line is longer than %zu bytes", len - 2);
		goto fail;
	}
	if (n > 0 && buf[n - 1] == '\r')
		buf[--n] = '\0';
	if (n == 0) {
		snprintf(errbuf, errlen, "the input is empty");
		goto fail;
	}
	ret = 0;
fail:
	if (!restored) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
		fputc('\n', stderr);
	}
	if (ret != 0)
		explicit_bzero(buf, len);
	return ret;
}
