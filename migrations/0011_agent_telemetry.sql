-- 0011_agent_telemetry: what node agents send besides their status
-- (docs/agent.md, "Telemetry"): GPU samples ingested set-based into the
-- daily partitions of gpu_metric_samples, the partitions kept (created
-- ahead, dropped past retention, never deleted row by row), hourly
-- roll-ups, workload profiles with isolation alerts, idle alerts.

-- Create the daily partitions from p_days_back days ago to p_days_ahead
-- days ahead, and drop those that ended before the retention window.
-- Returns the number of partitions dropped.
CREATE FUNCTION metric_partitions_maintain(p_retention_days integer, p_days_ahead integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	v_today date := (now() AT TIME ZONE 'UTC')::date;
	v_day   date;
	v_name  text;
	v_drop  integer := 0;
	r       record;
BEGIN
	FOR i IN -(p_retention_days - 1) .. p_days_ahead LOOP
		v_day := v_today + i;
		v_name := 'gpu_metric_samples_' || to_char(v_day, 'YYYYMMDD');
		IF to_regclass(v_name) IS NULL THEN
			EXECUTE format('CREATE TABLE %I PARTITION OF gpu_metric_samples '
			               'FOR VALUES FROM (%L) TO (%L)', v_name,
			               (v_day::timestamp AT TIME ZONE 'UTC'),
			               ((v_day + 1)::timestamp AT TIME ZONE 'UTC'));
		END IF;
	END LOOP;
	FOR r IN
		SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'gpu_metric_samples'::regclass
		  AND c.relname ~ '^gpu_metric_samples_[0-9]{8}$'
		  AND to_date(substring(c.relname from '[0-9]{8}$'), 'YYYYMMDD')
		      < v_today - (p_retention_days - 1)
	LOOP
		EXECUTE format('DROP TABLE %I', r.relname);
		v_drop := v_drop + 1;
	END LOOP;
	RETURN v_drop;
END
$$;

-- One batch of samples from node p_node, in one statement: samples of
-- GPUs that are not the node's, or outside the partitions kept
-- (p_retention_days back to tomorrow), are not stored. Returns how many were.
CREATE FUNCTION metric_ingest(p_node bigint, p_samples jsonb, p_retention_days integer)
RETURNS integer LANGUAGE sql AS $$
	WITH ins AS (
		INSERT INTO gpu_metric_samples (ts, gpu_id, device_uuid, power_w, sm_active,
			memory_used_mib, memory_total_mib, temperature_c, ecc_corrected, ecc_uncorrected,
			last_xid, remapped_rows)
		SELECT to_timestamp(x.ts_us / 1000000.0), g.id, coalesce(x.device_uuid, g.uuid),
		       x.power_w, x.sm_active, x.memory_used_mib, x.memory_total_mib, x.temperature_c,
		       x.ecc_corrected, x.ecc_uncorrected, x.last_xid, x.remapped_rows
		FROM jsonb_to_recordset(p_samples) AS x(ts_us bigint, gpu_uuid text, device_uuid text,
			power_w double precision, sm_active double precision, memory_used_mib bigint,
			memory_total_mib bigint, temperature_c double precision, ecc_corrected bigint,
			ecc_uncorrected bigint, last_xid integer, remapped_rows bigint)
		JOIN gpus g ON g.uuid = x.gpu_uuid AND g.node_id = p_node
		WHERE to_timestamp(x.ts_us / 1000000.0)
		      >= ((now() AT TIME ZONE 'UTC')::date - (p_retention_days - 1))::timestamp AT TIME ZONE 'UTC'
		  AND to_timestamp(x.ts_us / 1000000.0)
		      < ((now() AT TIME ZONE 'UTC')::date + 2)::timestamp AT TIME ZONE 'UTC'
		RETURNING 1
	)
	SELECT count(*)::integer FROM ins
$$;

-- Recompute the hourly roll-ups of the complete hours since p_from
-- (idempotent: a row is replaced by the same figures). sm_active_low
-- counts samples below p_idle_threshold.
CREATE FUNCTION metric_rollup(p_from timestamptz, p_idle_threshold double precision)
RETURNS integer LANGUAGE sql AS $$
	WITH up AS (
		INSERT INTO gpu_metric_hourly AS h (hour, gpu_id, device_uuid, samples, power_w_avg,
			power_w_max, sm_active_avg, sm_active_low, memory_used_mib_max, temperature_c_max,
			ecc_uncorrected_max)
		SELECT date_trunc('hour', ts), gpu_id, device_uuid, count(*), avg(power_w), max(power_w),
		       avg(sm_active), count(*) FILTER (WHERE sm_active < p_idle_threshold),
		       max(memory_used_mib), max(temperature_c), max(ecc_uncorrected)
		FROM gpu_metric_samples
		WHERE ts >= date_trunc('hour', p_from) AND ts < date_trunc('hour', now())
		GROUP BY 1, 2, 3
		ON CONFLICT (device_uuid, hour) DO UPDATE SET gpu_id = EXCLUDED.gpu_id,
			samples = EXCLUDED.samples, power_w_avg = EXCLUDED.power_w_avg,
			power_w_max = EXCLUDED.power_w_max, sm_active_avg = EXCLUDED.sm_active_avg,
			sm_active_low = EXCLUDED.sm_active_low,
			memory_used_mib_max = EXCLUDED.memory_used_mib_max,
			temperature_c_max = EXCLUDED.temperature_c_max,
			ecc_uncorrected_max = EXCLUDED.ecc_uncorrected_max
		RETURNING 1
	)
	SELECT count(*)::integer FROM up
$$;

-- The live allocation a device UUID stands for: a MIG instance's UUID, or a
-- GPU's UUID for its whole-GPU allocation.
CREATE FUNCTION device_allocation(p_node bigint, p_device text) RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT a.id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	WHERE g.node_id = p_node AND a.state NOT IN ('released')
	  AND (a.device_uuid = p_device OR (a.profile = 'full' AND g.uuid = p_device))
	ORDER BY a.id DESC LIMIT 1
$$;

-- The distinct workloads of a profiles report.
CREATE FUNCTION profiles_in(p jsonb)
RETURNS TABLE (device_uuid text, namespace text, pod text, container text)
LANGUAGE sql IMMUTABLE AS $$
	SELECT DISTINCT x.device_uuid, x.namespace, x.pod, coalesce(x.container, '')
	FROM jsonb_to_recordset(p) AS x(device_uuid text, namespace text, pod text, container text)
$$;

-- Replace node p_node's current workloads with p_profiles
-- ([{"device_uuid","namespace","pod","container"}]): rows no longer seen
-- end, seen ones are touched, new ones start. Then the isolation alerts
-- of the node: a pod on a device without a pool allocation, or in a
-- namespace that is not of the pool's project. Returns the number of
-- violations.
CREATE FUNCTION agent_apply_profiles(p_node bigint, p_profiles jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	v_keys text[] := '{}';
	v_name text;
	r      record;
BEGIN
	SELECT name INTO v_name FROM nodes WHERE id = p_node;
	UPDATE workload_profiles w SET ended_at = now()
	WHERE w.node_id = p_node AND w.ended_at IS NULL
	  AND NOT EXISTS (SELECT 1 FROM profiles_in(p_profiles) i WHERE i.device_uuid = w.device_uuid
	                  AND i.namespace = w.namespace AND i.pod = w.pod
	                  AND i.container = w.container);
	UPDATE workload_profiles w SET last_seen_at = now(),
		allocation_id = coalesce(device_allocation(p_node, w.device_uuid), w.allocation_id)
	WHERE w.node_id = p_node AND w.ended_at IS NULL;
	INSERT INTO workload_profiles (node_id, device_uuid, gpu_id, allocation_id, namespace, pod,
		container)
	SELECT p_node, i.device_uuid,
	       (SELECT g.id FROM gpus g LEFT JOIN allocations a ON a.gpu_id = g.id
	        AND a.device_uuid = i.device_uuid
	        WHERE g.node_id = p_node AND (g.uuid = i.device_uuid OR a.id IS NOT NULL) LIMIT 1),
	       device_allocation(p_node, i.device_uuid), i.namespace, i.pod, i.container
	FROM profiles_in(p_profiles) i
	WHERE NOT EXISTS (SELECT 1 FROM workload_profiles w WHERE w.node_id = p_node
	                  AND w.ended_at IS NULL AND w.device_uuid = i.device_uuid
	                  AND w.namespace = i.namespace AND w.pod = i.pod
	                  AND w.container = i.container);

	FOR r IN
		SELECT w.device_uuid, w.namespace, w.pod, w.gpu_id, p.id AS pool_id,
		       p.project_id, p.name AS pool, pr.name AS project
		FROM workload_profiles w
		LEFT JOIN allocations a ON a.id = w.allocation_id AND a.state <> 'released'
		LEFT JOIN pools p ON p.id = a.pool_id
		LEFT JOIN projects pr ON pr.id = p.project_id
		WHERE w.node_id = p_node AND w.ended_at IS NULL
		  AND (p.id IS NULL OR NOT EXISTS (SELECT 1 FROM project_namespaces n
		                                   WHERE n.project_id = p.project_id
		                                     AND n.namespace = w.namespace))
	LOOP
		v_keys := v_keys || ('isolation:' || r.device_uuid || ':' || r.namespace || '/' || r.pod);
		PERFORM alert_raise('isolation_violation', 'critical',
			'isolation:' || r.device_uuid || ':' || r.namespace || '/' || r.pod, p_node, r.gpu_id,
			r.pool_id, r.project_id,
			left(CASE WHEN r.pool_id IS NULL THEN
			          'pod ' || r.namespace || '/' || r.pod || ' uses device ' || r.device_uuid
			          || ' on node ' || v_name || ', which no pool holds'
			     ELSE 'pod ' || r.namespace || '/' || r.pod || ' uses device ' || r.device_uuid
			          || ' of pool ' || r.pool || ', but namespace ' || r.namespace
			          || ' is not of project ' || r.project END, 2000),
			jsonb_build_object('namespace', r.namespace, 'pod', r.pod,
			                   'device_uuid', r.device_uuid));
	END LOOP;
	UPDATE alerts SET resolved_at = now()
	WHERE type = 'isolation_violation' AND node_id = p_node AND resolved_at IS NULL
	  AND dedup_key <> ALL (v_keys);
	RETURN coalesce(array_length(v_keys, 1), 0);
END
$$;

-- Idle (hoarding) alerts: a ready pool allocation older than p_after with
-- no workload seen on it for p_after and average activity below
-- p_threshold over that time (no samples count as idle). Resolved when
-- either changes. Returns the number of idle allocations.
CREATE FUNCTION alerts_idle_sweep(p_after interval, p_threshold double precision)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	v_keys text[] := '{}';
	r      record;
BEGIN
	FOR r IN
		SELECT a.id, a.gpu_id, g.node_id, p.id AS pool_id, p.project_id, p.name AS pool,
		       coalesce(a.device_uuid, g.uuid) AS device
		FROM allocations a JOIN gpus g ON g.id = a.gpu_id JOIN pools p ON p.id = a.pool_id
		WHERE a.state = 'ready' AND a.updated_at < now() - p_after
		  AND NOT EXISTS (SELECT 1 FROM workload_profiles w WHERE w.allocation_id = a.id
		                  AND (w.ended_at IS NULL OR w.ended_at > now() - p_after))
		  AND coalesce((SELECT avg(s.sm_active) FROM gpu_metric_samples s
		                WHERE s.device_uuid = coalesce(a.device_uuid, g.uuid)
		                  AND s.ts > now() - p_after), 0) < p_threshold
	LOOP
		v_keys := v_keys || ('idle:' || r.id);
		PERFORM alert_raise('idle', 'warning', 'idle:' || r.id, r.node_id, r.gpu_id, r.pool_id,
			r.project_id, 'allocation ' || r.id || ' of pool ' || r.pool
			|| ' has had no workload and little activity for ' || p_after::text,
			jsonb_build_object('allocation', r.id, 'device_uuid', r.device));
	END LOOP;
	UPDATE alerts SET resolved_at = now()
	WHERE type = 'idle' AND resolved_at IS NULL AND dedup_key <> ALL (v_keys);
	RETURN coalesce(array_length(v_keys, 1), 0);
END
$$;
