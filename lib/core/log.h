/*
 * log.h - one JSON object per line on stderr.
 *
 * Each line carries ts, level, msg, the request id when there is one,
 * and extra string fields. Secrets must never be passed here.
 */
#ifndef GP_CORE_LOG_H
#define GP_CORE_LOG_H

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
};

/* Lines below this level are dropped (default INFO). */
void log_set_level(enum log_level level);

/* Parse "debug|info|warn|error"; returns -1 on an unknown name. */
int log_parse_level(const char *name, enum log_level *out);

/*
 * Write one line. request_id may be NULL. The varargs are pairs of
 * (const char *key, const char *value) ended by a NULL key; a NULL value
 * is written as JSON null.
 */
void log_event(enum log_level level, const char *request_id, const char *msg, ...);

#define log_info(rid, msg, ...) log_event(LOG_LEVEL_INFO, rid, msg, ##__VA_ARGS__, (const char *)0)
#define log_warn(rid, msg, ...) log_event(LOG_LEVEL_WARN, rid, msg, ##__VA_ARGS__, (const char *)0)
#define log_error(rid, msg, ...) \
	log_event(LOG_LEVEL_ERROR, rid, msg, ##__VA_ARGS__, (const char *)0)
#define log_debug(rid, msg, ...) \
	log_event(LOG_LEVEL_DEBUG, rid, msg, ##__VA_ARGS__, (const char *)0)

/* Log at ERROR and exit(1); only for start-up failures. */
void fatal(const char *msg, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
