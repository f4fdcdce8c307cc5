-- 0008_health_alerts_telemetry: the tables that node agents, billing and
-- the dashboard share (docs/design.md): every GPU health change kept as
-- an interval history (billing credits the failed time), alerts raised
-- by any part of the server, raw GPU telemetry in daily partitions with
-- hourly roll-ups, and the workloads seen on each device.

-- One row per stretch of time a GPU had one health. Kept by a trigger
-- on gpus, so that a change made by an operator (PATCH) and one made by
-- an agent's report are recorded alike. ended_at NULL: the current one.
CREATE TABLE gpu_health_intervals (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	gpu_id     bigint NOT NULL REFERENCES gpus (id),
	health     text NOT NULL CHECK (health IN ('ok', 'degraded', 'failed')),
	reason     text,
	started_at timestamptz NOT NULL,
	ended_at   timestamptz,
	CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE UNIQUE INDEX gpu_health_intervals_open_key ON gpu_health_intervals (gpu_id)
	WHERE ended_at IS NULL;
CREATE INDEX gpu_health_intervals_gpu_idx ON gpu_health_intervals (gpu_id, started_at);
CREATE INDEX gpu_health_intervals_failed_idx ON gpu_health_intervals (started_at)
	WHERE health = 'failed';

INSERT INTO gpu_health_intervals (gpu_id, health, reason, started_at)
SELECT id, health, health_reason, created_at FROM gpus;

CREATE FUNCTION gpus_health_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO gpu_health_intervals (gpu_id, health, reason, started_at)
		VALUES (NEW.id, NEW.health, NEW.health_reason, now());
		RETURN NULL;
	END IF;
	IF NEW.health IS NOT DISTINCT FROM OLD.health THEN
		RETURN NULL;
	END IF;
	UPDATE gpu_health_intervals SET ended_at = greatest(now(), started_at)
	WHERE gpu_id = NEW.id AND ended_at IS NULL;
	INSERT INTO gpu_health_intervals (gpu_id, health, reason, started_at)
	VALUES (NEW.id, NEW.health, NEW.health_reason, now());
	RETURN NULL;
END
$$;

CREATE TRIGGER gpus_health_history_ins AFTER INSERT ON gpus
	FOR EACH ROW EXECUTE FUNCTION gpus_health_history();
CREATE TRIGGER gpus_health_history_upd AFTER UPDATE OF health ON gpus
	FOR EACH ROW EXECUTE FUNCTION gpus_health_history();

-- Alerts. At most one open alert per dedup_key: raising an open one
-- again counts it (occurrences, last_seen_at); resolving closes it.
-- type: gpu_failed, xid, ecc, drift, isolation_violation, idle,
-- push_failed, node_unknown (the list lives in core/states.h).
CREATE TABLE alerts (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	type            text NOT NULL CHECK (type ~ '^[a-z][a-z_]{1,40}$'),
	severity        text NOT NULL DEFAULT 'warning'
	                CHECK (severity IN ('info', 'warning', 'critical')),
	dedup_key       text NOT NULL CHECK (length(dedup_key) BETWEEN 1 AND 500),
	node_id         bigint REFERENCES nodes (id),
	gpu_id          bigint REFERENCES gpus (id),
	pool_id         bigint REFERENCES pools (id),
	project_id      bigint REFERENCES projects (id),
	message         text NOT NULL CHECK (length(message) <= 2000),
	details         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(details) = 'object'),
	occurrences     bigint NOT NULL DEFAULT 1,
	raised_at       timestamptz NOT NULL DEFAULT now(),
	last_seen_at    timestamptz NOT NULL DEFAULT now(),
	resolved_at     timestamptz,
	acknowledged_at timestamptz,
	acknowledged_by bigint REFERENCES users (id)
);
CREATE UNIQUE INDEX alerts_open_key ON alerts (dedup_key) WHERE resolved_at IS NULL;
CREATE INDEX alerts_open_type_idx ON alerts (type) WHERE resolved_at IS NULL;
CREATE INDEX alerts_project_idx ON alerts (project_id, id) WHERE project_id IS NOT NULL;
CREATE INDEX alerts_raised_idx ON alerts (raised_at, id);

-- Raise (or count again) the open alert with this key; returns its id.
CREATE FUNCTION alert_raise(p_type text, p_severity text, p_key text, p_node bigint,
	p_gpu bigint, p_pool bigint, p_project bigint, p_message text, p_details jsonb)
RETURNS bigint LANGUAGE sql AS $$
	INSERT INTO alerts (type, severity, dedup_key, node_id, gpu_id, pool_id, project_id,
		message, details)
	VALUES (p_type, p_severity, p_key, p_node, p_gpu, p_pool, p_project, p_message,
		coalesce(p_details, '{}'))
	ON CONFLICT (dedup_key) WHERE resolved_at IS NULL DO UPDATE
	SET occurrences = alerts.occurrences + 1, last_seen_at = now(),
	    message = EXCLUDED.message, details = EXCLUDED.details
	RETURNING id
$$;

-- Close the open alert with this key, if any.
CREATE FUNCTION alert_resolve(p_key text) RETURNS void LANGUAGE sql AS $$
	UPDATE alerts SET resolved_at = now() WHERE dedup_key = p_key AND resolved_at IS NULL
$$;

-- Raw telemetry: one row per device per sample. device_uuid is the GPU's
-- UUID for a whole GPU and the MIG device's UUID (allocations.device_uuid)
-- for a MIG instance. Partitioned by day (the partition worker creates
-- them ahead and drops those past retention); NULL: not reported.
CREATE TABLE gpu_metric_samples (
	ts               timestamptz NOT NULL,
	gpu_id           bigint NOT NULL,
	device_uuid      text NOT NULL,
	power_w          double precision,
	sm_active        double precision CHECK (sm_active BETWEEN 0 AND 1),
	memory_used_mib  bigint,
	memory_total_mib bigint,
	temperature_c    double precision,
	ecc_corrected    bigint,
	ecc_uncorrected  bigint,
	last_xid         integer,
	remapped_rows    bigint
) PARTITION BY RANGE (ts);
CREATE INDEX gpu_metric_samples_gpu_idx ON gpu_metric_samples (gpu_id, ts);
CREATE INDEX gpu_metric_samples_device_idx ON gpu_metric_samples (device_uuid, ts);

-- Hourly roll-ups, kept long: one row per (device, hour).
CREATE TABLE gpu_metric_hourly (
	hour                timestamptz NOT NULL,
	gpu_id              bigint NOT NULL,
	device_uuid         text NOT NULL,
	samples             integer NOT NULL CHECK (samples > 0),
	power_w_avg         double precision,
	power_w_max         double precision,
	sm_active_avg       double precision,
	sm_active_low       integer NOT NULL DEFAULT 0,
	memory_used_mib_max bigint,
	temperature_c_max   double precision,
	ecc_uncorrected_max bigint,
	PRIMARY KEY (device_uuid, hour)
);
CREATE INDEX gpu_metric_hourly_gpu_idx ON gpu_metric_hourly (gpu_id, hour);

-- Workloads seen on a device: one row per (device, namespace, pod,
-- container) stretch; ended_at NULL while the node still reports it.
CREATE TABLE workload_profiles (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	node_id       bigint NOT NULL REFERENCES nodes (id),
	device_uuid   text NOT NULL,
	gpu_id        bigint REFERENCES gpus (id),
	allocation_id bigint REFERENCES allocations (id),
	namespace     text NOT NULL,
	pod           text NOT NULL,
	container     text NOT NULL DEFAULT '',
	first_seen_at timestamptz NOT NULL DEFAULT now(),
	last_seen_at  timestamptz NOT NULL DEFAULT now(),
	ended_at      timestamptz
);
CREATE UNIQUE INDEX workload_profiles_current_key
	ON workload_profiles (node_id, device_uuid, namespace, pod, container)
	WHERE ended_at IS NULL;
CREATE INDEX workload_profiles_allocation_idx ON workload_profiles (allocation_id, first_seen_at);
CREATE INDEX workload_profiles_device_idx ON workload_profiles (device_uuid, first_seen_at);
