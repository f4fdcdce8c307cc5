-- 0029_defrag_step_release_timeout: only a move creating its new instance
-- had a timeout. A dead agent that never released an old instance held a
-- move in reserving (break before make) or destroying (make before break)
-- for ever, and its plan never ended (a cancel lets the move in flight
-- finish). After GPUPOOL_DEFRAG_MOVE_TIMEOUT in those states too:
-- destroying -> done, reason release_pending (the new instance serves; the
-- old allocation stays releasing and its agent, when back, destroys it by
-- the ordinary release path); reserving -> failed, agent_timeout, the
-- plan's error set, and the target reserved anyway where the old
-- instance's slices leave it free, so that the pool stays whole (its agent
-- creates it when back); where they overlap, the pool is one instance short
-- once the old one is released. (docs/capacity.md "Applying a plan")

CREATE OR REPLACE FUNCTION defrag_step(p_plan bigint, p_threshold float8, p_timeout_s integer)
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
