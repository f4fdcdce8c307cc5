-- 0020_gpu_classes_at_commit: a new GPU's class is counted at commit.
--
-- gpu_classes (0002) counts GPUs per class, kept by statement triggers on
-- gpus. Every node of a fleet enrolls GPUs of the same few classes, so
-- every enrollment added to the same row: its lock, taken in the middle
-- of agent_enroll, was held through the rest of the transaction (the
-- node document, the audit rows, the commit), and enrollments ran one at
-- a time (issue 23: 435 a second, most of them waiting on each other's
-- transaction id).
--
-- A GPU inserted now goes to gpu_class_pending (a row of its own, no
-- shared lock); a deferred constraint trigger adds the transaction's
-- pending GPUs to gpu_classes at commit, summed per class in key order
-- (the order every writer of gpu_classes takes), so the shared row is
-- held only while the transaction commits. An update or delete of a GPU
-- still pending in the same transaction (an enrollment's instances set
-- its layout) changes or removes its pending row instead of gpu_classes.
-- gpu_classes still equals the grouping of gpus after every commit; inside
-- the inserting transaction its new GPUs are not counted yet (nothing
-- reads the classes of GPUs it has just inserted).
--
-- The table is UNLOGGED: its rows live only inside a transaction (each
-- one deletes its own before it commits), so a crash leaves nothing to
-- keep.
CREATE UNLOGGED TABLE gpu_class_pending (
	gpu_id      bigint PRIMARY KEY,
	cluster_id  bigint NOT NULL,
	model       text NOT NULL,
	mig_enabled boolean NOT NULL,
	healthy     boolean NOT NULL,
	node_ready  boolean NOT NULL,
	layout      text NOT NULL
);

CREATE OR REPLACE FUNCTION gpu_classes_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO gpu_class_pending (gpu_id, cluster_id, model, mig_enabled, healthy,
		                               node_ready, layout)
		SELECT id, cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout
		FROM new_rows;
	ELSIF TG_OP = 'DELETE' THEN
		UPDATE gpu_classes c SET gpus = c.gpus - d.n
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, count(*) AS n
		      FROM old_rows o
		      WHERE NOT EXISTS (SELECT 1 FROM gpu_class_pending p WHERE p.gpu_id = o.id)
		      GROUP BY 1, 2, 3, 4, 5, 6) d
		WHERE (c.cluster_id, c.model, c.mig_enabled, c.healthy, c.node_ready, c.layout) =
		      (d.cluster_id, d.model, d.mig_enabled, d.healthy, d.node_ready, d.layout);
		DELETE FROM gpu_class_pending p USING old_rows o WHERE p.gpu_id = o.id;
	ELSE
		INSERT INTO gpu_classes AS c (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(n)
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, -1 AS n FROM old_rows o
		      WHERE NOT EXISTS (SELECT 1 FROM gpu_class_pending p WHERE p.gpu_id = o.id)
		      UNION ALL
		      SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready',
		             layout, 1 FROM new_rows n
		      WHERE NOT EXISTS (SELECT 1 FROM gpu_class_pending p WHERE p.gpu_id = n.id)) d
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (cluster_id, model, mig_enabled, healthy, node_ready, layout)
		DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
		UPDATE gpu_class_pending p
		SET cluster_id = n.cluster_id, model = n.model, mig_enabled = n.mig_enabled,
		    healthy = n.health = 'ok', node_ready = n.node_status = 'ready', layout = n.layout
		FROM new_rows n WHERE p.gpu_id = n.id;
	END IF;
	RETURN NULL;
END
$$;

-- At commit: the transaction's pending GPUs into gpu_classes (the first
-- firing takes them all; the others find none). Only this transaction's
-- rows are visible here: every other one deletes its own before it commits.
CREATE FUNCTION gpu_class_pending_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	WITH d AS (DELETE FROM gpu_class_pending RETURNING *)
	INSERT INTO gpu_classes AS c (cluster_id, model, mig_enabled, healthy, node_ready, layout,
	                              gpus)
	SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, count(*)
	FROM d GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
	ON CONFLICT (cluster_id, model, mig_enabled, healthy, node_ready, layout)
	DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
	RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER gpu_class_pending_apply AFTER INSERT ON gpu_class_pending
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION gpu_class_pending_apply();

-- agent_enroll reads and writes a node's few rows by their keys (GPU
-- uuids, the node's name). A long-lived connection caches each of its
-- statements' plans; those made while the fleet was small joined gpus by
-- hashing the whole table (a generic plan is not remade as the table
-- grows), so each enrollment scanned every GPU enrolled before it:
-- 20,000 rows, 4 ms, at 20,000 GPUs (issue 23). Inside the function only
-- keyed access is planned: nested loops over the unique indexes, whatever
-- size gpus had when the plan was made.
ALTER FUNCTION agent_enroll(bigint, bigint, text, text, text, text, bigint, bigint, jsonb, bytea,
	text, interval)
	SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;
