-- 0012_billing_accrual: what fills and guards the billing tables of
-- 0009 (docs/billing.md): the rate timeline with derived MIG rates,
-- half-even rounding, the accrual of the usage ledger into hourly rows
-- (usage and health credits) as one set-based statement, and the
-- triggers that keep rates and closed periods immutable.

-- Division rounded half to even, to the integer (d > 0).
CREATE FUNCTION billing_div_half_even(n numeric, d numeric) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT (CASE
		WHEN 2 * (n - d * floor(n / d)) > d THEN floor(n / d) + 1
		WHEN 2 * (n - d * floor(n / d)) < d THEN floor(n / d)
		WHEN mod(floor(n / d), 2) = 0 THEN floor(n / d)
		ELSE floor(n / d) + 1
	END)::bigint
$$;

-- Rates start on a whole second: billed times are whole seconds.
ALTER TABLE billing_rates
	ADD CONSTRAINT billing_rates_whole_second
	CHECK (date_trunc('second', effective_from) = effective_from);

-- Every price in effect per (model, profile), from valid_from until
-- valid_to (NULL: open-ended): the stored versions, and for each MIG
-- profile without a version of its own (before its first own version)
-- the model's 'full' rate × the profile's compute slices / the model's
-- (7; A30: 4), rounded half-even (derived). rate_id is the stored
-- version the price comes from.
CREATE FUNCTION billing_rate_timeline()
RETURNS TABLE (model text, profile text, rate_id bigint, currency text,
	price_per_hour_micro bigint, derived boolean, valid_from timestamptz,
	valid_to timestamptz)
LANGUAGE sql STABLE AS $$
	WITH own AS (
		SELECT r.model, r.profile, r.id, r.currency, r.price_per_hour_micro,
		       r.effective_from AS vf,
		       lead(r.effective_from) OVER (PARTITION BY r.model, r.profile
		                                    ORDER BY r.effective_from) AS vt
		FROM billing_rates r
	), first_own AS (
		SELECT o.model, o.profile, min(o.vf) AS first_from FROM own o GROUP BY 1, 2
	)
	SELECT o.model, o.profile, o.id, o.currency, o.price_per_hour_micro, false, o.vf, o.vt
	FROM own o
	UNION ALL
	SELECT f.model, mp.name, f.id, f.currency,
	       billing_div_half_even(f.price_per_hour_micro::numeric * mp.compute_slices,
	                             gm.compute_slices),
	       true, f.vf, least(f.vt, fo.first_from)
	FROM own f
	JOIN gpu_models gm ON gm.id = f.model AND gm.compute_slices > 0
	JOIN mig_profiles mp ON mp.model = f.model
	LEFT JOIN first_own fo ON fo.model = f.model AND fo.profile = mp.name
	WHERE f.profile = 'full' AND (fo.first_from IS NULL OR f.vf < fo.first_from)
$$;

-- A rate version is never edited; one in effect is never deleted.
CREATE FUNCTION billing_rates_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		RAISE EXCEPTION 'billing rate % is never edited: add a new version', OLD.id
			USING ERRCODE = '55000';
	END IF;
	IF OLD.effective_from <= now() THEN
		RAISE EXCEPTION 'billing rate % is in effect and cannot be deleted', OLD.id
			USING ERRCODE = '55000';
	END IF;
	RETURN OLD;
END
$$;
CREATE TRIGGER billing_rates_guard BEFORE UPDATE OR DELETE ON billing_rates
	FOR EACH ROW EXECUTE FUNCTION billing_rates_guard();

-- Rows of a closed period never change (also for direct SQL); a row's
-- period is always the UTC month of its hour. Inserts are checked once
-- per statement (the accrual inserts many rows), updates and deletes per
-- row.
CREATE FUNCTION billing_usage_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM billing_periods WHERE period = OLD.period AND state = 'closed') THEN
		RAISE EXCEPTION 'billing period % is closed', OLD.period
			USING ERRCODE = '55000', HINT = 'enter an adjustment in an open period';
	END IF;
	IF TG_OP = 'DELETE' THEN
		RETURN OLD;
	END IF;
	NEW.period := to_char(NEW.hour AT TIME ZONE 'UTC', 'YYYY-MM');
	IF EXISTS (SELECT 1 FROM billing_periods WHERE period = NEW.period AND state = 'closed') THEN
		RAISE EXCEPTION 'billing period % is closed', NEW.period
			USING ERRCODE = '55000', HINT = 'enter an adjustment in an open period';
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER billing_usage_guard BEFORE UPDATE OR DELETE ON billing_usage
	FOR EACH ROW EXECUTE FUNCTION billing_usage_guard();

CREATE FUNCTION billing_usage_guard_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	bad text;
BEGIN
	SELECT n.period INTO bad FROM new_rows n
	WHERE n.period IS DISTINCT FROM to_char(n.hour AT TIME ZONE 'UTC', 'YYYY-MM') LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'a billing row''s period must be the UTC month of its hour, not %', bad
			USING ERRCODE = '23514';
	END IF;
	SELECT p.period INTO bad FROM billing_periods p
	WHERE p.state = 'closed' AND p.period IN (SELECT DISTINCT n.period FROM new_rows n) LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'billing period % is closed', bad
			USING ERRCODE = '55000', HINT = 'enter an adjustment in an open period';
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER billing_usage_guard_insert AFTER INSERT ON billing_usage
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION billing_usage_guard_insert();

CREATE FUNCTION billing_usage_guard_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM billing_periods WHERE state = 'closed') THEN
		RAISE EXCEPTION 'billing_usage holds closed periods' USING ERRCODE = '55000';
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER billing_usage_guard_truncate BEFORE TRUNCATE ON billing_usage
	FOR EACH STATEMENT EXECUTE FUNCTION billing_usage_guard_truncate();

-- A closed period stays closed.
CREATE FUNCTION billing_periods_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.state = 'closed' THEN
		RAISE EXCEPTION 'billing period % is closed', OLD.period USING ERRCODE = '55000';
	END IF;
	IF TG_OP = 'DELETE' THEN
		RETURN OLD;
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER billing_periods_guard BEFORE UPDATE OR DELETE ON billing_periods
	FOR EACH ROW EXECUTE FUNCTION billing_periods_guard();
CREATE TRIGGER billing_periods_guard_truncate BEFORE TRUNCATE ON billing_periods
	FOR EACH STATEMENT EXECUTE FUNCTION billing_usage_guard_truncate();

-- One accrued row per (hour, pool, model, profile, kind, rate version,
-- count): the key the accrual upserts on (idempotent); hour first, so it
-- also serves the accrual's range of hours.
CREATE UNIQUE INDEX billing_usage_accrual_key
	ON billing_usage (hour, pool_id, model, profile, kind, rate_id, count)
	WHERE kind IN ('usage', 'credit');
CREATE INDEX billing_usage_adjusts_idx ON billing_usage (adjusts) WHERE adjusts IS NOT NULL;
CREATE INDEX usage_ledger_ended_idx ON usage_ledger (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX allocations_pool_gpu_idx ON allocations (gpu_id) WHERE pool_id IS NOT NULL;

-- The accrual's progress: hours before watermark are final.
CREATE TABLE billing_accrual_state (
	id          integer PRIMARY KEY CHECK (id = 1),
	watermark   timestamptz,
	last_run_at timestamptz,
	last_until  timestamptz
);
INSERT INTO billing_accrual_state (id) VALUES (1);

-- Accrue the usage ledger up to p_now into hourly rows: every hour from
-- the watermark (the first hour not yet final) to p_now, the last one
-- partial. Per (pool, model, profile) the ledger's intervals (times
-- floored to the second) become a step function of the count held, and
-- the allocations of the pool on a failed GPU one of the count failed;
-- both are cut at every hour and every rate version. One row per (hour,
-- rate version, count): seconds at that count, amount =
-- round_half_even(seconds × count × price / 3600); a credit row for
-- the failed part (never more instances than held), negative. Rows of
-- these hours that no longer arise are deleted (kept at zero when an
-- adjustment refers to them); hours of a closed period are left alone.
-- One statement, under a transaction-level advisory lock (one accrual at
-- a time, any replica); hours ending p_settle or more before p_now become
-- final (the watermark moves past them). A backlog is done p_max_hours of
-- ledger activity at a time (acc_more: call again, in a new transaction),
-- so that no statement grows with the length of an outage. Running it
-- again, or after a crash (each call commits whole or not at all),
-- changes nothing but the partial hour.
CREATE FUNCTION billing_accrue(p_now timestamptz, p_settle interval, p_max_hours integer,
	OUT acc_from timestamptz, OUT acc_until timestamptz, OUT acc_upserted bigint,
	OUT acc_deleted bigint, OUT acc_watermark timestamptz, OUT acc_more boolean)
LANGUAGE plpgsql
-- The planner cannot estimate the CTEs (hours cut out of intervals by
-- generate_series): off by 1000 times, it picks nested loops that go
-- quadratic in the rows of a span. Hash joins keep a span linear; every
-- read of billing_usage is bounded to the span's hours.
SET TimeZone = 'UTC' SET enable_nestloop = off AS $$
DECLARE
	v_real timestamptz := date_trunc('second', p_now);
	v_now  timestamptz := v_real; -- the end of this call's span
	v_lo   timestamptz;
	v_next timestamptz;
BEGIN
	PERFORM pg_advisory_xact_lock(7234001, 12);
	SELECT s.watermark INTO v_lo FROM billing_accrual_state s WHERE s.id = 1 FOR UPDATE;
	IF v_lo IS NULL THEN
		SELECT date_trunc('hour', min(l.started_at)) INTO v_lo FROM usage_ledger l;
	END IF;
	acc_upserted := 0;
	acc_deleted := 0;
	acc_more := false;
	-- a span of p_max_hours from the first moment held (hours where the
	-- ledger holds nothing cost nothing)
	SELECT date_trunc('hour', min(greatest(l.started_at, v_lo))) INTO v_next
	FROM usage_ledger l WHERE l.ended_at IS NULL OR l.ended_at > v_lo;
	IF v_lo IS NOT NULL AND v_next IS NOT NULL
	   AND greatest(v_lo, v_next) + p_max_hours * interval '1 hour' < v_real THEN
		v_now := greatest(v_lo, v_next) + p_max_hours * interval '1 hour';
		acc_more := true;
	END IF;
	acc_until := v_now;
	IF v_lo IS NULL OR v_lo >= v_now THEN
		acc_from := v_lo;
		acc_watermark := v_lo;
		UPDATE billing_accrual_state SET last_run_at = now(), last_until = v_now WHERE id = 1;
		RETURN;
	END IF;
	acc_from := v_lo;

	WITH led AS (
		-- an open interval of a pool past its end time ends there (the
		-- expiry worker closes it at that time, perhaps later than now)
		SELECT l.pool_id, l.model, l.profile, l.count,
		       greatest(date_trunc('second', l.started_at), v_lo) AS s,
		       least(date_trunc('second', coalesce(l.ended_at, po.ends_at, v_now)), v_now) AS e
		FROM usage_ledger l JOIN pools po ON po.id = l.pool_id
		WHERE (l.ended_at IS NULL OR l.ended_at >= v_lo) AND l.started_at < v_now
	), fail AS (
		SELECT a.pool_id, g.model, a.profile,
		       greatest(date_trunc('second', a.created_at), date_trunc('second', h.started_at),
		                v_lo) AS s,
		       -- an instance leaves the bill at the approval that releases it,
		       -- before the agent confirms (released_at)
		       least(date_trunc('second', coalesce(a.released_at, v_now)),
		             date_trunc('second', coalesce(rr.decided_at, v_now)),
		             date_trunc('second', coalesce(h.ended_at, v_now)), v_now) AS e
		FROM gpu_health_intervals h
		JOIN allocations a ON a.gpu_id = h.gpu_id AND a.pool_id IS NOT NULL
		JOIN gpus g ON g.id = h.gpu_id
		LEFT JOIN pool_requests rr ON rr.id = a.release_request_id
		WHERE h.health = 'failed' AND (h.ended_at IS NULL OR h.ended_at > v_lo)
		  AND h.started_at < v_now
		  AND a.created_at < coalesce(h.ended_at, v_now)
		  AND (a.released_at IS NULL OR a.released_at > h.started_at)
	), ev AS (
		SELECT pool_id, model, profile, s AS t, count AS dl, 0 AS df FROM led WHERE e > s
		UNION ALL SELECT pool_id, model, profile, e, -count, 0 FROM led WHERE e > s
		UNION ALL SELECT pool_id, model, profile, s, 0, 1 FROM fail WHERE e > s
		UNION ALL SELECT pool_id, model, profile, e, 0, -1 FROM fail WHERE e > s
	), pt AS (
		SELECT pool_id, model, profile, t, sum(dl) AS dl, sum(df) AS df
		FROM ev GROUP BY 1, 2, 3, 4
	), seg AS (
		SELECT pool_id, model, profile, t AS s,
		       lead(t) OVER w AS e,
		       sum(dl) OVER w AS lvl,
		       sum(df) OVER w AS nf
		FROM pt
		WINDOW w AS (PARTITION BY pool_id, model, profile ORDER BY t)
	), piece AS (
		SELECT sg.pool_id, sg.model, sg.profile, sg.lvl::integer AS lvl,
		       least(greatest(sg.nf, 0), sg.lvl)::integer AS nf, h.hour,
		       greatest(sg.s, h.hour) AS s,
		       least(sg.e, h.hour + interval '1 hour') AS e
		FROM seg sg
		CROSS JOIN LATERAL generate_series(date_trunc('hour', sg.s),
		                                   sg.e - interval '1 microsecond',
		                                   interval '1 hour') AS h(hour)
		WHERE sg.e > sg.s AND sg.lvl > 0
	), priced AS (
		SELECT p.pool_id, p.model, p.profile, p.lvl, p.nf, p.hour, r.rate_id, r.currency,
		       r.price_per_hour_micro AS price,
		       extract(epoch FROM least(p.e, coalesce(r.valid_to, p.e))
		                          - greatest(p.s, r.valid_from))::bigint AS secs
		FROM piece p
		JOIN billing_rate_timeline() r ON r.model = p.model AND r.profile = p.profile
		     AND r.valid_from < p.e AND (r.valid_to IS NULL OR r.valid_to > p.s)
	), want AS (
		SELECT 'usage'::text AS kind, pool_id, model, profile, hour, rate_id, currency, price,
		       lvl AS cnt, sum(secs) AS seconds
		FROM priced GROUP BY pool_id, model, profile, hour, rate_id, currency, price, lvl
		UNION ALL
		SELECT 'credit', pool_id, model, profile, hour, rate_id, currency, price,
		       nf, sum(secs)
		FROM priced WHERE nf > 0
		GROUP BY pool_id, model, profile, hour, rate_id, currency, price, nf
	), acc0 AS (
		SELECT w.kind, po.project_id, w.pool_id, w.model, w.profile, w.hour, w.rate_id,
		       w.price, w.currency, w.seconds, w.cnt,
		       billing_div_half_even(w.seconds::numeric * w.cnt * w.price, 3600) AS raw
		FROM want w JOIN pools po ON po.id = w.pool_id
		WHERE w.seconds > 0 AND NOT EXISTS (
			SELECT 1 FROM billing_periods bp
			WHERE bp.period = to_char(w.hour, 'YYYY-MM') AND bp.state = 'closed')
	), acc1 AS (
		-- credits never exceed charges: per (pool, spec, hour, rate) the
		-- credits' roundings may add up to more than the charges' (each
		-- half rounds on its own); the excess comes off the credits with the
		-- most instances first
		SELECT a.*,
		       greatest(0, sum(CASE WHEN a.kind = 'credit' THEN a.raw ELSE 0 END) OVER g
		                   - sum(CASE WHEN a.kind = 'usage' THEN a.raw ELSE 0 END) OVER g)
		         AS excess,
		       coalesce(sum(a.raw) OVER (PARTITION BY a.pool_id, a.model, a.profile, a.hour,
		                                 a.rate_id, a.kind ORDER BY a.cnt DESC
		                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
		         AS before
		FROM acc0 a
		WINDOW g AS (PARTITION BY a.pool_id, a.model, a.profile, a.hour, a.rate_id)
	), acc AS (
		SELECT kind, project_id, pool_id, model, profile, hour, rate_id, price, currency,
		       seconds, cnt,
		       (CASE WHEN kind = 'usage' THEN raw
		             ELSE -(raw - least(raw, greatest(0, excess - before))) END)::bigint AS amount
		FROM acc1
	), upd AS (
		UPDATE billing_usage b
		SET seconds = r.seconds, amount_micro = r.amount,
		    price_per_hour_micro = r.price, currency = r.currency,
		    project_id = r.project_id, updated_at = now()
		FROM acc r
		WHERE b.kind = r.kind AND b.pool_id = r.pool_id AND b.model = r.model
		  AND b.profile = r.profile AND b.hour = r.hour AND b.rate_id = r.rate_id
		  AND b.count = r.cnt AND b.kind IN ('usage', 'credit')
		  AND b.hour >= v_lo AND b.hour < v_now
		  AND (b.seconds, b.amount_micro, b.price_per_hour_micro, b.currency, b.project_id)
		      IS DISTINCT FROM (r.seconds, r.amount, r.price, r.currency, r.project_id)
		RETURNING 1
	), ins AS (
		-- no other accrual runs (the advisory lock) and nothing else writes
		-- these kinds: absent now means absent at commit
		INSERT INTO billing_usage (kind, project_id, pool_id, model, profile, hour, period,
			rate_id, price_per_hour_micro, currency, seconds, count, amount_micro)
		SELECT kind, project_id, pool_id, model, profile, hour,
		       to_char(hour, 'YYYY-MM'), rate_id, price, currency, seconds, cnt, amount
		FROM acc r
		WHERE NOT EXISTS (
			SELECT 1 FROM billing_usage b
			WHERE b.kind = r.kind AND b.pool_id = r.pool_id AND b.model = r.model
			  AND b.profile = r.profile AND b.hour = r.hour AND b.rate_id = r.rate_id
			  AND b.count = r.cnt AND b.kind IN ('usage', 'credit')
			  AND b.hour >= v_lo AND b.hour < v_now)
		RETURNING 1
	), stale AS (
		-- rows of these hours that no longer arise
		SELECT b.id, b.seconds, b.amount_micro,
		       EXISTS (SELECT 1 FROM billing_usage x WHERE x.adjusts = b.id) AS adjusted
		FROM billing_usage b
		WHERE b.kind IN ('usage', 'credit') AND b.hour >= v_lo AND b.hour < v_now
		  AND NOT EXISTS (SELECT 1 FROM billing_periods bp
		                  WHERE bp.period = b.period AND bp.state = 'closed')
		  AND NOT EXISTS (
			SELECT 1 FROM acc r
			WHERE r.kind = b.kind AND r.pool_id = b.pool_id AND r.model = b.model
			  AND r.profile = b.profile AND r.hour = b.hour AND r.rate_id = b.rate_id
			  AND r.cnt = b.count)
	), del AS (
		DELETE FROM billing_usage b USING stale st
		WHERE b.id = st.id AND NOT st.adjusted
		RETURNING 1
	), zero AS (
		-- an adjustment refers to it: it stays, at zero
		UPDATE billing_usage b SET seconds = 0, amount_micro = 0, updated_at = now()
		FROM stale st
		WHERE b.id = st.id AND st.adjusted AND (st.seconds, st.amount_micro) <> (0, 0)
		RETURNING 1
	)
	SELECT (SELECT count(*) FROM ins) + (SELECT count(*) FROM upd) + (SELECT count(*) FROM zero),
	       (SELECT count(*) FROM del)
	INTO acc_upserted, acc_deleted;

	acc_watermark := greatest(v_lo, least(date_trunc('hour', v_real - p_settle), v_now));
	UPDATE billing_accrual_state s
	SET watermark = acc_watermark, last_run_at = now(), last_until = v_now
	WHERE s.id = 1;
END
$$;
