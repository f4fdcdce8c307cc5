/*
 * config.c - reading and atomically rewriting the CLI config file
 * (server URL and token) with private permissions.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
config_resolve_path(struct config *cfg, char *errbuf, size_t errlen)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	const char *file = getenv("GPUPOOL_CONFIG");
	int n;

	if (file != NULL && file[0] != '\0') {
		/* GPUPOOL_CONFIG names the file itself */
		n = snprintf(cfg->path, sizeof(cfg->path), "%s", file);
	} else if (xdg != NULL && xdg[0] == '/') {
		n = snprintf(cfg->path, sizeof(cfg->path), "%s/gpupool/config", xdg);
	} else {
		if (home == NULL || home[0] == '\0') {
			struct passwd *pw = getpwuid(getuid());

			home = pw != NULL ? pw->pw_dir : NULL;
		}
		if (home == NULL || home[0] == '\0') {
			snprintf(errbuf, errlen,
			    "could not find the config directory: neither "
			    "XDG_CONFIG_HOME nor HOME is set");
			return -1;
		}
		n = snprintf(cfg->path, sizeof(cfg->path), "%s/.config/gpupool/config", home);
	}
	if (n < 0 || (size_t)n >= sizeof(cfg->path)) {
		snprintf(errbuf, errlen, "the config file path is too long");
		return -1;
	}
	return 0;
}

static char *
config_strndup(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d != NULL) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static void
config_wipe_free(char *s)
{
	if (s != NULL) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static int
config_append(struct config *cfg, char *key, char *value)
{
	struct config_line *nl;

	nl = realloc(cfg->lines, (cfg->nlines + 1) * sizeof(*nl));
	if (nl == NULL)
		return -1;
	cfg->lines = nl;
	cfg->lines[cfg->nlines].key = key;
	cfg->lines[cfg->nlines].value = value;
	cfg->nlines++;
	return 0;
}

/* Trim blanks on both sides of [s, s+len); returns the new start and length. */
static const char *
config_trim(const char *s, size_t *len)
{
	while (*len > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		(*len)--;
	}
	while (*len > 0 && strchr(" \t\r\n", s[*len - 1]) != NULL)
		(*len)--;
	return s;
}

static int
config_parse_line(struct config *cfg, const char *line, size_t lineno, char *errbuf, size_t errlen)
{
	size_t len = strlen(line), klen, vlen;
	const char *t, *eq, *k, *v;
	char *key = NULL, *value = NULL;

	t = config_trim(line, &len);
	if (len == 0 || t[0] == '#') {
		value = config_strndup(t, len);
		if (value == NULL || config_append(cfg, NULL, value) != 0)
			goto oom;
		return 0;
	}
	eq = memchr(t, '=', len);
	if (eq == NULL) {
		snprintf(errbuf, errlen, "%s:%zu: expected \"key = value\"", cfg->path, lineno);
		return -1;
	}
	klen = (size_t)(eq - t);
	k = config_trim(t, &klen);
	vlen = len - (size_t)(eq - t) - 1;
	v = config_trim(eq + 1, &vlen);
	if (klen == 0) {
		snprintf(errbuf, errlen, "%s:%zu: the key is empty", cfg->path, lineno);
		return -1;
	}
	key = config_strndup(k, klen);
	value = config_strndup(v, vlen);
	if (key == NULL || value == NULL || config_append(cfg, key, value) != 0)
		goto oom;
	return 0;
oom:
	free(key);
	config_wipe_free(value);
	snprintf(errbuf, errlen, "out of memory");
	return -1;
}

int
config_load(struct config *cfg, char *errbuf, size_t errlen)
{
	FILE *f = NULL;
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	int ret = -1;

	memset(cfg, 0, sizeof(*cfg));
	if (config_resolve_path(cfg, errbuf, errlen) != 0)
		goto fail;
	f = fopen(cfg->path, "re");
	if (f == NULL) {
		if (errno == ENOENT)
			return 0;
		snprintf(errbuf, errlen, "could not open %s: %s", cfg->path, strerror(errno));
		goto fail;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if ((size_t)n != strlen(line)) {
			snprintf(errbuf, errlen, "%s:%zu: NUL byte in the line", cfg->path, lineno);
			goto fail;
		}
		if (config_parse_line(cfg, line, lineno, errbuf, errlen) != 0)
			goto fail;
	}
	if (ferror(f)) {
		snprintf(errbuf, errlen, "could not read %s: %s", cfg->path, strerror(errno));
		goto fail;
	}
	ret = 0;
fail:
	if (line != NULL) {
		explicit_bzero(line, cap);
		free(line);
	}
	if (f != NULL)
		fclose(f);
	return ret;
}

const char *
config_get(const struct config *cfg, const char *key)
{
	const char *found = NULL;

	for (size_t i = 0; i < cfg->nlines; i++) {
		if (cfg->lines[i].key != NULL && strcmp(cfg->lines[i].key, key) == 0)
			found = cfg->lines[i].value;
	}
	return found;
}

int
config_set(struct config *cfg, const char *key, const char *value)
{
	char *v = config_strndup(value, strlen(value));
	char *k;

	if (v == NULL)
		return -1;
	for (size_t i = cfg->nlines; i-- > 0;) {
		if (cfg->lines[i].key != NULL && strcmp(cfg->lines[i].key, key) == 0) {
			config_wipe_free(cfg->lines[i].value);
			cfg->lines[i].value = v;
			return 0;
		}
	}
	k = config_strndup(key, strlen(key));
	if (k == NULL || config_append(cfg, k, v) != 0) {
		free(k);
		config_wipe_free(v);
		return -1;
	}
	return 0;
}

/* mkdir -p of the directories above path, mode 0700 for the ones created. */
static int
config_make_dirs(const char *path, char *errbuf, size_t errlen)
{
	char dir[sizeof(((struct config *)0)->path)];
	size_t n = strlen(path);

	if (n >= sizeof(dir))
		return -1;
	memcpy(dir, path, n + 1);
	for (char *p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			snprintf(errbuf, errlen, "could not create %s: %s", dir, strerror(errno));
			return -1;
		}
		*p = '/';
	}
	return 0;
}

static bool
config_write_all(int fd, const char *s)
{
	size_t len = strlen(s);

	while (len > 0) {
		ssize_t n = write(fd, s, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		s += n;
		len -= (size_t)n;
	}
	return true;
}

int
config_save(const struct config *cfg, char *errbuf, size_t errlen)
{
	char tmp[sizeof(cfg->path) + 32];
	bool ok = true;
	int fd = -1, n;

	if (config_make_dirs(cfg->path, errbuf, errlen) != 0)
		return -1;
	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", cfg->path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		snprintf(errbuf, errlen, "the config file path is too long");
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(errbuf, errlen, "could not create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (fchmod(fd, 0600) != 0)
		ok = false;
	for (size_t i = 0; ok && i < cfg->nlines; i++) {
		const struct config_line *l = &cfg->lines[i];

		if (l->key != NULL)
			ok = config_write_all(fd, l->key) && config_write_all(fd, " = ") &&
			    config_write_all(fd, l->value) && config_write_all(fd, "\n");
		else
			ok = config_write_all(fd, l->value) && config_write_all(fd, "\n");
	}
	if (ok && fsync(fd) != 0)
		ok = false;
	if (close(fd) != 0)
		ok = false;
	if (ok && rename(tmp, cfg->path) != 0)
		ok = false;
	if (!ok) {
		snprintf(errbuf, errlen, "could not write %s: %s", cfg->path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

void
config_free(struct config *cfg)
{
	for (size_t i = 0; i < cfg->nlines; i++) {
		free(cfg->lines[i].key);
		config_wipe_free(cfg->lines[i].value);
	}
	free(cfg->lines);
	cfg->lines = NULL;
	cfg->nlines = 0;
}
