/*
 * maintenance.c - periodic cleanup: a periodic worker (periodic.h) on every
 * replica (no leadership lock: the passes are idempotent).
 */
#include "maintenance.h"

#include "core/log.h"
#include "db/db.h"
#include "db/db_idempotency.h"
#include "db/db_users.h"
#include "periodic.h"

#include <stdio.h>
#include <stdlib.h>

struct maintenance {
	struct maintenance_config cfg;
	struct periodic *worker;
};

static void
maintenance_run_once(void *arg)
{
	struct maintenance *m = arg;
	struct gp_error err;
	int64_t deleted = 0, failures = 0, tokens = 0;
	char n[3][24];

	gp_error_clear(&err);
	if (db_idem_expire(db_thread(), m->cfg.idempotency_ttl_s, &deleted, &err) < 0) {
		log_warn(NULL, "could not expire idempotency keys", "error", err.message);
		return;
	}
	if (db_auth_expire(db_thread(), m->cfg.login_window_s, m->cfg.token_keep_s, &failures,
		&tokens, &err) < 0) {
		log_warn(NULL, "could not expire login counters and tokens", "error", err.message);
		return;
	}
	if (deleted + failures + tokens == 0)
		return;
	snprintf(n[0], sizeof(n[0]), "%lld", (long long)deleted);
	snprintf(n[1], sizeof(n[1]), "%lld", (long long)failures);
	snprintf(n[2], sizeof(n[2]), "%lld", (long long)tokens);
	log_info(NULL, "housekeeping", "idempotency_keys", n[0], "login_failures", n[1], "tokens",
	    n[2]);
}

int
maintenance_start(struct maintenance **out, const struct maintenance_config *cfg)
{
	struct maintenance *m = calloc(1, sizeof(*m));
	struct periodic_config pc = {
		.name = "maintenance",
		/*
		 * every replica runs its own passes (each step is idempotent),
		 * at its own interval: a leader's interval would rule the others
		 */
		.leader = false,
		.run = maintenance_run_once,
	};

	if (m == NULL)
		return -1;
	m->cfg = *cfg;
	pc.interval_ms = (cfg->interval_s > 0 ? cfg->interval_s : 60) * 1000;
	pc.jitter_ms = pc.interval_ms / 10;
	pc.arg = m;
	if (periodic_start(&m->worker, &pc) < 0) {
		free(m);
		return -1;
	}
	*out = m;
	return 0;
}

void
maintenance_stop(struct maintenance *m)
{
	if (m == NULL)
		return;
	periodic_stop(m->worker);
	free(m);
}
