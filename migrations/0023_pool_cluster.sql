-- 0023_pool_cluster: a pool may be bound to one cluster.
--
-- A create request may name a cluster (`cluster`); the pool then lives
-- there: its approval and every expand place only on that cluster's GPUs
-- (docs/pools.md). A pool without one places across the fleet, as
-- before. Where the work runs in Kubernetes, the pool's devices are all in
-- the cluster whose DeviceClasses name them.
ALTER TABLE pools ADD COLUMN cluster_id bigint REFERENCES clusters (id) ON DELETE SET NULL;
CREATE INDEX pools_cluster_idx ON pools (cluster_id) WHERE cluster_id IS NOT NULL;

-- A cluster that a live pool is bound to cannot be deleted (it would
-- unbind the pool); released pools let go of it (ON DELETE SET NULL).
CREATE FUNCTION clusters_keep_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM pools WHERE cluster_id = OLD.id AND status <> 'released') THEN
		RAISE EXCEPTION 'cluster % has live pools bound to it', OLD.name
			USING ERRCODE = 'foreign_key_violation';
	END IF;
	RETURN OLD;
END
$$;
CREATE TRIGGER clusters_keep_bound BEFORE DELETE ON clusters
	FOR EACH ROW EXECUTE FUNCTION clusters_keep_bound();
