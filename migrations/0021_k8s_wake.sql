-- Wake the long-polls of GET /v1/clusters/{cluster}/kubernetes?wait=N
-- (gpupool-k8s, docs/kubernetes.md) when what that cluster's List is made
-- of changes: an allocation's state, device UUID or pool, a GPU's health,
-- a pool's status, a project's namespaces. The payload 'k8s:<cluster id>'
-- is a key of the deferred-request registry (server/workers/notifier.c),
-- delivered to every replica when the transaction commits. A hint only
-- (as outbox_wake): a controller that misses one converges at its next
-- poll; one too many answers a 304 early and the controller polls again.
-- pg_notify folds identical payloads of one transaction into one.

-- (plpgsql with PERFORM: a LANGUAGE sql function would stop at the first row)
CREATE FUNCTION k8s_wake_gpu(p_gpu bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || g.cluster_id) FROM gpus g WHERE g.id = p_gpu;
END
$$;

-- Every cluster holding an allocation (of any state) of the pool.
CREATE FUNCTION k8s_wake_pool(p_pool bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || c.cluster_id)
	FROM (SELECT DISTINCT g.cluster_id FROM allocations a JOIN gpus g ON g.id = a.gpu_id
	      WHERE a.pool_id = p_pool) c;
END
$$;

CREATE FUNCTION k8s_wake_allocation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP <> 'INSERT' THEN
		PERFORM k8s_wake_gpu(OLD.gpu_id);
	END IF;
	IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.gpu_id <> OLD.gpu_id) THEN
		PERFORM k8s_wake_gpu(NEW.gpu_id);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_allocation_insert_delete AFTER INSERT OR DELETE ON allocations
	FOR EACH ROW EXECUTE FUNCTION k8s_wake_allocation();
CREATE TRIGGER k8s_wake_allocation_update AFTER UPDATE ON allocations
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
		OR OLD.device_uuid IS DISTINCT FROM NEW.device_uuid
		OR OLD.pool_id IS DISTINCT FROM NEW.pool_id
		OR OLD.gpu_id IS DISTINCT FROM NEW.gpu_id)
	EXECUTE FUNCTION k8s_wake_allocation();

CREATE FUNCTION k8s_wake_gpu_health() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('gpupool_wake', 'k8s:' || NEW.cluster_id);
	IF OLD.cluster_id <> NEW.cluster_id THEN
		PERFORM pg_notify('gpupool_wake', 'k8s:' || OLD.cluster_id);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_gpu_health AFTER UPDATE ON gpus
	FOR EACH ROW WHEN (OLD.health IS DISTINCT FROM NEW.health
		OR OLD.cluster_id IS DISTINCT FROM NEW.cluster_id)
	EXECUTE FUNCTION k8s_wake_gpu_health();

CREATE FUNCTION k8s_wake_pool_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM k8s_wake_pool(NEW.id);
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_pool_status AFTER UPDATE ON pools
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
	EXECUTE FUNCTION k8s_wake_pool_status();

CREATE FUNCTION k8s_wake_namespaces() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM k8s_wake_pool(p.id) FROM pools p
	WHERE p.project_id = (CASE WHEN TG_OP = 'DELETE' THEN OLD.project_id ELSE NEW.project_id END);
	RETURN NULL;
END
$$;
CREATE TRIGGER k8s_wake_namespaces AFTER INSERT OR DELETE ON project_namespaces
	FOR EACH ROW EXECUTE FUNCTION k8s_wake_namespaces();
