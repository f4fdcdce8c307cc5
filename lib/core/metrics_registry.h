/*
 * metrics_registry.h - the /metrics collectors: each subsystem registers
 * a callback that writes its families in the Prometheus text format, and
 * /metrics renders them in registration order. Nothing here knows what
 * is collected.
 *
 * Registration happens at start-up, before any thread collects, and
 * metrics_unregister_all at shutdown, after the last: collecting takes
 * no lock (collectors keep their own counters thread-safe).
 */
#ifndef GP_CORE_METRICS_REGISTRY_H
#define GP_CORE_METRICS_REGISTRY_H

#include "core/arena.h"
#include "core/strbuf.h"

#define METRICS_MAX_COLLECTORS 32

/*
 * Append families to b (scratch memory from a, the scrape's arena). A
 * collector whose source is away (the database) writes nothing and
 * returns; the other collectors still run.
 */
typedef void (*metrics_collect_fn)(struct strbuf *b, struct arena *a, void *arg);

/* Register a collector (name for logs; arg passed back). -1 when the table is full. */
int metrics_register(const char *name, metrics_collect_fn fn, void *arg)
    __attribute__((warn_unused_result));

/* Run every collector, in registration order, into b. */
void metrics_collect(struct strbuf *b, struct arena *a);

/* Forget every collector (shutdown, tests). */
void metrics_unregister_all(void);

/* A family's head: "# HELP name help" and "# TYPE name type" (counter, gauge). */
void metrics_family(struct strbuf *b, const char *name, const char *type, const char *help);

/* A family of one unlabelled sample: its head, then "name value" (value as fmt prints it). */
void metrics_single(struct strbuf *b, const char *name, const char *type, const char *help,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * gpupool_build_info{version,commit} and the process_* families that
 * Prometheus client libraries export (CPU, memory, file descriptors,
 * start time), from /proc; a collector (arg unused).
 */
void metrics_process_collect(struct strbuf *b, struct arena *a, void *arg);

#endif
