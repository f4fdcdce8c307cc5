-- 0017_export_lines: one SQL home for the lines of each export format.
--
-- The export worker (server/workers/billing_export.c) reads a cursor over
-- billing_export_csv / _jsonl / _focus, and scripts/bench-billing times a
-- plain COPY of the very same function as its baseline, so the two can
-- never drift apart. Each is a single-SELECT SQL function (inlined into the
-- cursor's plan) returning the file's lines in (hour, id) order, each
-- ending with a newline, with the number of file rows it holds (a FOCUS
-- usage row split into its Used and Unused parts is one line of two rows).
--
-- The FOCUS line (0016's, whose credit description names every reason a
-- credit has) gains SkuMeter (FOCUS 1.4: "SkuMeter SHOULD NOT be null
-- when SkuId is not null"; SkuId is never null here), placed after SkuId as
-- the header in db_billing_export.c lists it.

CREATE OR REPLACE FUNCTION billing_focus_line(u billing_usage, p_status text, p_micro bigint, p_qty numeric,
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
			WHEN 'credit' THEN format('Credit: not available (failed GPU or instance, unknown node) during %s s of %s x %s %s',
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
		'GPU Instance Hours',                                        -- SkuMeter
		CASE WHEN u.rate_id IS NOT NULL AND u.kind = 'usage' THEN gp_csv(jsonb_build_object(
			'GpuCount', trim_scale(round(p_gpu_equiv, 6)),
			'x_Model', u.model, 'x_Profile', u.profile,
			'x_PricePerHour', gp_micro_dec(u.price_per_hour_micro))::text) END,
		CASE WHEN u.rate_id IS NOT NULL AND u.kind = 'usage'
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

CREATE FUNCTION billing_export_csv(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (line text, nrows integer)
LANGUAGE sql STABLE AS $$
	SELECT concat_ws(',', u.id, u.kind, u.period, gp_iso(u.hour),
	       gp_iso(u.hour + interval '1 hour'), gp_csv(p.name), gp_csv(po.name),
	       gp_csv(u.model), gp_csv(u.profile), u.count, u.seconds, u.price_per_hour_micro,
	       u.currency, u.amount_micro, gp_micro(u.amount_micro), coalesce(u.adjusts::text, ''),
	       gp_csv(u.note)) || E'\n', 1
	FROM billing_usage u JOIN projects p ON p.id = u.project_id
	LEFT JOIN pools po ON po.id = u.pool_id
	WHERE u.hour >= p_from AND u.hour < p_to
	ORDER BY u.hour, u.id
$$;

CREATE FUNCTION billing_export_jsonl(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (line text, nrows integer)
LANGUAGE sql STABLE AS $$
	SELECT json_build_object('usage_id', u.id, 'kind', u.kind, 'period', u.period,
	       'hour_start', gp_iso(u.hour), 'hour_end', gp_iso(u.hour + interval '1 hour'),
	       'project', p.name, 'pool', po.name, 'model', u.model, 'profile', u.profile,
	       'count', u.count, 'seconds', u.seconds,
	       'price_per_hour_micro', u.price_per_hour_micro, 'currency', u.currency,
	       'amount_micro', u.amount_micro, 'amount', gp_micro(u.amount_micro),
	       'adjusts', u.adjusts, 'note', u.note)::text || E'\n', 1
	FROM billing_usage u JOIN projects p ON p.id = u.project_id
	LEFT JOIN pools po ON po.id = u.pool_id
	WHERE u.hour >= p_from AND u.hour < p_to
	ORDER BY u.hour, u.id
$$;

-- FOCUS: each usage row joined to the utilization of its (pool, model,
-- profile, hour) (billing_idle, computed once) and its pool's cluster
-- (the first allocation's), then split into its Used and Unused parts.
CREATE FUNCTION billing_export_focus(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (line text, nrows integer)
LANGUAGE sql STABLE AS $$
	WITH i AS MATERIALIZED (
		SELECT * FROM billing_idle(p_from, p_to)
	), pc AS MATERIALIZED (
		SELECT DISTINCT ON (a.pool_id) a.pool_id, c.name AS cluster, c.region
		FROM allocations a JOIN gpus g ON g.id = a.gpu_id JOIN clusters c ON c.id = g.cluster_id
		WHERE a.pool_id IN (SELECT DISTINCT b.pool_id FROM billing_usage b
		                    WHERE b.hour >= p_from AND b.hour < p_to)
		ORDER BY a.pool_id, a.id
	), r AS (
		SELECT u, u.hour, u.id, p.name AS project, p.display_name, po.name AS pool,
		       pc.cluster, pc.region,
		       coalesce(least(i.idle_s, i.held_s) / nullif(i.held_s, 0), 0) AS share,
		       billing_idle_micro(CASE WHEN u.kind = 'usage' THEN u.amount_micro ELSE 0 END,
		           i.held_s, i.idle_s) AS unused,
		       round(u.seconds::numeric * u.count / 3600, 9) AS qty,
		       CASE WHEN u.profile = 'full' THEN 1::numeric
		            ELSE mp.compute_slices::numeric / nullif(gm.compute_slices, 0) END AS gpu_equiv,
		       (adj.period IS NOT NULL AND adj.period <> u.period AND EXISTS (
		           SELECT 1 FROM billing_periods bp
		           WHERE bp.period = adj.period AND bp.state = 'closed')) AS corr
		FROM billing_usage u JOIN projects p ON p.id = u.project_id
		LEFT JOIN pools po ON po.id = u.pool_id
		LEFT JOIN i ON i.pool_id = u.pool_id AND i.model = u.model
		     AND i.profile = u.profile AND i.hour = u.hour
		LEFT JOIN pc ON pc.pool_id = u.pool_id
		LEFT JOIN gpu_models gm ON gm.id = u.model
		LEFT JOIN mig_profiles mp ON mp.model = u.model AND mp.name = u.profile
		LEFT JOIN billing_usage adj ON adj.id = u.adjusts
		WHERE u.hour >= p_from AND u.hour < p_to
	), s AS (
		SELECT r.*, CASE WHEN unused > 0 THEN round(qty * unused / (u).amount_micro, 9)
		                 ELSE 0 END AS uq
		FROM r
	)
	SELECT CASE WHEN unused > 0
	            THEN billing_focus_line(u, 'Used', (u).amount_micro - unused, qty - uq, share,
	                     project, display_name, pool, cluster, region, corr, gpu_equiv) ||
	                 billing_focus_line(u, 'Unused', unused, uq, share, project, display_name,
	                     pool, cluster, region, corr, gpu_equiv)
	            ELSE billing_focus_line(u, 'Used', (u).amount_micro, qty, share, project,
	                     display_name, pool, cluster, region, corr, gpu_equiv) END,
	       CASE WHEN unused > 0 THEN 2 ELSE 1 END
	FROM s ORDER BY hour, id
$$;
