-- 0027_day_locks: what the mixed day (scripts/bench-day, issue 23) found.
--
-- 1. metric_ingest() (0011) has had no caller since ingestion moved to
--    COPY (db_metric_copy, server/db/db_agent.c): dropped.
--
-- 2. The outbox rows of one node are locked in id order. A status report
--    (agent_apply_status), a heartbeat (agent_heartbeat) and the pusher's
--    outbox_done and outbox_retry each update the undelivered rows of
--    their node with one UPDATE ... WHERE node_id = $1: the rows were
--    locked in whatever order that statement's plan visited them (the
--    node's index: id order; the pending index: next_attempt_at order; a
--    sequential or bitmap scan: where the rows lie in the table). Two of
--    them on one node with different plans could each hold a row the
--    other wanted next (test_lock_order's outbox case: a heartbeat in
--    index order and a pusher's outbox_done scanning the table). Now each
--    first locks the rows it will change with SELECT ... ORDER BY id FOR
--    NO KEY UPDATE, whatever the plan, then updates exactly those.
--
-- 3. gpu_classes counters change at commit. 0020 moved a new GPU's count
--    to commit; an update or delete of a GPU still changed the shared
--    counter row of its class (all empty H100s of a cluster are one row)
--    in the statement, and the row stayed locked to the end of the
--    transaction. A status report that released or readied an instance
--    updated the GPU's layout in its middle and held the class row while
--    it settled pools, requests, the node and the outbox; every approval
--    batch (its last statement) and every other report queued behind it:
--    with 10,000 agents and 32 operators, 300 ms waits on that row were
--    the largest share of approval latency (auto_explain, bench-day). Now
--    a statement's changes go to gpu_class_delta (UNLOGGED, rows of the
--    transaction only, like gpu_class_pending) and the deferred trigger
--    adds the pending GPUs and the deltas to gpu_classes at commit, summed
--    per class, in key order (the order every writer takes), in one
--    statement. gpu_classes equals the grouping of gpus after every
--    commit, as before; inside a transaction it does not count the
--    transaction's own GPU changes (nothing reads the classes after
--    changing GPUs in the same transaction: an approval batch reads them
--    before it places and changes layouts in its last statement).

--
-- 4. Plans made on a small fleet. A connection caches a function's plans
--    and, after five calls, PL/pgSQL keeps a generic one made for the
--    size the tables had then (a statement without parameters gets
--    nothing else). The pusher and the HTTP threads start before the fleet
--    enrolls: outbox_claim's first UPDATE joined every pending outbox row
--    to a scan of all nodes (0.3-2.5 s a call at 10,000 nodes), and
--    pools_settle's statements walked every live pool against a scan of
--    allocations instead of looking up the pools they were given (300 ms
--    of CPU in status reports that held the node's GPUs meanwhile, which
--    shrinks and releases waited for). pools_settle now plans each call
--    for its pools (plan_cache_mode = force_custom_plan: four short
--    statements); outbox_claim, as agent_enroll since 0020, plans only
--    keyed access (nested loops over indexes), whatever size the tables
--    had when its plan was made. So does agent_apply_status: every
--    statement in it reads or locks the rows of one node (its GPUs, their
--    allocations, the pools on them) by key, and plans made while
--    allocations was empty scanned the whole table in each of them (100
--    million rows read in a three-minute bench-day, PostgreSQL's largest
--    CPU use).

DROP FUNCTION metric_ingest(bigint, jsonb, integer);

ALTER FUNCTION pools_settle(bigint[]) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION outbox_claim(integer, interval)
	SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;

CREATE OR REPLACE FUNCTION agent_heartbeat(p_node bigint, p_observed bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION outbox_done(p_node bigint, p_generation bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE outbox SET delivered_at = now(), last_error = NULL
	WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
	             AND generation <= p_generation ORDER BY id FOR NO KEY UPDATE);
	PERFORM alert_resolve('push_failed:' || p_node);
END
$$;

CREATE OR REPLACE FUNCTION outbox_retry(p_node bigint, p_attempts integer, p_max integer,
	p_delay_ms integer, p_error text) RETURNS boolean
LANGUAGE plpgsql AS $$
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
	WHERE id IN (SELECT id FROM outbox WHERE node_id = p_node AND delivered_at IS NULL
	             AND generation <= v_obs ORDER BY id FOR NO KEY UPDATE);

	RETURN jsonb_build_object('generation', v_gen, 'ready', v_ready, 'failed', v_failed,
		'released', v_released, 'gpus_failed', v_gpus_bad,
		'drift', coalesce(array_length(v_keys, 1), 0), 'unknown_gpus', cardinality(v_unknown));
END
$$;

CREATE UNLOGGED TABLE gpu_class_delta (
	cluster_id  bigint NOT NULL,
	model       text NOT NULL,
	mig_enabled boolean NOT NULL,
	healthy     boolean NOT NULL,
	node_ready  boolean NOT NULL,
	layout      text NOT NULL,
	n           integer NOT NULL
);

CREATE OR REPLACE FUNCTION gpu_classes_sync() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- At commit: the transaction's pending GPUs and deltas into gpu_classes,
-- in key order, in one statement (the first firing takes them all; the
-- others find none). Only this transaction's rows are visible here: every
-- other one deletes its own before it commits.
CREATE OR REPLACE FUNCTION gpu_class_pending_apply() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE CONSTRAINT TRIGGER gpu_class_delta_apply AFTER INSERT ON gpu_class_delta
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION gpu_class_pending_apply();

ALTER FUNCTION agent_apply_status(bigint, bigint, text, jsonb, jsonb)
	SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
