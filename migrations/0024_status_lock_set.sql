-- 0024_status_lock_set: settle only the requests locked first.
--
-- An agent's status report (agent_apply_status, as 0019 left it) and the
-- expiry worker's confirmation of releases on nodes without an agent
-- (pools_confirm_unmanaged_releases, 0018) lock their pools' approved
-- requests, then the pools (the global lock order, docs/architecture.md),
-- and at the end settle the approved requests of those pools. A request
-- approved between the first lock and that final UPDATE (its approval
-- committed meanwhile) was taken there for the first time: a request
-- locked after a pool. Two agents whose nodes share a pool deadlocked so
-- (one held the new request from its own first lock and waited for the
-- pool, the other held the pool and waited for the request;
-- test_deadlock's agents test, real agents on two replicas, saw it in
-- every run). Now the final UPDATE settles exactly the requests locked
-- first; one approved later is settled by the next report or pass.
CREATE OR REPLACE FUNCTION agent_apply_status(p_node bigint, p_observed bigint, p_version text,
	p_gpus jsonb, p_errors jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
	v_gen      bigint;
	v_name     text;
	v_pools    bigint[];
	v_reqs     bigint[];
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
	-- (the requests settled below are exactly the ones locked here: one
	-- approved after this statement is left for the next report, since
	-- locking it later would take a request after a pool)
	SELECT coalesce(array_agg(s.id), '{}') INTO v_reqs FROM (SELECT q.id FROM pool_requests q
		WHERE q.pool_id = ANY (v_pools) AND q.state = 'approved'
		ORDER BY q.id FOR NO KEY UPDATE) s;
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
		WHERE q.id = ANY (v_reqs) AND q.state = 'approved'
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

CREATE OR REPLACE FUNCTION pools_confirm_unmanaged_releases() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	v_pools bigint[];
	v_reqs bigint[];
	v_n integer;
BEGIN
	SELECT array_agg(DISTINCT a.pool_id ORDER BY a.pool_id) INTO v_pools
	FROM allocations a JOIN gpus g ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id
	WHERE a.state = 'releasing' AND NOT n.managed_by_agent AND a.pool_id IS NOT NULL;
	IF v_pools IS NULL THEN
		RETURN 0;
	END IF;
	-- the global lock order (docs/architecture.md "The lock order"): the
	-- pools' approved requests, then the pools, each in id order; then the
	-- GPUs under the releasing allocations, in id order; the allocations of
	-- GPUs held are then wanted by no other transaction
	SELECT coalesce(array_agg(s.id), '{}') INTO v_reqs FROM (SELECT id FROM pool_requests
		WHERE pool_id = ANY (v_pools) AND state = 'approved' ORDER BY id FOR NO KEY UPDATE) s;
	PERFORM 1 FROM pools WHERE id = ANY (v_pools) ORDER BY id FOR NO KEY UPDATE;
	PERFORM 1 FROM gpus g WHERE g.id IN (
		SELECT a.gpu_id FROM allocations a JOIN gpus h ON h.id = a.gpu_id
		JOIN nodes n ON n.id = h.node_id
		WHERE a.pool_id = ANY (v_pools) AND a.state = 'releasing' AND NOT n.managed_by_agent)
	ORDER BY g.id FOR NO KEY UPDATE;
	UPDATE allocations a SET state = 'released', released_at = now(), updated_at = now()
	FROM gpus g JOIN nodes n ON n.id = g.node_id
	WHERE g.id = a.gpu_id AND a.pool_id = ANY (v_pools) AND a.state = 'releasing'
	  AND NOT n.managed_by_agent;
	GET DIAGNOSTICS v_n = ROW_COUNT;
	-- shrinks and releases whose allocations are all gone are fulfilled
	WITH done AS (
		UPDATE pool_requests q SET state = 'fulfilled', generation = q.generation + 1
		WHERE q.id = ANY (v_reqs) AND q.state = 'approved'
		  AND q.action IN ('shrink', 'release')
		  AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.release_request_id = q.id
		                  AND a.state <> 'released')
		RETURNING q.id
	)
	INSERT INTO pool_request_events (request_id, from_state, to_state, actor, note)
	SELECT id, 'approved', 'fulfilled', 'gpupool',
	       'released on a node without an agent (the operator removes the instances)'
	FROM done;
	RETURN v_n;
END
$$;
