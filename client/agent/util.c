/*
 * util.c - small helpers of gpupool-agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

char *
ag_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf != NULL) {
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (n + 1 < cap)
			break;
		char *nb = realloc(buf, cap * 2);
		if (nb == NULL) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	fclose(f);
	if (buf == NULL)
		return NULL;
	buf[n] = '\0';
	if (len != NULL)
		*len = n;
	return buf;
}

int
ag_write_file(const char *path, const char *data, size_t len, int mode)
{
	char tmp[4096];
	int fd = -1;
	/* a new file of our own: never one planted there, never through a link */
	for (int attempt = 0; fd < 0 && attempt < 8; attempt++) {
		if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
			ag_rand(1000000000u)) >= (int)sizeof(tmp))
			return -1;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
		if (fd < 0 && errno != EEXIST)
			return -1;
	}
	if (fd < 0)
		return -1;
	if (fchmod(fd, (mode_t)mode) != 0) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			return -1;
		}
		off += (size_t)w;
	}
	if (fsync(fd) != 0 || close(fd) != 0) {
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

long long
ag_now(void)
{
	return (long long)time(NULL);
}

long long
ag_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long
ag_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
ag_strlcpy(char *dst, const char *src, size_t len)
{
	if (len == 0)
		return;
	size_t n = strlen(src);
	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

char *
ag_trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (
	    n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = '\0';
	return s;
}

void
ag_sleep_ms(long long ms, volatile bool *stop)
{
	long long end = ag_mono_ms() + ms;
	for (;;) {
		long long left = end - ag_mono_ms();
		if (left <= 0 || (stop != NULL && *stop))
			return;
		if (left > 200)
			left = 200;
		struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
}

unsigned
ag_rand(unsigned n)
{
	static __thread unsigned seed;
	if (seed == 0)
		seed = (unsigned)ag_mono_ms() ^ (unsigned)getpid() ^ (unsigned)time(NULL);
	if (n == 0)
		return 0;
	return (unsigned)rand_r(&seed) % n;
}

int
ag_parse_int(const char *s, int min, int max, int fallback)
{
	char *end = NULL;
	long v;

	if (s == NULL || s[0] == '\0')
		return fallback;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return fallback;
	return (int)v;
}
