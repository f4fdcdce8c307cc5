/*
 * db_audit.h - the audit log: one row per mutation, written inside the
 * mutation's transaction.
 */
#ifndef GP_DB_AUDIT_H
#define GP_DB_AUDIT_H

#include <stdint.h>

#include "db.h"

struct audit_entry {
	int64_t id;
	int64_t at_us;
	int64_t actor_id; /* 0: none */
	const char *actor;
	const char *action;      /* "project.create" */
	const char *object_type; /* "project" */
	const char *object_id;
	int64_t project_id;  /* 0: none */
	const char *project; /* name, on reads */
	const char *request_id;
	const char *before_json; /* NULL or a JSON document */
	const char *after_json;
};

struct audit_filter {
	const char *actor;
	const char *action;
	const char *object_type;
	const char *object_id;
	int64_t project_id; /* 0: any */
	int64_t since_us;   /* 0: unbounded */
	int64_t until_us;
	int64_t before_id; /* cursor: rows with id < before_id; 0: newest */
	int limit;
};

int db_audit_insert(struct db *db, struct arena *a, const struct audit_entry *e,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Newest first. */
int db_audit_list(struct db *db, struct arena *a, const struct audit_filter *f,
    struct audit_entry **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

#endif
