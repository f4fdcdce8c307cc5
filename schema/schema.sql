CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;

COMMENT ON EXTENSION btree_gist IS 'support for indexing common datatypes in GiST';

CREATE FUNCTION public.agent_apply_profiles(p_node bigint, p_profiles jsonb) RETURNS integer
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM profiles_replace(p_node, 'agent', p_profiles);
	RETURN profiles_isolation(p_node);
END
$$;

CREATE FUNCTION public.agent_apply_status(p_node bigint, p_observed bigint, p_version text, p_gpus jsonb, p_errors jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
	v_gen      bigint;
	v_name     text;
	v_status   text;
	v_pools    bigint[];
	v_reqs     bigint[];
	v_gpus     bigint[];
	v_change   boolean;
	v_nunknown integer;
	v_n        integer;
	v_ready    integer := 0;
	v_failed   integer := 0;
	v_released integer := 0;
	v_gpus_bad integer := 0;
	v_keys     text[];
	v_unknown  bigint[];
	v_obs      bigint;
	-- the instances the report lists on the GPUs held: agent_reported, once
	v_rgpu     bigint[];
	v_rprofile text[];
	v_rstart   integer[];
	v_ruuid    text[];
	r          record;
BEGIN
	-- 1. What the report would change, read without locks (see above)
	SELECT n.generation, n.status INTO v_gen, v_status FROM nodes n WHERE n.id = p_node;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node % does not exist', p_node USING ERRCODE = 'no_data_found';
	END IF;
	v_obs := least(p_observed, v_gen);
	WITH g AS MATERIALIZED (
		SELECT g.id, g.uuid, g.health,
		       -- failed, or failed by this report (the health statement below)
		       g.health = 'failed' OR rg.v IS NULL OR rg.v->>'fail_reason' IS NOT NULL
		           OR (g.health = 'ok' AND rg.v->>'ecc_reason' IS NOT NULL) AS failing,
		       -- its health changes, or an unknown Xid is raised
		       (g.health <> 'failed' AND (rg.v IS NULL OR rg.v->>'fail_reason' IS NOT NULL
		            OR (g.health = 'ok' AND rg.v->>'ecc_reason' IS NOT NULL)))
		       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_gpus) x WHERE x->>'uuid' = g.uuid
		                  AND ((g.health = 'ok' AND x->>'degrade_reason' IS NOT NULL
		                        AND x->>'fail_reason' IS NULL)
		                       OR jsonb_array_length(coalesce(x->'unknown_xids', '[]')) > 0))
		           AS health_change,
		       EXISTS (SELECT 1 FROM jsonb_array_elements(p_gpus) x WHERE x->>'uuid' = g.uuid
		               AND x->>'state' = 'unknown') AS unknown
		FROM gpus g
		LEFT JOIN LATERAL (SELECT x AS v FROM jsonb_array_elements(p_gpus) x
		                   WHERE x->>'uuid' = g.uuid LIMIT 1) rg ON true
		WHERE g.node_id = p_node
	), rep AS MATERIALIZED (
		SELECT * FROM agent_reported(p_node, p_gpus)
	), live AS MATERIALIZED (
		SELECT a.id, a.pool_id, a.state, a.gpu_id, a.start, a.profile, a.device_uuid,
		       g.uuid AS gpu_uuid, g.failing, g.unknown
		FROM g JOIN allocations a ON a.gpu_id = g.id AND a.state <> 'released'
	), moved AS (
		-- the allocation statements' predicates, each widened to a superset
		-- (failing: the GPU is failed once the health statement ran, so no
		-- instance on it turns ready)
		SELECT l.pool_id FROM live l
		WHERE (l.failing AND l.state IN ('reserved', 'provisioning', 'ready'))
		   OR (NOT l.failing AND EXISTS (SELECT 1 FROM rep WHERE rep.gpu_id = l.gpu_id
		              AND rep.start = l.start AND rep.profile = l.profile
		              AND (l.state IN ('reserved', 'provisioning', 'failed')
		                   OR (l.state = 'ready' AND l.device_uuid IS DISTINCT FROM rep.uuid))))
		   OR (l.state IN ('reserved', 'provisioning') AND EXISTS (
		           SELECT 1 FROM jsonb_to_recordset(coalesce(p_errors, '[]'))
		               AS e(gpu text, profile text, start integer)
		           WHERE e.gpu = l.gpu_uuid AND e.start = l.start AND e.profile = l.profile))
		   OR (NOT l.unknown
		       AND (l.state = 'ready' OR (l.state IN ('reserved', 'provisioning') AND v_obs >= v_gen))
		       AND NOT EXISTS (SELECT 1 FROM rep WHERE rep.gpu_id = l.gpu_id
		                       AND rep.start = l.start AND rep.profile = l.profile))
		   OR (NOT l.unknown AND l.state = 'releasing'
		       AND NOT EXISTS (SELECT 1 FROM rep WHERE rep.gpu_id = l.gpu_id
		                       AND rep.start = l.start))
	), here AS (
		SELECT DISTINCT l.pool_id FROM live l WHERE l.pool_id IS NOT NULL
	), due AS (
		SELECT m.pool_id FROM moved m WHERE m.pool_id IS NOT NULL
		UNION
		-- pools_settle's rules (0026's), as things are
		SELECT p.id FROM here h JOIN pools p ON p.id = h.pool_id
		WHERE (p.status IN ('provisioning', 'active') AND EXISTS (
		          SELECT 1 FROM allocations a WHERE a.pool_id = p.id AND a.state = 'failed'
		          AND NOT defrag_shadowed(a.replaces)))
		   OR (p.status IN ('provisioning', 'degraded') AND NOT EXISTS (
		          SELECT 1 FROM allocations a WHERE a.pool_id = p.id
		          AND a.state NOT IN ('ready', 'releasing', 'released')
		          AND NOT (a.state = 'failed' AND defrag_shadowed(a.replaces))))
		   OR (p.status = 'releasing' AND NOT EXISTS (
		          SELECT 1 FROM allocations a WHERE a.pool_id = p.id AND a.state <> 'released'))
		UNION
		-- approved requests the settle statement below would settle as things are
		-- (a shrink's allocations are its pool's: the pool_id only narrows the scan)
		SELECT q.pool_id FROM here h JOIN pool_requests q ON q.pool_id = h.pool_id
		WHERE q.state = 'approved'
		  AND CASE WHEN q.action IN ('create', 'expand') THEN
		           NOT EXISTS (SELECT 1 FROM allocations a WHERE a.request_id = q.id
		                       AND a.state IN ('reserved', 'provisioning'))
		      ELSE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = q.pool_id
		                       AND a.release_request_id = q.id AND a.state <> 'released') END
	)
	SELECT (SELECT coalesce(array_agg(d.pool_id ORDER BY d.pool_id), '{}') FROM due d),
	       v_status = 'unknown'
	       OR EXISTS (SELECT 1 FROM g WHERE g.health_change)
	       OR EXISTS (SELECT 1 FROM moved m WHERE m.pool_id IS NULL)
	       -- drift to raise
	       OR EXISTS (SELECT 1 FROM rep WHERE NOT EXISTS (SELECT 1 FROM live l
	                  WHERE l.gpu_id = rep.gpu_id AND l.start = rep.start
	                    AND l.profile = rep.profile))
	       -- drift to resolve (none raised: every open one not on an unknown GPU)
	       OR EXISTS (SELECT 1 FROM alerts x WHERE x.type = 'drift' AND x.node_id = p_node
	                  AND x.resolved_at IS NULL
	                  AND x.gpu_id <> ALL (ARRAY(SELECT g.id FROM g WHERE g.unknown)))
	       OR EXISTS (SELECT 1 FROM alerts x WHERE x.dedup_key = 'node_unknown:' || p_node
	                  AND x.resolved_at IS NULL),
	       (SELECT count(*) FROM g WHERE g.unknown)
	INTO v_pools, v_change, v_nunknown;

	IF NOT v_change AND cardinality(v_pools) = 0 THEN
		-- 2. The fast path: the node row and the outbox rows only
		UPDATE nodes SET observed_generation = greatest(observed_generation,
				least(p_observed, generation)),
			agent_version = coalesce(p_version, agent_version), agent_heartbeat_at = now(),
			agent_status_at = now(), agent_errors = coalesce(p_errors, '[]')
		WHERE id = p_node RETURNING generation INTO v_gen;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'node % does not exist', p_node USING ERRCODE = 'no_data_found';
		END IF;
		v_obs := least(p_observed, v_gen);
		UPDATE outbox SET delivered_at = now(), last_error = NULL
		WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
		             AND generation <= v_obs ORDER BY id FOR NO KEY UPDATE);
		RETURN jsonb_build_object('generation', v_gen, 'ready', 0, 'failed', 0, 'released', 0,
			'gpus_failed', 0, 'drift', 0, 'unknown_gpus', v_nunknown);
	END IF;

	-- 3. The slow path, in the global lock order (docs/architecture.md):
	-- the pools' approved requests, then the pools, each in id order, as
	-- approvals take them (one approved after this statement is taken
	-- before the settle, without waiting: see there)
	SELECT coalesce(array_agg(s.id), '{}') INTO v_reqs FROM (SELECT q.id FROM pool_requests q
		WHERE q.pool_id = ANY (v_pools) AND q.state = 'approved'
		ORDER BY q.id FOR NO KEY UPDATE) s;
	PERFORM 1 FROM pools p WHERE p.id = ANY (v_pools) ORDER BY p.id FOR NO KEY UPDATE;
	-- the node's GPUs: every statement below works on these
	SELECT coalesce(array_agg(s.id), '{}') INTO v_gpus FROM (SELECT g.id FROM gpus g
		WHERE g.node_id = p_node ORDER BY g.id FOR NO KEY UPDATE) s;
	-- the live allocations that the statements below may change
	PERFORM 1 FROM allocations a WHERE a.gpu_id = ANY (v_gpus) AND a.state <> 'released'
		AND (a.pool_id IS NULL OR a.pool_id = ANY (v_pools)) ORDER BY a.id FOR NO KEY UPDATE;
	SELECT n.generation, n.name INTO v_gen, v_name FROM nodes n WHERE n.id = p_node
		FOR NO KEY UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node % does not exist', p_node USING ERRCODE = 'no_data_found';
	END IF;
	v_obs := least(p_observed, v_gen);
	SELECT coalesce(array_agg(g.id), '{}'), coalesce(array_agg(i.profile), '{}'),
	       coalesce(array_agg(i.start), '{}'), coalesce(array_agg(i.uuid), '{}')
	INTO v_rgpu, v_rprofile, v_rstart, v_ruuid
	FROM jsonb_array_elements(p_gpus) rg
	JOIN gpus g ON g.uuid = rg->>'uuid' AND g.id = ANY (v_gpus)
	CROSS JOIN LATERAL jsonb_to_recordset(coalesce(rg->'instances', '[]'))
		AS i(profile text, start integer, uuid text);
	-- GPUs whose instances could not be listed this scan
	SELECT coalesce(array_agg(g.id), '{}') INTO v_unknown
	FROM jsonb_array_elements(p_gpus) rg JOIN gpus g ON g.uuid = rg->>'uuid' AND g.id = ANY (v_gpus)
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
			WHERE g.id = ANY (v_gpus)
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
			JOIN gpus g ON g.uuid = rg->>'uuid' AND g.id = ANY (v_gpus)
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
		JOIN gpus g ON g.uuid = rg->>'uuid' AND g.id = ANY (v_gpus)
		CROSS JOIN LATERAL jsonb_array_elements(coalesce(rg->'unknown_xids', '[]')) x
	LOOP
		PERFORM alert_raise('xid_unknown', 'warning', 'xid_unknown:' || r.uuid || ':' || r.xid,
			p_node, r.id, NULL, NULL, 'GPU ' || r.uuid || ' on node ' || v_name
			|| ' reported Xid ' || r.xid || ', which the Xid catalog does not know',
			jsonb_build_object('xid', r.xid, 'count', r.n));
	END LOOP;

	-- Every statement below changes only allocations of the pools locked
	-- above (or of no pool): one of a pool that became relevant since the
	-- read is left for the next report.

	-- allocations on a failed GPU fail with it
	UPDATE allocations a SET state = 'failed', updated_at = now(),
		error = left('GPU failed: ' || coalesce(g.health_reason, 'marked failed'), 2000)
	FROM gpus g WHERE g.id = a.gpu_id AND g.id = ANY (v_gpus) AND g.health = 'failed'
	  AND a.state IN ('reserved', 'provisioning', 'ready')
	  AND (a.pool_id IS NULL OR a.pool_id = ANY (v_pools));
	GET DIAGNOSTICS v_n = ROW_COUNT;
	v_failed := v_failed + v_n;

	-- realized instances: the allocation is ready (again)
	UPDATE allocations a SET state = 'ready', device_uuid = rep.uuid, error = NULL,
		updated_at = now()
	FROM unnest(v_rgpu, v_rprofile, v_rstart, v_ruuid) AS rep (gpu_id, profile, start, uuid)
	JOIN gpus g ON g.id = rep.gpu_id
	WHERE a.gpu_id = rep.gpu_id AND a.start = rep.start AND a.profile = rep.profile
	  AND g.health <> 'failed'
	  AND (a.state IN ('reserved', 'provisioning', 'failed')
	       OR (a.state = 'ready' AND a.device_uuid IS DISTINCT FROM rep.uuid))
	  AND (a.pool_id IS NULL OR a.pool_id = ANY (v_pools));
	GET DIAGNOSTICS v_ready = ROW_COUNT;

	-- the agent said why it could not create one
	UPDATE allocations a SET state = 'failed', updated_at = now(),
		error = left(coalesce(e.message, 'the node agent could not create the instance'), 2000)
	FROM jsonb_to_recordset(coalesce(p_errors, '[]'))
		AS e(gpu text, profile text, start integer, message text)
	JOIN gpus g ON g.uuid = e.gpu AND g.id = ANY (v_gpus)
	WHERE a.gpu_id = g.id AND a.start = e.start AND a.profile = e.profile
	  AND a.state IN ('reserved', 'provisioning')
	  AND (a.pool_id IS NULL OR a.pool_id = ANY (v_pools));
	GET DIAGNOSTICS v_n = ROW_COUNT;
	v_failed := v_failed + v_n;

	-- not there although the agent applied this generation, or gone
	UPDATE allocations a SET state = 'failed', updated_at = now(),
		error = CASE WHEN a.state = 'ready' THEN 'the instance disappeared from the node'
		             ELSE 'the node agent applied generation ' || v_obs
		                  || ' without creating this instance' END
	WHERE a.gpu_id = ANY (v_gpus)
	  AND (a.state = 'ready' OR (a.state IN ('reserved', 'provisioning') AND v_obs >= v_gen))
	  AND a.gpu_id <> ALL (v_unknown)
	  AND (a.pool_id IS NULL OR a.pool_id = ANY (v_pools))
	  AND NOT EXISTS (SELECT 1 FROM unnest(v_rgpu, v_rprofile, v_rstart)
	                      AS rep (gpu_id, profile, start)
	                  WHERE rep.gpu_id = a.gpu_id AND rep.start = a.start
	                    AND rep.profile = a.profile);
	GET DIAGNOSTICS v_n = ROW_COUNT;
	v_failed := v_failed + v_n;

	-- releasing ones whose instance is gone: the capacity is free again
	UPDATE allocations a SET state = 'released', released_at = now(), updated_at = now()
	WHERE a.gpu_id = ANY (v_gpus) AND a.state = 'releasing'
	  AND a.gpu_id <> ALL (v_unknown)
	  AND (a.pool_id IS NULL OR a.pool_id = ANY (v_pools))
	  AND NOT EXISTS (SELECT 1 FROM unnest(v_rgpu, v_rstart) AS rep (gpu_id, start)
	                  WHERE rep.gpu_id = a.gpu_id AND rep.start = a.start);
	GET DIAGNOSTICS v_released = ROW_COUNT;

	-- drift: an instance the node has and gpupool does not know
	v_keys := '{}';
	FOR r IN
		SELECT rep.gpu_id, g.uuid AS gpu_uuid, rep.profile, rep.start, rep.uuid
		FROM unnest(v_rgpu, v_rprofile, v_rstart, v_ruuid) AS rep (gpu_id, profile, start, uuid)
		JOIN gpus g ON g.id = rep.gpu_id
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

	-- requests of these pools approved after the first lock of requests
	-- (their approval held a pool this report then waited for): taken now
	-- without waiting (SKIP LOCKED), so out of every wait-for cycle, and
	-- settled with the others; left, one released here would be read by
	-- no later report (its pool has no live allocation on the node)
	SELECT v_reqs || coalesce(array_agg(s.id), '{}') INTO v_reqs FROM (SELECT q.id
		FROM pool_requests q WHERE q.pool_id = ANY (v_pools) AND q.state = 'approved'
		  AND q.id <> ALL (v_reqs)
		ORDER BY q.id FOR NO KEY UPDATE SKIP LOCKED) s;

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
	WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
	             AND generation <= v_obs ORDER BY id FOR NO KEY UPDATE);

	RETURN jsonb_build_object('generation', v_gen, 'ready', v_ready, 'failed', v_failed,
		'released', v_released, 'gpus_failed', v_gpus_bad,
		'drift', coalesce(array_length(v_keys, 1), 0), 'unknown_gpus', cardinality(v_unknown));
END
$$;

CREATE FUNCTION public.agent_enroll(p_token bigint, p_cluster bigint, p_name text, p_hostname text, p_callback text, p_version text, p_cpu bigint, p_mem bigint, p_gpus jsonb, p_digest bytea, p_secret text, p_grace interval, OUT node_id bigint, OUT adopted jsonb) RETURNS record
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
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

CREATE FUNCTION public.agent_heartbeat(p_node bigint, p_observed bigint) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_gen bigint;
	v_status text;
	v_locked boolean := false;
BEGIN
	SELECT status INTO v_status FROM nodes WHERE id = p_node;
	IF v_status = 'unknown' THEN
		PERFORM 1 FROM gpus g WHERE g.node_id = p_node ORDER BY g.id FOR NO KEY UPDATE;
		v_locked := true;
	END IF;
	UPDATE nodes SET agent_heartbeat_at = now(),
		observed_generation = CASE WHEN p_observed IS NULL THEN observed_generation
			ELSE greatest(observed_generation, least(p_observed, generation)) END,
		status = CASE WHEN status = 'unknown' AND v_locked THEN 'ready' ELSE status END,
		status_reason = CASE WHEN status = 'unknown' AND v_locked THEN NULL
		                     ELSE status_reason END
	WHERE id = p_node RETURNING generation, status INTO v_gen, v_status;
	IF v_locked AND v_status <> 'unknown' THEN
		PERFORM alert_resolve('node_unknown:' || p_node);
	END IF;
	IF p_observed IS NOT NULL THEN
		UPDATE outbox SET delivered_at = now(), last_error = NULL
		WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
		             AND generation <= least(p_observed, v_gen) ORDER BY id FOR NO KEY UPDATE);
	END IF;
	RETURN v_gen;
END
$$;

CREATE FUNCTION public.agent_heartbeats(p_nodes bigint[], p_observed bigint[]) RETURNS TABLE(node_id bigint, generation bigint)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
	UPDATE nodes n SET agent_heartbeat_at = now()
	FROM (SELECT x.id FROM nodes x
	      JOIN unnest(p_nodes, p_observed) AS h (node, observed) ON h.node = x.id
	      WHERE x.status <> 'unknown'
	        AND (h.observed IS NULL OR h.observed < 0
	             OR least(h.observed, x.generation) <= x.observed_generation)
	      ORDER BY x.id FOR NO KEY UPDATE OF x SKIP LOCKED) s
	WHERE n.id = s.id
	RETURNING n.id, n.generation;
END
$$;

CREATE FUNCTION public.agent_liveness_sweep(p_grace interval) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_ids bigint[];
	v_n   integer := 0;
	r     record;
BEGIN
	SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO v_ids FROM nodes
	WHERE managed_by_agent AND status = 'ready'
	  AND coalesce(agent_heartbeat_at, created_at) < now() - p_grace;
	IF cardinality(v_ids) = 0 THEN
		RETURN 0;
	END IF;
	PERFORM 1 FROM gpus g WHERE g.node_id = ANY (v_ids) ORDER BY g.id FOR NO KEY UPDATE;
	PERFORM 1 FROM nodes n WHERE n.id = ANY (v_ids) ORDER BY n.id FOR NO KEY UPDATE;
	FOR r IN
		UPDATE nodes n SET status = 'unknown', updated_at = now(),
			status_reason = 'no heartbeat from the node agent since '
			                || coalesce(to_char(n.agent_heartbeat_at AT TIME ZONE 'UTC',
			                            'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'enrollment')
		WHERE n.id = ANY (v_ids) AND n.status = 'ready'
		  AND coalesce(n.agent_heartbeat_at, n.created_at) < now() - p_grace
		RETURNING n.id, n.name, n.status_reason
	LOOP
		v_n := v_n + 1;
		PERFORM alert_raise('node_unknown', 'critical', 'node_unknown:' || r.id, r.id, NULL,
			NULL, NULL, 'node ' || r.name || ': ' || r.status_reason, '{}');
	END LOOP;
	RETURN v_n;
END
$$;

CREATE FUNCTION public.agent_plane_prune(p_outbox interval, p_alerts interval, p_profiles interval, p_limit integer) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.agent_reported(p_node bigint, p_gpus jsonb) RETURNS TABLE(gpu_id bigint, profile text, start integer, size integer, uuid text)
    LANGUAGE sql STABLE
    AS $$
	SELECT g.id, i.profile, i.start, i.size, i.uuid
	FROM jsonb_array_elements(p_gpus) rg
	JOIN gpus g ON g.node_id = p_node AND g.uuid = rg->>'uuid'
	CROSS JOIN LATERAL jsonb_to_recordset(coalesce(rg->'instances', '[]'))
		AS i(profile text, start integer, size integer, uuid text)
	WHERE coalesce(rg->>'state', 'ok') = 'ok'
$$;

CREATE FUNCTION public.alert_raise(p_type text, p_severity text, p_key text, p_node bigint, p_gpu bigint, p_pool bigint, p_project bigint, p_message text, p_details jsonb) RETURNS bigint
    LANGUAGE sql
    AS $$
	INSERT INTO alerts (type, severity, dedup_key, node_id, gpu_id, pool_id, project_id,
		message, details)
	VALUES (p_type, p_severity, p_key, p_node, p_gpu, p_pool, p_project, p_message,
		coalesce(p_details, '{}'))
	ON CONFLICT (dedup_key) WHERE resolved_at IS NULL DO UPDATE
	SET occurrences = alerts.occurrences + 1, last_seen_at = now(),
	    message = EXCLUDED.message, details = EXCLUDED.details
	RETURNING id
$$;

CREATE FUNCTION public.alert_resolve(p_key text) RETURNS void
    LANGUAGE sql
    AS $$
	UPDATE alerts SET resolved_at = now() WHERE dedup_key = p_key AND resolved_at IS NULL
$$;

CREATE FUNCTION public.alerts_idle_sweep(p_after interval, p_threshold double precision) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.allocations_check_placement() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
	m_id          text;
	m_full_slices integer;
	p_name        text;
	p_slices      integer;
	p_placements  integer[];
BEGIN
	SELECT gm.id, gm.full_slices, p.name, p.memory_slices, p.placements
	INTO m_id, m_full_slices, p_name, p_slices, p_placements
	FROM gpus g JOIN gpu_models gm ON gm.id = g.model
	LEFT JOIN mig_profiles p ON p.model = gm.id AND p.name = NEW.profile
	WHERE g.id = NEW.gpu_id;
	IF NOT FOUND THEN
		RETURN NEW;     -- the foreign key reports it
	END IF;
	IF NEW.profile = 'full' THEN
		IF NEW.start <> 0 OR NEW.size <> m_full_slices THEN
			RAISE EXCEPTION 'a whole-gpu allocation on % holds slices [0, %)',
				m_id, m_full_slices
				USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
		END IF;
		RETURN NEW;
	END IF;
	IF p_name IS NULL THEN
		RAISE EXCEPTION 'model % offers no MIG profile %', m_id, NEW.profile
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	IF NOT (NEW.start = ANY (p_placements)) OR NEW.size <> p_slices THEN
		RAISE EXCEPTION '% on % takes % slices from a start in %, not % from %',
			p_name, m_id, p_slices, p_placements, NEW.size, NEW.start
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	RETURN NEW;
END
$$;

CREATE FUNCTION public.allocations_fault_history() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF NEW.state = 'failed' AND OLD.state IS DISTINCT FROM 'failed'
	   AND NOT defrag_shadowed(NEW.replaces) THEN
		INSERT INTO allocation_fault_intervals (allocation_id) VALUES (NEW.id);
	ELSIF OLD.state = 'failed' AND NEW.state <> 'failed' THEN
		UPDATE allocation_fault_intervals SET ended_at = now()
		WHERE allocation_id = NEW.id AND ended_at IS NULL;
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.allocations_layout_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
	ids bigint[];
BEGIN
	IF TG_OP = 'INSERT' THEN
		PERFORM 1 FROM gpus WHERE id IN (SELECT gpu_id FROM new_rows)
		ORDER BY id FOR NO KEY UPDATE;
		UPDATE gpus g SET layout = s.layout, used_mask = s.used_mask
		FROM (SELECT u.gpu_id AS id,
		             coalesce(string_agg(a.profile || '@' || a.start, ',' ORDER BY a.start), '')
		                 AS layout,
		             coalesce(bit_or(((1 << a.size) - 1) << a.start), 0)::smallint AS used_mask
		      FROM (SELECT DISTINCT gpu_id FROM new_rows) u
		      LEFT JOIN allocations a ON a.gpu_id = u.gpu_id AND a.state <> 'released'
		      GROUP BY u.gpu_id) s
		WHERE g.id = s.id AND (g.layout <> s.layout OR g.used_mask <> s.used_mask);
		RETURN NULL;
	ELSIF TG_OP = 'DELETE' THEN
		SELECT array_agg(DISTINCT gpu_id) INTO ids FROM old_rows;
	ELSE
		SELECT array_agg(DISTINCT x.gpu_id) INTO ids FROM (
			SELECT o.gpu_id FROM old_rows o JOIN new_rows n USING (id)
			WHERE (o.gpu_id, o.profile, o.start, o.size, o.state = 'released')
			      IS DISTINCT FROM (n.gpu_id, n.profile, n.start, n.size, n.state = 'released')
			UNION ALL
			SELECT n.gpu_id FROM old_rows o JOIN new_rows n USING (id)
			WHERE (o.gpu_id, o.profile, o.start, o.size, o.state = 'released')
			      IS DISTINCT FROM (n.gpu_id, n.profile, n.start, n.size, n.state = 'released')
		) x;
	END IF;
	IF ids IS NOT NULL THEN
		PERFORM gpu_layout_refresh(ids);
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.audit_doc_compact(doc jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
	SELECT CASE
	WHEN jsonb_typeof(doc -> 'allocations') = 'array'
	     AND jsonb_array_length(doc -> 'allocations') > 32 THEN
		(doc - 'allocations') || jsonb_build_object('allocations_summary', (
			SELECT jsonb_build_object(
				'count', count(*),
				'gpus', count(DISTINCT e ->> 'gpu_uuid'),
				'nodes', count(DISTINCT e ->> 'node'),
				'by_spec', (
					SELECT jsonb_agg(jsonb_build_object('model', s.model,
						'profile', s.profile, 'state', s.state, 'count', s.n)
						ORDER BY s.model, s.profile, s.state)
					FROM (SELECT x ->> 'model' AS model, x ->> 'profile' AS profile,
					             x ->> 'state' AS state, count(*) AS n
					      FROM jsonb_array_elements(doc -> 'allocations') x
					      GROUP BY 1, 2, 3) s),
				'full_list', CASE WHEN doc ? 'pool_id'
				                  THEN '/v1/pools/' || (doc ->> 'pool_id') END)
			FROM jsonb_array_elements(doc -> 'allocations') e))
	ELSE doc
	END
$$;

CREATE FUNCTION public.audit_log_compact() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	NEW.before := audit_doc_compact(NEW.before);
	NEW.after := audit_doc_compact(NEW.after);
	RETURN NEW;
END
$$;

CREATE FUNCTION public.billing_accrue(p_now timestamp with time zone, p_settle interval, p_max_hours integer, OUT acc_from timestamp with time zone, OUT acc_until timestamp with time zone, OUT acc_upserted bigint, OUT acc_deleted bigint, OUT acc_watermark timestamp with time zone, OUT acc_more boolean) RETURNS record
    LANGUAGE plpgsql
    SET "TimeZone" TO 'UTC'
    SET enable_nestloop TO 'off'
    AS $$
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

CREATE FUNCTION public.billing_div_half_even(n numeric, d numeric) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
	SELECT (CASE
		WHEN 2 * (n - d * floor(n / d)) > d THEN floor(n / d) + 1
		WHEN 2 * (n - d * floor(n / d)) < d THEN floor(n / d)
		WHEN mod(floor(n / d), 2) = 0 THEN floor(n / d)
		ELSE floor(n / d) + 1
	END)::bigint
$$;

CREATE FUNCTION public.billing_export_csv(p_from timestamp with time zone, p_to timestamp with time zone) RETURNS TABLE(line text, nrows integer)
    LANGUAGE sql STABLE
    AS $$
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

CREATE FUNCTION public.billing_export_focus(p_from timestamp with time zone, p_to timestamp with time zone) RETURNS TABLE(line text, nrows integer)
    LANGUAGE sql STABLE
    AS $$
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

CREATE FUNCTION public.billing_export_jsonl(p_from timestamp with time zone, p_to timestamp with time zone) RETURNS TABLE(line text, nrows integer)
    LANGUAGE sql STABLE
    AS $$
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

CREATE TABLE public.billing_usage (
    id bigint NOT NULL,
    kind text NOT NULL,
    project_id bigint NOT NULL,
    pool_id bigint,
    model text NOT NULL,
    profile text NOT NULL,
    hour timestamp with time zone NOT NULL,
    period text NOT NULL,
    rate_id bigint,
    price_per_hour_micro bigint NOT NULL,
    currency text NOT NULL,
    seconds bigint NOT NULL,
    count integer NOT NULL,
    amount_micro bigint NOT NULL,
    adjusts bigint,
    note text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT billing_usage_count_check CHECK ((count >= 0)),
    CONSTRAINT billing_usage_hour_check CHECK ((date_trunc('hour'::text, (hour AT TIME ZONE 'UTC'::text)) = (hour AT TIME ZONE 'UTC'::text))),
    CONSTRAINT billing_usage_kind_check CHECK ((kind = ANY (ARRAY['usage'::text, 'credit'::text, 'adjustment'::text]))),
    CONSTRAINT billing_usage_seconds_check CHECK (((seconds >= 0) AND (seconds <= 3600)))
);

CREATE FUNCTION public.billing_focus_line(u public.billing_usage, p_status text, p_micro bigint, p_qty numeric, p_share numeric, p_project text, p_project_display text, p_pool text, p_cluster text, p_region text, p_correction boolean, p_gpu_equiv numeric) RETURNS text
    LANGUAGE sql STABLE
    AS $$
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

CREATE FUNCTION public.billing_gpu_equiv(p_model text, p_profile text) RETURNS numeric
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
	SELECT CASE WHEN p_profile = 'full' THEN 1::numeric
	       ELSE (SELECT mp.compute_slices::numeric / nullif(gm.compute_slices, 0)
	             FROM mig_profiles mp JOIN gpu_models gm ON gm.id = mp.model
	             WHERE mp.model = p_model AND mp.name = p_profile) END
$$;

CREATE FUNCTION public.billing_idle(p_from timestamp with time zone, p_to timestamp with time zone) RETURNS TABLE(pool_id bigint, model text, profile text, hour timestamp with time zone, held_s numeric, measured_s numeric, idle_s numeric, active_s numeric)
    LANGUAGE sql STABLE
    AS $$
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

CREATE FUNCTION public.billing_idle_micro(p_amount bigint, p_held numeric, p_idle numeric) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
	SELECT CASE WHEN p_amount > 0 AND p_held > 0 AND p_idle > 0
	            THEN billing_div_half_even(p_amount * least(p_idle, p_held), p_held)
	            ELSE 0 END
$$;

CREATE FUNCTION public.billing_periods_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.billing_rate_timeline() RETURNS TABLE(model text, profile text, rate_id bigint, currency text, price_per_hour_micro bigint, derived boolean, valid_from timestamp with time zone, valid_to timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
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

CREATE FUNCTION public.billing_rates_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.billing_usage_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.billing_usage_guard_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.billing_usage_guard_truncate() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM billing_periods WHERE state = 'closed') THEN
		RAISE EXCEPTION 'billing_usage holds closed periods' USING ERRCODE = '55000';
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.defrag_apply(p_plan bigint, p_user bigint, p_ttl_s integer) RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_plan record;
BEGIN
	SELECT * INTO v_plan FROM defrag_plans WHERE id = p_plan FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF v_plan.state IN ('applying', 'applied') THEN
		RETURN 'already';
	END IF;
	IF v_plan.state <> 'planned' THEN
		RETURN 'not_applicable';
	END IF;
	IF v_plan.created_at < now() - make_interval(secs => p_ttl_s) THEN
		UPDATE defrag_plans SET state = 'expired', updated_at = now() WHERE id = p_plan;
		RETURN 'expired';
	END IF;
	INSERT INTO defrag_moves (plan_id, ordinal, allocation_id, pool_id, profile, from_gpu_id,
		from_start, to_gpu_id, to_start, make_before_break)
	SELECT p_plan, (mv.ord - 1)::integer, (mv.v->>'allocation')::bigint,
	       coalesce(a.pool_id, 0), mv.v->>'profile', coalesce(gf.id, 0),
	       (mv.v#>>'{from,start}')::integer, coalesce(gt.id, 0), (mv.v#>>'{to,start}')::integer,
	       coalesce((mv.v->>'make_before_break')::boolean, false)
	FROM jsonb_array_elements(v_plan.body->'moves') WITH ORDINALITY AS mv (v, ord)
	LEFT JOIN allocations a ON a.id = (mv.v->>'allocation')::bigint
	LEFT JOIN gpus gf ON gf.uuid = mv.v#>>'{from,gpu_uuid}'
	LEFT JOIN gpus gt ON gt.uuid = mv.v#>>'{to,gpu_uuid}';
	UPDATE defrag_plans SET state = CASE WHEN moves = 0 THEN 'applied' ELSE 'applying' END,
		applied_by = nullif(p_user, 0), applied_at = now(),
		finished_at = CASE WHEN moves = 0 THEN now() END, updated_at = now()
	WHERE id = p_plan;
	RETURN 'applying';
END
$$;

CREATE FUNCTION public.defrag_cancel(p_plan bigint) RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_state text;
BEGIN
	SELECT state INTO v_state FROM defrag_plans WHERE id = p_plan FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'not_found';
	END IF;
	IF v_state NOT IN ('planned', 'applying') THEN
		RETURN 'not_applicable';
	END IF;
	UPDATE defrag_moves SET state = 'skipped', reason = 'cancelled', updated_at = now()
	WHERE plan_id = p_plan AND state = 'pending';
	UPDATE defrag_plans SET state = 'cancelled', updated_at = now(),
		finished_at = CASE WHEN NOT EXISTS (SELECT 1 FROM defrag_moves WHERE plan_id = p_plan
			AND state NOT IN ('done', 'skipped', 'failed')) THEN now() END
	WHERE id = p_plan;
	RETURN 'cancelled';
END
$$;

CREATE FUNCTION public.defrag_move_event(p_plan bigint, p_ord integer, p_old bigint, p_new bigint) RETURNS void
    LANGUAGE sql
    AS $$
	INSERT INTO audit_log (actor, action, object_type, object_id, project_id, before, after)
	SELECT 'gpupool', 'pool.move', 'pool', p.id::text, p.project_id,
	       jsonb_build_object('allocation', o.id, 'gpu_uuid', go.uuid, 'start', o.start,
	                          'profile', o.profile, 'device_uuid', o.device_uuid),
	       jsonb_build_object('allocation', n.id, 'gpu_uuid', gn.uuid, 'start', n.start,
	                          'profile', n.profile, 'device_uuid', n.device_uuid,
	                          'defrag_plan', p_plan, 'move', p_ord)
	FROM allocations o JOIN gpus go ON go.id = o.gpu_id JOIN pools p ON p.id = o.pool_id,
	     allocations n JOIN gpus gn ON gn.id = n.gpu_id
	WHERE o.id = p_old AND n.id = p_new
$$;

CREATE FUNCTION public.defrag_notify_node(p_gpu bigint, p_pool bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_node bigint;
	v_gen  bigint;
BEGIN
	UPDATE nodes n SET generation = n.generation + 1, updated_at = now()
	FROM gpus g WHERE g.id = p_gpu AND n.id = g.node_id
	RETURNING n.id, n.generation INTO v_node, v_gen;
	INSERT INTO outbox (node_id, generation, pool_id) VALUES (v_node, v_gen, p_pool);
END
$$;

CREATE FUNCTION public.defrag_reserve(p_gpu bigint, p_start integer, p_old bigint) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_id bigint;
	v_managed boolean;
BEGIN
	SELECT n.managed_by_agent INTO v_managed FROM gpus g JOIN nodes n ON n.id = g.node_id
	WHERE g.id = p_gpu;
	BEGIN
		INSERT INTO allocations (gpu_id, profile, start, size, state, pool_id, replaces)
		SELECT p_gpu, o.profile, p_start, o.size,
		       CASE WHEN v_managed THEN 'reserved' ELSE 'ready' END, o.pool_id, o.id
		FROM allocations o WHERE o.id = p_old
		RETURNING id INTO v_id;
	EXCEPTION WHEN exclusion_violation OR check_violation THEN
		RETURN NULL;
	END;
	RETURN v_id;
END
$$;

CREATE FUNCTION public.defrag_shadowed(p_replaces bigint) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
	SELECT p_replaces IS NOT NULL AND EXISTS (SELECT 1 FROM allocations o
		WHERE o.id = p_replaces AND o.state NOT IN ('releasing', 'released'))
$$;

CREATE FUNCTION public.defrag_source_idle(p_alloc bigint, p_idle_s integer, p_threshold double precision) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
	SELECT a.state = 'ready' AND a.updated_at <= now() - make_interval(secs => p_idle_s)
	   AND NOT EXISTS (SELECT 1 FROM workload_profiles w WHERE w.allocation_id = a.id
	                   AND w.node_id = g.node_id
	                   AND (w.ended_at IS NULL
	                        OR w.ended_at > now() - make_interval(secs => p_idle_s)))
	   AND coalesce((SELECT avg(s.sm_active) FROM gpu_metric_samples s
	                 WHERE s.gpu_id = a.gpu_id AND s.device_uuid = coalesce(a.device_uuid, g.uuid)
	                   AND s.ts > now() - make_interval(secs => p_idle_s)), 0) < p_threshold
	FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE a.id = p_alloc
$$;

CREATE FUNCTION public.defrag_step(p_plan bigint, p_threshold double precision, p_timeout_s integer) RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_plan  record;
	m       record;
	o       record;
	n       record;
	v_idle  integer;
	v_id    bigint;
	v_why   text;
	v_nf    integer;
BEGIN
	SELECT * INTO v_plan FROM defrag_plans WHERE id = p_plan FOR UPDATE;
	-- a cancelled plan still finishes the move in flight
	IF NOT FOUND OR v_plan.finished_at IS NOT NULL
	   OR v_plan.state NOT IN ('applying', 'cancelled') THEN
		RETURN 'idle';
	END IF;
	SELECT * INTO m FROM defrag_moves WHERE plan_id = p_plan
	  AND state NOT IN ('done', 'skipped', 'failed') ORDER BY ordinal LIMIT 1 FOR UPDATE;
	IF NOT FOUND THEN
		SELECT count(*) INTO v_nf FROM defrag_moves WHERE plan_id = p_plan AND state = 'failed';
		UPDATE defrag_plans SET state = CASE WHEN state = 'cancelled' THEN state
			WHEN v_nf > 0 THEN 'failed' ELSE 'applied' END,
			error = CASE WHEN v_nf > 0 AND state <> 'cancelled' THEN coalesce(error,
				v_nf || ' move(s) failed') ELSE error END,
			finished_at = now(), updated_at = now() WHERE id = p_plan;
		RETURN 'idle';
	END IF;
	v_idle := coalesce((v_plan.body->>'idle_minutes')::integer, 60) * 60;
	PERFORM 1 FROM pool_requests q WHERE q.pool_id = m.pool_id AND q.state = 'approved'
		ORDER BY q.id FOR NO KEY UPDATE;
	PERFORM 1 FROM pools WHERE id = m.pool_id FOR NO KEY UPDATE;
	PERFORM 1 FROM gpus WHERE id IN (m.from_gpu_id, m.to_gpu_id) ORDER BY id FOR NO KEY UPDATE;
	PERFORM 1 FROM allocations WHERE id IN (m.allocation_id, m.new_allocation_id)
		ORDER BY id FOR NO KEY UPDATE;
	SELECT * INTO o FROM allocations WHERE id = m.allocation_id;
	IF m.new_allocation_id IS NOT NULL THEN
		SELECT * INTO n FROM allocations WHERE id = m.new_allocation_id;
	END IF;

	IF m.state = 'pending' THEN
		v_why := CASE
			WHEN o.id IS NULL OR o.state <> 'ready' OR o.gpu_id <> m.from_gpu_id
			     OR o.start <> m.from_start OR o.pool_id IS DISTINCT FROM m.pool_id
			     OR o.release_request_id IS NOT NULL THEN 'source_gone'
			-- another plan's move of it waits for its agent
			WHEN EXISTS (SELECT 1 FROM allocations s WHERE s.replaces = o.id
			             AND s.state <> 'released') THEN 'source_moving'
			WHEN NOT defrag_source_idle(o.id, v_idle, p_threshold) THEN 'source_busy'
			WHEN NOT EXISTS (SELECT 1 FROM gpus g WHERE g.id = m.to_gpu_id AND g.health = 'ok'
			                 AND g.node_status = 'ready') THEN 'target_unavailable'
			WHEN NOT EXISTS (SELECT 1 FROM gpus g WHERE g.id = m.from_gpu_id
			                 AND g.node_status = 'ready') THEN 'source_unavailable'
			END;
		IF v_why IS NOT NULL THEN
			UPDATE defrag_moves SET state = 'skipped', reason = v_why, old_uuid = o.device_uuid,
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			RETURN 'step';
		END IF;
		IF m.make_before_break THEN
			v_id := defrag_reserve(m.to_gpu_id, m.to_start, o.id);
			IF v_id IS NULL THEN
				UPDATE defrag_moves SET state = 'skipped', reason = 'target_taken',
					old_uuid = o.device_uuid, updated_at = now()
				WHERE plan_id = p_plan AND ordinal = m.ordinal;
				RETURN 'step';
			END IF;
			PERFORM defrag_notify_node(m.to_gpu_id, m.pool_id);
			UPDATE defrag_moves SET state = 'creating', new_allocation_id = v_id,
				old_uuid = o.device_uuid, updated_at = now()
			WHERE plan_id = p_plan AND ordinal = m.ordinal;
		ELSE
			-- break before make (within its GPU): the old instance goes first
			UPDATE allocations SET state = 'releasing', updated_at = now() WHERE id = o.id;
			PERFORM defrag_notify_node(m.from_gpu_id, m.pool_id);
			UPDATE defrag_moves SET state = 'reserving', old_uuid = o.device_uuid,
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
		END IF;
		RETURN 'step';
	END IF;

	IF m.state = 'reserving' THEN
		IF o.state <> 'released'
		   AND m.updated_at >= now() - make_interval(secs => p_timeout_s) THEN
			RETURN 'wait';
		END IF;
		-- a shrink or release meanwhile left the pool without need of it
		IF (SELECT count(*) FROM allocations a JOIN gpus g ON g.id = a.gpu_id
		    WHERE a.pool_id = m.pool_id AND a.profile = m.profile
		      AND g.model = (SELECT model FROM gpus WHERE id = m.from_gpu_id)
		      AND a.state NOT IN ('releasing', 'released')
		      -- another move's new instance: its old one counts
		      AND NOT defrag_shadowed(a.replaces))
		   >= (SELECT coalesce(sum((i->>'count')::integer), 0)
		       FROM pools p CROSS JOIN jsonb_array_elements(p.items) i
		       WHERE p.id = m.pool_id AND p.status NOT IN ('releasing', 'released')
		         AND i->>'profile' = m.profile
		         AND i->>'model' = (SELECT model FROM gpus WHERE id = m.from_gpu_id)) THEN
			UPDATE defrag_moves SET state = 'skipped', reason = 'source_released',
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			RETURN 'step';
		END IF;
		IF o.state <> 'released' THEN
			-- the agent never released the old instance: the target anyway
			-- where the old one's slices leave it free (the pool stays whole,
			-- the agent creates it when back); else the pool is one short
			-- once the old one is released
			v_id := defrag_reserve(m.to_gpu_id, m.to_start, o.id);
			IF v_id IS NOT NULL THEN
				PERFORM defrag_notify_node(m.to_gpu_id, m.pool_id);
			END IF;
			UPDATE defrag_moves SET state = 'failed', reason = 'agent_timeout',
				new_allocation_id = v_id, updated_at = now()
			WHERE plan_id = p_plan AND ordinal = m.ordinal;
			UPDATE defrag_plans SET error = coalesce(error, 'move ' || m.ordinal
				|| ': the node agent did not release the old instance within '
				|| p_timeout_s || ' s; ' || CASE WHEN v_id IS NULL
				THEN 'the pool is one instance short once it is released'
				ELSE 'the new one is reserved for the agent' END),
				updated_at = now() WHERE id = p_plan;
			RETURN 'step';
		END IF;
		-- the target, else back where it was: the pool keeps its instance
		v_id := defrag_reserve(m.to_gpu_id, m.to_start, o.id);
		v_why := NULL;
		IF v_id IS NULL THEN
			v_id := defrag_reserve(m.from_gpu_id, m.from_start, o.id);
			v_why := 'target_taken';
		END IF;
		IF v_id IS NULL THEN
			UPDATE defrag_moves SET state = 'failed', reason = 'target_taken',
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			UPDATE defrag_plans SET error = coalesce(error, 'move ' || m.ordinal
				|| ': the slices of the instance were taken while it was recreated'),
				updated_at = now() WHERE id = p_plan;
			RETURN 'step';
		END IF;
		PERFORM defrag_notify_node(m.to_gpu_id, m.pool_id);
		UPDATE defrag_moves SET state = 'creating', new_allocation_id = v_id, reason = v_why,
			updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
		RETURN 'step';
	END IF;

	IF m.state = 'creating' THEN
		IF m.make_before_break AND o.release_request_id IS NOT NULL
		   AND n.state NOT IN ('releasing', 'released') THEN
			-- a shrink or release of the pool took the old one meanwhile: the new one goes too
			UPDATE allocations SET state = 'releasing', release_request_id = o.release_request_id,
				updated_at = now() WHERE id = n.id;
			PERFORM defrag_notify_node(m.to_gpu_id, m.pool_id);
			UPDATE defrag_moves SET state = 'skipped', reason = 'source_released',
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			RETURN 'step';
		END IF;
		IF n.state IN ('reserved', 'provisioning')
		   AND m.updated_at < now() - make_interval(secs => p_timeout_s) THEN
			-- the agent never created it: make before break gives it up (the old
			-- one serves on); break before make leaves it reserved for the agent
			IF m.make_before_break THEN
				UPDATE allocations SET state = 'releasing', updated_at = now()
				WHERE id = n.id;
				PERFORM defrag_notify_node(m.to_gpu_id, m.pool_id);
			END IF;
			UPDATE defrag_moves SET state = 'failed', reason = 'agent_timeout',
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			UPDATE defrag_plans SET error = coalesce(error, 'move ' || m.ordinal
				|| ': the node agent did not create the new instance within '
				|| p_timeout_s || ' s'), updated_at = now() WHERE id = p_plan;
			RETURN 'step';
		END IF;
		IF n.state IN ('reserved', 'provisioning') THEN
			RETURN 'wait';
		END IF;
		IF n.state = 'ready' THEN
			PERFORM defrag_move_event(p_plan, m.ordinal, o.id, n.id);
			IF m.make_before_break AND o.state NOT IN ('releasing', 'released') THEN
				UPDATE allocations SET state = 'releasing', updated_at = now() WHERE id = o.id;
				PERFORM defrag_notify_node(m.from_gpu_id, m.pool_id);
				UPDATE defrag_moves SET state = 'destroying', new_uuid = n.device_uuid,
					updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			ELSE
				-- (recreated where it was when its target was taken: skipped)
				UPDATE defrag_moves SET new_uuid = n.device_uuid,
					state = CASE WHEN m.reason = 'target_taken' THEN 'skipped' ELSE 'done' END,
					updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			END IF;
			RETURN 'step';
		END IF;
		IF n.state IN ('releasing', 'released') AND n.release_request_id IS NOT NULL THEN
			-- a shrink or release of the pool chose the new one: the pool is whole
			UPDATE defrag_moves SET state = 'skipped', reason = 'source_released',
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			RETURN 'step';
		END IF;
		-- failed: the agent could not create it
		IF m.make_before_break AND n.state = 'failed' THEN
			-- the old instance keeps serving; the new one goes
			UPDATE allocations SET state = 'releasing', updated_at = now() WHERE id = n.id;
			PERFORM defrag_notify_node(m.to_gpu_id, m.pool_id);
		END IF;
		UPDATE defrag_moves SET state = 'failed',
			reason = left('agent_failed: ' || coalesce(n.error, n.state), 2000),
			updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
		UPDATE defrag_plans SET error = coalesce(error, left('move ' || m.ordinal
			|| ': the node agent could not create the new instance: '
			|| coalesce(n.error, n.state), 2000)), updated_at = now() WHERE id = p_plan;
		RETURN 'step';
	END IF;

	IF m.state = 'destroying' THEN
		IF o.state <> 'released'
		   AND m.updated_at >= now() - make_interval(secs => p_timeout_s) THEN
			RETURN 'wait';
		END IF;
		IF o.state <> 'released' THEN
			-- the new instance serves; the old one stays releasing for its agent
			UPDATE defrag_moves SET state = 'done', reason = 'release_pending',
				updated_at = now() WHERE plan_id = p_plan AND ordinal = m.ordinal;
			RETURN 'step';
		END IF;
		UPDATE defrag_moves SET state = 'done', updated_at = now()
		WHERE plan_id = p_plan AND ordinal = m.ordinal;
		RETURN 'step';
	END IF;
	RETURN 'idle';
END
$$;

CREATE FUNCTION public.device_allocation(p_node bigint, p_device text) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$
	SELECT a.id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	WHERE g.node_id = p_node AND a.state NOT IN ('released')
	  AND (a.device_uuid = p_device OR (a.profile = 'full' AND g.uuid = p_device))
	ORDER BY a.id DESC LIMIT 1
$$;

CREATE FUNCTION public.gp_csv(v text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
	SELECT CASE WHEN v IS NULL THEN ''
	            WHEN v ~ '[",\r\n]' THEN '"' || replace(v, '"', '""') || '"'
	            ELSE v END
$$;

CREATE FUNCTION public.gp_dec(v numeric) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
	SELECT trim_scale(v)::text
$$;

CREATE FUNCTION public.gp_iso(t timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
	SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

CREATE FUNCTION public.gp_micro(v bigint) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
	SELECT round(v::numeric / 1000000, 6)::text
$$;

CREATE FUNCTION public.gp_micro_dec(v bigint) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
	SELECT trim_scale(round(v::numeric / 1000000, 6))::text
$$;

CREATE FUNCTION public.gpu_class_pending_apply() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	WITH p AS (DELETE FROM gpu_class_pending
	           RETURNING cluster_id, model, mig_enabled, healthy, node_ready, layout, 1 AS n),
	     d AS (DELETE FROM gpu_class_delta
	           RETURNING cluster_id, model, mig_enabled, healthy, node_ready, layout, n)
	INSERT INTO gpu_classes AS c (cluster_id, model, mig_enabled, healthy, node_ready, layout,
	                              gpus)
	SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(n)
	FROM (SELECT * FROM p UNION ALL SELECT * FROM d) x
	GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
	ON CONFLICT (cluster_id, model, mig_enabled, healthy, node_ready, layout)
	DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.gpu_classes_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO gpu_class_pending (gpu_id, cluster_id, model, mig_enabled, healthy,
		                               node_ready, layout)
		SELECT id, cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout
		FROM new_rows;
	ELSIF TG_OP = 'DELETE' THEN
		INSERT INTO gpu_class_delta (cluster_id, model, mig_enabled, healthy, node_ready,
		                             layout, n)
		SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout,
		       -count(*)
		FROM old_rows o
		WHERE NOT EXISTS (SELECT 1 FROM gpu_class_pending p WHERE p.gpu_id = o.id)
		GROUP BY 1, 2, 3, 4, 5, 6;
		DELETE FROM gpu_class_pending p USING old_rows o WHERE p.gpu_id = o.id;
	ELSE
		INSERT INTO gpu_class_delta (cluster_id, model, mig_enabled, healthy, node_ready,
		                             layout, n)
		SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(n)
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, -1 AS n FROM old_rows o
		      WHERE NOT EXISTS (SELECT 1 FROM gpu_class_pending p WHERE p.gpu_id = o.id)
		      UNION ALL
		      SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready',
		             layout, 1 FROM new_rows n
		      WHERE NOT EXISTS (SELECT 1 FROM gpu_class_pending p WHERE p.gpu_id = n.id)) d
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0;
		UPDATE gpu_class_pending p
		SET cluster_id = n.cluster_id, model = n.model, mig_enabled = n.mig_enabled,
		    healthy = n.health = 'ok', node_ready = n.node_status = 'ready', layout = n.layout
		FROM new_rows n WHERE p.gpu_id = n.id;
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.gpu_layout_refresh(ids bigint[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF ids IS NULL OR cardinality(ids) = 0 THEN
		RETURN;
	END IF;
	PERFORM 1 FROM gpus WHERE id = ANY (ids) ORDER BY id FOR NO KEY UPDATE;
	UPDATE gpus g SET layout = s.layout, used_mask = s.used_mask
	FROM (SELECT u.id,
	             coalesce(string_agg(a.profile || '@' || a.start, ',' ORDER BY a.start), '')
	                 AS layout,
	             coalesce(bit_or(((1 << a.size) - 1) << a.start), 0)::smallint AS used_mask
	      FROM unnest(ids) AS u (id)
	      LEFT JOIN allocations a ON a.gpu_id = u.id AND a.state <> 'released'
	      GROUP BY u.id) s
	WHERE g.id = s.id AND (g.layout <> s.layout OR g.used_mask <> s.used_mask);
END
$$;

CREATE FUNCTION public.gpus_from_node() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	SELECT n.cluster_id, n.status INTO NEW.cluster_id, NEW.node_status
	FROM nodes n WHERE n.id = NEW.node_id;
	RETURN NEW;
END
$$;

CREATE FUNCTION public.gpus_health_history() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.k8s_apply_workloads(p_cluster bigint, p_profiles jsonb, OUT bad_index integer, OUT violations integer) RETURNS record
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.k8s_wake_allocation() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.k8s_wake_gpu(p_gpu bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || g.cluster_id) FROM gpus g WHERE g.id = p_gpu;
END
$$;

CREATE FUNCTION public.k8s_wake_gpu_health() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || NEW.cluster_id);
	IF OLD.cluster_id <> NEW.cluster_id THEN
		PERFORM pg_notify('gpupool_wake', 'k8s:' || OLD.cluster_id);
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.k8s_wake_namespaces() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM k8s_wake_pool(p.id) FROM pools p
	WHERE p.project_id = (CASE WHEN TG_OP = 'DELETE' THEN OLD.project_id ELSE NEW.project_id END);
	RETURN NULL;
END
$$;

CREATE FUNCTION public.k8s_wake_pool(p_pool bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || c.cluster_id)
	FROM (SELECT DISTINCT g.cluster_id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	      WHERE a.pool_id = p_pool) c;
END
$$;

CREATE FUNCTION public.k8s_wake_pool_status() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM k8s_wake_pool(NEW.id);
	RETURN NULL;
END
$$;

CREATE FUNCTION public.metric_check(p_node bigint, p_samples jsonb) RETURNS TABLE(idx integer, field text, verdict text)
    LANGUAGE sql STABLE
    AS $$
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

CREATE FUNCTION public.metric_partitions_maintain(p_retention_days integer, p_days_ahead integer) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
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
$_$;

CREATE FUNCTION public.metric_rollup_run(p_idle_threshold double precision, p_settle interval, p_max_hours integer, OUT rows integer, OUT watermark timestamp with time zone, OUT more boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.node_tokens_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF TG_OP = 'TRUNCATE' THEN
		PERFORM pg_notify('gpupool_tokens', '');
		RETURN NULL;
	END IF;
	PERFORM pg_notify('gpupool_tokens', OLD.node_id::text);
	IF TG_OP = 'UPDATE' AND NEW.node_id IS DISTINCT FROM OLD.node_id THEN
		PERFORM pg_notify('gpupool_tokens', NEW.node_id::text);
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.nodes_status_to_gpus() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	UPDATE gpus SET node_status = NEW.status, cluster_id = NEW.cluster_id
	WHERE node_id = NEW.id;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.nodes_unknown_history() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.outbox_claim(p_limit integer, p_lease interval) RETURNS TABLE(node_id bigint, attempts integer, callback_url text, push_secret text)
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
BEGIN
	UPDATE outbox o SET delivered_at = now(), last_error = 'no callback URL: the agent long-polls'
	WHERE o.id IN (SELECT x.id FROM outbox x JOIN nodes n ON n.id = x.node_id
	               WHERE x.delivered_at IS NULL AND x.next_attempt_at <= now()
	                 AND (n.callback_url IS NULL OR n.push_secret IS NULL)
	               ORDER BY x.id LIMIT 1000 FOR UPDATE OF x SKIP LOCKED);
	RETURN QUERY
	WITH c AS (
		SELECT x.id FROM outbox x WHERE x.delivered_at IS NULL AND x.next_attempt_at <= now()
		ORDER BY x.id LIMIT p_limit FOR UPDATE SKIP LOCKED
	), u AS (
		UPDATE outbox o SET attempts = o.attempts + 1, next_attempt_at = now() + p_lease
		FROM c WHERE o.id = c.id RETURNING o.node_id, o.attempts
	)
	SELECT u.node_id, max(u.attempts)::integer, n.callback_url, n.push_secret
	FROM u JOIN nodes n ON n.id = u.node_id
	WHERE n.callback_url IS NOT NULL AND n.push_secret IS NOT NULL
	GROUP BY u.node_id, n.callback_url, n.push_secret;
END
$$;

CREATE FUNCTION public.outbox_done(p_node bigint, p_generation bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
	UPDATE outbox SET delivered_at = now(), last_error = NULL
	WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
	             AND generation <= p_generation ORDER BY id FOR NO KEY UPDATE);
	PERFORM alert_resolve('push_failed:' || p_node);
END
$$;

CREATE FUNCTION public.outbox_retry(p_node bigint, p_attempts integer, p_max integer, p_delay_ms integer, p_error text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_name text;
BEGIN
	IF p_attempts < p_max THEN
		UPDATE outbox SET next_attempt_at = now() + make_interval(secs => p_delay_ms / 1000.0),
			last_error = left(p_error, 2000)
		WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
		             ORDER BY id FOR NO KEY UPDATE);
		RETURN false;
	END IF;
	UPDATE outbox SET delivered_at = now(), gave_up_at = now(),
		last_error = left('gave up after ' || p_attempts || ' attempts: ' || p_error, 2000)
	WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
	             ORDER BY id FOR NO KEY UPDATE);
	SELECT name INTO v_name FROM nodes WHERE id = p_node;
	PERFORM alert_raise('push_failed', 'warning', 'push_failed:' || p_node, p_node, NULL, NULL,
		NULL, left('pushes to node ' || v_name || ' fail (' || p_error
		|| '); its agent must long-poll', 2000), jsonb_build_object('attempts', p_attempts));
	RETURN true;
END
$$;

CREATE FUNCTION public.outbox_wake() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'node:' || NEW.node_id);
	RETURN NULL;
END
$$;

CREATE FUNCTION public.pool_request_layout_done(p_id bigint, p_action text) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
	SELECT CASE WHEN p_action IN ('create', 'expand') THEN
	            NOT EXISTS (SELECT 1 FROM allocations a WHERE a.request_id = p_id
	                        AND a.state IN ('reserved', 'provisioning'))
	       ELSE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.release_request_id = p_id
	                        AND a.state <> 'released') END
$$;

CREATE FUNCTION public.pools_check(ok boolean, what text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF ok IS NOT TRUE THEN
		RAISE EXCEPTION 'the approval found % changed; retrying', what
			USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN true;
END
$$;

CREATE FUNCTION public.pools_confirm_unmanaged_releases() RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.pools_settle(p_pools bigint[]) RETURNS integer
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
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
		  AND EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = p.id AND a.state = 'failed'
		              AND NOT defrag_shadowed(a.replaces))
		RETURNING p.id, p.project_id, p.name, was.status AS before,
		          (SELECT g.node_id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
		           WHERE a.pool_id = p.id AND a.state = 'failed' AND NOT defrag_shadowed(a.replaces)
		           ORDER BY a.id LIMIT 1) AS node
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
		                  AND a.state NOT IN ('ready', 'releasing', 'released')
		                  AND NOT (a.state = 'failed' AND defrag_shadowed(a.replaces)))
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

CREATE FUNCTION public.pools_settle_audit(p_pool bigint, p_project bigint, p_before text, p_after text) RETURNS void
    LANGUAGE sql
    AS $$
	INSERT INTO audit_log (action, object_type, object_id, project_id, before, after)
	VALUES ('pool.' || p_after, 'pool', p_pool::text, p_project,
		jsonb_build_object('status', p_before), jsonb_build_object('status', p_after))
$$;

CREATE FUNCTION public.pools_settle_due() RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_reqs bigint[];
	v_n    integer;
	v_m    integer := 0;
BEGIN
	SELECT coalesce(array_agg(s.id), '{}') INTO v_reqs FROM (SELECT q.id
		FROM pool_requests q WHERE q.state = 'approved'
		  AND pool_request_layout_done(q.id, q.action)
		ORDER BY q.id FOR NO KEY UPDATE SKIP LOCKED) s;
	IF cardinality(v_reqs) > 0 THEN
		WITH done AS (
			UPDATE pool_requests q SET
				state = CASE WHEN q.action IN ('create', 'expand') AND EXISTS (
				             SELECT 1 FROM allocations a WHERE a.request_id = q.id
				             AND a.state = 'failed') THEN 'failed' ELSE 'fulfilled' END,
				generation = q.generation + 1
			WHERE q.id = ANY (v_reqs) AND q.state = 'approved'
			  AND pool_request_layout_done(q.id, q.action)
			RETURNING q.id, q.state
		)
		INSERT INTO pool_request_events (request_id, from_state, to_state, actor, note)
		SELECT id, 'approved', state, 'gpupool',
		       CASE WHEN state = 'failed' THEN 'an allocation of the request failed'
		            ELSE 'its layout is done (settled by the expiry pass)' END
		FROM done;
		GET DIAGNOSTICS v_m = ROW_COUNT;
	END IF;
	v_n := pools_settle(ARRAY(SELECT id FROM pools
		WHERE status IN ('releasing', 'provisioning') ORDER BY id));
	RETURN v_n + v_m;
END
$$;

CREATE FUNCTION public.profiles_in(p jsonb) RETURNS TABLE(device_uuid text, namespace text, pod text, container text)
    LANGUAGE sql IMMUTABLE
    AS $$
	SELECT DISTINCT x.device_uuid, x.namespace, x.pod, coalesce(x.container, '')
	FROM jsonb_to_recordset(p) AS x(device_uuid text, namespace text, pod text, container text)
$$;

CREATE FUNCTION public.profiles_isolation(p_node bigint) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.profiles_replace(p_node bigint, p_source text, p_profiles jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
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

CREATE TABLE public.alerts (
    id bigint NOT NULL,
    type text NOT NULL,
    severity text DEFAULT 'warning'::text NOT NULL,
    dedup_key text NOT NULL,
    node_id bigint,
    gpu_id bigint,
    pool_id bigint,
    project_id bigint,
    message text NOT NULL,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    occurrences bigint DEFAULT 1 NOT NULL,
    raised_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    resolved_at timestamp with time zone,
    acknowledged_at timestamp with time zone,
    acknowledged_by bigint,
    CONSTRAINT alerts_dedup_key_check CHECK (((length(dedup_key) >= 1) AND (length(dedup_key) <= 500))),
    CONSTRAINT alerts_details_check CHECK ((jsonb_typeof(details) = 'object'::text)),
    CONSTRAINT alerts_message_check CHECK ((length(message) <= 2000)),
    CONSTRAINT alerts_severity_check CHECK ((severity = ANY (ARRAY['info'::text, 'warning'::text, 'critical'::text]))),
    CONSTRAINT alerts_type_check CHECK ((type ~ '^[a-z][a-z_]{1,40}$'::text))
);

ALTER TABLE public.alerts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.alerts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.allocation_fault_intervals (
    id bigint NOT NULL,
    allocation_id bigint NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    CONSTRAINT allocation_fault_intervals_check CHECK (((ended_at IS NULL) OR (ended_at >= started_at)))
);

ALTER TABLE public.allocation_fault_intervals ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.allocation_fault_intervals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.allocations (
    id bigint NOT NULL,
    gpu_id bigint NOT NULL,
    profile text NOT NULL,
    start integer NOT NULL,
    size integer NOT NULL,
    state text DEFAULT 'reserved'::text NOT NULL,
    pool_id bigint,
    device_uuid text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    released_at timestamp with time zone,
    request_id bigint,
    release_request_id bigint,
    error text,
    replaces bigint,
    CONSTRAINT allocations_error_check CHECK ((length(error) <= 2000)),
    CONSTRAINT allocations_size_check CHECK ((size > 0)),
    CONSTRAINT allocations_start_check CHECK ((start >= 0)),
    CONSTRAINT allocations_state_check CHECK ((state = ANY (ARRAY['reserved'::text, 'provisioning'::text, 'ready'::text, 'failed'::text, 'releasing'::text, 'released'::text]))),
    CONSTRAINT allocations_within_gpu CHECK (((start + size) <= 8))
);

ALTER TABLE public.allocations ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.allocations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.audit_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    actor_id bigint,
    actor text,
    action text NOT NULL,
    object_type text NOT NULL,
    object_id text NOT NULL,
    project_id bigint,
    request_id text,
    before jsonb,
    after jsonb
);

ALTER TABLE public.audit_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.billing_accrual_state (
    id integer NOT NULL,
    watermark timestamp with time zone,
    last_run_at timestamp with time zone,
    last_until timestamp with time zone,
    CONSTRAINT billing_accrual_state_id_check CHECK ((id = 1))
);

CREATE TABLE public.billing_export_chunks (
    export_id bigint NOT NULL,
    seq integer NOT NULL,
    data bytea NOT NULL
);
ALTER TABLE ONLY public.billing_export_chunks ALTER COLUMN data SET COMPRESSION lz4;

CREATE TABLE public.billing_exports (
    id bigint NOT NULL,
    format text NOT NULL,
    period text,
    range_from timestamp with time zone,
    range_to timestamp with time zone,
    state text DEFAULT 'queued'::text NOT NULL,
    rows bigint,
    bytes bigint,
    sha256 text,
    error text,
    lease_until timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    created_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    chunks integer,
    worker text,
    CONSTRAINT billing_exports_check CHECK (((period IS NOT NULL) <> ((range_from IS NOT NULL) AND (range_to IS NOT NULL)))),
    CONSTRAINT billing_exports_format_check CHECK ((format = ANY (ARRAY['csv'::text, 'jsonl'::text, 'focus'::text]))),
    CONSTRAINT billing_exports_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text, 'done'::text, 'failed'::text])))
);

ALTER TABLE public.billing_exports ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.billing_exports_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.billing_periods (
    period text NOT NULL,
    state text DEFAULT 'open'::text NOT NULL,
    closed_at timestamp with time zone,
    closed_by bigint,
    CONSTRAINT billing_periods_check CHECK (((state = 'closed'::text) = (closed_at IS NOT NULL))),
    CONSTRAINT billing_periods_period_check CHECK ((period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'::text)),
    CONSTRAINT billing_periods_state_check CHECK ((state = ANY (ARRAY['open'::text, 'closed'::text])))
);

CREATE TABLE public.billing_rates (
    id bigint NOT NULL,
    model text NOT NULL,
    profile text NOT NULL,
    currency text NOT NULL,
    price_per_hour_micro bigint NOT NULL,
    effective_from timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by bigint,
    CONSTRAINT billing_rates_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT billing_rates_price_per_hour_micro_check CHECK ((price_per_hour_micro >= 0)),
    CONSTRAINT billing_rates_profile_check CHECK (((length(profile) >= 1) AND (length(profile) <= 40))),
    CONSTRAINT billing_rates_whole_second CHECK ((date_trunc('second'::text, effective_from) = effective_from))
);

ALTER TABLE public.billing_rates ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.billing_rates_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE public.billing_usage ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.billing_usage_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.clusters (
    id bigint NOT NULL,
    name text NOT NULL,
    region text DEFAULT ''::text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT clusters_description_check CHECK ((length(description) <= 500)),
    CONSTRAINT clusters_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text)),
    CONSTRAINT clusters_region_check CHECK ((length(region) <= 63))
);

ALTER TABLE public.clusters ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.clusters_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.defrag_moves (
    plan_id bigint NOT NULL,
    ordinal integer NOT NULL,
    allocation_id bigint NOT NULL,
    new_allocation_id bigint,
    pool_id bigint NOT NULL,
    profile text NOT NULL,
    from_gpu_id bigint NOT NULL,
    from_start integer NOT NULL,
    to_gpu_id bigint NOT NULL,
    to_start integer NOT NULL,
    make_before_break boolean NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    reason text,
    old_uuid text,
    new_uuid text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT defrag_moves_ordinal_check CHECK ((ordinal >= 0)),
    CONSTRAINT defrag_moves_reason_check CHECK ((length(reason) <= 2000)),
    CONSTRAINT defrag_moves_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'reserving'::text, 'creating'::text, 'destroying'::text, 'done'::text, 'skipped'::text, 'failed'::text])))
);

CREATE TABLE public.defrag_plans (
    id bigint NOT NULL,
    created_by bigint,
    cluster_id bigint,
    goal text NOT NULL,
    state text DEFAULT 'planned'::text NOT NULL,
    moves integer NOT NULL,
    body jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    error text,
    applied_by bigint,
    applied_at timestamp with time zone,
    finished_at timestamp with time zone,
    CONSTRAINT defrag_plans_error_check CHECK ((length(error) <= 2000)),
    CONSTRAINT defrag_plans_goal_check CHECK ((goal = ANY (ARRAY['items'::text, 'free_gpus'::text]))),
    CONSTRAINT defrag_plans_moves_check CHECK ((moves >= 0)),
    CONSTRAINT defrag_plans_state_check CHECK ((state = ANY (ARRAY['planned'::text, 'applying'::text, 'applied'::text, 'failed'::text, 'expired'::text, 'cancelled'::text])))
);

ALTER TABLE public.defrag_plans ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.defrag_plans_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.enrollment_tokens (
    id bigint NOT NULL,
    cluster_id bigint NOT NULL,
    digest bytea NOT NULL,
    prefix text NOT NULL,
    created_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    node_id bigint,
    revoked_at timestamp with time zone,
    node_name text,
    adopt_manual boolean DEFAULT false NOT NULL,
    CONSTRAINT enrollment_tokens_digest_check CHECK ((length(digest) = 32)),
    CONSTRAINT enrollment_tokens_node_name_check CHECK (((node_name IS NULL) OR ((length(node_name) >= 1) AND (length(node_name) <= 253))))
);

ALTER TABLE public.enrollment_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.enrollment_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE UNLOGGED TABLE public.gpu_class_delta (
    cluster_id bigint NOT NULL,
    model text NOT NULL,
    mig_enabled boolean NOT NULL,
    healthy boolean NOT NULL,
    node_ready boolean NOT NULL,
    layout text NOT NULL,
    n integer NOT NULL
);

CREATE UNLOGGED TABLE public.gpu_class_pending (
    gpu_id bigint NOT NULL,
    cluster_id bigint NOT NULL,
    model text NOT NULL,
    mig_enabled boolean NOT NULL,
    healthy boolean NOT NULL,
    node_ready boolean NOT NULL,
    layout text NOT NULL
);

CREATE TABLE public.gpu_classes (
    cluster_id bigint NOT NULL,
    model text NOT NULL,
    mig_enabled boolean NOT NULL,
    healthy boolean NOT NULL,
    node_ready boolean NOT NULL,
    layout text NOT NULL,
    gpus integer NOT NULL
);

CREATE TABLE public.gpu_health_intervals (
    id bigint NOT NULL,
    gpu_id bigint NOT NULL,
    health text NOT NULL,
    reason text,
    started_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    CONSTRAINT gpu_health_intervals_check CHECK (((ended_at IS NULL) OR (ended_at >= started_at))),
    CONSTRAINT gpu_health_intervals_health_check CHECK ((health = ANY (ARRAY['ok'::text, 'degraded'::text, 'failed'::text])))
);

ALTER TABLE public.gpu_health_intervals ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.gpu_health_intervals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.gpu_metric_hourly (
    hour timestamp with time zone NOT NULL,
    gpu_id bigint NOT NULL,
    device_uuid text NOT NULL,
    samples integer NOT NULL,
    power_w_avg double precision,
    power_w_max double precision,
    sm_active_avg double precision,
    sm_active_low integer DEFAULT 0 NOT NULL,
    memory_used_mib_max bigint,
    temperature_c_max double precision,
    ecc_uncorrected_max bigint,
    CONSTRAINT gpu_metric_hourly_samples_check CHECK ((samples > 0))
);

CREATE TABLE public.gpu_metric_samples (
    ts timestamp with time zone NOT NULL,
    gpu_id bigint NOT NULL,
    device_uuid text NOT NULL,
    power_w double precision,
    sm_active double precision,
    memory_used_mib bigint,
    memory_total_mib bigint,
    temperature_c double precision,
    ecc_corrected bigint,
    ecc_uncorrected bigint,
    last_xid integer,
    remapped_rows bigint,
    CONSTRAINT gpu_metric_samples_sm_active_check CHECK (((sm_active >= (0)::double precision) AND (sm_active <= (1)::double precision)))
)
PARTITION BY RANGE (ts);

CREATE TABLE public.gpu_models (
    id text NOT NULL,
    memory_mib integer NOT NULL,
    mig_capable boolean NOT NULL,
    memory_slices integer NOT NULL,
    compute_slices integer NOT NULL,
    full_slices integer NOT NULL,
    product_names text[] NOT NULL,
    pci_device_ids text[] NOT NULL,
    CONSTRAINT gpu_models_check CHECK ((mig_capable = (memory_slices > 0))),
    CONSTRAINT gpu_models_compute_slices_check CHECK (((compute_slices >= 0) AND (compute_slices <= 8))),
    CONSTRAINT gpu_models_full_slices_check CHECK (((full_slices >= 1) AND (full_slices <= 8))),
    CONSTRAINT gpu_models_memory_mib_check CHECK ((memory_mib > 0)),
    CONSTRAINT gpu_models_memory_slices_check CHECK (((memory_slices >= 0) AND (memory_slices <= 8)))
);

CREATE TABLE public.gpus (
    id bigint NOT NULL,
    node_id bigint NOT NULL,
    cluster_id bigint NOT NULL,
    gpu_index integer NOT NULL,
    uuid text NOT NULL,
    model text NOT NULL,
    memory_mib integer NOT NULL,
    mig_enabled boolean DEFAULT false NOT NULL,
    health text DEFAULT 'ok'::text NOT NULL,
    health_reason text,
    node_status text NOT NULL,
    layout text DEFAULT ''::text NOT NULL,
    used_mask smallint DEFAULT 0 NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT gpus_gpu_index_check CHECK (((gpu_index >= 0) AND (gpu_index <= 15))),
    CONSTRAINT gpus_health_check CHECK ((health = ANY (ARRAY['ok'::text, 'degraded'::text, 'failed'::text]))),
    CONSTRAINT gpus_memory_mib_check CHECK ((memory_mib > 0)),
    CONSTRAINT gpus_used_mask_check CHECK (((used_mask >= 0) AND (used_mask <= 255))),
    CONSTRAINT gpus_uuid_check CHECK ((uuid ~ '^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'::text))
);

ALTER TABLE public.gpus ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.gpus_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.idempotency_keys (
    user_id bigint NOT NULL,
    key text NOT NULL,
    request_hash bytea NOT NULL,
    state text NOT NULL,
    status integer,
    content_type text,
    etag text,
    location text,
    body bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_by text,
    CONSTRAINT idempotency_keys_state_check CHECK ((state = ANY (ARRAY['committed'::text, 'done'::text])))
);

CREATE TABLE public.login_failures (
    key text NOT NULL,
    failures integer NOT NULL,
    window_start timestamp with time zone NOT NULL
);

CREATE TABLE public.metric_rollup_state (
    id integer NOT NULL,
    watermark timestamp with time zone,
    last_run_at timestamp with time zone,
    CONSTRAINT metric_rollup_state_id_check CHECK ((id = 1))
);

CREATE TABLE public.mig_profiles (
    model text NOT NULL,
    name text NOT NULL,
    profile_id integer NOT NULL,
    compute_slices integer NOT NULL,
    memory_slices integer NOT NULL,
    max_instances integer NOT NULL,
    sm_count integer NOT NULL,
    memory_mib integer NOT NULL,
    placements integer[] NOT NULL,
    media_extensions boolean NOT NULL,
    confirmed boolean NOT NULL,
    CONSTRAINT mig_profiles_compute_slices_check CHECK ((compute_slices > 0)),
    CONSTRAINT mig_profiles_max_instances_check CHECK ((max_instances > 0)),
    CONSTRAINT mig_profiles_memory_slices_check CHECK (((memory_slices >= 1) AND (memory_slices <= 8))),
    CONSTRAINT mig_profiles_placements_check CHECK ((cardinality(placements) > 0))
);

CREATE TABLE public.node_tokens (
    id bigint NOT NULL,
    node_id bigint NOT NULL,
    digest bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT node_tokens_digest_check CHECK ((length(digest) = 32))
);

ALTER TABLE public.node_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.node_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.node_unknown_intervals (
    id bigint NOT NULL,
    node_id bigint NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    CONSTRAINT node_unknown_intervals_check CHECK (((ended_at IS NULL) OR (ended_at >= started_at)))
);

ALTER TABLE public.node_unknown_intervals ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.node_unknown_intervals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.nodes (
    id bigint NOT NULL,
    cluster_id bigint NOT NULL,
    name text NOT NULL,
    hostname text NOT NULL,
    status text DEFAULT 'ready'::text NOT NULL,
    status_reason text,
    cpu_millicores bigint NOT NULL,
    memory_bytes bigint NOT NULL,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    agent_version text,
    agent_heartbeat_at timestamp with time zone,
    generation bigint DEFAULT 1 NOT NULL,
    observed_generation bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    managed_by_agent boolean DEFAULT false NOT NULL,
    callback_url text,
    push_secret text,
    agent_status_at timestamp with time zone,
    agent_errors jsonb DEFAULT '[]'::jsonb NOT NULL,
    CONSTRAINT nodes_agent_errors_check CHECK ((jsonb_typeof(agent_errors) = 'array'::text)),
    CONSTRAINT nodes_callback_url_check CHECK (((callback_url IS NULL) OR ((length(callback_url) <= 500) AND (callback_url ~ '^https?://[^[:space:]]+$'::text)))),
    CONSTRAINT nodes_cpu_millicores_check CHECK ((cpu_millicores >= 0)),
    CONSTRAINT nodes_hostname_check CHECK (((length(hostname) >= 1) AND (length(hostname) <= 253))),
    CONSTRAINT nodes_labels_check CHECK ((jsonb_typeof(labels) = 'object'::text)),
    CONSTRAINT nodes_memory_bytes_check CHECK ((memory_bytes >= 0)),
    CONSTRAINT nodes_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$'::text)),
    CONSTRAINT nodes_push_secret_check CHECK (((push_secret IS NULL) OR (push_secret ~ '^[0-9a-f]{64}$'::text))),
    CONSTRAINT nodes_status_check CHECK ((status = ANY (ARRAY['ready'::text, 'cordoned'::text, 'draining'::text, 'down'::text, 'unknown'::text])))
);

ALTER TABLE public.nodes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.nodes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.outbox (
    id bigint NOT NULL,
    node_id bigint NOT NULL,
    generation bigint NOT NULL,
    kind text DEFAULT 'desired_state'::text NOT NULL,
    request_id bigint,
    pool_id bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    last_error text,
    gave_up_at timestamp with time zone
);

ALTER TABLE public.outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.pool_request_events (
    id bigint NOT NULL,
    request_id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    from_state text,
    to_state text NOT NULL,
    actor_id bigint,
    actor text,
    note text
);

ALTER TABLE public.pool_request_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.pool_request_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.pool_requests (
    id bigint NOT NULL,
    project_id bigint NOT NULL,
    pool_id bigint NOT NULL,
    action text NOT NULL,
    items jsonb DEFAULT '[]'::jsonb NOT NULL,
    justification text DEFAULT ''::text NOT NULL,
    ends_at timestamp with time zone,
    state text DEFAULT 'pending'::text NOT NULL,
    requested_by bigint,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    decided_by bigint,
    decided_at timestamp with time zone,
    note text,
    generation bigint DEFAULT 1 NOT NULL,
    CONSTRAINT pool_requests_action_check CHECK ((action = ANY (ARRAY['create'::text, 'expand'::text, 'shrink'::text, 'release'::text]))),
    CONSTRAINT pool_requests_check CHECK (((action = 'release'::text) = (items = '[]'::jsonb))),
    CONSTRAINT pool_requests_items_check CHECK ((jsonb_typeof(items) = 'array'::text)),
    CONSTRAINT pool_requests_justification_check CHECK ((length(justification) <= 2000)),
    CONSTRAINT pool_requests_note_check CHECK ((length(note) <= 2000)),
    CONSTRAINT pool_requests_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'approved'::text, 'fulfilled'::text, 'failed'::text, 'rejected'::text, 'cancelled'::text, 'expired'::text])))
);

ALTER TABLE public.pool_requests ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.pool_requests_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.pools (
    id bigint NOT NULL,
    project_id bigint NOT NULL,
    name text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    items jsonb DEFAULT '[]'::jsonb NOT NULL,
    ends_at timestamp with time zone,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    released_at timestamp with time zone,
    cluster_id bigint,
    CONSTRAINT pools_items_check CHECK ((jsonb_typeof(items) = 'array'::text)),
    CONSTRAINT pools_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text)),
    CONSTRAINT pools_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'provisioning'::text, 'active'::text, 'degraded'::text, 'releasing'::text, 'released'::text])))
);

ALTER TABLE public.pools ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.pools_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.project_members (
    project_id bigint NOT NULL,
    user_id bigint NOT NULL,
    role text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT project_members_role_check CHECK ((role = ANY (ARRAY['owner'::text, 'member'::text, 'viewer'::text])))
);

CREATE TABLE public.project_namespaces (
    project_id bigint NOT NULL,
    namespace text NOT NULL,
    CONSTRAINT project_namespaces_namespace_check CHECK ((namespace ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text))
);

CREATE TABLE public.project_quotas (
    project_id bigint NOT NULL,
    items jsonb NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT project_quotas_items_check CHECK ((jsonb_typeof(items) = 'array'::text))
);

CREATE TABLE public.projects (
    id bigint NOT NULL,
    name text NOT NULL,
    display_name text NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT projects_display_name_check CHECK (((length(display_name) >= 1) AND (length(display_name) <= 200))),
    CONSTRAINT projects_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text))
);

ALTER TABLE public.projects ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.projects_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    checksum text
);

CREATE TABLE public.server_keys (
    name text NOT NULL,
    secret bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT server_keys_name_check CHECK ((name ~ '^[a-z_]{1,40}$'::text)),
    CONSTRAINT server_keys_secret_check CHECK ((length(secret) >= 32))
);

CREATE TABLE public.tokens (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    digest bytea NOT NULL,
    prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT tokens_digest_check CHECK ((length(digest) = 32)),
    CONSTRAINT tokens_kind_check CHECK ((kind = ANY (ARRAY['session'::text, 'api'::text])))
);

ALTER TABLE public.tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.usage_ledger (
    id bigint NOT NULL,
    pool_id bigint NOT NULL,
    project_id bigint NOT NULL,
    model text NOT NULL,
    profile text NOT NULL,
    count integer NOT NULL,
    started_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    opened_by bigint NOT NULL,
    closed_by bigint,
    CONSTRAINT usage_ledger_check CHECK (((ended_at IS NULL) OR (ended_at >= started_at))),
    CONSTRAINT usage_ledger_count_check CHECK ((count > 0))
);

ALTER TABLE public.usage_ledger ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.usage_ledger_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.users (
    id bigint NOT NULL,
    username text NOT NULL,
    password_hash text NOT NULL,
    role text DEFAULT 'none'::text NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT users_role_check CHECK ((role = ANY (ARRAY['admin'::text, 'operator'::text, 'billing'::text, 'none'::text]))),
    CONSTRAINT users_username_check CHECK ((username ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text))
);

ALTER TABLE public.users ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.workload_profiles (
    id bigint NOT NULL,
    node_id bigint NOT NULL,
    device_uuid text NOT NULL,
    gpu_id bigint,
    allocation_id bigint,
    namespace text NOT NULL,
    pod text NOT NULL,
    container text DEFAULT ''::text NOT NULL,
    first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    source text DEFAULT 'agent'::text NOT NULL,
    CONSTRAINT workload_profiles_source_check CHECK ((source = ANY (ARRAY['agent'::text, 'kubernetes'::text])))
);

ALTER TABLE public.workload_profiles ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.workload_profiles_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY public.alerts
    ADD CONSTRAINT alerts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.allocation_fault_intervals
    ADD CONSTRAINT allocation_fault_intervals_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_no_overlap EXCLUDE USING gist (gpu_id WITH =, int4range(start, (start + size)) WITH &&) WHERE ((state <> 'released'::text));

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.billing_accrual_state
    ADD CONSTRAINT billing_accrual_state_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.billing_export_chunks
    ADD CONSTRAINT billing_export_chunks_pkey PRIMARY KEY (export_id, seq);

ALTER TABLE ONLY public.billing_exports
    ADD CONSTRAINT billing_exports_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.billing_periods
    ADD CONSTRAINT billing_periods_pkey PRIMARY KEY (period);

ALTER TABLE ONLY public.billing_rates
    ADD CONSTRAINT billing_rates_model_profile_effective_from_key UNIQUE (model, profile, effective_from);

ALTER TABLE ONLY public.billing_rates
    ADD CONSTRAINT billing_rates_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.billing_usage
    ADD CONSTRAINT billing_usage_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_name_key UNIQUE (name);

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.defrag_moves
    ADD CONSTRAINT defrag_moves_pkey PRIMARY KEY (plan_id, ordinal);

ALTER TABLE ONLY public.defrag_plans
    ADD CONSTRAINT defrag_plans_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.enrollment_tokens
    ADD CONSTRAINT enrollment_tokens_digest_key UNIQUE (digest);

ALTER TABLE ONLY public.enrollment_tokens
    ADD CONSTRAINT enrollment_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.gpu_class_pending
    ADD CONSTRAINT gpu_class_pending_pkey PRIMARY KEY (gpu_id);

ALTER TABLE ONLY public.gpu_classes
    ADD CONSTRAINT gpu_classes_pkey PRIMARY KEY (cluster_id, model, mig_enabled, healthy, node_ready, layout);

ALTER TABLE ONLY public.gpu_health_intervals
    ADD CONSTRAINT gpu_health_intervals_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.gpu_metric_hourly
    ADD CONSTRAINT gpu_metric_hourly_pkey PRIMARY KEY (gpu_id, device_uuid, hour);

ALTER TABLE ONLY public.gpu_models
    ADD CONSTRAINT gpu_models_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_node_id_gpu_index_key UNIQUE (node_id, gpu_index);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_uuid_key UNIQUE (uuid);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (user_id, key);

ALTER TABLE ONLY public.login_failures
    ADD CONSTRAINT login_failures_pkey PRIMARY KEY (key);

ALTER TABLE ONLY public.metric_rollup_state
    ADD CONSTRAINT metric_rollup_state_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.mig_profiles
    ADD CONSTRAINT mig_profiles_pkey PRIMARY KEY (model, name);

ALTER TABLE ONLY public.node_tokens
    ADD CONSTRAINT node_tokens_digest_key UNIQUE (digest);

ALTER TABLE ONLY public.node_tokens
    ADD CONSTRAINT node_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.node_unknown_intervals
    ADD CONSTRAINT node_unknown_intervals_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.nodes
    ADD CONSTRAINT nodes_name_key UNIQUE (name);

ALTER TABLE ONLY public.nodes
    ADD CONSTRAINT nodes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.pool_request_events
    ADD CONSTRAINT pool_request_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.pool_requests
    ADD CONSTRAINT pool_requests_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_pkey PRIMARY KEY (project_id, user_id);

ALTER TABLE ONLY public.project_namespaces
    ADD CONSTRAINT project_namespaces_pkey PRIMARY KEY (namespace);

ALTER TABLE ONLY public.project_quotas
    ADD CONSTRAINT project_quotas_pkey PRIMARY KEY (project_id);

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_name_key UNIQUE (name);

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.server_keys
    ADD CONSTRAINT server_keys_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_digest_key UNIQUE (digest);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.usage_ledger
    ADD CONSTRAINT usage_ledger_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_username_key UNIQUE (username);

ALTER TABLE ONLY public.workload_profiles
    ADD CONSTRAINT workload_profiles_pkey PRIMARY KEY (id);

CREATE UNIQUE INDEX alerts_open_key ON public.alerts USING btree (dedup_key) WHERE (resolved_at IS NULL);

CREATE INDEX alerts_open_type_idx ON public.alerts USING btree (type) WHERE (resolved_at IS NULL);

CREATE INDEX alerts_project_idx ON public.alerts USING btree (project_id, id) WHERE (project_id IS NOT NULL);

CREATE INDEX alerts_raised_idx ON public.alerts USING btree (raised_at, id);

CREATE INDEX alerts_resolved_idx ON public.alerts USING btree (resolved_at) WHERE (resolved_at IS NOT NULL);

CREATE UNIQUE INDEX allocation_fault_intervals_open_key ON public.allocation_fault_intervals USING btree (allocation_id) WHERE (ended_at IS NULL);

CREATE INDEX allocation_fault_intervals_time_idx ON public.allocation_fault_intervals USING btree (COALESCE(ended_at, 'infinity'::timestamp with time zone), started_at);

CREATE INDEX allocations_device_uuid_idx ON public.allocations USING btree (device_uuid) WHERE (device_uuid IS NOT NULL);

CREATE INDEX allocations_gpu_live_idx ON public.allocations USING btree (gpu_id, start) WHERE (state <> 'released'::text);

CREATE INDEX allocations_pool_gpu_idx ON public.allocations USING btree (gpu_id) WHERE (pool_id IS NOT NULL);

CREATE INDEX allocations_pool_idx ON public.allocations USING btree (pool_id) WHERE (pool_id IS NOT NULL);

CREATE INDEX allocations_release_request_idx ON public.allocations USING btree (release_request_id) WHERE (release_request_id IS NOT NULL);

CREATE UNIQUE INDEX allocations_replaces_live_idx ON public.allocations USING btree (replaces) WHERE ((replaces IS NOT NULL) AND (state <> 'released'::text));

CREATE INDEX allocations_request_idx ON public.allocations USING btree (request_id) WHERE (request_id IS NOT NULL);

CREATE INDEX audit_log_action_idx ON public.audit_log USING btree (action, id);

CREATE INDEX audit_log_actor_idx ON public.audit_log USING btree (actor, id);

CREATE INDEX audit_log_project_idx ON public.audit_log USING btree (project_id, id);

CREATE INDEX billing_exports_queued_idx ON public.billing_exports USING btree (id) WHERE (state = ANY (ARRAY['queued'::text, 'running'::text]));

CREATE UNIQUE INDEX billing_usage_accrual_key ON public.billing_usage USING btree (hour, pool_id, model, profile, kind, rate_id, count) WHERE (kind = ANY (ARRAY['usage'::text, 'credit'::text]));

CREATE INDEX billing_usage_adjusts_idx ON public.billing_usage USING btree (adjusts) WHERE (adjusts IS NOT NULL);

CREATE INDEX billing_usage_hour_id_idx ON public.billing_usage USING btree (hour, id);

CREATE INDEX billing_usage_period_idx ON public.billing_usage USING btree (period, id);

CREATE INDEX billing_usage_pool_hour_idx ON public.billing_usage USING btree (pool_id, hour);

CREATE INDEX billing_usage_project_hour_idx ON public.billing_usage USING btree (project_id, hour);

CREATE INDEX defrag_plans_applying_idx ON public.defrag_plans USING btree (id) WHERE (state = 'applying'::text);

CREATE INDEX defrag_plans_created_idx ON public.defrag_plans USING btree (created_at);

CREATE INDEX enrollment_tokens_cluster_idx ON public.enrollment_tokens USING btree (cluster_id, id);

CREATE INDEX gpu_health_intervals_failed_idx ON public.gpu_health_intervals USING btree (started_at) WHERE (health = 'failed'::text);

CREATE INDEX gpu_health_intervals_gpu_idx ON public.gpu_health_intervals USING btree (gpu_id, started_at);

CREATE UNIQUE INDEX gpu_health_intervals_open_key ON public.gpu_health_intervals USING btree (gpu_id) WHERE (ended_at IS NULL);

CREATE INDEX gpu_metric_hourly_device_idx ON public.gpu_metric_hourly USING btree (device_uuid, hour);

CREATE INDEX gpu_metric_hourly_gpu_idx ON public.gpu_metric_hourly USING btree (gpu_id, hour);

CREATE INDEX gpu_metric_samples_device_idx ON ONLY public.gpu_metric_samples USING btree (device_uuid, ts);

CREATE INDEX gpu_metric_samples_gpu_idx ON ONLY public.gpu_metric_samples USING btree (gpu_id, ts);

CREATE INDEX gpus_cluster_idx ON public.gpus USING btree (cluster_id, id);

CREATE INDEX gpus_model_idx ON public.gpus USING btree (model, id);

CREATE INDEX gpus_placeable_cluster_idx ON public.gpus USING btree (model, cluster_id, mig_enabled, layout, node_id, gpu_index, id) WHERE ((health = 'ok'::text) AND (node_status = 'ready'::text));

CREATE INDEX gpus_placeable_idx ON public.gpus USING btree (model, mig_enabled, layout, node_id, gpu_index, id) WHERE ((health = 'ok'::text) AND (node_status = 'ready'::text));

CREATE INDEX idempotency_keys_created_idx ON public.idempotency_keys USING btree (created_at);

CREATE UNIQUE INDEX node_tokens_live_key ON public.node_tokens USING btree (node_id) WHERE (revoked_at IS NULL);

CREATE UNIQUE INDEX node_unknown_intervals_open_key ON public.node_unknown_intervals USING btree (node_id) WHERE (ended_at IS NULL);

CREATE INDEX node_unknown_intervals_time_idx ON public.node_unknown_intervals USING btree (COALESCE(ended_at, 'infinity'::timestamp with time zone), started_at);

CREATE INDEX nodes_agent_liveness_idx ON public.nodes USING btree (agent_heartbeat_at, id) WHERE (managed_by_agent AND (status = 'ready'::text));

CREATE INDEX nodes_cluster_idx ON public.nodes USING btree (cluster_id, id);

CREATE INDEX nodes_labels_idx ON public.nodes USING gin (labels jsonb_path_ops);

CREATE INDEX nodes_status_idx ON public.nodes USING btree (status, id);

CREATE INDEX outbox_delivered_idx ON public.outbox USING btree (delivered_at) WHERE (delivered_at IS NOT NULL);

CREATE INDEX outbox_node_idx ON public.outbox USING btree (node_id, id);

CREATE INDEX outbox_pending_idx ON public.outbox USING btree (next_attempt_at, id) WHERE (delivered_at IS NULL);

CREATE INDEX pool_request_events_request_idx ON public.pool_request_events USING btree (request_id, id);

CREATE INDEX pool_requests_approved_idx ON public.pool_requests USING btree (id) WHERE (state = 'approved'::text);

CREATE INDEX pool_requests_expiry_idx ON public.pool_requests USING btree (expires_at) WHERE (state = 'pending'::text);

CREATE INDEX pool_requests_pending_idx ON public.pool_requests USING btree (id) WHERE (state = 'pending'::text);

CREATE INDEX pool_requests_pool_idx ON public.pool_requests USING btree (pool_id, id);

CREATE INDEX pool_requests_project_idx ON public.pool_requests USING btree (project_id, id);

CREATE INDEX pools_cluster_idx ON public.pools USING btree (cluster_id) WHERE (cluster_id IS NOT NULL);

CREATE INDEX pools_ends_at_idx ON public.pools USING btree (ends_at) WHERE ((ends_at IS NOT NULL) AND (status = ANY (ARRAY['provisioning'::text, 'active'::text, 'degraded'::text])));

CREATE INDEX pools_project_idx ON public.pools USING btree (project_id, id);

CREATE UNIQUE INDEX pools_project_name_key ON public.pools USING btree (project_id, name) WHERE (status <> 'released'::text);

CREATE INDEX pools_settle_idx ON public.pools USING btree (status, id) WHERE (status = ANY (ARRAY['provisioning'::text, 'releasing'::text]));

CREATE INDEX project_members_user_idx ON public.project_members USING btree (user_id);

CREATE INDEX project_namespaces_project_idx ON public.project_namespaces USING btree (project_id);

CREATE INDEX tokens_user_idx ON public.tokens USING btree (user_id, id);

CREATE INDEX usage_ledger_ended_idx ON public.usage_ledger USING btree (ended_at) WHERE (ended_at IS NOT NULL);

CREATE INDEX usage_ledger_open_idx ON public.usage_ledger USING btree (pool_id, model, profile) WHERE (ended_at IS NULL);

CREATE INDEX usage_ledger_project_idx ON public.usage_ledger USING btree (project_id, started_at);

CREATE INDEX workload_profiles_allocation_idx ON public.workload_profiles USING btree (allocation_id, first_seen_at);

CREATE UNIQUE INDEX workload_profiles_current_key ON public.workload_profiles USING btree (node_id, device_uuid, namespace, pod, container, source) WHERE (ended_at IS NULL);

CREATE INDEX workload_profiles_device_idx ON public.workload_profiles USING btree (device_uuid, first_seen_at);

CREATE INDEX workload_profiles_ended_idx ON public.workload_profiles USING btree (ended_at) WHERE (ended_at IS NOT NULL);

CREATE TRIGGER allocations_check_placement BEFORE INSERT OR UPDATE OF gpu_id, profile, start, size ON public.allocations FOR EACH ROW EXECUTE FUNCTION public.allocations_check_placement();

CREATE TRIGGER allocations_fault_history AFTER UPDATE OF state ON public.allocations FOR EACH ROW WHEN ((old.state IS DISTINCT FROM new.state)) EXECUTE FUNCTION public.allocations_fault_history();

CREATE TRIGGER allocations_layout_delete AFTER DELETE ON public.allocations REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.allocations_layout_sync();

CREATE TRIGGER allocations_layout_insert AFTER INSERT ON public.allocations REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.allocations_layout_sync();

CREATE TRIGGER allocations_layout_update AFTER UPDATE ON public.allocations REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.allocations_layout_sync();

CREATE TRIGGER audit_log_compact BEFORE INSERT ON public.audit_log FOR EACH ROW WHEN (((COALESCE(jsonb_array_length(
        CASE
            WHEN (jsonb_typeof((new.after -> 'allocations'::text)) = 'array'::text) THEN (new.after -> 'allocations'::text)
            ELSE NULL::jsonb
        END), 0) > 32) OR (COALESCE(jsonb_array_length(
        CASE
            WHEN (jsonb_typeof((new.before -> 'allocations'::text)) = 'array'::text) THEN (new.before -> 'allocations'::text)
            ELSE NULL::jsonb
        END), 0) > 32))) EXECUTE FUNCTION public.audit_log_compact();

CREATE TRIGGER billing_periods_guard BEFORE DELETE OR UPDATE ON public.billing_periods FOR EACH ROW EXECUTE FUNCTION public.billing_periods_guard();

CREATE TRIGGER billing_periods_guard_truncate BEFORE TRUNCATE ON public.billing_periods FOR EACH STATEMENT EXECUTE FUNCTION public.billing_usage_guard_truncate();

CREATE TRIGGER billing_rates_guard BEFORE DELETE OR UPDATE ON public.billing_rates FOR EACH ROW EXECUTE FUNCTION public.billing_rates_guard();

CREATE TRIGGER billing_usage_guard BEFORE DELETE OR UPDATE ON public.billing_usage FOR EACH ROW EXECUTE FUNCTION public.billing_usage_guard();

CREATE TRIGGER billing_usage_guard_insert AFTER INSERT ON public.billing_usage REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.billing_usage_guard_insert();

CREATE TRIGGER billing_usage_guard_truncate BEFORE TRUNCATE ON public.billing_usage FOR EACH STATEMENT EXECUTE FUNCTION public.billing_usage_guard_truncate();

CREATE CONSTRAINT TRIGGER gpu_class_delta_apply AFTER INSERT ON public.gpu_class_delta DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.gpu_class_pending_apply();

CREATE CONSTRAINT TRIGGER gpu_class_pending_apply AFTER INSERT ON public.gpu_class_pending DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.gpu_class_pending_apply();

CREATE TRIGGER gpu_classes_delete AFTER DELETE ON public.gpus REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.gpu_classes_sync();

CREATE TRIGGER gpu_classes_insert AFTER INSERT ON public.gpus REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.gpu_classes_sync();

CREATE TRIGGER gpu_classes_update AFTER UPDATE ON public.gpus REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.gpu_classes_sync();

CREATE TRIGGER gpus_from_node BEFORE INSERT OR UPDATE OF node_id ON public.gpus FOR EACH ROW EXECUTE FUNCTION public.gpus_from_node();

CREATE TRIGGER gpus_health_history_ins AFTER INSERT ON public.gpus FOR EACH ROW EXECUTE FUNCTION public.gpus_health_history();

CREATE TRIGGER gpus_health_history_upd AFTER UPDATE OF health ON public.gpus FOR EACH ROW EXECUTE FUNCTION public.gpus_health_history();

CREATE TRIGGER k8s_wake_allocation_insert_delete AFTER INSERT OR DELETE ON public.allocations FOR EACH ROW EXECUTE FUNCTION public.k8s_wake_allocation();

CREATE TRIGGER k8s_wake_allocation_update AFTER UPDATE ON public.allocations FOR EACH ROW WHEN (((old.state IS DISTINCT FROM new.state) OR (old.device_uuid IS DISTINCT FROM new.device_uuid) OR (old.pool_id IS DISTINCT FROM new.pool_id) OR (old.gpu_id IS DISTINCT FROM new.gpu_id))) EXECUTE FUNCTION public.k8s_wake_allocation();

CREATE TRIGGER k8s_wake_gpu_health AFTER UPDATE ON public.gpus FOR EACH ROW WHEN (((old.health IS DISTINCT FROM new.health) OR (old.cluster_id IS DISTINCT FROM new.cluster_id))) EXECUTE FUNCTION public.k8s_wake_gpu_health();

CREATE TRIGGER k8s_wake_namespaces AFTER INSERT OR DELETE ON public.project_namespaces FOR EACH ROW EXECUTE FUNCTION public.k8s_wake_namespaces();

CREATE TRIGGER k8s_wake_pool_status AFTER UPDATE ON public.pools FOR EACH ROW WHEN ((old.status IS DISTINCT FROM new.status)) EXECUTE FUNCTION public.k8s_wake_pool_status();

CREATE TRIGGER node_tokens_notify AFTER DELETE OR UPDATE ON public.node_tokens FOR EACH ROW EXECUTE FUNCTION public.node_tokens_notify();

CREATE TRIGGER node_tokens_notify_truncate AFTER TRUNCATE ON public.node_tokens FOR EACH STATEMENT EXECUTE FUNCTION public.node_tokens_notify();

CREATE TRIGGER nodes_status_to_gpus AFTER UPDATE OF status, cluster_id ON public.nodes FOR EACH ROW WHEN (((old.status IS DISTINCT FROM new.status) OR (old.cluster_id IS DISTINCT FROM new.cluster_id))) EXECUTE FUNCTION public.nodes_status_to_gpus();

CREATE TRIGGER nodes_unknown_history AFTER UPDATE OF status ON public.nodes FOR EACH ROW WHEN ((old.status IS DISTINCT FROM new.status)) EXECUTE FUNCTION public.nodes_unknown_history();

CREATE TRIGGER outbox_wake AFTER INSERT ON public.outbox FOR EACH ROW EXECUTE FUNCTION public.outbox_wake();

ALTER TABLE ONLY public.alerts
    ADD CONSTRAINT alerts_acknowledged_by_fkey FOREIGN KEY (acknowledged_by) REFERENCES public.users(id);

ALTER TABLE ONLY public.alerts
    ADD CONSTRAINT alerts_gpu_id_fkey FOREIGN KEY (gpu_id) REFERENCES public.gpus(id);

ALTER TABLE ONLY public.alerts
    ADD CONSTRAINT alerts_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.alerts
    ADD CONSTRAINT alerts_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

ALTER TABLE ONLY public.alerts
    ADD CONSTRAINT alerts_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

ALTER TABLE ONLY public.allocation_fault_intervals
    ADD CONSTRAINT allocation_fault_intervals_allocation_id_fkey FOREIGN KEY (allocation_id) REFERENCES public.allocations(id);

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_gpu_id_fkey FOREIGN KEY (gpu_id) REFERENCES public.gpus(id);

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_pool_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_replaces_fkey FOREIGN KEY (replaces) REFERENCES public.allocations(id);

ALTER TABLE ONLY public.billing_export_chunks
    ADD CONSTRAINT billing_export_chunks_export_id_fkey FOREIGN KEY (export_id) REFERENCES public.billing_exports(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.billing_exports
    ADD CONSTRAINT billing_exports_created_by_fkey FOREIGN KEY (created_by) REFERENCES public.users(id);

ALTER TABLE ONLY public.billing_periods
    ADD CONSTRAINT billing_periods_closed_by_fkey FOREIGN KEY (closed_by) REFERENCES public.users(id);

ALTER TABLE ONLY public.billing_rates
    ADD CONSTRAINT billing_rates_created_by_fkey FOREIGN KEY (created_by) REFERENCES public.users(id);

ALTER TABLE ONLY public.billing_rates
    ADD CONSTRAINT billing_rates_model_fkey FOREIGN KEY (model) REFERENCES public.gpu_models(id);

ALTER TABLE ONLY public.billing_usage
    ADD CONSTRAINT billing_usage_adjusts_fkey FOREIGN KEY (adjusts) REFERENCES public.billing_usage(id);

ALTER TABLE ONLY public.billing_usage
    ADD CONSTRAINT billing_usage_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

ALTER TABLE ONLY public.billing_usage
    ADD CONSTRAINT billing_usage_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

ALTER TABLE ONLY public.billing_usage
    ADD CONSTRAINT billing_usage_rate_id_fkey FOREIGN KEY (rate_id) REFERENCES public.billing_rates(id);

ALTER TABLE ONLY public.defrag_moves
    ADD CONSTRAINT defrag_moves_plan_id_fkey FOREIGN KEY (plan_id) REFERENCES public.defrag_plans(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.defrag_plans
    ADD CONSTRAINT defrag_plans_applied_by_fkey FOREIGN KEY (applied_by) REFERENCES public.users(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.defrag_plans
    ADD CONSTRAINT defrag_plans_cluster_id_fkey FOREIGN KEY (cluster_id) REFERENCES public.clusters(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.defrag_plans
    ADD CONSTRAINT defrag_plans_created_by_fkey FOREIGN KEY (created_by) REFERENCES public.users(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.enrollment_tokens
    ADD CONSTRAINT enrollment_tokens_cluster_id_fkey FOREIGN KEY (cluster_id) REFERENCES public.clusters(id);

ALTER TABLE ONLY public.enrollment_tokens
    ADD CONSTRAINT enrollment_tokens_created_by_fkey FOREIGN KEY (created_by) REFERENCES public.users(id);

ALTER TABLE ONLY public.enrollment_tokens
    ADD CONSTRAINT enrollment_tokens_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.gpu_health_intervals
    ADD CONSTRAINT gpu_health_intervals_gpu_id_fkey FOREIGN KEY (gpu_id) REFERENCES public.gpus(id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_cluster_id_fkey FOREIGN KEY (cluster_id) REFERENCES public.clusters(id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_model_fkey FOREIGN KEY (model) REFERENCES public.gpu_models(id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.mig_profiles
    ADD CONSTRAINT mig_profiles_model_fkey FOREIGN KEY (model) REFERENCES public.gpu_models(id);

ALTER TABLE ONLY public.node_tokens
    ADD CONSTRAINT node_tokens_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.node_unknown_intervals
    ADD CONSTRAINT node_unknown_intervals_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.nodes
    ADD CONSTRAINT nodes_cluster_id_fkey FOREIGN KEY (cluster_id) REFERENCES public.clusters(id);

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.pool_request_events
    ADD CONSTRAINT pool_request_events_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.pool_requests(id);

ALTER TABLE ONLY public.pool_requests
    ADD CONSTRAINT pool_requests_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

ALTER TABLE ONLY public.pool_requests
    ADD CONSTRAINT pool_requests_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_cluster_id_fkey FOREIGN KEY (cluster_id) REFERENCES public.clusters(id);

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_namespaces
    ADD CONSTRAINT project_namespaces_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_quotas
    ADD CONSTRAINT project_quotas_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.usage_ledger
    ADD CONSTRAINT usage_ledger_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

ALTER TABLE ONLY public.workload_profiles
    ADD CONSTRAINT workload_profiles_allocation_id_fkey FOREIGN KEY (allocation_id) REFERENCES public.allocations(id);

ALTER TABLE ONLY public.workload_profiles
    ADD CONSTRAINT workload_profiles_gpu_id_fkey FOREIGN KEY (gpu_id) REFERENCES public.gpus(id);

ALTER TABLE ONLY public.workload_profiles
    ADD CONSTRAINT workload_profiles_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

