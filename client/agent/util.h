/*
 * util.h - small helpers of gpupool-agent: files, time, strings.
 */
#ifndef GP_AGENT_UTIL_H
#define GP_AGENT_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* The whole file as a NUL-terminated malloc'd string; NULL when unreadable. */
char *ag_read_file(const char *path, size_t *len);

/* s as a whole decimal integer in [min, max], else fallback (no atoi: junk is not 0). */
int ag_parse_int(const char *s, int min, int max, int fallback);

/* Write data to path atomically with mode: a new temp file next to it
 * (O_CREAT|O_EXCL|O_NOFOLLOW, a random name), fsync, rename. */
int ag_write_file(const char *path, const char *data, size_t len, int mode);

/* Wall clock seconds and a monotonic clock in milliseconds. */
long long ag_now(void);
long long ag_mono_ms(void);
long long ag_now_ms(void); /* wall clock, milliseconds */

/* Copy src into dst (always NUL-terminated). */
void ag_strlcpy(char *dst, const char *src, size_t len);

/* Trim spaces at both ends in place; returns s. */
char *ag_trim(char *s);

/* Sleep ms milliseconds (restarted on EINTR unless *stop turns true). */
void ag_sleep_ms(long long ms, volatile bool *stop);

/* A random number in [0, n). */
unsigned ag_rand(unsigned n);

#endif
