-- 0032_requests_settle_due: the expiry worker's pass also settles the
-- approved requests whose layout is done, a report or not.
--
-- An approved request was settled (fulfilled, or failed when one of its
-- allocations failed) only by a pass that locked it: an agent's status
-- report of a node under it (agent_apply_status), or the confirmation of
-- releases on nodes without an agent (pools_confirm_unmanaged_releases,
-- shrinks and releases only). Two kinds stayed approved for ever:
--
-- (a) a create or expand placed only on nodes without an agent: its
--     allocations are ready at once (docs/pools.md), no agent ever
--     reports, and nothing else settled it (test_pools:
--     test_unmanaged_node, approved for ever before this migration);
-- (b) a request a report skipped: the report takes the approved requests
--     approved while it waited FOR NO KEY UPDATE SKIP LOCKED (0030), and
--     one another transaction held then (defrag_step, say) was left to a
--     report that may never come, its pool having no live allocation on
--     the node any more (test_pools: test_request_settled_without_report).
--
-- pools_settle_due (the expiry pass, every GPUPOOL_EXPIRY_INTERVAL on
-- every replica) now first takes the approved requests whose layout is
-- done, by the same rule as the report's settle, in id order and
-- FOR NO KEY UPDATE SKIP LOCKED (the requests come first in the global
-- lock order, and one held is a transaction's that settles it or leaves
-- it to the next pass), settles them with the event the report writes
-- (actor 'gpupool'), then settles the pools as before. A partial index
-- keeps the pass to the approved requests, a few at any time.

CREATE INDEX pool_requests_approved_idx ON pool_requests (id) WHERE state = 'approved';

-- A shrink's or a release's allocations are found through an index too:
-- whether an approved shrink or release is done (all the allocations it
-- freed are released) is asked by release_request_id, by this pass for
-- every approved request, every GPUPOOL_EXPIRY_INTERVAL on every replica,
-- by an agent's report settling its pools' requests (agent_apply_status,
-- 0030) and by the confirmation of releases on nodes without an agent
-- (0024). No index had that column, so each ask read every live
-- allocation of the fleet, or the whole table with its released history;
-- a release whose node's agent is gone stays approved until the node is
-- back or removed, and would cost every pass one such read
-- (test_pools: test_settle_pass_indexed). The index holds only the
-- allocations a shrink or release freed.
CREATE INDEX allocations_release_request_idx ON allocations (release_request_id)
	WHERE release_request_id IS NOT NULL;

-- The settle rule of an approved request, as agent_apply_status applies
-- it inline (0030): a create or expand once none of its allocations is
-- still reserved or provisioning, a shrink or release once all it freed
-- are released.
CREATE FUNCTION pool_request_layout_done(p_id bigint, p_action text) RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN p_action IN ('create', 'expand') THEN
	            NOT EXISTS (SELECT 1 FROM allocations a WHERE a.request_id = p_id
	                        AND a.state IN ('reserved', 'provisioning'))
	       ELSE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.release_request_id = p_id
	                        AND a.state <> 'released') END
$$;

CREATE OR REPLACE FUNCTION pools_settle_due() RETURNS integer
LANGUAGE plpgsql AS $$
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
