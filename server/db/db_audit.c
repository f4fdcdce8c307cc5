/*
 * db_audit.c - audit rows. Large documents are made compact by the
 * audit_log_compact trigger (migrations/0006) whoever writes the row;
 * reads are bounded by rows and by bytes.
 */
#include "db_audit.h"
#include "db_internal.h"
#include "db_sql.h"

DB_STMT(stmt_audit_insert,
    "INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, "
    "project_id, request_id, before, after) VALUES "
    "(nullif($1::int8, 0), $2, $3, $4, $5, nullif($6::int8, 0), $7, $8::jsonb, $9::jsonb)");
/*
 * Newest first, at most $9 rows and about $10 bytes of documents. The
 * recursive query walks the matching rows one at a time (an index
 * scan from the previous id), measuring each row's documents as text,
 * and goes on only while the rows before the current one total less
 * than $10: the first row always comes (however large), a page ends at
 * most one row past the budget, and only the rows it returns, plus one
 * probe row, are ever turned into text. "visited" counts the probe:
 * more than the rows returned means the budget ended the page. (A
 * window sum over LIMIT $9 rows measured all of them: 0.6 s for 20
 * rows of 1 MB.) The OFFSET 0 keeps each measure a single evaluation.
 */
#define AUDIT_FILTER                                                                               \
	"($1::text IS NULL OR l.actor = $1) AND ($2::text IS NULL OR l.action = $2) "              \
	"AND ($3::text IS NULL OR l.object_type = $3) AND ($4::text IS NULL OR l.object_id = $4) " \
	"AND ($5::int8 = 0 OR l.project_id = $5) "                                                 \
	"AND ($6::int8 = 0 OR l.at >= to_timestamp($6::int8 / 1000000.0)) "                        \
	"AND ($7::int8 = 0 OR l.at < to_timestamp($7::int8 / 1000000.0)) "
#define AUDIT_DOC_LEN                                                             \
	"CROSS JOIN LATERAL (SELECT coalesce(octet_length(c.before::text), 0) + " \
	"coalesce(octet_length(c.after::text), 0) AS len OFFSET 0) s "
DB_STMT(stmt_audit_list,
    "WITH RECURSIVE w (id, n, run, own) AS ("
    " (SELECT c.id, 1::int8, s.len, s.len FROM ("
    "   SELECT l.id, l.before, l.after FROM audit_log l WHERE " AUDIT_FILTER
    "   AND ($8::int8 = 0 OR l.id < $8) ORDER BY l.id DESC LIMIT 1) c " AUDIT_DOC_LEN ")"
    " UNION ALL"
    " (SELECT c.id, w.n + 1, w.run + s.len, s.len FROM w CROSS JOIN LATERAL ("
    "   SELECT l.id, l.before, l.after FROM audit_log l WHERE " AUDIT_FILTER
    "   AND l.id < w.id ORDER BY l.id DESC LIMIT 1) c " AUDIT_DOC_LEN
    "  WHERE w.n < $9 AND w.run - w.own < $10)) "
    "SELECT l.id, " EPOCH_US(
	"l.at") ", coalesce(l.actor_id, 0), l.actor, l.action, "
		"l.object_type, l.object_id, coalesce(l.project_id, 0), p.name, l.request_id, "
		"l.before::text, l.after::text, (SELECT count(*) FROM w) AS visited "
		"FROM w JOIN audit_log l ON l.id = w.id LEFT JOIN projects p ON p.id = l.project_id "
		"WHERE w.run - w.own < $10 ORDER BY l.id DESC");

int
db_audit_insert(struct db *db, struct arena *a, const struct audit_entry *e, struct gp_error *err)
{
	const char *p[9];

	p[0] = db_param_int(a, e->actor_id);
	p[1] = e->actor;
	p[2] = e->action;
	p[3] = e->object_type;
	p[4] = e->object_id;
	p[5] = db_param_int(a, e->project_id);
	p[6] = e->request_id;
	p[7] = e->before_json;
	p[8] = e->after_json;
	return db_exec(db, a, &stmt_audit_insert, 9, p, err) ? 0 : -1;
}

int
db_audit_list(struct db *db, struct arena *a, const struct audit_filter *f,
    struct audit_entry **out, int *n, bool *cut, struct gp_error *err)
{
	const char *p[10];
	PGresult *r;

	p[0] = f->actor;
	p[1] = f->action;
	p[2] = f->object_type;
	p[3] = f->object_id;
	p[4] = db_param_int(a, f->project_id);
	p[5] = db_param_int(a, f->since_us);
	p[6] = db_param_int(a, f->until_us);
	p[7] = db_param_int(a, f->before_id);
	p[8] = db_param_int(a, f->limit);
	p[9] = db_param_int(a, f->max_bytes > 0 ? f->max_bytes : INT64_MAX);
	r = db_exec(db, a, &stmt_audit_list, 10, p, err);
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*cut = *n > 0 && db_int64(r, 0, 12) > *n;
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct audit_entry *e = &(*out)[i];

		e->id = db_int64(r, i, 0);
		e->at_us = db_int64(r, i, 1);
		e->actor_id = db_int64(r, i, 2);
		e->actor = db_text(a, r, i, 3);
		e->action = db_text(a, r, i, 4);
		e->object_type = db_text(a, r, i, 5);
		e->object_id = db_text(a, r, i, 6);
		e->project_id = db_int64(r, i, 7);
		e->project = db_text(a, r, i, 8);
		e->request_id = db_text(a, r, i, 9);
		e->before_json = db_text(a, r, i, 10);
		e->after_json = db_text(a, r, i, 11);
	}
	return 0;
}
