-- 0019_pool_status: one settle path for pool statuses.
--
-- A pool's status follows its allocations: degraded when one of them
-- failed, active when all are ready, released when nothing is left. Two
-- copies of that rule had drifted: the expiry worker's statement in
-- db/db_pools.c (releasing and provisioning pools only, an audit document
-- whose "before" named the old status, no alert) and agent_apply_status
-- (0010, 0016: a null "before", the pool_degraded alert raised and
-- resolved). A pool released by the expiry worker kept its pool_degraded
-- alert open for ever. pools_settle is now the only home of the rule; the
-- expiry worker (service/pool_status.c) and agent_apply_status call it.
--
-- It stays in SQL for atomicity: an agent's report changes allocations
-- and settles their pools in the one transaction that holds their locks
-- (a C caller would need a second round trip inside that transaction).

-- Settle the pools p_pools (any order; locked here in id order, the
-- global lock order of docs/architecture.md: a caller that holds them
-- already, as agent_apply_status does, re-locks nothing). Each change
-- writes one audit document, {"status": before} -> {"status": after},
-- action 'pool.<after>', no actor (the fleet moved it, not a person);
-- degraded raises the pool_degraded alert (on the node of its first
-- failed allocation), active and released resolve it. Returns how many
-- pools changed.
CREATE FUNCTION pools_settle(p_pools bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	v_n integer := 0;
	r   record;
BEGIN
	IF p_pools IS NULL OR cardinality(p_pools) = 0 THEN
		RETURN 0;
	END IF;
	PERFORM 1 FROM pools WHERE id = ANY (p_pools) ORDER BY id FOR NO KEY UPDATE;
	FOR r IN
		WITH was AS (SELECT id, status FROM pools WHERE id = ANY (p_pools))
		UPDATE pools p SET status = 'degraded', generation = p.generation + 1, updated_at = now()
		FROM was WHERE p.id = was.id AND p.status IN ('provisioning', 'active')
		  AND EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id AND a.state = 'failed')
		RETURNING p.id, p.project_id, p.name, was.status AS before,
		          (SELECT g.node_id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
		           WHERE a.pool_id = p.id AND a.state = 'failed' ORDER BY a.id LIMIT 1) AS node
	LOOP
		PERFORM pools_settle_audit(r.id, r.project_id, r.before, 'degraded');
		PERFORM alert_raise('pool_degraded', 'critical', 'pool_degraded:' || r.id, r.node, NULL,
			r.id, r.project_id, 'pool ' || r.name || ' has a failed allocation', '{}');
		v_n := v_n + 1;
	END LOOP;
	FOR r IN
		WITH was AS (SELECT id, status FROM pools WHERE id = ANY (p_pools))
		UPDATE pools p SET status = 'active', generation = p.generation + 1, updated_at = now()
		FROM was WHERE p.id = was.id AND p.status IN ('provisioning', 'degraded')
		  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id
		                  AND a.state NOT IN ('ready', 'releasing', 'released'))
		RETURNING p.id, p.project_id, was.status AS before
	LOOP
		PERFORM pools_settle_audit(r.id, r.project_id, r.before, 'active');
		PERFORM alert_resolve('pool_degraded:' || r.id);
		v_n := v_n + 1;
	END LOOP;
	FOR r IN
		WITH was AS (SELECT id, status FROM pools WHERE id = ANY (p_pools))
		UPDATE pools p SET status = 'released', released_at = now(),
			generation = p.generation + 1, updated_at = now()
		FROM was WHERE p.id = was.id AND p.status = 'releasing'
		  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id
		                  AND a.state <> 'released')
		RETURNING p.id, p.project_id, was.status AS before
	LOOP
		PERFORM pools_settle_audit(r.id, r.project_id, r.before, 'released');
		PERFORM alert_resolve('pool_degraded:' || r.id);
		v_n := v_n + 1;
	END LOOP;
	RETURN v_n;
END
$$;

-- The one audit document of a settled pool.
CREATE FUNCTION pools_settle_audit(p_pool bigint, p_project bigint, p_before text, p_after text)
RETURNS void LANGUAGE sql AS $$
	INSERT INTO audit_log (action, object_type, object_id, project_id, before, after)
	VALUES ('pool.' || p_after, 'pool', p_pool::text, p_project,
		jsonb_build_object('status', p_before), jsonb_build_object('status', p_after))
$$;

-- The expiry worker's pass: the pools whose status may move without an
-- agent's report (releasing ones whose allocations are all gone, on nodes
-- without an agent or freed by a release; provisioning ones all ready).
CREATE FUNCTION pools_settle_due() RETURNS integer
LANGUAGE sql AS $$
	SELECT pools_settle(ARRAY(SELECT id FROM pools
		WHERE status IN ('releasing', 'provisioning') ORDER BY id))
$$;

-- agent_apply_status (0016's) with its pools settled by pools_settle.
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

	-- pools: their statuses, alerts and audit, by the one settle path
	PERFORM pools_settle(v_pools);

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
