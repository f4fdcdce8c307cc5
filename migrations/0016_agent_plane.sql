-- 0016_agent_plane: the agent plane under real GPU faults and hostile
-- nodes (issue 19, docs/agent.md "Faults" and "Hostile nodes").
--
-- * status reports carry a per-GPU state: "lost" fails the GPU at once,
--   "unknown" leaves its allocations exactly as they were (no failure,
--   no release, no drift); contained faults make a GPU "degraded";
--   observed_generation is clamped to the node's generation and never
--   moves backwards;
-- * the hourly roll-up is keyed by (gpu, device, hour) and keeps a
--   watermark; idle sweeps and billing's idle split join through the
--   GPU (and its node), never by device UUID alone;
-- * enrollment tokens may be bound to a node name and may adopt a node
--   registered by hand; a live agent's node is never adopted;
-- * failed allocations and unknown nodes are credited (billing.md);
-- * retention of delivered outbox rows, resolved alerts and ended
--   workload profiles.

-- ---- enrollment ----

ALTER TABLE enrollment_tokens
	ADD COLUMN node_name text CHECK (node_name IS NULL OR length(node_name) BETWEEN 1 AND 253),
	ADD COLUMN adopt_manual boolean NOT NULL DEFAULT false;

-- Enroll (or adopt) a node for an agent, in the transaction that consumed
-- enrollment token p_token. Refused (SQLSTATE 23505, constraint
-- node_adopt_refused: 409) when the token is bound to another node name,
-- when the node is registered by hand and the token does not say
-- adopt_manual, and when the node's agent is live: it holds a node token
-- that is not revoked and its last heartbeat is within p_grace. Every
-- adoption of an existing node is audited by the caller (node.adopt).
-- p_adopted: whether an existing node was taken over.
DROP FUNCTION agent_enroll(bigint, bigint, text, text, text, text, bigint, bigint, jsonb, bytea,
	text);
CREATE FUNCTION agent_enroll(p_token bigint, p_cluster bigint, p_name text, p_hostname text,
	p_callback text, p_version text, p_cpu bigint, p_mem bigint, p_gpus jsonb,
	p_digest bytea, p_secret text, p_grace interval, OUT node_id bigint, OUT adopted jsonb)
LANGUAGE plpgsql AS $$
DECLARE
	v_id      bigint;
	v_cluster bigint;
	v_managed boolean;
	v_beat    timestamptz;
	v_bound   text;
	v_manual  boolean;
	v_live    boolean;
BEGIN
	SELECT t.node_name, t.adopt_manual INTO v_bound, v_manual
	FROM enrollment_tokens t WHERE t.id = p_token;
	IF v_bound IS NOT NULL AND v_bound <> p_name THEN
		RAISE EXCEPTION 'this enrollment token is bound to node %, not %', v_bound, p_name
			USING ERRCODE = 'unique_violation', CONSTRAINT = 'node_adopt_refused';
	END IF;
	PERFORM 1 FROM gpus g WHERE g.node_id = (SELECT n.id FROM nodes n WHERE n.name = p_name)
		ORDER BY g.id FOR NO KEY UPDATE;
	SELECT n.id, n.cluster_id, n.managed_by_agent, n.agent_heartbeat_at
	INTO v_id, v_cluster, v_managed, v_beat
	FROM nodes n WHERE n.name = p_name FOR NO KEY UPDATE;
	IF FOUND AND v_cluster <> p_cluster THEN
		RAISE EXCEPTION 'node % belongs to another cluster than the enrollment token', p_name
			USING ERRCODE = 'unique_violation', CONSTRAINT = 'nodes_cluster_enroll';
	END IF;
	adopted := NULL;
	IF v_id IS NOT NULL THEN
		IF NOT v_managed AND NOT v_manual THEN
			RAISE EXCEPTION 'node % was registered by hand: only an enrollment token made '
				'with adopt_manual may adopt it', p_name
				USING ERRCODE = 'unique_violation', CONSTRAINT = 'node_adopt_refused';
		END IF;
		v_live := v_managed AND v_beat IS NOT NULL AND v_beat > now() - p_grace
			AND EXISTS (SELECT 1 FROM node_tokens t WHERE t.node_id = v_id
			            AND t.revoked_at IS NULL);
		IF v_live THEN
			RAISE EXCEPTION 'node % has a live agent (last heartbeat %): revoke its agent '
				'token first', p_name,
				to_char(v_beat AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
				USING ERRCODE = 'unique_violation', CONSTRAINT = 'node_adopt_refused';
		END IF;
		adopted := jsonb_build_object('managed_by_agent', v_managed,
			'last_heartbeat', v_beat, 'bound_token', v_bound IS NOT NULL,
			'adopt_manual', v_manual);
	END IF;
	IF v_id IS NULL THEN
		INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes,
			managed_by_agent, callback_url, push_secret, agent_version, agent_heartbeat_at)
		VALUES (p_cluster, p_name, p_hostname, coalesce(p_cpu, 0), coalesce(p_mem, 0), true,
			p_callback, p_secret, p_version, now())
		RETURNING id INTO v_id;
	ELSE
		UPDATE nodes SET hostname = p_hostname, callback_url = p_callback, push_secret = p_secret,
			managed_by_agent = true, agent_version = p_version, agent_heartbeat_at = now(),
			cpu_millicores = coalesce(p_cpu, cpu_millicores),
			memory_bytes = coalesce(p_mem, memory_bytes),
			generation = generation + 1, updated_at = now()
		WHERE id = v_id;
	END IF;
	node_id := v_id;
	UPDATE node_tokens SET revoked_at = now() WHERE node_tokens.node_id = v_id
		AND revoked_at IS NULL;
	INSERT INTO node_tokens (node_id, digest) VALUES (v_id, p_digest);
	UPDATE enrollment_tokens SET node_id = v_id WHERE id = p_token;

	IF EXISTS (SELECT 1 FROM jsonb_to_recordset(p_gpus) x(uuid text)
	           JOIN gpus g ON g.uuid = x.uuid WHERE g.node_id <> v_id) THEN
		RAISE EXCEPTION 'a GPU of this node is registered on another node'
			USING ERRCODE = 'unique_violation', CONSTRAINT = 'gpus_uuid_key';
	END IF;
	UPDATE gpus g SET mig_enabled = x.mig_enabled, generation = g.generation + 1,
		updated_at = now()
	FROM jsonb_to_recordset(p_gpus) x(uuid text, mig_enabled boolean)
	WHERE g.uuid = x.uuid AND g.node_id = v_id AND g.mig_enabled <> x.mig_enabled
	  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.gpu_id = g.id AND a.state <> 'released');
	INSERT INTO gpus (node_id, cluster_id, gpu_index, uuid, model, memory_mib, mig_enabled,
		node_status)
	SELECT v_id, p_cluster, x.index, x.uuid, x.model, x.memory_mib, x.mig_enabled, 'ready'
	FROM jsonb_to_recordset(p_gpus)
		AS x(uuid text, index integer, model text, memory_mib integer, mig_enabled boolean)
	WHERE NOT EXISTS (SELECT 1 FROM gpus g WHERE g.uuid = x.uuid)
	ORDER BY x.index;
	INSERT INTO allocations (gpu_id, profile, start, size, state, device_uuid)
	SELECT g.id, i.profile, i.start, i.size, 'ready', i.uuid
	FROM jsonb_array_elements(p_gpus) rg
	JOIN gpus g ON g.uuid = rg->>'uuid' AND g.node_id = v_id
	CROSS JOIN LATERAL jsonb_to_recordset(coalesce(rg->'instances', '[]'))
		AS i(profile text, start integer, size integer, uuid text)
	WHERE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.gpu_id = g.id AND a.state <> 'released'
	                  AND int4range(a.start, a.start + a.size) && int4range(i.start, i.start + i.size));
END
$$;

-- ---- status reports ----

-- The instances a status report lists, on the node's own GPUs, of the GPUs
-- whose instances were listed (state "ok" or absent; 0016).
CREATE OR REPLACE FUNCTION agent_reported(p_node bigint, p_gpus jsonb)
RETURNS TABLE (gpu_id bigint, profile text, start integer, size integer, uuid text)
LANGUAGE sql STABLE AS $$
	SELECT g.id, i.profile, i.start, i.size, i.uuid
	FROM jsonb_array_elements(p_gpus) rg
	JOIN gpus g ON g.node_id = p_node AND g.uuid = rg->>'uuid'
	CROSS JOIN LATERAL jsonb_to_recordset(coalesce(rg->'instances', '[]'))
		AS i(profile text, start integer, size integer, uuid text)
	WHERE coalesce(rg->>'state', 'ok') = 'ok'
$$;

-- Apply an agent's status report (PUT /v1/agent/status) in one
-- transaction (0010's, with the fault classes of issue 19). p_gpus:
-- [{"uuid","state"("ok"|"unknown"|"lost"),"fail_reason"(null: not failed
-- by this report),"ecc_reason"(uncorrectable ECC errors without a
-- contained-error Xid: fails a GPU that is ok, not a degraded one),
-- "degrade_reason"(null: not degraded),"details"({}: for the alerts),
-- "unknown_xids":[{"xid","count"}],"instances":[{"profile","start","size",
-- "uuid"}]}] (the
-- server decided the reasons from the Xid catalog, ECC, row remapping,
-- the recovery action and the GPU's state); p_errors:
-- [{"gpu","profile","start","message"}]. A GPU in state "unknown" keeps
-- every allocation as it was (its instances could not be listed: no
-- failure, no release, no drift); a "lost" one fails at once.
-- observed_generation is clamped to the node's generation and never
-- moves backwards.
-- Locks, in the global order: the pools with live allocations on the
-- node and their approved requests, the node's GPUs, their live
-- allocations, the node; gpu_classes last (through triggers).
-- Health only gets worse here: a failed GPU stays failed until an
-- operator sets it back (PATCH /v1/gpus/{gpu}).
CREATE OR REPLACE FUNCTION agent_apply_status(p_node bigint, p_observed bigint, p_version text,
	p_gpus jsonb, p_errors jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
	v_gen      bigint;
	v_name     text;
	v_pools    bigint[];
	v_n        integer;
	v_ready    integer := 0;
	v_failed   integer := 0;
	v_released integer := 0;
	v_gpus_bad integer := 0;
	v_keys     text[];
	v_unknown  bigint[];
	v_obs      bigint;
	r          record;
BEGIN
	-- the global lock order (docs/architecture.md): the pools' approved
	-- requests, then the pools, each in id order, as approvals take them
	SELECT coalesce(array_agg(DISTINCT a.pool_id ORDER BY a.pool_id), '{}') INTO v_pools
	FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	WHERE g.node_id = p_node AND a.state <> 'released' AND a.pool_id IS NOT NULL;
	PERFORM 1 FROM pool_requests q WHERE q.pool_id = ANY (v_pools) AND q.state = 'approved'
		ORDER BY q.id FOR NO KEY UPDATE;
	PERFORM 1 FROM pools p WHERE p.id = ANY (v_pools) ORDER BY p.id FOR NO KEY UPDATE;
	PERFORM 1 FROM gpus g WHERE g.node_id = p_node ORDER BY g.id FOR NO KEY UPDATE;
	PERFORM 1 FROM allocations a JOIN gpus g ON g.id = a.gpu_id
		WHERE g.node_id = p_node AND a.state <> 'released' ORDER BY a.id FOR NO KEY UPDATE OF a;
	SELECT n.generation, n.name INTO v_gen, v_name FROM nodes n WHERE n.id = p_node
		FOR NO KEY UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node % does not exist', p_node USING ERRCODE = 'no_data_found';
	END IF;
	v_obs := least(p_observed, v_gen);
	-- GPUs whose instances could not be listed this scan
	SELECT coalesce(array_agg(g.id), '{}') INTO v_unknown
	FROM jsonb_array_elements(p_gpus) rg JOIN gpus g ON g.node_id = p_node AND g.uuid = rg->>'uuid'
	WHERE rg->>'state' = 'unknown';

	-- health: a GPU the report marks failed, or one the node no longer shows
	FOR r IN
		WITH f AS (
			SELECT g.id, g.uuid,
			       CASE WHEN rg.v IS NULL THEN 'the node agent no longer sees this GPU'
			            WHEN rg.v->>'fail_reason' IS NOT NULL THEN rg.v->>'fail_reason'
			            -- an ECC count alone fails a healthy GPU; a degraded one
			            -- (a contained error) keeps its count and stays degraded
			            WHEN g.health = 'ok' THEN rg.v->>'ecc_reason' END AS reason,
			       coalesce(rg.v->'details', '{}') AS details
			FROM gpus g
			LEFT JOIN LATERAL (SELECT x AS v FROM jsonb_array_elements(p_gpus) x
			                   WHERE x->>'uuid' = g.uuid LIMIT 1) rg ON true
			WHERE g.node_id = p_node
		)
		UPDATE gpus g SET health = 'failed', health_reason = left(f.reason, 500),
			generation = g.generation + 1, updated_at = now()
		FROM f WHERE g.id = f.id AND f.reason IS NOT NULL AND g.health <> 'failed'
		RETURNING g.id, g.uuid, f.reason, f.details
	LOOP
		v_gpus_bad := v_gpus_bad + 1;
		PERFORM alert_raise('gpu_failed', 'critical', 'gpu_failed:' || r.uuid, p_node, r.id,
			NULL, NULL, left('GPU ' || r.uuid || ' on node ' || v_name || ' failed: ' || r.reason, 2000),
			r.details || jsonb_build_object('reason', r.reason));
		PERFORM alert_resolve('gpu_degraded:' || r.uuid);
	END LOOP;

	-- contained faults: degraded (out of placement for new work, the
	-- allocations on it keep running), an alert
	FOR r IN
		WITH f AS (
			SELECT g.id, g.uuid, rg->>'degrade_reason' AS reason,
			       coalesce(rg->'details', '{}') AS details
			FROM jsonb_array_elements(p_gpus) rg
			JOIN gpus g ON g.node_id = p_node AND g.uuid = rg->>'uuid'
			WHERE rg->>'degrade_reason' IS NOT NULL AND rg->>'fail_reason' IS NULL
		)
		UPDATE gpus g SET health = 'degraded', health_reason = left(f.reason, 500),
			generation = g.generation + 1, updated_at = now()
		FROM f WHERE g.id = f.id AND g.health = 'ok'
		RETURNING g.id, g.uuid, f.reason, f.details
	LOOP
		PERFORM alert_raise('gpu_degraded', 'warning', 'gpu_degraded:' || r.uuid, p_node, r.id,
			NULL, NULL, left('GPU ' || r.uuid || ' on node ' || v_name || ' is degraded: '
			|| r.reason || '; its allocations keep running, no new work is placed on it', 2000),
			r.details || jsonb_build_object('reason', r.reason));
	END LOOP;

	-- Xids the catalog does not know: recorded, the GPU's health unchanged
	FOR r IN
		SELECT g.id, g.uuid, (x->>'xid')::integer AS xid, (x->>'count')::bigint AS n
		FROM jsonb_array_elements(p_gpus) rg
		JOIN gpus g ON g.node_id = p_node AND g.uuid = rg->>'uuid'
		CROSS JOIN LATERAL jsonb_array_elements(coalesce(rg->'unknown_xids', '[]')) x
	LOOP
		PERFORM alert_raise('xid_unknown', 'warning', 'xid_unknown:' || r.uuid || ':' || r.xid,
			p_node, r.id, NULL, NULL, 'GPU ' || r.uuid || ' on node ' || v_name
			|| ' reported Xid ' || r.xid || ', which the Xid catalog does not know',
			jsonb_build_object('xid', r.xid, 'count', r.n));
	END LOOP;

	-- allocations on a failed GPU fail with it
	UPDATE allocations a SET state = 'failed', updated_at = now(),
		error = left('GPU failed: ' || coalesce(g.health_reason, 'marked failed'), 2000)
	FROM gpus g WHERE g.id = a.gpu_id AND g.node_id = p_node AND g.health = 'failed'
	  AND a.state IN ('reserved', 'provisioning', 'ready');
	GET DIAGNOSTICS v_n = ROW_COUNT;
	v_failed := v_failed + v_n;

	-- realized instances: the allocation is ready (again)
	UPDATE allocations a SET state = 'ready', device_uuid = rep.uuid, error = NULL,
		updated_at = now()
	FROM agent_reported(p_node, p_gpus) rep JOIN gpus g ON g.id = rep.gpu_id
	WHERE a.gpu_id = rep.gpu_id AND a.start = rep.start AND a.profile = rep.profile
	  AND g.health <> 'failed'
	  AND (a.state IN ('reserved', 'provisioning', 'failed')
	       OR (a.state = 'ready' AND a.device_uuid IS DISTINCT FROM rep.uuid));
	GET DIAGNOSTICS v_ready = ROW_COUNT;

	-- the agent said why it could not create one
	UPDATE allocations a SET state = 'failed', updated_at = now(),
		error = left(coalesce(e.message, 'the node agent could not create the instance'), 2000)
	FROM jsonb_to_recordset(coalesce(p_errors, '[]'))
		AS e(gpu text, profile text, start integer, message text)
	JOIN gpus g ON g.uuid = e.gpu AND g.node_id = p_node
	WHERE a.gpu_id = g.id AND a.start = e.start AND a.profile = e.profile
	  AND a.state IN ('reserved', 'provisioning');
	GET DIAGNOSTICS v_n = ROW_COUNT;
	v_failed := v_failed + v_n;

	-- not there although the agent applied this generation, or gone
	UPDATE allocations a SET state = 'failed', updated_at = now(),
		error = CASE WHEN a.state = 'ready' THEN 'the instance disappeared from the node'
		             ELSE 'the node agent applied generation ' || v_obs
		                  || ' without creating this instance' END
	FROM gpus g
	WHERE g.id = a.gpu_id AND g.node_id = p_node
	  AND (a.state = 'ready' OR (a.state IN ('reserved', 'provisioning') AND v_obs >= v_gen))
	  AND a.gpu_id <> ALL (v_unknown)
	  AND NOT EXISTS (SELECT 1 FROM agent_reported(p_node, p_gpus) rep
	                  WHERE rep.gpu_id = a.gpu_id AND rep.start = a.start
	                    AND rep.profile = a.profile);
	GET DIAGNOSTICS v_n = ROW_COUNT;
	v_failed := v_failed + v_n;

	-- releasing ones whose instance is gone: the capacity is free again
	UPDATE allocations a SET state = 'released', released_at = now(), updated_at = now()
	FROM gpus g
	WHERE g.id = a.gpu_id AND g.node_id = p_node AND a.state = 'releasing'
	  AND a.gpu_id <> ALL (v_unknown)
	  AND NOT EXISTS (SELECT 1 FROM agent_reported(p_node, p_gpus) rep
	                  WHERE rep.gpu_id = a.gpu_id AND rep.start = a.start);
	GET DIAGNOSTICS v_released = ROW_COUNT;

	-- drift: an instance the node has and gpupool does not know
	v_keys := '{}';
	FOR r IN
		SELECT rep.gpu_id, g.uuid AS gpu_uuid, rep.profile, rep.start, rep.uuid
		FROM agent_reported(p_node, p_gpus) rep JOIN gpus g ON g.id = rep.gpu_id
		WHERE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.gpu_id = rep.gpu_id
		                  AND a.state <> 'released' AND a.start = rep.start
		                  AND a.profile = rep.profile)
	LOOP
		v_keys := v_keys || ('drift:' || r.gpu_uuid || ':' || r.profile || '@' || r.start);
		PERFORM alert_raise('drift', 'warning',
			'drift:' || r.gpu_uuid || ':' || r.profile || '@' || r.start, p_node, r.gpu_id,
			NULL, NULL, left('node ' || v_name || ' has instance ' || r.profile || '@' || r.start
			|| ' on GPU ' || r.gpu_uuid || ' that gpupool did not place', 2000),
			jsonb_build_object('profile', r.profile, 'start', r.start, 'device_uuid', r.uuid));
	END LOOP;
	UPDATE alerts SET resolved_at = now()
	WHERE type = 'drift' AND node_id = p_node AND resolved_at IS NULL
	  AND dedup_key <> ALL (v_keys) AND gpu_id <> ALL (v_unknown);

	-- pools: degraded when one of theirs failed, active when all are ready,
	-- released when nothing is left
	FOR r IN
		UPDATE pools p SET status = 'degraded', generation = p.generation + 1, updated_at = now()
		WHERE p.id = ANY (v_pools) AND p.status IN ('provisioning', 'active')
		  AND EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id AND a.state = 'failed')
		RETURNING p.id, p.project_id, p.name
	LOOP
		INSERT INTO audit_log (action, object_type, object_id, project_id, before, after)
		VALUES ('pool.degraded', 'pool', r.id::text, r.project_id, NULL,
			'{"status":"degraded"}'::jsonb);
		PERFORM alert_raise('pool_degraded', 'critical', 'pool_degraded:' || r.id, p_node, NULL,
			r.id, r.project_id, 'pool ' || r.name || ' has a failed allocation', '{}');
	END LOOP;
	FOR r IN
		UPDATE pools p SET status = 'active', generation = p.generation + 1, updated_at = now()
		WHERE p.id = ANY (v_pools) AND p.status IN ('provisioning', 'degraded')
		  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id
		                  AND a.state NOT IN ('ready', 'releasing', 'released'))
		RETURNING p.id, p.project_id
	LOOP
		INSERT INTO audit_log (action, object_type, object_id, project_id, before, after)
		VALUES ('pool.active', 'pool', r.id::text, r.project_id, NULL, '{"status":"active"}'::jsonb);
		PERFORM alert_resolve('pool_degraded:' || r.id);
	END LOOP;
	FOR r IN
		UPDATE pools p SET status = 'released', released_at = now(),
			generation = p.generation + 1, updated_at = now()
		WHERE p.id = ANY (v_pools) AND p.status = 'releasing'
		  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id
		                  AND a.state <> 'released')
		RETURNING p.id, p.project_id
	LOOP
		INSERT INTO audit_log (action, object_type, object_id, project_id, before, after)
		VALUES ('pool.released', 'pool', r.id::text, r.project_id,
			'{"status":"releasing"}'::jsonb, '{"status":"released"}'::jsonb);
		PERFORM alert_resolve('pool_degraded:' || r.id);
	END LOOP;

	-- approved requests: fulfilled once their allocations are there (or
	-- gone, for shrink and release), failed when one of theirs failed
	WITH done AS (
		UPDATE pool_requests q SET
			state = CASE WHEN q.action IN ('create', 'expand') AND EXISTS (
			             SELECT 1 FROM allocations a WHERE a.request_id = q.id
			             AND a.state = 'failed') THEN 'failed' ELSE 'fulfilled' END,
			generation = q.generation + 1
		WHERE q.pool_id = ANY (v_pools) AND q.state = 'approved'
		  AND CASE WHEN q.action IN ('create', 'expand') THEN
		           NOT EXISTS (SELECT 1 FROM allocations a WHERE a.request_id = q.id
		                       AND a.state IN ('reserved', 'provisioning'))
		       ELSE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.release_request_id = q.id
		                        AND a.state <> 'released') END
		RETURNING q.id, q.state
	)
	INSERT INTO pool_request_events (request_id, from_state, to_state, actor, note)
	SELECT id, 'approved', state, 'agent:' || v_name,
	       CASE WHEN state = 'failed' THEN 'the node agent could not create an allocation'
	            ELSE 'the node agent confirmed the layout' END
	FROM done;

	UPDATE nodes SET observed_generation = greatest(observed_generation, v_obs),
		agent_version = coalesce(p_version, agent_version), agent_heartbeat_at = now(),
		agent_status_at = now(), agent_errors = coalesce(p_errors, '[]'),
		status = CASE WHEN status = 'unknown' THEN 'ready' ELSE status END,
		status_reason = CASE WHEN status = 'unknown' THEN NULL ELSE status_reason END
	WHERE id = p_node;
	PERFORM alert_resolve('node_unknown:' || p_node);
	-- what the agent applied needs no push any more
	UPDATE outbox SET delivered_at = now(), last_error = NULL
	WHERE node_id = p_node AND delivered_at IS NULL AND generation <= v_obs;

	RETURN jsonb_build_object('generation', v_gen, 'ready', v_ready, 'failed', v_failed,
		'released', v_released, 'gpus_failed', v_gpus_bad,
		'drift', coalesce(array_length(v_keys, 1), 0), 'unknown_gpus', cardinality(v_unknown));
END
$$;

-- A heartbeat: the node is alive. A node that was unknown is ready
-- again (its GPUs first, then the node, as the lock order wants).
-- observed_generation is clamped to the node's generation and never
-- moves backwards (0016).
CREATE OR REPLACE FUNCTION agent_heartbeat(p_node bigint, p_observed bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	v_gen bigint;
	v_status text;
BEGIN
	SELECT status INTO v_status FROM nodes WHERE id = p_node;
	IF v_status = 'unknown' THEN
		PERFORM 1 FROM gpus g WHERE g.node_id = p_node ORDER BY g.id FOR NO KEY UPDATE;
		PERFORM alert_resolve('node_unknown:' || p_node);
	END IF;
	UPDATE nodes SET agent_heartbeat_at = now(),
		observed_generation = CASE WHEN p_observed IS NULL THEN observed_generation
			ELSE greatest(observed_generation, least(p_observed, generation)) END,
		status = CASE WHEN status = 'unknown' THEN 'ready' ELSE status END,
		status_reason = CASE WHEN status = 'unknown' THEN NULL ELSE status_reason END
	WHERE id = p_node RETURNING generation INTO v_gen;
	IF p_observed IS NOT NULL THEN
		UPDATE outbox SET delivered_at = now(), last_error = NULL
		WHERE node_id = p_node AND delivered_at IS NULL
		  AND generation <= least(p_observed, v_gen);
	END IF;
	RETURN v_gen;
END
$$;


-- ---- telemetry bound to the node ----

CREATE INDEX allocations_device_uuid_idx ON allocations (device_uuid) WHERE device_uuid IS NOT NULL;

-- The samples of a batch from node p_node ([{"i","gpu_uuid","device_uuid"}])
-- that are not the node's to send: verdict 'foreign' (gpu_uuid is not a GPU
-- of the node, or device_uuid is a GPU or an instance of another node:
-- the whole batch is refused) or 'unknown_device' (device_uuid is neither
-- the GPU nor an instance gpupool knows on it: that sample is dropped).
CREATE FUNCTION metric_check(p_node bigint, p_samples jsonb)
RETURNS TABLE (idx integer, field text, verdict text)
LANGUAGE sql STABLE AS $$
	WITH x AS (
		SELECT s.i, s.gpu_uuid, s.device_uuid, g.id AS gpu_id, g.uuid AS own_uuid
		FROM jsonb_to_recordset(p_samples) AS s(i integer, gpu_uuid text, device_uuid text)
		LEFT JOIN gpus g ON g.uuid = s.gpu_uuid AND g.node_id = p_node
	)
	SELECT x.i, 'gpu_uuid', 'foreign' FROM x WHERE x.gpu_id IS NULL
	UNION ALL
	SELECT x.i, 'device_uuid',
	       CASE WHEN EXISTS (SELECT 1 FROM gpus g WHERE g.uuid = x.device_uuid
	                         AND g.node_id <> p_node)
	              OR EXISTS (SELECT 1 FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	                         WHERE a.device_uuid = x.device_uuid AND g.node_id <> p_node)
	            THEN 'foreign' ELSE 'unknown_device' END
	FROM x
	WHERE x.gpu_id IS NOT NULL AND x.device_uuid IS NOT NULL AND x.device_uuid <> x.own_uuid
	  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.gpu_id = x.gpu_id
	                  AND a.device_uuid = x.device_uuid)
	ORDER BY 1
$$;

-- Roll-ups keyed by GPU too: two GPUs of a node reporting the same device
-- UUID in one hour are two rows, never a conflict that stops the roll-up.
ALTER TABLE gpu_metric_hourly DROP CONSTRAINT gpu_metric_hourly_pkey,
	ADD PRIMARY KEY (gpu_id, device_uuid, hour);
CREATE INDEX gpu_metric_hourly_device_idx ON gpu_metric_hourly (device_uuid, hour);

-- The roll-up's progress: hours before watermark were rolled up.
CREATE TABLE metric_rollup_state (
	id          integer PRIMARY KEY CHECK (id = 1),
	watermark   timestamptz,
	last_run_at timestamptz
);
INSERT INTO metric_rollup_state (id) VALUES (1);

DROP FUNCTION metric_rollup(timestamptz, double precision);

-- Recompute the hourly roll-ups from the watermark less p_settle (late
-- samples of an agent that was cut off) to the last complete hour, at most
-- p_max_hours past the watermark per call (more: call again). The
-- watermark starts at the oldest sample's hour, so a leader that was down
-- for longer than p_settle loses no hour. Idempotent: a row is replaced by
-- the same figures. sm_active_low counts samples below p_idle_threshold.
CREATE FUNCTION metric_rollup_run(p_idle_threshold double precision, p_settle interval,
	p_max_hours integer, OUT rows integer, OUT watermark timestamptz, OUT more boolean)
LANGUAGE plpgsql AS $$
DECLARE
	v_lo  timestamptz;
	v_now timestamptz := date_trunc('hour', now());
	v_to  timestamptz;
BEGIN
	PERFORM pg_advisory_xact_lock(7234001, 16);
	SELECT s.watermark INTO v_lo FROM metric_rollup_state s WHERE s.id = 1 FOR UPDATE;
	IF v_lo IS NULL THEN
		SELECT date_trunc('hour', min(ts)) INTO v_lo FROM gpu_metric_samples;
	END IF;
	v_lo := coalesce(v_lo, v_now);
	v_to := least(v_now, v_lo + p_max_hours * interval '1 hour');
	more := v_to < v_now;
	WITH up AS (
		INSERT INTO gpu_metric_hourly AS h (hour, gpu_id, device_uuid, samples, power_w_avg,
			power_w_max, sm_active_avg, sm_active_low, memory_used_mib_max, temperature_c_max,
			ecc_uncorrected_max)
		SELECT date_trunc('hour', s.ts), s.gpu_id, s.device_uuid, count(*), avg(s.power_w),
		       max(s.power_w), avg(s.sm_active),
		       count(*) FILTER (WHERE s.sm_active < p_idle_threshold),
		       max(s.memory_used_mib), max(s.temperature_c), max(s.ecc_uncorrected)
		FROM gpu_metric_samples s
		WHERE s.ts >= v_lo - p_settle AND s.ts < v_to
		GROUP BY 1, 2, 3
		ON CONFLICT (gpu_id, device_uuid, hour) DO UPDATE SET
			samples = EXCLUDED.samples, power_w_avg = EXCLUDED.power_w_avg,
			power_w_max = EXCLUDED.power_w_max, sm_active_avg = EXCLUDED.sm_active_avg,
			sm_active_low = EXCLUDED.sm_active_low,
			memory_used_mib_max = EXCLUDED.memory_used_mib_max,
			temperature_c_max = EXCLUDED.temperature_c_max,
			ecc_uncorrected_max = EXCLUDED.ecc_uncorrected_max
		RETURNING 1
	)
	SELECT count(*)::integer INTO rows FROM up;
	watermark := greatest(v_lo, v_to);
	UPDATE metric_rollup_state s SET watermark = metric_rollup_run.watermark, last_run_at = now()
	WHERE s.id = 1;
END
$$;

-- Idle (hoarding) alerts (0011's), with the samples of the allocation's own
-- GPU: a device UUID alone never ties samples to an allocation.
CREATE OR REPLACE FUNCTION alerts_idle_sweep(p_after interval, p_threshold double precision)
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
		                  AND w.node_id = g.node_id
		                  AND (w.ended_at IS NULL OR w.ended_at > now() - p_after))
		  AND coalesce((SELECT avg(s.sm_active) FROM gpu_metric_samples s
		                WHERE s.gpu_id = a.gpu_id
		                  AND s.device_uuid = coalesce(a.device_uuid, g.uuid)
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

-- Billing's idle split (0013's), with roll-ups of the allocation's own GPU
-- and workloads seen on its own node.
CREATE OR REPLACE FUNCTION billing_idle(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (pool_id bigint, model text, profile text, hour timestamptz, held_s numeric,
	measured_s numeric, idle_s numeric, active_s numeric)
LANGUAGE sql STABLE AS $$
	WITH a AS (
		SELECT al.pool_id, g.model, al.profile, g.id AS gpu_id, g.node_id,
		       coalesce(al.device_uuid, CASE WHEN al.profile = 'full' THEN g.uuid END) AS device,
		       greatest(al.created_at, p_from) AS s,
		       least(coalesce(al.released_at, now()), p_to) AS e
		FROM allocations al JOIN gpus g ON g.id = al.gpu_id
		WHERE al.pool_id IS NOT NULL AND al.created_at < p_to
		  AND coalesce(al.released_at, 'infinity') > p_from
	), h AS (
		SELECT a.pool_id, a.model, a.profile, a.gpu_id, a.node_id, a.device, hr AS hour,
		       extract(epoch FROM least(a.e, hr + interval '1 hour') - greatest(a.s, hr)) AS o
		FROM a, generate_series(date_trunc('hour', a.s AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
		                        a.e - interval '1 microsecond', interval '1 hour') AS hr
		WHERE a.e > a.s
	), m AS (
		SELECT h.*, mh.samples, mh.sm_active_low, mh.sm_active_avg,
		       EXISTS (SELECT 1 FROM workload_profiles w WHERE w.device_uuid = h.device
		               AND w.node_id = h.node_id
		               AND w.first_seen_at < h.hour + interval '1 hour'
		               AND coalesce(w.ended_at, 'infinity') > h.hour) AS busy
		FROM h LEFT JOIN gpu_metric_hourly mh ON mh.gpu_id = h.gpu_id
		     AND mh.device_uuid = h.device AND mh.hour = h.hour
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

-- ---- retention ----

-- Delete, at most p_limit rows of each per call, delivered outbox rows,
-- resolved alerts and ended workload profiles older than their retention
-- (NULL: kept). Returns the rows deleted.
CREATE FUNCTION agent_plane_prune(p_outbox interval, p_alerts interval, p_profiles interval,
	p_limit integer)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	v_n bigint := 0;
	v_k bigint;
BEGIN
	IF p_outbox IS NOT NULL THEN
		DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE delivered_at IS NOT NULL
			AND delivered_at < now() - p_outbox ORDER BY id LIMIT p_limit);
		GET DIAGNOSTICS v_k = ROW_COUNT;
		v_n := v_n + v_k;
	END IF;
	IF p_alerts IS NOT NULL THEN
		DELETE FROM alerts WHERE id IN (SELECT id FROM alerts WHERE resolved_at IS NOT NULL
			AND resolved_at < now() - p_alerts ORDER BY id LIMIT p_limit);
		GET DIAGNOSTICS v_k = ROW_COUNT;
		v_n := v_n + v_k;
	END IF;
	IF p_profiles IS NOT NULL THEN
		DELETE FROM workload_profiles WHERE id IN (SELECT id FROM workload_profiles
			WHERE ended_at IS NOT NULL AND ended_at < now() - p_profiles ORDER BY id
			LIMIT p_limit);
		GET DIAGNOSTICS v_k = ROW_COUNT;
		v_n := v_n + v_k;
	END IF;
	RETURN v_n;
END
$$;
CREATE INDEX outbox_delivered_idx ON outbox (delivered_at) WHERE delivered_at IS NOT NULL;
CREATE INDEX alerts_resolved_idx ON alerts (resolved_at) WHERE resolved_at IS NOT NULL;
CREATE INDEX workload_profiles_ended_idx ON workload_profiles (ended_at)
	WHERE ended_at IS NOT NULL;

-- ---- billing: credits for capacity that never existed ----

-- When an allocation was failed (a status report said it could not be
-- created, or its instance disappeared, or its GPU failed): one row per
-- stretch, opened when it becomes failed and closed when it leaves that
-- state (ready again, releasing, released). Kept by a trigger.
CREATE TABLE allocation_fault_intervals (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	allocation_id bigint NOT NULL REFERENCES allocations (id),
	started_at    timestamptz NOT NULL DEFAULT now(),
	ended_at      timestamptz,
	CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE UNIQUE INDEX allocation_fault_intervals_open_key ON allocation_fault_intervals
	(allocation_id) WHERE ended_at IS NULL;
CREATE INDEX allocation_fault_intervals_time_idx ON allocation_fault_intervals
	(coalesce(ended_at, 'infinity'), started_at);

CREATE FUNCTION allocations_fault_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.state = 'failed' AND OLD.state IS DISTINCT FROM 'failed' THEN
		INSERT INTO allocation_fault_intervals (allocation_id) VALUES (NEW.id);
	ELSIF OLD.state = 'failed' AND NEW.state <> 'failed' THEN
		UPDATE allocation_fault_intervals SET ended_at = now()
		WHERE allocation_id = NEW.id AND ended_at IS NULL;
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER allocations_fault_history AFTER UPDATE OF state ON allocations
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
	EXECUTE FUNCTION allocations_fault_history();

-- When a node was unknown (its agent silent past the grace): one row per
-- stretch. Kept by a trigger.
CREATE TABLE node_unknown_intervals (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	node_id    bigint NOT NULL REFERENCES nodes (id),
	started_at timestamptz NOT NULL DEFAULT now(),
	ended_at   timestamptz,
	CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE UNIQUE INDEX node_unknown_intervals_open_key ON node_unknown_intervals (node_id)
	WHERE ended_at IS NULL;
CREATE INDEX node_unknown_intervals_time_idx ON node_unknown_intervals
	(coalesce(ended_at, 'infinity'), started_at);

CREATE FUNCTION nodes_unknown_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.status = 'unknown' AND OLD.status IS DISTINCT FROM 'unknown' THEN
		INSERT INTO node_unknown_intervals (node_id) VALUES (NEW.id);
	ELSIF OLD.status = 'unknown' AND NEW.status <> 'unknown' THEN
		UPDATE node_unknown_intervals SET ended_at = now()
		WHERE node_id = NEW.id AND ended_at IS NULL;
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER nodes_unknown_history AFTER UPDATE OF status ON nodes
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
	EXECUTE FUNCTION nodes_unknown_history();

-- Already failed allocations and unknown nodes: their stretches start now.
INSERT INTO allocation_fault_intervals (allocation_id)
SELECT id FROM allocations WHERE state = 'failed';
INSERT INTO node_unknown_intervals (node_id) SELECT id FROM nodes WHERE status = 'unknown';

-- The accrual (0012's) with the credits of issue 19: besides the time an
-- allocation's GPU was failed, the time the allocation itself was failed
-- and the time its node was unknown are credited, from the moment the
-- server knew, each second at most once per allocation, never more than
-- the charge (docs/billing.md "Credits").
CREATE OR REPLACE FUNCTION billing_accrue(p_now timestamptz, p_settle interval, p_max_hours integer,
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
	), fsrc AS (
		-- the allocation on a failed GPU (0012)
		SELECT a.id, a.pool_id, g.model, a.profile,
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
		UNION ALL
		-- the allocation itself failed: never created, or its instance
		-- disappeared (0016), from the status report that said so
		SELECT a.id, a.pool_id, g.model, a.profile,
		       greatest(date_trunc('second', f.started_at), v_lo),
		       least(date_trunc('second', coalesce(a.released_at, v_now)),
		             date_trunc('second', coalesce(rr.decided_at, v_now)),
		             date_trunc('second', coalesce(f.ended_at, v_now)), v_now)
		FROM allocation_fault_intervals f
		JOIN allocations a ON a.id = f.allocation_id AND a.pool_id IS NOT NULL
		JOIN gpus g ON g.id = a.gpu_id
		LEFT JOIN pool_requests rr ON rr.id = a.release_request_id
		WHERE (f.ended_at IS NULL OR f.ended_at > v_lo) AND f.started_at < v_now
		UNION ALL
		-- its node was unknown (no heartbeat past the grace, 0016)
		SELECT a.id, a.pool_id, g.model, a.profile,
		       greatest(date_trunc('second', a.created_at), date_trunc('second', u.started_at),
		                v_lo),
		       least(date_trunc('second', coalesce(a.released_at, v_now)),
		             date_trunc('second', coalesce(rr.decided_at, v_now)),
		             date_trunc('second', coalesce(u.ended_at, v_now)), v_now)
		FROM node_unknown_intervals u
		JOIN gpus g ON g.node_id = u.node_id
		JOIN allocations a ON a.gpu_id = g.id AND a.pool_id IS NOT NULL
		LEFT JOIN pool_requests rr ON rr.id = a.release_request_id
		WHERE (u.ended_at IS NULL OR u.ended_at > v_lo) AND u.started_at < v_now
		  AND a.created_at < coalesce(u.ended_at, v_now)
		  AND (a.released_at IS NULL OR a.released_at > u.started_at)
	), fisl AS (
		-- one allocation's faults overlap (a failed GPU fails its allocations
		-- too): merged into islands, so that no second is credited twice
		SELECT x.*, CASE WHEN x.s <= max(x.e) OVER (PARTITION BY x.id ORDER BY x.s, x.e
		                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END
		         AS brk
		FROM fsrc x WHERE x.e > x.s
	), fgrp AS (
		SELECT y.*, sum(y.brk) OVER (PARTITION BY y.id ORDER BY y.s, y.e) AS grp FROM fisl y
	), fail AS (
		SELECT z.pool_id, z.model, z.profile, min(z.s) AS s, max(z.e) AS e
		FROM fgrp z GROUP BY z.id, z.pool_id, z.model, z.profile, z.grp
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

-- The FOCUS line's credit description, which names every reason a credit
-- has since issue 19, is in 0017 with the rest of the export's lines.
