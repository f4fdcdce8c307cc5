-- 0030_status_narrow_locks: an agent's status report locks only what it
-- changes (issue 23).
--
-- agent_apply_status (0027's) locked, for every report, every pool with a
-- live allocation on the node, their approved requests, all the node's
-- GPUs and live allocations and the node, then ran some twenty statements.
-- With small pools packed seven to a GPU, reports were PostgreSQL's largest
-- time in the mixed day (scripts/bench-day), and the approvals of the
-- other pools on the GPU (shrinks, releases) waited for the pool and
-- request locks they held; yet most reports change nothing (the periodic
-- one, every 300 s) or one or two allocations (an instance ready, one
-- released).
--
-- Now the report first reads, without locks, what it would change:
--
--   * the allocations it would move (the predicates of the statements
--     below, widened where a statement depends on an earlier one: a
--     superset of what they change when nothing commits meanwhile);
--   * the pools on the node that pools_settle would change as things are
--     (pools_settle's three rules), and those with an approved request
--     that could be settled now (its allocations all there, or all gone):
--     a report that changes nothing still settles what an earlier report
--     could not;
--   * GPU health, unknown Xids, drift alerts to raise or resolve, the node
--     unknown or its node_unknown alert open.
--
-- Nothing to do at all (the fast path): it updates the node row (the
-- agent's liveness, version, errors and observed generation) and the
-- outbox rows the agent has applied, in id order, and returns the same
-- document with zeros; no request, pool, GPU or allocation is locked.
-- Otherwise (the slow path) it locks, in the global order
-- (docs/architecture.md "The lock order"), the approved requests of the
-- pools it changes or settles, those pools, the node's GPUs, the live
-- allocations of those pools (or of no pool) on them, the node; every
-- UPDATE of allocations is confined to those pools (or to no pool), and
-- pools_settle settles only them. The instances the report lists on the
-- GPUs held (agent_reported) are computed once, into arrays, instead of
-- once per statement.
--
-- Why deciding from a read without locks is harmless. The read's
-- snapshot holds every commit before it began, among them everything the
-- report reflects: an agent acts on a generation only after the
-- transaction that made it committed, and reports after acting. Let T be
-- a transaction that commits after the read. (a) Where the read found
-- nothing to do for an allocation, a pool or a request and T left
-- something: T's change is newer than the report; the slow path would
-- have judged it with that same older report, and leaving it is what
-- happens when T commits just after this report. The next report (the
-- agent's status interval, or at once after a generation T bumped) reads
-- it and does it, since the read decides by the same rules the
-- statements apply. (b) Where the read found a pool to lock that T made
-- irrelevant: the lock is superfluous; every statement re-checks its own
-- predicate under the locks. (c) An allocation of a pool not locked (T
-- made it relevant) is left alone by every statement, as a request
-- approved after the requests were locked is (0024): to the next report.
-- (d) The fast path writes the node's observed generation from the row
-- under its lock (least(reported, generation), never backwards), so a
-- generation T bumped is respected, and marks delivered only the outbox
-- rows up to that; it leaves a node T made unknown (the liveness sweep)
-- unknown, since readying it would take the GPUs after the node: the
-- next heartbeat readies it having locked the GPUs first (0025).
--
-- (e) A request approved while the report waited for its pool is settled
-- by that report (test_status_late_request).
-- agent_apply_status (0024 to 0027) locked the approved requests of its
-- pools, then the pools, and settled only the requests locked first: one
-- approved in between (its approval held the pool, and the report waited
-- for it) was left "for the next report". But when the report released
-- the request's last allocation on the node (a release or shrink whose
-- instance was already gone: it vanished, or its GPU failed), the pool has
-- no live allocation on the node any more, so no later report reads it:
-- the request stayed approved for ever, its pool released
-- (test_status_late_request). Now, once everything else is done and just
-- before the settle, the report also takes the approved requests of its
-- pools that it did not lock first, FOR NO KEY UPDATE SKIP LOCKED: a lock
-- taken out of order but never waited for puts the report in no wait-for
-- cycle through it (a transaction waiting for such a request holds only
-- requests, the first in the order, none of which the report wants). One
-- another transaction holds at that moment is skipped: that holder is a
-- report or pass of the same pool, which settles it itself.

CREATE OR REPLACE FUNCTION agent_apply_status(p_node bigint, p_observed bigint, p_version text,
	p_gpus jsonb, p_errors jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
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

-- Keyed access only, as 0027 set it, and the generic plan of every
-- statement from the first call: with plan_cache_mode auto, statements
-- that take the arrays above (unnest, = ANY) kept choosing custom plans
-- and were planned again at every call (one report changing one
-- allocation: 2.7 ms against 2.0 ms generic, 1,000 nodes of seven pools
-- each, one client); the plans are index lookups whatever the sizes.
ALTER FUNCTION agent_apply_status(bigint, bigint, text, jsonb, jsonb)
	SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
	SET plan_cache_mode = force_generic_plan;
