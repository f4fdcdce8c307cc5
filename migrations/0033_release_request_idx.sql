-- 0033_release_request_idx: a shrink's or a release's allocations found
-- through an index.
--
-- Whether an approved shrink or release is done (all the allocations it
-- freed are released) is asked by release_request_id: by the expiry
-- worker's pass (pool_request_layout_done, 0032) for every approved
-- request, every GPUPOOL_EXPIRY_INTERVAL on every replica; by an agent's
-- report settling its pools' requests (agent_apply_status, 0030); by the
-- confirmation of releases on nodes without an agent (0024). No index
-- had that column, so each ask was a scan of the whole allocations table,
-- released history included. A release whose node's agent is gone (a
-- dead node) stays approved until the node is back or removed, and each
-- such request cost every pass one such scan (test_pools:
-- test_settle_pass_indexed, a sequential scan of allocations before).
-- The index holds only the allocations a shrink or release freed.

CREATE INDEX allocations_release_request_idx ON allocations (release_request_id)
	WHERE release_request_id IS NOT NULL;
