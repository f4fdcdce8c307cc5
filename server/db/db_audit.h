/*
 * db_audit.h - the audit log: one row per mutation, written inside the
 * mutation's transaction.
 */
#ifndef GP_DB_AUDIT_H
#define GP_DB_AUDIT_H

#include <stdbool.h>
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
	int64_t max_bytes; /* documents per page (before + after as text); 0: no bound */
};

int db_audit_insert(struct db *db, struct arena *a, const struct audit_entry *e,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Newest first: at most f->limit rows, and no row once the documents of
 * the rows before it reach f->max_bytes (the first row always comes).
 * *cut is true when the byte bound ended the list before f->limit rows
 * although more rows match.
 */
int db_audit_list(struct db *db, struct arena *a, const struct audit_filter *f,
    struct audit_entry **out, int *n, bool *cut, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
