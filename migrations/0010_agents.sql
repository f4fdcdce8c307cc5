-- 0010_agents: node agents (docs/agent.md). One-time enrollment tokens
-- per cluster, node tokens (gpn_, SHA-256 digests only), the agent's
-- fields on nodes, a wake-up NOTIFY for every desired-state change, and
-- the set-based functions that apply an agent's status report, its
-- heartbeat and the liveness sweep in the global lock order
-- (docs/architecture.md, "The lock order").

CREATE TABLE enrollment_tokens (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	cluster_id bigint NOT NULL REFERENCES clusters (id),
	digest     bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
	prefix     text NOT NULL,
	created_by bigint REFERENCES users (id),
	created_at timestamptz NOT NULL DEFAULT now(),
	expires_at timestamptz NOT NULL,
	used_at    timestamptz,
	node_id    bigint REFERENCES nodes (id),
	revoked_at timestamptz
);
CREATE INDEX enrollment_tokens_cluster_idx ON enrollment_tokens (cluster_id, id);

CREATE TABLE node_tokens (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	node_id    bigint NOT NULL REFERENCES nodes (id),
	digest     bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
	created_at timestamptz NOT NULL DEFAULT now(),
	revoked_at timestamptz
);
CREATE UNIQUE INDEX node_tokens_live_key ON node_tokens (node_id) WHERE revoked_at IS NULL;

-- push_secret signs pushes to callback_url (HMAC-SHA256): the server must
-- read it back, so it is kept as is, like a webhook secret, and never
-- shown by the API after enrollment.
ALTER TABLE nodes
	ADD COLUMN managed_by_agent boolean NOT NULL DEFAULT false,
	ADD COLUMN callback_url text
		CHECK (callback_url IS NULL OR (length(callback_url) <= 500
		       AND callback_url ~ '^https?://[^[:space:]]+$')),
	ADD COLUMN push_secret text CHECK (push_secret IS NULL OR push_secret ~ '^[0-9a-f]{64}$'),
	ADD COLUMN agent_status_at timestamptz,
	ADD COLUMN agent_errors jsonb NOT NULL DEFAULT '[]'
		CHECK (jsonb_typeof(agent_errors) = 'array');
CREATE INDEX nodes_agent_liveness_idx ON nodes (agent_heartbeat_at, id)
	WHERE managed_by_agent AND status = 'ready';

-- Why an allocation failed, as the agent said it.
ALTER TABLE allocations ADD COLUMN error text CHECK (length(error) <= 2000);

-- Every desired-state change writes an outbox row in its transaction:
-- wake the long-polls of that node on every replica when it commits.
-- A hint only: an agent that misses it converges at its next poll.
CREATE FUNCTION outbox_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'node:' || NEW.node_id);
	RETURN NULL;
END
$$;
CREATE TRIGGER outbox_wake AFTER INSERT ON outbox
	FOR EACH ROW EXECUTE FUNCTION outbox_wake();

-- The instances a status report lists, on the node's own GPUs.
CREATE FUNCTION agent_reported(p_node bigint, p_gpus jsonb)
RETURNS TABLE (gpu_id bigint, profile text, start integer, size integer, uuid text)
LANGUAGE sql STABLE AS $$
	SELECT g.id, i.profile, i.start, i.size, i.uuid
	FROM jsonb_array_elements(p_gpus) rg
	JOIN gpus g ON g.node_id = p_node AND g.uuid = rg->>'uuid'
	CROSS JOIN LATERAL jsonb_to_recordset(coalesce(rg->'instances', '[]'))
		AS i(profile text, start integer, size integer, uuid text)
$$;

-- Apply an agent's status report (PUT /v1/agent/status) in one
-- transaction. p_gpus: [{"uuid","fail_reason"(null: healthy by this
-- report),"instances":[{"profile","start","size","uuid"}]}] (the server
-- decided fail_reason from the XID catalog, ECC, row remapping and the
-- recovery action); p_errors: [{"gpu","profile","start","message"}].
-- Locks, in the global order: the pools with live allocations on the
-- node and their approved requests, the node's GPUs, their live
-- allocations, the node; gpu_classes last (through triggers).
-- Health only gets worse here: a failed GPU stays failed until an
-- operator sets it back (PATCH /v1/gpus/{gpu}).
CREATE FUNCTION agent_apply_status(p_node bigint, p_observed bigint, p_version text,
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
	r          record;
BEGIN
	SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO v_pools FROM (
		SELECT p.id FROM pools p WHERE p.id IN (
			SELECT a.pool_id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
			WHERE g.node_id = p_node AND a.state <> 'released' AND a.pool_id IS NOT NULL)
		ORDER BY p.id FOR NO KEY UPDATE) s;
	PERFORM 1 FROM pool_requests q WHERE q.pool_id = ANY (v_pools) AND q.state = 'approved'
		ORDER BY q.id FOR NO KEY UPDATE;
	PERFORM 1 FROM gpus g WHERE g.node_id = p_node ORDER BY g.id FOR NO KEY UPDATE;
	PERFORM 1 FROM allocations a JOIN gpus g ON g.id = a.gpu_id
		WHERE g.node_id = p_node AND a.state <> 'released' ORDER BY a.id FOR NO KEY UPDATE OF a;
	SELECT n.generation, n.name INTO v_gen, v_name FROM nodes n WHERE n.id = p_node
		FOR NO KEY UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node % does not exist', p_node USING ERRCODE = 'no_data_found';
	END IF;

	-- health: a GPU the report marks failed, or one the node no longer shows
	FOR r IN
		WITH f AS (
			SELECT g.id, g.uuid,
			       CASE WHEN rg.v IS NULL THEN 'the node agent no longer sees this GPU'
			            ELSE rg.v->>'fail_reason' END AS reason
			FROM gpus g
			LEFT JOIN LATERAL (SELECT x AS v FROM jsonb_array_elements(p_gpus) x
			                   WHERE x->>'uuid' = g.uuid LIMIT 1) rg ON true
			WHERE g.node_id = p_node
		)
		UPDATE gpus g SET health = 'failed', health_reason = left(f.reason, 500),
			generation = g.generation + 1, updated_at = now()
		FROM f WHERE g.id = f.id AND f.reason IS NOT NULL AND g.health <> 'failed'
		RETURNING g.id, g.uuid, f.reason
	LOOP
		v_gpus_bad := v_gpus_bad + 1;
		PERFORM alert_raise('gpu_failed', 'critical', 'gpu_failed:' || r.uuid, p_node, r.id,
			NULL, NULL, left('GPU ' || r.uuid || ' on node ' || v_name || ' failed: ' || r.reason, 2000),
			jsonb_build_object('reason', r.reason));
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
		             ELSE 'the node agent applied generation ' || p_observed
		                  || ' without creating this instance' END
	FROM gpus g
	WHERE g.id = a.gpu_id AND g.node_id = p_node
	  AND (a.state = 'ready' OR (a.state IN ('reserved', 'provisioning') AND p_observed >= v_gen))
	  AND NOT EXISTS (SELECT 1 FROM agent_reported(p_node, p_gpus) rep
	                  WHERE rep.gpu_id = a.gpu_id AND rep.start = a.start
	                    AND rep.profile = a.profile);
	GET DIAGNOSTICS v_n = ROW_COUNT;
	v_failed := v_failed + v_n;

	-- releasing ones whose instance is gone: the capacity is free again
	UPDATE allocations a SET state = 'released', released_at = now(), updated_at = now()
	FROM gpus g
	WHERE g.id = a.gpu_id AND g.node_id = p_node AND a.state = 'releasing'
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
	  AND dedup_key <> ALL (v_keys);

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

	UPDATE nodes SET observed_generation = p_observed,
		agent_version = coalesce(p_version, agent_version), agent_heartbeat_at = now(),
		agent_status_at = now(), agent_errors = coalesce(p_errors, '[]'),
		status = CASE WHEN status = 'unknown' THEN 'ready' ELSE status END,
		status_reason = CASE WHEN status = 'unknown' THEN NULL ELSE status_reason END
	WHERE id = p_node;
	PERFORM alert_resolve('node_unknown:' || p_node);
	-- what the agent applied needs no push any more
	UPDATE outbox SET delivered_at = now(), last_error = NULL
	WHERE node_id = p_node AND delivered_at IS NULL AND generation <= p_observed;

	RETURN jsonb_build_object('generation', v_gen, 'ready', v_ready, 'failed', v_failed,
		'released', v_released, 'gpus_failed', v_gpus_bad,
		'drift', coalesce(array_length(v_keys, 1), 0));
END
$$;

-- A heartbeat: the node is alive. A node that was unknown is ready
-- again (its GPUs first, then the node, as the lock order wants).
CREATE FUNCTION agent_heartbeat(p_node bigint, p_observed bigint)
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
		observed_generation = coalesce(p_observed, observed_generation),
		status = CASE WHEN status = 'unknown' THEN 'ready' ELSE status END,
		status_reason = CASE WHEN status = 'unknown' THEN NULL ELSE status_reason END
	WHERE id = p_node RETURNING generation INTO v_gen;
	IF p_observed IS NOT NULL THEN
		UPDATE outbox SET delivered_at = now(), last_error = NULL
		WHERE node_id = p_node AND delivered_at IS NULL AND generation <= p_observed;
	END IF;
	RETURN v_gen;
END
$$;

-- Agent-managed nodes silent for longer than p_grace become unknown and
-- leave placement; operator-set statuses (cordoned, draining, down) and
-- nodes registered by hand are left alone. GPUs of all of them first
-- (one statement, id order), then the nodes (id order).
CREATE FUNCTION agent_liveness_sweep(p_grace interval)
RETURNS integer LANGUAGE plpgsql AS $$
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

-- Enroll (or adopt) a node for an agent (POST /v1/agent/enroll), in the
-- transaction that consumed the enrollment token p_token. p_gpus was
-- checked by the server against the GPU catalog: [{"uuid","index",
-- "model","memory_mib","mig_enabled","instances":[{"profile","start",
-- "size","uuid"}]}]. Instances found on the hardware become allocations
-- without a pool (they hold their slices; drift stays quiet about them).
-- An adopted node keeps its GPUs' MIG mode while they hold allocations.
-- Returns the node's id.
CREATE FUNCTION agent_enroll(p_token bigint, p_cluster bigint, p_name text, p_hostname text,
	p_callback text, p_version text, p_cpu bigint, p_mem bigint, p_gpus jsonb,
	p_digest bytea, p_secret text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	v_id      bigint;
	v_cluster bigint;
BEGIN
	PERFORM 1 FROM gpus g WHERE g.node_id = (SELECT id FROM nodes WHERE name = p_name)
		ORDER BY g.id FOR NO KEY UPDATE;
	SELECT id, cluster_id INTO v_id, v_cluster FROM nodes WHERE name = p_name FOR NO KEY UPDATE;
	IF FOUND AND v_cluster <> p_cluster THEN
		RAISE EXCEPTION 'node % belongs to another cluster than the enrollment token', p_name
			USING ERRCODE = 'unique_violation', CONSTRAINT = 'nodes_cluster_enroll';
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
	UPDATE node_tokens SET revoked_at = now() WHERE node_id = v_id AND revoked_at IS NULL;
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
	RETURN v_id;
END
$$;

-- The outbox pusher (server/workers/pusher.c). A row is done
-- (delivered_at) when a push of its generation or a later one was
-- accepted, when the agent reported that generation as observed (it
-- long-polled it), when the node has no callback URL (the agent only
-- long-polls), or when the pusher gave up (gave_up_at, alert push_failed).
ALTER TABLE outbox ADD COLUMN gave_up_at timestamptz;

-- Claim the due rows (a lease: next_attempt_at moves past now, so another
-- replica does not take them meanwhile); one row per node to push to.
CREATE FUNCTION outbox_claim(p_limit integer, p_lease interval)
RETURNS TABLE (node_id bigint, attempts integer, callback_url text, push_secret text)
LANGUAGE plpgsql AS $$
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

-- A push of p_generation was accepted.
CREATE FUNCTION outbox_done(p_node bigint, p_generation bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE outbox SET delivered_at = now(), last_error = NULL
	WHERE node_id = p_node AND delivered_at IS NULL AND generation <= p_generation;
	PERFORM alert_resolve('push_failed:' || p_node);
END
$$;

-- A push failed: try again after p_delay_ms, or give up after p_max attempts.
CREATE FUNCTION outbox_retry(p_node bigint, p_attempts integer, p_max integer,
	p_delay_ms integer, p_error text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	v_name text;
BEGIN
	IF p_attempts < p_max THEN
		UPDATE outbox SET next_attempt_at = now() + make_interval(secs => p_delay_ms / 1000.0),
			last_error = left(p_error, 2000)
		WHERE node_id = p_node AND delivered_at IS NULL;
		RETURN false;
	END IF;
	UPDATE outbox SET delivered_at = now(), gave_up_at = now(),
		last_error = left('gave up after ' || p_attempts || ' attempts: ' || p_error, 2000)
	WHERE node_id = p_node AND delivered_at IS NULL;
	SELECT name INTO v_name FROM nodes WHERE id = p_node;
	PERFORM alert_raise('push_failed', 'warning', 'push_failed:' || p_node, p_node, NULL, NULL,
		NULL, left('pushes to node ' || v_name || ' fail (' || p_error
		|| '); its agent must long-poll', 2000), jsonb_build_object('attempts', p_attempts));
	RETURN true;
END
$$;
