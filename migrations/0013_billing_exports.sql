-- 0013_billing_exports: export jobs (docs/billing.md "Exports"). The
-- worker reads billing_usage in (hour, id) order by keyset pages, so the
-- index below; the file's text is built by the SQL helpers here, so that
-- the same rows always give the same bytes.

CREATE INDEX billing_usage_hour_id_idx ON billing_usage (hour, id);

-- Who asked for the file, how far the worker got (rows and chunks
-- written by the attempt under way are invisible until it commits).
ALTER TABLE billing_exports ADD COLUMN chunks integer;
ALTER TABLE billing_exports ADD COLUMN worker text;

-- One CSV field (RFC 4180): quoted when it holds a comma, quote, CR or
-- LF; NULL is empty.
CREATE FUNCTION gp_csv(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN v IS NULL THEN ''
	            WHEN v ~ '[",\r\n]' THEN '"' || replace(v, '"', '""') || '"'
	            ELSE v END
$$;

-- Micro-units as an exact decimal string with six fraction digits
-- ("-1.250000"); gp_dec trims trailing zeros ("-1.25", "0").
CREATE FUNCTION gp_micro(v bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT round(v::numeric / 1000000, 6)::text
$$;
CREATE FUNCTION gp_dec(v numeric) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT trim_scale(v)::text
$$;

-- ISO 8601 UTC with a Z ("2026-11-01T00:00:00Z"). STABLE as to_char is:
-- so that it is inlined into the statements that call it.
CREATE FUNCTION gp_iso(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- Micro-units as the shortest exact decimal ("-1.25", "0", "3").
CREATE FUNCTION gp_micro_dec(v bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT trim_scale(round(v::numeric / 1000000, 6))::text
$$;

-- Whole-GPU equivalent of one instance of (model, profile): 1 for a
-- whole GPU, else the profile's compute slices / the model's (7; A30: 4).
CREATE FUNCTION billing_gpu_equiv(p_model text, p_profile text) RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN p_profile = 'full' THEN 1::numeric
	       ELSE (SELECT mp.compute_slices::numeric / nullif(gm.compute_slices, 0)
	             FROM mig_profiles mp JOIN gpu_models gm ON gm.id = mp.model
	             WHERE mp.model = p_model AND mp.name = p_profile) END
$$;

-- Utilization (docs/billing.md "Utilization"): per (pool, model,
-- profile, UTC hour) of [p_from, p_to), over the pool's allocations
-- (an open one counts up to p_to or now): held_s the instance-seconds
-- held; measured_s the part with telemetry (a gpu_metric_hourly row of
-- the device for the hour); idle_s the idle part of it: all of it when
-- no workload ran on the device during the hour (workload_profiles),
-- else the share of samples below the idle threshold (sm_active_low /
-- samples); active_s the held seconds × the average SM activity. Time
-- without telemetry counts as neither idle nor measured.
CREATE FUNCTION billing_idle(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (pool_id bigint, model text, profile text, hour timestamptz, held_s numeric,
	measured_s numeric, idle_s numeric, active_s numeric)
LANGUAGE sql STABLE AS $$
	WITH a AS (
		SELECT al.pool_id, g.model, al.profile,
		       coalesce(al.device_uuid, CASE WHEN al.profile = 'full' THEN g.uuid END) AS device,
		       greatest(al.created_at, p_from) AS s,
		       least(coalesce(al.released_at, now()), p_to) AS e
		FROM allocations al JOIN gpus g ON g.id = al.gpu_id
		WHERE al.pool_id IS NOT NULL AND al.created_at < p_to
		  AND coalesce(al.released_at, 'infinity') > p_from
	), h AS (
		SELECT a.pool_id, a.model, a.profile, a.device, hr AS hour,
		       extract(epoch FROM least(a.e, hr + interval '1 hour') - greatest(a.s, hr)) AS o
		FROM a, generate_series(date_trunc('hour', a.s AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
		                        a.e - interval '1 microsecond', interval '1 hour') AS hr
		WHERE a.e > a.s
	), m AS (
		SELECT h.*, mh.samples, mh.sm_active_low, mh.sm_active_avg,
		       EXISTS (SELECT 1 FROM workload_profiles w WHERE w.device_uuid = h.device
		               AND w.first_seen_at < h.hour + interval '1 hour'
		               AND coalesce(w.ended_at, 'infinity') > h.hour) AS busy
		FROM h LEFT JOIN gpu_metric_hourly mh ON mh.device_uuid = h.device AND mh.hour = h.hour
		WHERE h.o > 0
	)
	SELECT m.pool_id, m.model, m.profile, m.hour, sum(m.o),
	       coalesce(sum(m.o) FILTER (WHERE m.samples IS NOT NULL), 0),
	       coalesce(sum(CASE WHEN m.samples IS NULL THEN 0 WHEN NOT m.busy THEN m.o
	                    ELSE m.o * m.sm_active_low / m.samples END), 0),
	       coalesce(sum(m.o * coalesce(m.sm_active_avg, 0)::numeric)
	                FILTER (WHERE m.samples IS NOT NULL), 0)
	FROM m GROUP BY m.pool_id, m.model, m.profile, m.hour
$$;

-- The idle part of a usage row's amount (micro-units): amount × idle_s
-- / held_s of its (pool, model, profile, hour), rounded half-even; the
-- rest is the used part. 0 without telemetry.
CREATE FUNCTION billing_idle_micro(p_amount bigint, p_held numeric, p_idle numeric) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN p_amount > 0 AND p_held > 0 AND p_idle > 0
	            THEN billing_div_half_even(p_amount * least(p_idle, p_held), p_held)
	            ELSE 0 END
$$;

-- One line of the FOCUS 1.4 export (docs/billing.md "FOCUS mapping"),
-- ending with a newline: the row u, or for a usage row split by
-- utilization its Used or Unused part (status), whose amount is
-- p_micro and quantity p_qty (instance-hours). p_correction: an
-- adjustment of a row of an earlier, closed period; p_gpu_equiv: the
-- whole-GPU equivalent of one instance (billing_gpu_equiv). The column order is
-- db_billing_export.c's FOCUS_HEADER.
CREATE FUNCTION billing_focus_line(u billing_usage, p_status text, p_micro bigint, p_qty numeric,
	p_share numeric, p_project text, p_project_display text, p_pool text, p_cluster text,
	p_region text, p_correction boolean, p_gpu_equiv numeric) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT array_to_string(ARRAY[
		gp_csv(p_cluster),                                           -- AvailabilityZone
		gp_micro_dec(p_micro),                                       -- BilledCost
		'gpupool',                                                   -- BillingAccountId
		'gpupool',                                                   -- BillingAccountName
		u.currency,                                                  -- BillingCurrency
		gp_iso((u.period || '-01 00:00:00+00')::timestamptz + interval '1 month'),
		gp_iso((u.period || '-01 00:00:00+00')::timestamptz),       -- BillingPeriodStart
		CASE WHEN u.pool_id IS NOT NULL THEN 'pool-' || u.pool_id END, -- CapacityReservationId
		CASE WHEN u.kind = 'usage' AND u.pool_id IS NOT NULL THEN p_status END,
		CASE u.kind WHEN 'usage' THEN 'Usage' WHEN 'credit' THEN 'Credit'
		            ELSE 'Adjustment' END,                           -- ChargeCategory
		CASE WHEN p_correction THEN 'Correction' END,                -- ChargeClass
		gp_csv(CASE u.kind
			WHEN 'usage' THEN format('%s x %s %s for %s s at %s %s/hour%s', u.count, u.model,
				u.profile, u.seconds, gp_micro_dec(u.price_per_hour_micro), u.currency,
				CASE p_status WHEN 'Unused' THEN ' (idle part)'
				              WHEN 'Used' THEN CASE WHEN p_share > 0 THEN ' (used part)'
				                                    ELSE '' END ELSE '' END)
			WHEN 'credit' THEN format('Credit: GPU failed during %s s of %s x %s %s',
				u.seconds, u.count, u.model, u.profile)
			ELSE format('Adjustment of billing row %s: %s', u.adjusts, u.note) END),
		CASE WHEN u.kind = 'adjustment' THEN 'One-Time' ELSE 'Usage-Based' END,
		gp_iso(u.hour + interval '1 hour'),                          -- ChargePeriodEnd
		gp_iso(u.hour),                                              -- ChargePeriodStart
		CASE WHEN u.kind = 'usage' THEN trim_scale(p_qty)::text END, -- ConsumedQuantity
		CASE WHEN u.kind = 'usage' THEN 'Hours' END,                 -- ConsumedUnit
		gp_micro_dec(p_micro),                                       -- ContractedCost
		CASE WHEN u.kind = 'usage' THEN gp_micro_dec(u.price_per_hour_micro) END,
		gp_micro_dec(p_micro),                                       -- EffectiveCost
		'gpupool',                                                   -- HostProviderName
		'gpupool',                                                   -- InvoiceIssuerName
		gp_micro_dec(p_micro),                                       -- ListCost
		CASE WHEN u.kind = 'usage' THEN gp_micro_dec(u.price_per_hour_micro) END,
		CASE WHEN u.kind = 'usage' THEN 'Standard' END,              -- PricingCategory
		CASE WHEN u.kind = 'usage' THEN trim_scale(p_qty)::text END, -- PricingQuantity
		CASE WHEN u.kind = 'usage' THEN 'Hours' END,                 -- PricingUnit
		gp_csv(nullif(p_region, '')),                                -- RegionId
		gp_csv(nullif(p_region, '')),                                -- RegionName
		CASE WHEN u.pool_id IS NOT NULL THEN 'pool-' || u.pool_id END, -- ResourceId
		gp_csv(p_pool),                                              -- ResourceName
		CASE WHEN u.pool_id IS NOT NULL THEN 'GPU Pool' END,         -- ResourceType
		'Compute',                                                   -- ServiceCategory
		'gpupool GPU pools',                                         -- ServiceName
		'gpupool',                                                   -- ServiceProviderName
		'Other (Compute)',                                           -- ServiceSubcategory
		gp_csv(u.model || '/' || u.profile),                         -- SkuId
		CASE WHEN u.rate_id IS NOT NULL THEN gp_csv(jsonb_build_object(
			'GpuCount', trim_scale(round(p_gpu_equiv, 6)),
			'x_Model', u.model, 'x_Profile', u.profile,
			'x_PricePerHour', gp_micro_dec(u.price_per_hour_micro))::text) END,
		CASE WHEN u.rate_id IS NOT NULL
		     THEN gp_csv('rate-' || u.rate_id || '/' || u.profile) END, -- SkuPriceId
		gp_csv(p_project),                                           -- SubAccountId
		gp_csv(p_project_display),                                   -- SubAccountName
		gp_csv(jsonb_strip_nulls(jsonb_build_object('gpupool/project', p_project,
			'gpupool/pool', p_pool, 'gpupool/cluster', p_cluster))::text), -- Tags
		u.id::text,                                                  -- x_UsageId
		u.kind,                                                      -- x_Kind
		u.count::text,                                               -- x_Count
		u.seconds::text,                                             -- x_Seconds
		u.price_per_hour_micro::text,                                -- x_PricePerHourMicro
		p_micro::text,                                               -- x_AmountMicro
		u.amount_micro::text,                                        -- x_RowAmountMicro
		CASE WHEN u.kind = 'usage' THEN trim_scale(round(p_share, 6))::text END, -- x_IdleShare
		u.adjusts::text                                              -- x_Adjusts
	], ',', '') || E'\n'
$$;

-- Export chunks are written once and read whole: lz4 compresses them
-- several times faster than the default pglz (servers built without lz4
-- store them uncompressed instead).
DO $$
BEGIN
	ALTER TABLE billing_export_chunks ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
	ALTER TABLE billing_export_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
END
$$;
