/*
 * test_workers.c - the worker primitives against a real PostgreSQL and
 * a real gpupoold: the deferred-request registry (wake by key, deadlines,
 * shutdown), the notifier (NOTIFY from another connection wakes by key,
 * reconnect after pg_terminate_backend of its connection, and a
 * gpupoold's own notifier doing the same), the periodic worker
 * (leadership between two instances, hand-over, jitter bounds, prompt
 * stop) and the metrics registry's order.
 */
#include "fixture.h"

#include "core/metrics_registry.h"
#include "core/timeutil.h"
#include "db/db.h"
#include "db/db_lock.h"
#include "workers/deferred.h"
#include "workers/notifier.h"
#include "workers/periodic.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One waiting request as the registry sees it. */
struct waiter {
	atomic_int fired; /* times fire ran */
	atomic_int outcome;
	atomic_llong fired_us;
};

static void
waiter_fire(void *arg, enum deferred_outcome outcome)
{
	struct waiter *w = arg;

	atomic_store(&w->outcome, (int)outcome);
	atomic_store(&w->fired_us, (long long)time_mono_us());
	atomic_fetch_add(&w->fired, 1);
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Wait up to ms for *v to reach want; returns the last value seen. */
static int
wait_int(atomic_int *v, int want, int ms)
{
	for (int i = 0; i < ms / 10 && atomic_load(v) < want; i++)
		sleep_ms(10);
	return atomic_load(v);
}

static int64_t
far(void)
{
	return time_mono_us() + 60 * 1000000LL;
}

/* ---- the registry alone ---- */

static void
test_registry_wake_by_key(void **state)
{
	struct deferred_registry *r;
	struct waiter a1 = { 0 }, a2 = { 0 }, b = { 0 };

	(void)state;
	assert_int_equal(deferred_start(&r), 0);
	assert_int_equal(deferred_add(r, "node:1", far(), waiter_fire, &a1), 0);
	assert_int_equal(deferred_add(r, "node:1", far(), waiter_fire, &a2), 0);
	assert_int_equal(deferred_add(r, "node:2", far(), waiter_fire, &b), 0);
	assert_int_equal(deferred_count(r), 3);
	assert_int_equal(deferred_wake(r, "node:3"), 0);
	assert_int_equal(deferred_wake(r, "node:1"), 2);
	/* fired on the waker's thread, before deferred_wake returned */
	assert_int_equal(atomic_load(&a1.fired), 1);
	assert_int_equal(atomic_load(&a2.fired), 1);
	assert_int_equal(atomic_load(&a1.outcome), DEFERRED_WOKEN);
	assert_int_equal(atomic_load(&b.fired), 0);
	/* fired once: a second wake finds nothing */
	assert_int_equal(deferred_wake(r, "node:1"), 0);
	assert_int_equal(atomic_load(&a1.fired), 1);
	assert_int_equal(deferred_count(r), 1);
	deferred_free(r);
	/* the stop answered what was left */
	assert_int_equal(atomic_load(&b.fired), 1);
	assert_int_equal(atomic_load(&b.outcome), DEFERRED_SHUTDOWN);
}

/* deferred_mark / deferred_add_since: a wake between the mark and the add is not lost. */
static void
test_registry_mark(void **state)
{
	struct deferred_registry *r;
	struct waiter a = { 0 }, b = { 0 }, c = { 0 }, old = { 0 };
	uint64_t m;

	(void)state;
	assert_int_equal(deferred_start(&r), 0);
	/* nothing woken since the mark: registered, fired by the next wake */
	m = deferred_mark(r, "node:1");
	assert_int_equal(deferred_add_since(r, "node:1", m, false, far(), waiter_fire, &a), 0);
	assert_int_equal(deferred_wake(r, "node:1"), 1);
	assert_int_equal(atomic_load(&a.fired), 1);
	/* woken in between (nobody waited then): not registered, fire not called */
	m = deferred_mark(r, "node:1");
	assert_int_equal(deferred_wake(r, "node:1"), 0);
	assert_int_equal(deferred_add_since(r, "node:1", m, false, far(), waiter_fire, &b), 1);
	assert_int_equal(atomic_load(&b.fired), 0);
	assert_int_equal(deferred_count(r), 0);
	/* another key's wake leaves the mark as it was */
	m = deferred_mark(r, "node:1");
	assert_int_equal(deferred_wake(r, "node:2"), 0);
	assert_int_equal(deferred_add_since(r, "node:1", m, true, far(), waiter_fire, &b), 0);
	assert_int_equal(deferred_count(r), 1);
	/* a wake of everything (the notifier reconnected) counts for every key; the
	 * exclusive add still answers the entry it would have replaced */
	m = deferred_mark(r, "node:1");
	assert_int_equal(deferred_wake_all(r), 1);
	assert_int_equal(atomic_load(&b.fired), 1);
	assert_int_equal(deferred_add(r, "node:1", far(), waiter_fire, &old), 0);
	assert_int_equal(deferred_add_since(r, "node:1", m, true, far(), waiter_fire, &c), 1);
	assert_int_equal(atomic_load(&old.fired), 1);
	assert_int_equal(atomic_load(&old.outcome), DEFERRED_WOKEN);
	assert_int_equal(atomic_load(&c.fired), 0);
	assert_int_equal(deferred_count(r), 0);
	deferred_free(r);
}

static void
test_registry_deadlines(void **state)
{
	struct deferred_registry *r;
	struct waiter early = { 0 }, late = { 0 }, never = { 0 };
	int64_t t0 = time_mono_us();

	(void)state;
	assert_int_equal(deferred_start(&r), 0);
	/* the later deadline first: the earlier one must wake the timer */
	assert_int_equal(deferred_add(r, "k", t0 + 600000, waiter_fire, &late), 0);
	assert_int_equal(deferred_add(r, "k", t0 + 200000, waiter_fire, &early), 0);
	assert_int_equal(deferred_add(r, "other", far(), waiter_fire, &never), 0);
	assert_int_equal(wait_int(&early.fired, 1, 3000), 1);
	assert_int_equal(atomic_load(&early.outcome), DEFERRED_TIMEOUT);
	assert_true(atomic_load(&early.fired_us) >= t0 + 200000);
	assert_int_equal(wait_int(&late.fired, 1, 3000), 1);
	assert_int_equal(atomic_load(&late.outcome), DEFERRED_TIMEOUT);
	assert_true(atomic_load(&late.fired_us) >= t0 + 600000);
	/* in deadline order, each soon after its deadline (loose: a busy machine) */
	assert_true(atomic_load(&early.fired_us) < atomic_load(&late.fired_us));
	assert_true(atomic_load(&late.fired_us) < t0 + 2600000);
	assert_int_equal(atomic_load(&never.fired), 0);
	assert_int_equal(deferred_count(r), 1);
	deferred_free(r);
	assert_int_equal(atomic_load(&never.outcome), DEFERRED_SHUTDOWN);
}

/* Many entries: every one fires once, timeouts never early and in deadline order. */
struct ordered {
	int64_t deadline_us;
	atomic_int fired;
	atomic_int outcome;
	atomic_llong seq;
};

static atomic_llong fire_seq;

static void
ordered_fire(void *arg, enum deferred_outcome outcome)
{
	struct ordered *o = arg;

	atomic_store(&o->outcome, (int)outcome);
	atomic_store(&o->seq, atomic_fetch_add(&fire_seq, 1));
	if (outcome == DEFERRED_TIMEOUT && time_mono_us() < o->deadline_us)
		atomic_store(&o->outcome, -1); /* early: the test fails on it */
	atomic_fetch_add(&o->fired, 1);
}

static void
test_registry_heap(void **state)
{
	enum {
		N = 4000
	};
	struct deferred_registry *r;
	struct ordered *o = calloc(N, sizeof(*o));
	int64_t t0 = time_mono_us();
	unsigned seed = 12345;
	int woken = 0;

	(void)state;
	assert_non_null(o);
	assert_int_equal(deferred_start(&r), 0);
	for (int i = 0; i < N; i++) {
		char key[32];

		seed = seed * 1103515245u + 12345u;
		o[i].deadline_us = t0 + 100000 + (int64_t)((seed >> 8) % 400000);
		snprintf(key, sizeof(key), "k:%d", i % 997);
		assert_int_equal(deferred_add(r, key, o[i].deadline_us, ordered_fire, &o[i]), 0);
	}
	assert_int_equal(deferred_count(r), N);
	/* wake some keys early: their entries leave the heap from anywhere in it */
	for (int k = 0; k < 997; k += 7) {
		char key[32];

		snprintf(key, sizeof(key), "k:%d", k);
		woken += deferred_wake(r, key);
	}
	for (int i = 0; i < 600 && deferred_count(r) > 0; i++)
		sleep_ms(10);
	assert_int_equal(deferred_count(r), 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(atomic_load(&o[i].fired), 1);
		assert_int_not_equal(atomic_load(&o[i].outcome), -1);
		if (atomic_load(&o[i].outcome) == DEFERRED_WOKEN)
			woken--;
	}
	assert_int_equal(woken, 0);
	/* timeouts fired in deadline order */
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N && j < i + 50; j++) {
			if (atomic_load(&o[i].outcome) != DEFERRED_TIMEOUT ||
			    atomic_load(&o[j].outcome) != DEFERRED_TIMEOUT ||
			    o[i].deadline_us == o[j].deadline_us)
				continue;
			if ((o[i].deadline_us < o[j].deadline_us) !=
			    (atomic_load(&o[i].seq) < atomic_load(&o[j].seq)))
				fail_msg("entries %d and %d fired out of deadline order", i, j);
		}
	deferred_free(r);
	free(o);
}

/* deferred_add_exclusive: one entry per key, the older one answered at once. */
static void
test_registry_exclusive(void **state)
{
	struct deferred_registry *r;
	struct waiter a = { 0 }, b = { 0 }, other = { 0 };

	(void)state;
	assert_int_equal(deferred_start(&r), 0);
	assert_int_equal(deferred_add(r, "node:1", far(), waiter_fire, &a), 0);
	assert_int_equal(deferred_add(r, "node:2", far(), waiter_fire, &other), 0);
	assert_int_equal(deferred_add_exclusive(r, "node:1", far(), waiter_fire, &b), 0);
	assert_int_equal(atomic_load(&a.fired), 1);
	assert_int_equal(atomic_load(&a.outcome), DEFERRED_WOKEN);
	assert_int_equal(atomic_load(&b.fired), 0);
	assert_int_equal(atomic_load(&other.fired), 0);
	assert_int_equal(deferred_count(r), 2);
	assert_int_equal(deferred_wake(r, "node:1"), 1);
	assert_int_equal(atomic_load(&b.fired), 1);
	deferred_free(r);
	assert_int_equal(atomic_load(&other.outcome), DEFERRED_SHUTDOWN);
}

static void
test_registry_shutdown(void **state)
{
	enum {
		N = 500
	};
	static struct waiter w[N];
	struct deferred_registry *r;
	struct waiter refused = { 0 };
	char key[32];

	(void)state;
	memset(w, 0, sizeof(w));
	assert_int_equal(deferred_start(&r), 0);
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "pool:%d", i % 37);
		assert_int_equal(deferred_add(r, key, far(), waiter_fire, &w[i]), 0);
	}
	assert_int_equal(deferred_count(r), N);
	deferred_stop(r);
	for (int i = 0; i < N; i++) {
		assert_int_equal(atomic_load(&w[i].fired), 1);
		assert_int_equal(atomic_load(&w[i].outcome), DEFERRED_SHUTDOWN);
	}
	assert_int_equal(deferred_count(r), 0);
	/* a request that comes later is refused: its handler answers itself */
	assert_int_equal(deferred_add(r, "pool:1", far(), waiter_fire, &refused), -1);
	assert_int_equal(atomic_load(&refused.fired), 0);
	deferred_free(r);
}

/* ---- the notifier ---- */

static struct notifier *
notifier_for(struct fixture *fx, struct deferred_registry *r)
{
	const struct notifier_channel ch[] = {
		{ "gpupool_wake", notifier_wake_registry, r },
	};
	struct notifier_config nc = {
		.url = fx->db_url,
		.application_name = "test notifier",
		.channels = ch,
		.nchannels = 1,
		.reconnect_max_ms = 500,
	};
	struct notifier *n = NULL;

	assert_int_equal(notifier_start(&n, &nc), 0);
	for (int i = 0; i < 500 && !notifier_connected(n); i++)
		sleep_ms(10);
	assert_true(notifier_connected(n));
	return n;
}

static void
test_notify_wakes_by_key(void **state)
{
	struct fixture *fx = *state;
	struct deferred_registry *r;
	struct notifier *n;
	struct waiter a = { 0 }, b = { 0 };

	assert_int_equal(deferred_start(&r), 0);
	n = notifier_for(fx, r);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pg_stat_activity "
			     "WHERE application_name = 'test notifier' AND pid = $1::int",
			     fx_str(fx, "%d", notifier_backend_pid(n))),
	    1);
	assert_int_equal(deferred_add(r, "node:7", far(), waiter_fire, &a), 0);
	assert_int_equal(deferred_add(r, "node:8", far(), waiter_fire, &b), 0);
	/* another channel, and another key, wake nothing */
	fx_sql_exec(fx, "SELECT pg_notify('other_channel', 'node:7')");
	fx_sql_exec(fx, "SELECT pg_notify('gpupool_wake', 'node:9')");
	/* inside a transaction: delivered at commit */
	fx_sql_exec(fx, "SELECT pg_notify('gpupool_wake', $1)", "node:7");
	assert_int_equal(wait_int(&a.fired, 1, 3000), 1);
	assert_int_equal(atomic_load(&a.outcome), DEFERRED_WOKEN);
	sleep_ms(200);
	assert_int_equal(atomic_load(&b.fired), 0);
	assert_int_equal(deferred_count(r), 1);
	assert_int_equal(notifier_reconnects(n), 0);
	notifier_stop(n);
	deferred_free(r);
	assert_int_equal(atomic_load(&b.outcome), DEFERRED_SHUTDOWN);
}

static void
test_notifier_reconnects(void **state)
{
	struct fixture *fx = *state;
	struct deferred_registry *r;
	struct notifier *n;
	struct waiter before = { 0 }, after = { 0 };
	int pid, pid2;

	assert_int_equal(deferred_start(&r), 0);
	n = notifier_for(fx, r);
	pid = notifier_backend_pid(n);
	assert_int_equal(deferred_add(r, "pool:1", far(), waiter_fire, &before), 0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pg_terminate_backend($1::int) t WHERE t",
			     fx_str(fx, "%d", pid)),
	    1);
	/* back by itself, listening again */
	for (int i = 0; i < 500 && notifier_reconnects(n) == 0; i++)
		sleep_ms(10);
	assert_int_equal(notifier_reconnects(n), 1);
	assert_true(notifier_connected(n));
	pid2 = notifier_backend_pid(n);
	assert_true(pid2 != 0 && pid2 != pid);
	/* what waited across the gap was woken: its NOTIFY may have been lost */
	assert_int_equal(wait_int(&before.fired, 1, 3000), 1);
	assert_int_equal(atomic_load(&before.outcome), DEFERRED_WOKEN);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pg_stat_activity "
			     "WHERE application_name = 'test notifier' AND pid = $1::int",
			     fx_str(fx, "%d", pid2)),
	    1);
	assert_int_equal(deferred_add(r, "pool:2", far(), waiter_fire, &after), 0);
	fx_sql_exec(fx, "SELECT pg_notify('gpupool_wake', 'pool:2')");
	assert_int_equal(wait_int(&after.fired, 1, 3000), 1);
	assert_int_equal(atomic_load(&after.outcome), DEFERRED_WOKEN);
	/*
	 * halted (gpupoold's drain pass): down and its connection closed, yet
	 * still readable (authentications read it until the listeners stop)
	 */
	notifier_halt(n);
	assert_false(notifier_connected(n));
	assert_int_equal(notifier_backend_pid(n), 0);
	for (int64_t t0 = time_mono_us(); fx_sql_int64(fx,
					      "SELECT count(*) FROM pg_stat_activity "
					      "WHERE application_name = 'test notifier'") != 0;) {
		assert_true(time_mono_us() - t0 < 3 * 1000000);
		usleep(20 * 1000);
	}
	notifier_halt(n); /* twice: nothing */
	notifier_stop(n);
	deferred_free(r);
}

/* gpupoold's own notifier: one LISTEN connection, back after being killed. */
static void
test_server_notifier(void **state)
{
	struct fixture *fx = *state;
	/* one row always: 0 while there is none (or, briefly, two) */
	const char *q = "SELECT CASE WHEN count(*) = 1 THEN max(pid) ELSE 0 END "
			"FROM pg_stat_activity WHERE application_name = 'gpupoold notifier' "
			"AND datname = current_database()";
	int64_t pid = 0, pid2 = 0;

	for (int i = 0; i < 300 && (pid = fx_sql_int64(fx, q)) == 0; i++)
		sleep_ms(10);
	assert_true(pid > 0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pg_terminate_backend($1::int) t WHERE t",
			     fx_str(fx, "%lld", (long long)pid)),
	    1);
	for (int i = 0; i < 500; i++) {
		pid2 = fx_sql_int64(fx, q);
		if (pid2 != 0 && pid2 != pid)
			break;
		sleep_ms(10);
	}
	assert_true(pid2 > 0 && pid2 != pid);
	/* the server kept serving; its stop (SIGTERM, exit 0) is checked at teardown */
	assert_status(fx_request(fx, NULL, "GET", "/readyz", NULL), 200);
}

/* ---- the periodic worker ---- */

struct counter {
	atomic_int runs;
};

static void
count_run(void *arg)
{
	struct counter *c = arg;

	atomic_fetch_add(&c->runs, 1);
}

/* The periodic worker's thread has a connection (db_thread) of its own. */
static void
db_setup(struct fixture *fx)
{
	struct db_config dc = { .url = fx->db_url, .application_name = "test periodic" };

	db_init(&dc);
}

static void
test_periodic_leadership(void **state)
{
	struct fixture *fx = *state;
	struct counter ca = { 0 }, cb = { 0 };
	struct periodic_config pc = {
		.name = "test-leader",
		.interval_ms = 30,
		.jitter_ms = 10,
		.leader = true,
		.run = count_run,
	};
	struct periodic *a, *b;
	int ra, rb;

	db_setup(fx);
	pc.arg = &ca;
	assert_int_equal(periodic_start(&a, &pc), 0);
	assert_int_equal(wait_int(&ca.runs, 1, 3000), 1);
	assert_true(periodic_is_leader(a));
	pc.arg = &cb;
	assert_int_equal(periodic_start(&b, &pc), 0);
	sleep_ms(500);
	/* two instances, one runs; the lock is held once, not stacked */
	assert_true(atomic_load(&ca.runs) >= 3);
	assert_int_equal(atomic_load(&cb.runs), 0);
	assert_false(periodic_is_leader(b));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
			     "AND classid = 1768189029 AND objid = hashtext('test-leader')::oid"),
	    1);
	/* the leader stops: its session ends, the other takes over */
	periodic_stop(a);
	ra = atomic_load(&ca.runs);
	assert_true(wait_int(&cb.runs, 3, 3000) >= 3);
	assert_true(periodic_is_leader(b));
	assert_int_equal(atomic_load(&ca.runs), ra);
	periodic_stop(b);
	rb = atomic_load(&cb.runs);
	sleep_ms(100);
	assert_int_equal(atomic_load(&cb.runs), rb);
	/* (gpupoold's own leader workers, billing accrual, hold theirs) */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
			     "AND classid = 1768189029 AND objid = hashtext('test-leader')::oid"),
	    0);
}

/* Taking the lock again keeps it once: one release gives it up. */
static void
test_leader_lock_not_stacked(void **state)
{
	struct fixture *fx = *state;
	const char *held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
			   "AND classid = 1768189029 AND objid = hashtext('test-stack')::oid";
	struct gp_error err;
	bool leader = false;

	db_setup(fx);
	gp_error_clear(&err);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(db_leader_try(db_thread(), "test-stack", &leader, &err), 0);
		assert_true(leader);
	}
	assert_int_equal(fx_sql_int64(fx, held), 1);
	/* another session cannot take it */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pg_try_advisory_lock(1768189029, "
			     "hashtext('test-stack')) t WHERE t"),
	    0);
	assert_int_equal(db_leader_release(db_thread(), "test-stack", &err), 0);
	assert_int_equal(fx_sql_int64(fx, held), 0);
	db_thread_close();
}

static void
test_periodic_stop_and_kick(void **state)
{
	struct counter c = { 0 };
	struct periodic_config pc = {
		.name = "test-slow",
		.interval_ms = 60000,
		.run = count_run,
		.arg = &c,
	};
	struct periodic *p;
	int64_t t0;

	db_setup(*state);
	assert_int_equal(periodic_start(&p, &pc), 0);
	/* the first pass at once, the next not before the interval */
	assert_int_equal(wait_int(&c.runs, 1, 3000), 1);
	sleep_ms(100);
	assert_int_equal(atomic_load(&c.runs), 1);
	periodic_kick(p);
	assert_int_equal(wait_int(&c.runs, 2, 3000), 2);
	/* a stop ends the wait at once */
	t0 = time_mono_us();
	periodic_stop(p);
	assert_true(time_mono_us() - t0 < 500000);
	assert_int_equal(atomic_load(&c.runs), 2);
}

static void
test_periodic_jitter_bounds(void **state)
{
	unsigned int seed = 42;
	int lo = 1 << 30, hi = 0;
	int64_t sum = 0;

	(void)state;
	for (int i = 0; i < 20000; i++) {
		int d = periodic_next_delay_ms(1000, 100, &seed);

		assert_true(d >= 1000 && d <= 1100);
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
		sum += d;
	}
	/* both ends are reached and the mean sits in the middle */
	assert_int_equal(lo, 1000);
	assert_int_equal(hi, 1100);
	assert_true(sum / 20000 >= 1045 && sum / 20000 <= 1055);
	for (int i = 0; i < 100; i++)
		assert_int_equal(periodic_next_delay_ms(250, 0, &seed), 250);
}

/* ---- the metrics registry ---- */

static void
collect_text(struct strbuf *b, struct arena *a, void *arg)
{
	(void)a;
	strbuf_printf(b, "%s\n", (const char *)arg);
}

static void
test_metrics_registry_order(void **state)
{
	struct fixture *fx = *state;
	struct strbuf b;

	metrics_unregister_all();
	assert_int_equal(metrics_register("one", collect_text, "first 1"), 0);
	assert_int_equal(metrics_register("two", collect_text, "second 2"), 0);
	strbuf_init(&b, fx->arena, 16);
	metrics_collect(&b, fx->arena);
	assert_string_equal(b.p, "first 1\nsecond 2\n");
	for (int i = 2; i < METRICS_MAX_COLLECTORS; i++)
		assert_int_equal(metrics_register("more", collect_text, "x"), 0);
	assert_int_equal(metrics_register("too many", collect_text, "x"), -1);
	metrics_unregister_all();
	strbuf_init(&b, fx->arena, 16);
	metrics_collect(&b, fx->arena);
	assert_int_equal(b.len, 0);
}

/*
 * docs/architecture.md "Threads": a replica holds at most GPUPOOL_THREADS +
 * 2 x GPUPOOL_APPROVAL_WORKERS + 14 connections (the six heartbeat
 * workers, the seven periodic workers and the notifier's LISTEN
 * connection; the heartbeat workers connect on their first heartbeat,
 * which this test sends none of), the formula operators
 * size max_connections with. The workers alone hold 8 once started, more
 * than the "+ 3" the documents used to say.
 */
static void
test_replica_connections(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_THREADS=3", "GPUPOOL_APPROVAL_WORKERS=1",
		NULL };
	const char *q = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
			"AND application_name LIKE 'gpupoold%' AND pid <> pg_backend_pid()";
	const int64_t formula = 3 + 2 * 1 + 14;
	int64_t n = -1, peak = 0;

	assert_int_equal(fixture_server_stop(fx, fx->server), 0);
	for (int i = 0; i < 500 && (n = fx_sql_int64(fx, q)) != 0; i++)
		sleep_ms(10);
	assert_int_equal(n, 0);
	fx->server = fixture_server_start(fx, env);
	assert_non_null(fx->server);
	/* every periodic worker runs a pass at start; the notifier listens at once */
	for (int i = 0; i < 500 && (n = fx_sql_int64(fx, q)) < 8; i++)
		sleep_ms(10);
	assert_true(n >= 8);
	/* requests on every HTTP thread and a group-commit submission */
	for (int i = 0; i < 60; i++) {
		assert_status(fx_request(fx, NULL, "GET", "/readyz", NULL), 200);
		n = fx_sql_int64(fx, q);
		peak = n > peak ? n : peak;
	}
	sleep_ms(300);
	n = fx_sql_int64(fx, q);
	peak = n > peak ? n : peak;
	/* the 8 of the workers and at least one HTTP thread's: the old "+ 3" was short */
	assert_true(peak >= 9);
	print_message("replica connections: peak %lld, formula %lld\n", (long long)peak,
	    (long long)formula);
	if (peak > formula)
		fail_msg("%lld connections, more than GPUPOOL_THREADS + 2 x "
			 "GPUPOOL_APPROVAL_WORKERS + 14 = %lld",
		    (long long)peak, (long long)formula);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_wake_by_key),
		cmocka_unit_test(test_registry_mark),
		cmocka_unit_test(test_registry_deadlines),
		cmocka_unit_test(test_registry_shutdown),
		cmocka_unit_test(test_registry_heap),
		cmocka_unit_test(test_registry_exclusive),
		cmocka_unit_test(test_notify_wakes_by_key),
		cmocka_unit_test(test_notifier_reconnects),
		cmocka_unit_test(test_server_notifier),
		cmocka_unit_test(test_periodic_leadership),
		cmocka_unit_test(test_leader_lock_not_stacked),
		cmocka_unit_test(test_periodic_stop_and_kick),
		cmocka_unit_test(test_periodic_jitter_bounds),
		cmocka_unit_test(test_metrics_registry_order),
		cmocka_unit_test(test_replica_connections),
	};

	return fixture_run_tests(tests);
}
