-- 0018_unmanaged_release: releases on nodes without an agent are confirmed.
--
-- On a node registered by hand (managed_by_agent false) an approval's
-- allocations are ready at once: the operator realises them (docs/pools.md).
-- A shrink or release marks allocations 'releasing' and, with no agent to
-- confirm the instances are gone, nothing moved them to 'released': the
-- slices stayed held and the release request 'approved' for ever. The
-- expiry worker now confirms them on every pass (db_pools_settle calls this
-- first), in its own transaction and in the global lock order (requests,
-- pools, GPUs, then allocations: docs/architecture.md), so that it cannot
-- deadlock with approvals, releases or an agent's report beside it
-- (test_deadlock's fleet has no agent: it runs this under its load).
CREATE FUNCTION pools_confirm_unmanaged_releases() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	v_pools bigint[];
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
	PERFORM 1 FROM pool_requests WHERE pool_id = ANY (v_pools) AND state = 'approved'
	ORDER BY id FOR NO KEY UPDATE;
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
		WHERE q.pool_id = ANY (v_pools) AND q.state = 'approved'
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
