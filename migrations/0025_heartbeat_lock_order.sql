-- 0025_heartbeat_lock_order: a heartbeat readies only a node whose GPUs it
-- locked first.
--
-- agent_heartbeat read the node's status without a lock and locked the
-- node's GPUs only when it read 'unknown'. When the liveness sweep made
-- the node unknown between that read and the UPDATE (the UPDATE waited
-- for the sweep's row, then saw 'unknown'), the UPDATE made it ready: the
-- status trigger (nodes_status_to_gpus) then took the node's GPUs after
-- the node, against the global lock order (docs/architecture.md), and a
-- transaction holding one of those GPUs and waiting for the node (a
-- release or shrink batch, a cordon, an approval's last statement)
-- deadlocked with it (test_lock_order). Now the UPDATE makes the node
-- ready only when the GPUs were locked first; otherwise the node stays
-- unknown until the next heartbeat, a few seconds later.
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
		WHERE node_id = p_node AND delivered_at IS NULL
		  AND generation <= least(p_observed, v_gen);
	END IF;
	RETURN v_gen;
END
$$;
