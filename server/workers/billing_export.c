/*
 * billing_export.c - the billing export worker (see billing_export.h).
 */
#include "billing_export.h"

#include "core/arena.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "crypto/digest.h"
#include "db/db.h"
#include "db/db_billing_export.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* one worker per process: its handle, for billing_export_kick */
static struct periodic *_Atomic export_self;

struct job {
	struct billing_export_row e;
	char *buf; /* the chunk being filled */
	size_t len;
	int seq;
	int64_t rows, bytes;
	int test_row_delay_ms; /* the worker's configuration */
	struct digest_sha256 *sha;
	char hex[65];
};

static int
flush(struct db *db, struct job *j, struct gp_error *err)
{
	struct arena *a;
	int rc;

	if (j->len == 0)
		return 0;
	a = arena_create();
	rc = db_billing_export_chunk_put(db, a, j->e.id, j->seq, j->buf, j->len, err);
	arena_destroy(a);
	if (rc < 0)
		return -1;
	j->seq++;
	j->len = 0;
	return 0;
}

static int
append(struct db *db, struct job *j, const char *s, size_t n, struct gp_error *err)
{
	digest_sha256_update(j->sha, s, n);
	j->bytes += (int64_t)n;
	while (n > 0) {
		size_t room = BILLING_EXPORT_CHUNK_BYTES - j->len;
		size_t take = n < room ? n : room;

		memcpy(j->buf + j->len, s, take);
		j->len += take;
		s += take;
		n -= take;
		if (j->len == BILLING_EXPORT_CHUNK_BYTES && flush(db, j, err) < 0)
			return -1;
	}
	return 0;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The job's transaction: lock, write every chunk, finish. */
static int
job_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct job *j = arg;
	const char *header = db_billing_export_header(j->e.format);
	bool first = true;
	struct arena *a = arena_create();
	bool ok;

	j->len = 0;
	j->seq = 0;
	j->rows = j->bytes = 0;
	digest_sha256_free(j->sha);
	j->sha = digest_sha256_new();
	if (j->sha == NULL) {
		arena_destroy(a);
		return gp_error_set(err, 500, "internal", "out of memory");
	}
	if (db_billing_export_lock(db, a, j->e.id, j->e.attempts, &ok, err) < 0)
		goto fail;
	if (!ok) {
		gp_error_set(err, 409, "conflict", "export %lld was taken over",
		    (long long)j->e.id);
		goto fail;
	}
	if (header != NULL && append(db, j, header, strlen(header), err) < 0)
		goto fail;
	for (;;) {
		struct arena *pa = arena_create();
		struct billing_export_page pg;

		if (db_billing_export_page(db, pa, j->e.format, j->e.from_us, j->e.to_us, first,
			&pg, err) < 0) {
			arena_destroy(pa);
			goto fail;
		}
		for (int i = 0; i < pg.n; i++)
			if (append(db, j, pg.lines[i], pg.lens[i], err) < 0) {
				arena_destroy(pa);
				goto fail;
			}
		j->rows += pg.rows;
		first = false;
		arena_destroy(pa);
		/* tests: a chunk written, then asleep with the transaction open */
		if (j->test_row_delay_ms > 0) {
			if (flush(db, j, err) < 0)
				goto fail;
			sleep_ms(j->test_row_delay_ms);
		}
		if (pg.last)
			break;
	}
	if (flush(db, j, err) < 0)
		goto fail;
	digest_sha256_final(j->sha, j->hex);
	j->sha = NULL;
	if (db_billing_export_finish(db, a, j->e.id, j->e.attempts, j->rows, j->bytes, j->hex,
		j->seq, err) < 0)
		goto fail;
	arena_destroy(a);
	return 0;
fail:
	arena_destroy(a);
	return -1;
}

static void
run_job(struct db *db, const struct billing_export_config *cfg, struct billing_export_row *e)
{
	struct job j;
	struct gp_error err;
	char id[24], rows[24], bytes[24];

	memset(&j, 0, sizeof(j));
	j.e = *e;
	j.test_row_delay_ms = cfg->test_row_delay_ms;
	j.buf = malloc(BILLING_EXPORT_CHUNK_BYTES);
	gp_error_clear(&err);
	snprintf(id, sizeof(id), "%lld", (long long)e->id);
	if (j.buf == NULL) {
		gp_error_set(&err, 500, "internal", "out of memory");
	} else if (e->attempts > BILLING_EXPORT_MAX_ATTEMPTS) {
		gp_error_set(&err, 500, "internal", "gave up after %d attempts", e->attempts - 1);
	} else if (db_tx(db, job_tx, &j, &err) == 0) {
		snprintf(rows, sizeof(rows), "%lld", (long long)j.rows);
		snprintf(bytes, sizeof(bytes), "%lld", (long long)j.bytes);
		log_info(NULL, "billing export done", "export", id, "rows", rows, "bytes", bytes,
		    "sha256", j.hex);
		goto out;
	}
	log_warn(NULL, "billing export failed", "export", id, "error", err.message);
	{
		struct arena *a = arena_create();
		struct gp_error e2;

		gp_error_clear(&e2);
		if (db_billing_export_fail(db, a, e->id, e->attempts,
			e->attempts > BILLING_EXPORT_MAX_ATTEMPTS ? e->attempts
								  : BILLING_EXPORT_MAX_ATTEMPTS,
			err.message, &e2) < 0)
			log_warn(NULL, "billing export: could not record the failure", "export", id,
			    "error", e2.message);
		arena_destroy(a);
	}
out:
	digest_sha256_free(j.sha);
	free(j.buf);
}

static void
export_run_once(void *arg)
{
	const struct billing_export_config *cfg = arg;
	char worker[64];

	snprintf(worker, sizeof(worker), "pid-%ld", (long)getpid());
	/* every job queued now, one after the other */
	for (int n = 0; n < 100; n++) {
		struct arena *a = arena_create();
		struct billing_export_row e;
		struct gp_error err;
		bool found = false;

		gp_error_clear(&err);
		if (db_billing_export_claim(db_thread(), a, cfg->lease_s, worker, &e, &found,
			&err) < 0)
			log_warn(NULL, "billing export claim failed", "error", err.message);
		if (found)
			run_job(db_thread(), cfg, &e);
		arena_destroy(a);
		if (!found)
			break;
	}
}

int
billing_export_start(struct periodic **out, const struct billing_export_config *cfg)
{
	struct billing_export_config own = *cfg; /* copied by periodic_start */
	struct periodic_config pc = {
		.name = "billing_export",
		.leader = false,
		.run = export_run_once,
		.arg = &own,
		.arg_size = sizeof(own),
	};

	if (own.lease_s <= 0)
		own.lease_s = 60;
	pc.interval_ms = cfg->interval_ms > 0 ? cfg->interval_ms : 2000;
	pc.jitter_ms = pc.interval_ms / 10;
	if (periodic_start(out, &pc) < 0)
		return -1;
	export_self = *out;
	return 0;
}

void
billing_export_kick(void)
{
	struct periodic *p = export_self;

	if (p != NULL)
		periodic_kick(p);
}
