/*
 * billing_export.h - the billing export worker (docs/billing.md
 * "Exports"): a periodic worker on every replica that claims queued
 * export jobs (FOR UPDATE SKIP LOCKED plus a lease) and writes each file
 * into billing_export_chunks in one transaction holding the job's row
 * lock, hashing it as it goes (SHA-256). A replica that dies mid-way
 * leaves nothing (its transaction rolls back); once the lease is past,
 * the next pass of any replica runs the job again from the start.
 */
#ifndef GP_WORKERS_BILLING_EXPORT_H
#define GP_WORKERS_BILLING_EXPORT_H

#include "periodic.h"

/* Bytes of one stored chunk (a download holds one at a time). */
#define BILLING_EXPORT_CHUNK_BYTES (256 * 1024)
/* Attempts before a job is failed for good. */
#define BILLING_EXPORT_MAX_ATTEMPTS 5

struct billing_export_config {
	int interval_ms;       /* between polls for queued jobs */
	int lease_s;           /* a running job whose worker died is taken over after this */
	int test_row_delay_ms; /* tests: sleep this long after each page (kill mid-export) */
};

int billing_export_start(struct periodic **out, const struct billing_export_config *cfg)
    __attribute__((warn_unused_result));

/* Run a pass now (a job was just queued); no-op before start. */
void billing_export_kick(void);

#endif
