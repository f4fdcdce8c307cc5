-- 0028_node_token_notify: every change of node_tokens is announced.
--
-- gpupoold keeps the node tokens it has authenticated in memory
-- (server/auth/node_cache.h), so that an agent's heartbeats, metrics and
-- polls do not each read node_tokens. A revocation, a rotation, an
-- enrollment that takes a node over (each revokes the old token with an
-- UPDATE) or a node deleted with its tokens must reach every replica's
-- cache: NOTIFY gpupool_tokens at commit, which each replica's notifier
-- answers by flushing its cache. New tokens need nothing (a token not
-- cached is read). The cache answers only while the notifier is connected
-- (notifications sent while it is away are lost) and for at most 60 s.
CREATE FUNCTION node_tokens_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_tokens', '');
	RETURN NULL;
END
$$;
CREATE TRIGGER node_tokens_notify AFTER UPDATE OR DELETE OR TRUNCATE ON node_tokens
	FOR EACH STATEMENT EXECUTE FUNCTION node_tokens_notify();
