-- Wake the long-polls of GET /v1/clusters/{cluster}/kubernetes?wait=N
-- (gpupool-k8s, docs/kubernetes.md) when what that cluster's List is made
-- of changes: an allocation's state, device UUID or pool, a GPU's health,
-- a pool's status, a project's namespaces. The payload 'k8s:<cluster id>'
-- is a key of the deferred-request registry (server/workers/notifier.c),
-- delivered to every replica when the transaction commits. A hint only
-- (as outbox_wake): a controller that misses one converges at its next
-- poll; one too many answers a 304 early and the controller polls again.
-- pg_notify folds identical payloads of one transaction into one.

-- (plpgsql with PERFORM: a LANGUAGE sql function would stop at the first row)
CREATE FUNCTION k8s_wake_gpu(p_gpu bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || g.cluster_id) FROM gpus g WHERE g.id = p_gpu;
END
$$;

-- Every cluster holding an allocation (of any state) of the pool.
CREATE FUNCTION k8s_wake_pool(p_pool bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || c.cluster_id)
	FROM (SELECT DISTINCT g.cluster_id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	      WHERE a.pool_id = p_pool) c;
END
$$;

CREATE FUNCTION k8s_wake_allocation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP <> 'INSERT' THEN
		PERFORM k8s_wake_gpu(OLD.gpu_id);
	END IF;
	IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.gpu_id <> OLD.gpu_id) THEN
		PERFORM k8s_wake_gpu(NEW.gpu_id);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_allocation_insert_delete AFTER INSERT OR DELETE ON allocations
	FOR EACH ROW EXECUTE FUNCTION k8s_wake_allocation();
CREATE TRIGGER k8s_wake_allocation_update AFTER UPDATE ON allocations
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
		OR OLD.device_uuid IS DISTINCT FROM NEW.device_uuid
		OR OLD.pool_id IS DISTINCT FROM NEW.pool_id
		OR OLD.gpu_id IS DISTINCT FROM NEW.gpu_id)
	EXECUTE FUNCTION k8s_wake_allocation();

CREATE FUNCTION k8s_wake_gpu_health() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || NEW.cluster_id);
	IF OLD.cluster_id <> NEW.cluster_id THEN
		PERFORM pg_notify('gpupool_wake', 'k8s:' || OLD.cluster_id);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_gpu_health AFTER UPDATE ON gpus
	FOR EACH ROW WHEN (OLD.health IS DISTINCT FROM NEW.health
		OR OLD.cluster_id IS DISTINCT FROM NEW.cluster_id)
	EXECUTE FUNCTION k8s_wake_gpu_health();

CREATE FUNCTION k8s_wake_pool_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM k8s_wake_pool(NEW.id);
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_pool_status AFTER UPDATE ON pools
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
	EXECUTE FUNCTION k8s_wake_pool_status();

CREATE FUNCTION k8s_wake_namespaces() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM k8s_wake_pool(p.id) FROM pools p
	WHERE p.project_id = (CASE WHEN TG_OP = 'DELETE' THEN OLD.project_id ELSE NEW.project_id END);
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_namespaces AFTER INSERT OR DELETE ON project_namespaces
	FOR EACH ROW EXECUTE FUNCTION k8s_wake_namespaces();

-- ---- Workloads as Kubernetes allocated them (gpupool-k8s) ----
-- gpupool-k8s reads back each ResourceClaim of a gpupool class
-- (status.allocation.devices.results[] and status.reservedFor pods) and
-- reports pod <-> device for its cluster (PUT
-- /v1/clusters/{cluster}/kubernetes/workloads). Those rows are the
-- scheduler's view, the agent's are the node's: each source replaces only
-- its own rows, and the isolation check of a node looks at both.
ALTER TABLE workload_profiles ADD COLUMN source text NOT NULL DEFAULT 'agent'
	CHECK (source IN ('agent', 'kubernetes'));
DROP INDEX workload_profiles_current_key;
CREATE UNIQUE INDEX workload_profiles_current_key
	ON workload_profiles (node_id, device_uuid, namespace, pod, container, source)
	WHERE ended_at IS NULL;

-- The isolation alerts of node p_node from its current workloads (either
-- source): a pod on a device without a pool allocation, or in a namespace
-- that is not of the pool's project. Returns the number of violations.
CREATE FUNCTION profiles_isolation(p_node bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	v_keys text[] := '{}';
	v_name text;
	r      record;
BEGIN
	SELECT name INTO v_name FROM nodes WHERE id = p_node;
	FOR r IN
		SELECT DISTINCT w.device_uuid, w.namespace, w.pod, w.gpu_id, p.id AS pool_id,
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

-- Replace source p_source's current workloads of node p_node with
-- p_profiles ([{"device_uuid","namespace","pod","container"}]): rows no
-- longer seen end, seen ones are touched, new ones start.
CREATE FUNCTION profiles_replace(p_node bigint, p_source text, p_profiles jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE workload_profiles w SET ended_at = now()
	WHERE w.node_id = p_node AND w.source = p_source AND w.ended_at IS NULL
	  AND NOT EXISTS (SELECT 1 FROM profiles_in(p_profiles) i WHERE i.device_uuid = w.device_uuid
	                  AND i.namespace = w.namespace AND i.pod = w.pod
	                  AND i.container = w.container);
	UPDATE workload_profiles w SET last_seen_at = now(),
		allocation_id = coalesce(device_allocation(p_node, w.device_uuid), w.allocation_id)
	WHERE w.node_id = p_node AND w.source = p_source AND w.ended_at IS NULL;
	INSERT INTO workload_profiles (node_id, device_uuid, gpu_id, allocation_id, namespace, pod,
		container, source)
	SELECT p_node, i.device_uuid,
	       (SELECT g.id FROM gpus g LEFT JOIN allocations a ON a.gpu_id = g.id
	        AND a.device_uuid = i.device_uuid
	        WHERE g.node_id = p_node AND (g.uuid = i.device_uuid OR a.id IS NOT NULL) LIMIT 1),
	       device_allocation(p_node, i.device_uuid), i.namespace, i.pod, i.container, p_source
	FROM profiles_in(p_profiles) i
	WHERE NOT EXISTS (SELECT 1 FROM workload_profiles w WHERE w.node_id = p_node
	                  AND w.source = p_source AND w.ended_at IS NULL
	                  AND w.device_uuid = i.device_uuid AND w.namespace = i.namespace
	                  AND w.pod = i.pod AND w.container = i.container);
END
$$;

-- The agent's report (as in 0011), now replacing only the agent's rows.
CREATE OR REPLACE FUNCTION agent_apply_profiles(p_node bigint, p_profiles jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM profiles_replace(p_node, 'agent', p_profiles);
	RETURN profiles_isolation(p_node);
END
$$;

-- gpupool-k8s' report for cluster p_cluster: p_profiles as above, the
-- devices named by UUID. Every device must be a GPU of the cluster or a
-- live allocation's device on one: else nothing is stored and the answer
-- is the index of the first one that is not (and 0 violations). Otherwise
-- each node of the cluster gets its share (possibly none: its rows of this
-- source end). Returns (bad_index -1, violations).
CREATE FUNCTION k8s_apply_workloads(p_cluster bigint, p_profiles jsonb,
	OUT bad_index integer, OUT violations integer)
LANGUAGE plpgsql AS $$
DECLARE
	v_node bigint;
BEGIN
	bad_index := -1;
	violations := 0;
	SELECT min(x.i - 1)::integer INTO bad_index
	FROM jsonb_array_elements(p_profiles) WITH ORDINALITY AS x(p, i)
	WHERE NOT EXISTS (SELECT 1 FROM gpus g WHERE g.cluster_id = p_cluster
	                  AND g.uuid = x.p->>'device_uuid')
	  AND NOT EXISTS (SELECT 1 FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	                  WHERE g.cluster_id = p_cluster AND a.state <> 'released'
	                    AND a.device_uuid = x.p->>'device_uuid');
	IF bad_index IS NOT NULL THEN
		RETURN;
	END IF;
	bad_index := -1;
	-- the nodes in id order (the global lock order), each with its devices' rows
	FOR v_node IN
		SELECT n.id FROM nodes n WHERE n.cluster_id = p_cluster ORDER BY n.id
	LOOP
		PERFORM profiles_replace(v_node, 'kubernetes', coalesce((
			SELECT jsonb_agg(x.p) FROM jsonb_array_elements(p_profiles) AS x(p)
			WHERE EXISTS (SELECT 1 FROM gpus g LEFT JOIN allocations a ON a.gpu_id = g.id
			              AND a.state <> 'released' AND a.device_uuid = x.p->>'device_uuid'
			              WHERE g.node_id = v_node AND (g.uuid = x.p->>'device_uuid'
			                                            OR a.id IS NOT NULL))), '[]'));
		violations := violations + profiles_isolation(v_node);
	END LOOP;
END
$$;
