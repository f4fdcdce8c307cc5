-- 0029_heartbeat_batch: node-agent heartbeats by group commit (issue 23).
--
-- Each POST /v1/agent/heartbeat was its own transaction (BEGIN, SELECT
-- agent_heartbeat, COMMIT) on the HTTP thread that received it: 1,000 a
-- second with 10,000 agents, PostgreSQL's second-largest cost in the
-- mixed day, and a heartbeat whose node a status report or an approval
-- held kept one of the agent listener's HTTP threads waiting. The
-- heartbeats are now queued (server/workers/heartbeat_queue.c) and a
-- worker sends everything queued, up to a few hundred, to
-- agent_heartbeats() below: one statement, its own transaction, that
-- handles the common heartbeat (a ready node whose agent reports nothing
-- new). Every other heartbeat of the batch (node unknown, its observed
-- generation advancing, its node row held by another transaction, a
-- second heartbeat of one node in the batch, a node gone) runs
-- agent_heartbeat() alone, in a transaction of its own, after the batch,
-- exactly as before.
--
-- What a heartbeat of the common case would have done in
-- agent_heartbeat(): set agent_heartbeat_at, leave observed_generation
-- (greatest(observed, least(p_observed, generation)) is observed when
-- least(p_observed, generation) <= observed) and the status alone, and
-- mark no outbox row delivered: every statement that raises
-- observed_generation to G (agent_heartbeat, agent_apply_status) marks
-- the node's outbox rows up to G delivered in its transaction, under the
-- node's lock, and an outbox row is written with the node's generation
-- just bumped under that lock (above observed_generation), so no
-- undelivered row of the node is at or below observed_generation.
--
-- The lock order (docs/architecture.md, "The lock order"). The statement
-- locks the batch's node rows in id order FOR NO KEY UPDATE SKIP LOCKED
-- and then updates only those rows: it never waits for a lock. A
-- transaction that never waits is in no wait-for cycle, whoever waits for
-- it, so it cannot deadlock with
--   * an approval batch (GPUs, then its nodes in id order in its last
--     statement), a release, a cordon, a defrag step (node last): they
--     may wait for a node the batch holds, for the length of one
--     statement; the batch skips a node they hold;
--   * a status report (agent_apply_status: pools, GPUs, allocations, the
--     node, its outbox rows): same;
--   * the liveness sweep (the nodes' GPUs, then the nodes in id order):
--     it waits for a node the batch holds, then finds agent_heartbeat_at
--     fresh in its UPDATE's recheck and leaves the node ready; a node it
--     made unknown first fails the batch's recheck of status under the
--     lock (SKIP LOCKED locks the latest version and evaluates the WHERE
--     clause on it) and its heartbeat goes through agent_heartbeat();
--   * the pusher (outbox_claim, outbox_done, outbox_retry): outbox rows
--     only, which the batch does not touch; an outbox insert's foreign
--     key takes FOR KEY SHARE on the node, which FOR NO KEY UPDATE does
--     not conflict with.
-- It takes no GPU: that is why unknown nodes (agent_heartbeat locks
-- their GPUs before the node) and advancing generations (outbox rows)
-- stay out of it, and why their agent_heartbeat() runs in its own
-- transaction, never in the batch's: holding other nodes' rows while
-- waiting for GPUs would put nodes before GPUs.
--
-- p_observed[i] < 0 (or NULL) is a heartbeat without observed_generation.
-- p_nodes holds each node once (a repeated node is updated once).
-- PL/pgSQL, not SQL: a connection keeps its plan (a LANGUAGE sql
-- function plans its UPDATE again at every call, which cost twice
-- agent_heartbeat's whole call at one heartbeat a batch in bench-day).
CREATE FUNCTION agent_heartbeats(p_nodes bigint[], p_observed bigint[])
RETURNS TABLE (node_id bigint, generation bigint) LANGUAGE plpgsql AS $$
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
