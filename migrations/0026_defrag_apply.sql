-- 0026_defrag_apply: applying defragmentation plans (docs/capacity.md
-- "Applying a plan").
--
-- POST /v1/capacity/defrag-plans/{id}/apply turns a plan applying and
-- copies its moves into defrag_moves; the apply worker (on the leader)
-- then runs defrag_step(), one committed step per call, so that a replica
-- killed mid-plan leaves every move in a state the next leader resumes
-- from. A move's new allocation names the one it replaces
-- (allocations.replaces); while both live, the pool counts one of them
-- (the invariants count the new one instead of the old). A shrink or
-- release of the pool meanwhile may choose either: the move is then
-- skipped (source_released) and, when the old one was chosen, the worker
-- releases the new one too, so the pool loses one instance, never two.
-- The usage ledger is per (pool, model, profile) count, which a move
-- keeps: it is not touched.

ALTER TABLE allocations ADD COLUMN replaces bigint REFERENCES allocations (id);
-- one live successor per allocation: a resumed step finds it again, never inserts a second
CREATE UNIQUE INDEX allocations_replaces_live_idx ON allocations (replaces)
	WHERE replaces IS NOT NULL AND state <> 'released';

ALTER TABLE defrag_plans DROP CONSTRAINT defrag_plans_state_check;
ALTER TABLE defrag_plans ADD CONSTRAINT defrag_plans_state_check
	CHECK (state IN ('planned', 'applying', 'applied', 'failed', 'expired', 'cancelled'));
ALTER TABLE defrag_plans ADD COLUMN error text CHECK (length(error) <= 2000);
ALTER TABLE defrag_plans ADD COLUMN applied_by bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE defrag_plans ADD COLUMN applied_at timestamptz;
ALTER TABLE defrag_plans ADD COLUMN finished_at timestamptz;
CREATE INDEX defrag_plans_applying_idx ON defrag_plans (id) WHERE state = 'applying';

-- The moves of an applied plan, in the plan's order (ordinal from 0).
-- pending -> (make before break) creating -> destroying -> done
-- pending -> (break before make) reserving -> creating -> done
-- any open state -> skipped | failed, with a reason.
CREATE TABLE defrag_moves (
	plan_id           bigint NOT NULL REFERENCES defrag_plans (id) ON DELETE CASCADE,
	ordinal           integer NOT NULL CHECK (ordinal >= 0),
	allocation_id     bigint NOT NULL,
	new_allocation_id bigint,
	pool_id           bigint NOT NULL,
	profile           text NOT NULL,
	from_gpu_id       bigint NOT NULL,
	from_start        integer NOT NULL,
	to_gpu_id         bigint NOT NULL,
	to_start          integer NOT NULL,
	make_before_break boolean NOT NULL,
	state             text NOT NULL DEFAULT 'pending'
	                  CHECK (state IN ('pending', 'reserving', 'creating', 'destroying', 'done',
	                                   'skipped', 'failed')),
	reason            text CHECK (length(reason) <= 2000),
	old_uuid          text,
	new_uuid          text,
	updated_at        timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (plan_id, ordinal)
);

-- A node's desired state changed: its generation moves and the outbox
-- tells its agent (as an approval's last statement does).
CREATE FUNCTION defrag_notify_node(p_gpu bigint, p_pool bigint) RETURNS void
LANGUAGE plpgsql AS $$
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

-- Whether allocation p_alloc is idle by the planner's rule (db_defrag.c,
-- the idle alert's): ready, unchanged for p_idle_s, no workload profile
-- during the window, average SM activity below p_threshold.
CREATE FUNCTION defrag_source_idle(p_alloc bigint, p_idle_s integer, p_threshold float8)
RETURNS boolean LANGUAGE sql STABLE AS $$
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

-- The pool's event for a move: the old and the new device.
CREATE FUNCTION defrag_move_event(p_plan bigint, p_ord integer, p_old bigint, p_new bigint)
RETURNS void LANGUAGE sql AS $$
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

-- Insert the new allocation of a move; NULL when its slices are taken.
CREATE FUNCTION defrag_reserve(p_gpu bigint, p_start integer, p_old bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
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

-- One step of a plan that is applying: one state change of its first
-- unfinished move (or the plan's end). A new instance not ready
-- p_timeout_s after its move began creating fails the move (agent_timeout). Returns 'step' (something changed:
-- call again), 'wait' (the move waits for an agent) or 'idle' (the plan
-- is finished or not applying). The lock order is the approvals'
-- (docs/architecture.md): the plan row (wanted by nothing else), the
-- pool's approved requests, the pool, the source and target GPUs in id
-- order, the allocations, last the nodes.
-- Guards (found by attacking it): a move whose source another plan is
-- moving already is skipped (source_moving), not retried against the
-- one-live-successor index; counting a pool's instances, a move's new
-- allocation whose old one lives (defrag_shadowed) does not count. After
-- GPUPOOL_DEFRAG_MOVE_TIMEOUT a move waiting in reserving or destroying
-- ends too: destroying -> done, release_pending (the new instance serves,
-- the old allocation is released by the ordinary path when its agent is
-- back); reserving -> failed, agent_timeout, the target reserved anyway
-- where the old instance's slices leave it free.
CREATE FUNCTION defrag_step(p_plan bigint, p_threshold float8, p_timeout_s integer)
RETURNS text
LANGUAGE plpgsql AS $$
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

-- Apply a plan (the API, in the request's transaction): 'applying' when
-- it turned applying now (its moves copied, in order), 'already' when it
-- is applying or applied, 'expired' when it outlived p_ttl_s (it turns
-- expired), 'not_applicable' otherwise, 'not_found'.
CREATE FUNCTION defrag_apply(p_plan bigint, p_user bigint, p_ttl_s integer) RETURNS text
LANGUAGE plpgsql AS $$
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

-- Cancel a plan: 'cancelled' (its moves not started are skipped, the one
-- in flight finishes), 'not_applicable', 'not_found'.
CREATE FUNCTION defrag_cancel(p_plan bigint) RETURNS text
LANGUAGE plpgsql AS $$
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

-- A move's new allocation that the agent could not create while the old
-- one still serves (make before break) is no fault of the pool: it
-- neither degrades the pool (pools_settle, as 0019 left it otherwise) nor
-- opens a fault interval that billing would credit
-- (allocations_fault_history, as 0016 left it otherwise); the worker
-- releases it at its next step.
CREATE FUNCTION defrag_shadowed(p_replaces bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT p_replaces IS NOT NULL AND EXISTS (SELECT 1 FROM allocations o
		WHERE o.id = p_replaces AND o.state NOT IN ('releasing', 'released'))
$$;

CREATE OR REPLACE FUNCTION allocations_fault_history() RETURNS trigger
LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION pools_settle(p_pools bigint[]) RETURNS integer
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

-- The one audit document of a settled pool.
