-- 0031_node_token_notify_node: NOTIFY gpupool_tokens names the node whose
-- token changed.
--
-- 0028 notified '' once per statement on node_tokens, and every replica
-- flushed its whole node-token cache (server/auth/node_cache.h) on it: an
-- enrollment of a new node (its UPDATE revokes nothing) flushed every
-- cache, and one node rotating its own token in a loop
-- (POST /v1/agent/token/rotate) kept every replica's cache empty for the
-- whole fleet. Now each changed row sends its node id (the replicas forget
-- that node's tokens only; identical payloads of one transaction arrive
-- once), an UPDATE or DELETE that changes no row sends nothing, and a
-- TRUNCATE still sends '' (everything is forgotten).
CREATE OR REPLACE FUNCTION node_tokens_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'TRUNCATE' THEN
		PERFORM pg_notify('gpupool_tokens', '');
		RETURN NULL;
	END IF;
	PERFORM pg_notify('gpupool_tokens', OLD.node_id::text);
	IF TG_OP = 'UPDATE' AND NEW.node_id IS DISTINCT FROM OLD.node_id THEN
		PERFORM pg_notify('gpupool_tokens', NEW.node_id::text);
	END IF;
	RETURN NULL;
END
$$;
DROP TRIGGER node_tokens_notify ON node_tokens;
CREATE TRIGGER node_tokens_notify AFTER UPDATE OR DELETE ON node_tokens
	FOR EACH ROW EXECUTE FUNCTION node_tokens_notify();
CREATE TRIGGER node_tokens_notify_truncate AFTER TRUNCATE ON node_tokens
	FOR EACH STATEMENT EXECUTE FUNCTION node_tokens_notify();
