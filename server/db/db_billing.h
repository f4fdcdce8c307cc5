/*
 * db_billing.h - billing's reads (docs/billing.md): the rate timeline
 * with derived MIG rates, the usage rows and groups, periods, the
 * accrual's watermark. Its writes (the accrual, one set-based SQL
 * function, billing_accrue, migration 0012; rate versions, period close,
 * adjustments) are declared in db_billing_write.h, which only service/
 * includes.
 */
#ifndef GP_DB_BILLING_H
#define GP_DB_BILLING_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"

/* What one accrual did. */
struct billing_accrual_result {
	int64_t from_us;      /* first hour recomputed (0: nothing to accrue) */
	int64_t until_us;     /* accrued up to (whole second) */
	int64_t upserted;     /* rows inserted or changed */
	int64_t deleted;      /* rows of these hours that no longer arise */
	int64_t watermark_us; /* hours before this are final */
	bool more;            /* more backlog to go: call again */
};

/* Hours of ledger activity one accrual statement covers at most. */
#define BILLING_ACCRUE_MAX_HOURS 24
/* The statement timeout of an accrual transaction (ms). */
#define BILLING_ACCRUE_TIMEOUT_MS 600000

/* A rate as the API shows it: a stored version or a derived one. */
struct billing_rate_row {
	int64_t id; /* the stored version (for a derived rate: the 'full' one) */
	const char *model;
	const char *profile;
	const char *currency;
	int64_t price_per_hour_micro;
	bool derived;
	int64_t effective_from_us;
	int64_t effective_to_us; /* 0: open-ended */
	int64_t created_us;      /* stored versions only */
	const char *created_by;  /* NULL when unknown or derived */
};

/*
 * Whether (model, profile) may be priced: *model_ok when the model is in
 * the catalog, *profile_ok when profile is "full" or one of its MIG
 * profiles.
 */
int db_billing_spec_known(struct db *db, struct arena *a, const char *model, const char *profile,
    bool *model_ok, bool *profile_ok, struct gp_error *err) __attribute__((warn_unused_result));

/* The accrual watermark (0 when nothing was accrued yet). */
int db_billing_watermark(struct db *db, struct arena *a, int64_t *watermark_us,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * The rate timeline, stored and derived, ordered by model, profile,
 * effective_from. model/profile filter when not NULL; member_user_id > 0
 * keeps the (model, profile) pairs that user's projects hold or held
 * (the usage ledger); at_us > 0 keeps the versions in effect at that time.
 */
int db_billing_rates_list(struct db *db, struct arena *a, const char *model, const char *profile,
    int64_t member_user_id, int64_t at_us, struct billing_rate_row **out, int *n,
    struct gp_error *err) __attribute__((warn_unused_result));

/* One billing_usage row. */
struct billing_usage_row {
	int64_t id;
	const char *kind; /* usage | credit | adjustment */
	int64_t project_id;
	const char *project;
	const char *pool; /* NULL when none */
	const char *model;
	const char *profile;
	int64_t hour_us;
	const char *period;
	int64_t rate_id; /* 0 when none */
	int64_t price_per_hour_micro;
	const char *currency;
	int64_t seconds;
	int64_t count;
	int64_t amount_micro;
	int64_t adjusts; /* 0 when none */
	const char *note;
};

struct billing_usage_filter {
	int64_t project_id;     /* 0: any */
	int64_t member_user_id; /* > 0: only that user's projects */
	int64_t from_us;        /* hour >= from (0: no bound) */
	int64_t to_us;          /* hour < to (0: no bound) */
};

/* Rows with id > after_id, in id order. */
int db_billing_usage_list(struct db *db, struct arena *a, const struct billing_usage_filter *f,
    int64_t after_id, int limit, struct billing_usage_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* A group of rows (group_by) or a total. Unused key members are NULL / 0. */
struct billing_usage_group {
	const char *project;
	const char *pool;
	const char *model;
	const char *profile;
	int64_t day_us; /* group_by day */
	const char *period;
	const char *kind;
	const char *currency;
	int64_t instance_seconds; /* sum of seconds × count */
	int64_t amount_micro;
	int64_t rows;
};

/* group_by: project | pool | spec | day | month | total (per kind and currency). */
int db_billing_usage_groups(struct db *db, struct arena *a, const struct billing_usage_filter *f,
    const char *group_by, struct billing_usage_group **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Get one row by id (*found false when none). */
int db_billing_usage_get(struct db *db, struct arena *a, int64_t id, struct billing_usage_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

struct billing_period_row {
	const char *period;
	const char *state; /* open | closed */
	int64_t closed_us;
	const char *closed_by;
	int64_t rows;
};

int db_billing_periods_list(struct db *db, struct arena *a, struct billing_period_row **out, int *n,
    struct gp_error *err) __attribute__((warn_unused_result));

/* The period ("YYYY-MM") of the current hour. */
int db_billing_current_period(struct db *db, struct arena *a, const char **period,
    struct gp_error *err) __attribute__((warn_unused_result));

#endif
