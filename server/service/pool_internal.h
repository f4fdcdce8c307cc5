/*
 * pool_internal.h - between the files of the pool-request workflow
 * (pool_service.c, pool_approve.c); nothing outside service/ includes it.
 */
#ifndef GP_SERVICE_POOL_INTERNAL_H
#define GP_SERVICE_POOL_INTERNAL_H

#include "core/strbuf.h"

/* The submissions' counters in the Prometheus text format (pool_approvals_metrics). */
void pool_submit_metrics(struct strbuf *b);

#endif
