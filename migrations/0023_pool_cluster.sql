-- 0023_pool_cluster: a pool may be bound to one cluster.
--
-- A create request may name a cluster (`cluster`); the pool then lives
-- there: its approval and every expand place only on that cluster's GPUs
-- (docs/pools.md). A pool without one places across the fleet, as
-- before. Where the work runs in Kubernetes, the pool's devices are all in
-- the cluster whose DeviceClasses name them.
--
-- A cluster that a live pool is bound to cannot be deleted: the foreign
-- key refuses it (checked at the end of the delete with the latest rows,
-- so a pool bound by a submission that commits while the delete waits for
-- it is seen too); the delete statement first lets go of the released
-- pools bound to it (db_cluster_delete).
ALTER TABLE pools ADD COLUMN cluster_id bigint REFERENCES clusters (id);
CREATE INDEX pools_cluster_idx ON pools (cluster_id) WHERE cluster_id IS NOT NULL;
