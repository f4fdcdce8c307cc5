/*
 * db_billing_export.h - billing export jobs (docs/billing.md "Exports"):
 * the job rows, the worker's claim (FOR UPDATE SKIP LOCKED plus a lease),
 * keyset pages of the file's lines built in SQL (migration 0013), the
 * chunks the file is stored in, and the chunk reads of a download.
 */
#ifndef GP_DB_BILLING_EXPORT_H
#define GP_DB_BILLING_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"

struct billing_export_row {
	int64_t id;
	const char *format;     /* csv | jsonl | focus */
	const char *period;     /* NULL for a range */
	int64_t from_us, to_us; /* the range (a period's month, too) */
	const char *state;      /* queued | running | done | failed */
	int64_t rows, bytes;    /* -1 until done */
	const char *sha256;     /* NULL until done */
	const char *error;
	int attempts;
	int chunks;
	const char *created_by;
	int64_t created_us, started_us, finished_us; /* 0: not yet */
};

/* Insert a queued job (period, or from/to with period NULL). */
int db_billing_export_insert(struct db *db, struct arena *a, const char *format, const char *period,
    int64_t from_us, int64_t to_us, int64_t created_by, struct billing_export_row *out,
    struct gp_error *err) __attribute__((warn_unused_result));

int db_billing_export_get(struct db *db, struct arena *a, int64_t id,
    struct billing_export_row *out, bool *found, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Newest first, ids below cursor (0: from the newest). */
int db_billing_export_list(struct db *db, struct arena *a, int64_t cursor, int limit,
    struct billing_export_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Outside a transaction: claim the oldest job that is queued, or running
 * with its lease past (its worker died) and not row-locked by a live
 * worker: state running, attempts + 1, lease lease_s. *found false when
 * there is none.
 */
int db_billing_export_claim(struct db *db, struct arena *a, int lease_s, const char *worker,
    struct billing_export_row *out, bool *found, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * First statement of the job's transaction: make it REPEATABLE READ (one
 * snapshot for the whole file), lock the job row for the transaction
 * (other workers skip it while it runs) when it is still running under
 * this attempt, and drop chunks a dead attempt left. *ok false: another
 * worker has taken it over.
 */
int db_billing_export_lock(struct db *db, struct arena *a, int64_t id, int attempt, bool *ok,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * The next page of the file's lines, in (hour, id) order: first (the
 * first call of the job's transaction) opens the cursor over the format's
 * SQL function (migration 0017), every call fetches the next lines from it
 * (50,000 of csv or jsonl, 10,000 of focus, whose lines are about five
 * times longer: each fetch's result stays near 6 MB); last is set on the
 * final page.
 */
struct billing_export_page {
	int n;
	const char **lines; /* each ends with "\n"; a FOCUS line may hold two rows */
	size_t *lens;
	int64_t rows; /* rows of the file in this page */
	bool last;    /* the cursor is exhausted */
};

int db_billing_export_page(struct db *db, struct arena *a, const char *format, int64_t from_us,
    int64_t to_us, bool first, struct billing_export_page *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* The file's first line for format (NULL for jsonl). */
const char *db_billing_export_header(const char *format);

int db_billing_export_chunk_put(struct db *db, struct arena *a, int64_t id, int seq,
    const char *data, size_t len, struct gp_error *err) __attribute__((warn_unused_result));

/* Last statement of the job's transaction: done, with what was written. */
int db_billing_export_finish(struct db *db, struct arena *a, int64_t id, int attempt, int64_t rows,
    int64_t bytes, const char *sha256, int chunks, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Outside a transaction, after a failed attempt: back to queued, or
 * failed with message once attempt reached max_attempts.
 */
int db_billing_export_fail(struct db *db, struct arena *a, int64_t id, int attempt,
    int max_attempts, const char *message, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Chunk seq of a done export into arena memory; *found false when absent. */
int db_billing_export_chunk_get(struct db *db, struct arena *a, int64_t id, int seq,
    const char **data, size_t *len, bool *found, struct gp_error *err)
    __attribute__((warn_unused_result));

/* One group of the utilization report (docs/billing.md "Utilization"). */
struct billing_util_row {
	const char *project;
	const char *pool; /* group_by=pool only */
	int64_t pool_id;
	const char *currency; /* NULL when nothing was billed */
	/* whole-GPU-equivalent hours, exact decimals with 6 fraction digits */
	const char *allocated_gpu_hours, *measured_gpu_hours, *idle_gpu_hours;
	const char *average_activity; /* 0..1, NULL without telemetry */
	int64_t billed_micro, idle_cost_micro;
};

/*
 * Utilization over [from_us, to_us) by "project" or "pool"; project_id
 * > 0 keeps one project, member_user_id > 0 the projects that user is a
 * member of.
 */
int db_billing_utilization(struct db *db, struct arena *a, int64_t from_us, int64_t to_us,
    const char *group_by, int64_t project_id, int64_t member_user_id, struct billing_util_row **out,
    int *n, struct gp_error *err) __attribute__((warn_unused_result));

#endif
