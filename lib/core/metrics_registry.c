/*
 * metrics_registry.c - the collector table (see metrics_registry.h).
 */
#include "metrics_registry.h"

#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

struct collector {
	const char *name;
	metrics_collect_fn fn;
	void *arg;
};

static struct collector collectors[METRICS_MAX_COLLECTORS];
static int ncollectors;

int
metrics_register(const char *name, metrics_collect_fn fn, void *arg)
{
	if (ncollectors == METRICS_MAX_COLLECTORS) {
		log_error(NULL, "too many metrics collectors", "collector", name);
		return -1;
	}
	collectors[ncollectors].name = name;
	collectors[ncollectors].fn = fn;
	collectors[ncollectors].arg = arg;
	ncollectors++;
	return 0;
}

void
metrics_collect(struct strbuf *b, struct arena *a)
{
	for (int i = 0; i < ncollectors; i++)
		collectors[i].fn(b, a, collectors[i].arg);
}

void
metrics_unregister_all(void)
{
	ncollectors = 0;
}

void
metrics_family(struct strbuf *b, const char *name, const char *type, const char *help)
{
	strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void
metrics_single(struct strbuf *b, const char *name, const char *type, const char *help,
    const char *fmt, ...)
{
	char value[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	metrics_family(b, name, type, help);
	strbuf_printf(b, "%s %s\n", name, value);
}
