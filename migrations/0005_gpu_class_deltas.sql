-- 0005_gpu_class_deltas: the per-class GPU counts without a hot row.
--
-- 0002 kept gpu_classes as one counter row per class, updated by every
-- statement that changes a GPU's class. An approval moves GPUs out of
-- one class (most often the empty one) into another, so concurrent
-- approvals all updated the same row and queued on its lock until each
-- other's COMMIT. Now the triggers only append the difference of each
-- statement to gpu_class_deltas (no key, no index, no row lock), and
-- gpu_classes is a view summing them: same columns, same answers. The
-- maintenance worker folds the deltas into one row per class every few
-- seconds (gpu_classes_compact), so reads sum a few rows per class.

CREATE TABLE gpu_class_deltas (
	cluster_id  bigint NOT NULL,
	model       text NOT NULL,
	mig_enabled boolean NOT NULL,
	healthy     boolean NOT NULL,
	node_ready  boolean NOT NULL,
	layout      text NOT NULL,
	gpus        integer NOT NULL
);

INSERT INTO gpu_class_deltas (cluster_id, model, mig_enabled, healthy, node_ready, layout, gpus)
SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, gpus
FROM gpu_classes WHERE gpus <> 0;

DROP TABLE gpu_classes;

-- A class with no GPU left may show 0 until the next compaction drops it,
-- as the 0002 table kept such rows.
CREATE VIEW gpu_classes AS
SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(gpus)::integer AS gpus
FROM gpu_class_deltas
GROUP BY cluster_id, model, mig_enabled, healthy, node_ready, layout;

-- The difference of each statement on gpus, summed per class; classes
-- whose count did not change (a GPU updated within its class) add nothing.
CREATE OR REPLACE FUNCTION gpu_classes_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO gpu_class_deltas (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout,
		       count(*)
		FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6;
	ELSIF TG_OP = 'DELETE' THEN
		INSERT INTO gpu_class_deltas (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout,
		       -count(*)
		FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6;
	ELSE
		INSERT INTO gpu_class_deltas (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(n)
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, -1 AS n FROM old_rows
		      UNION ALL
		      SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready',
		             layout, 1 FROM new_rows) d
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0;
	END IF;
	RETURN NULL;
END
$$;

-- Fold the deltas into one row per class (classes summing to 0 go).
-- The DELETE takes the rows of its snapshot and the INSERT writes their
-- sums in the same statement, so every reader sees either the old rows
-- or the new ones, with the same totals; deltas appended meanwhile stay
-- as they are. One compaction at a time (an advisory lock; the others
-- return -1 at once). Returns how many rows it removed.
CREATE FUNCTION gpu_classes_compact() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	IF NOT pg_try_advisory_xact_lock(7453010373645639271) THEN
		RETURN -1;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM gpu_class_deltas
	               GROUP BY cluster_id, model, mig_enabled, healthy, node_ready, layout
	               HAVING count(*) > 1 OR sum(gpus) = 0) THEN
		RETURN 0;
	END IF;
	WITH d AS (
		DELETE FROM gpu_class_deltas RETURNING *
	), s AS (
		INSERT INTO gpu_class_deltas (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(gpus)
		FROM d GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(gpus) <> 0
	)
	SELECT count(*) INTO n FROM d;
	RETURN n;
END
$$;

-- The approval's triggers, cheaper and with the same checks.
--
-- Invariant 2 (0002): one lookup of the GPU's model and the profile
-- instead of two, same errors.
CREATE OR REPLACE FUNCTION allocations_check_placement() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	m_id          text;
	m_full_slices integer;
	p_name        text;
	p_slices      integer;
	p_placements  integer[];
BEGIN
	SELECT gm.id, gm.full_slices, p.name, p.memory_slices, p.placements
	INTO m_id, m_full_slices, p_name, p_slices, p_placements
	FROM gpus g JOIN gpu_models gm ON gm.id = g.model
	LEFT JOIN mig_profiles p ON p.model = gm.id AND p.name = NEW.profile
	WHERE g.id = NEW.gpu_id;
	IF NOT FOUND THEN
		RETURN NEW;     -- the foreign key reports it
	END IF;
	IF NEW.profile = 'full' THEN
		IF NEW.start <> 0 OR NEW.size <> m_full_slices THEN
			RAISE EXCEPTION 'a whole-gpu allocation on % holds slices [0, %)',
				m_id, m_full_slices
				USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
		END IF;
		RETURN NEW;
	END IF;
	IF p_name IS NULL THEN
		RAISE EXCEPTION 'model % offers no MIG profile %', m_id, NEW.profile
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	IF NOT (NEW.start = ANY (p_placements)) OR NEW.size <> p_slices THEN
		RAISE EXCEPTION '% on % takes % slices from a start in %, not % from %',
			p_name, m_id, p_slices, p_placements, NEW.size, NEW.start
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	RETURN NEW;
END
$$;

-- The layout mirror (0002): gpu_layout_refresh's two statements inline,
-- reading the GPU ids from the transition tables (no array, no nested
-- function call). Lock first, then recompute in a new statement, whose
-- snapshot sees every writer of these GPUs that committed before us.
CREATE OR REPLACE FUNCTION allocations_layout_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	ids bigint[];
BEGIN
	IF TG_OP = 'INSERT' THEN
		PERFORM 1 FROM gpus WHERE id IN (SELECT gpu_id FROM new_rows)
		ORDER BY id FOR NO KEY UPDATE;
		UPDATE gpus g SET layout = s.layout, used_mask = s.used_mask
		FROM (SELECT u.gpu_id AS id,
		             coalesce(string_agg(a.profile || '@' || a.start, ',' ORDER BY a.start), '')
		                 AS layout,
		             coalesce(bit_or(((1 << a.size) - 1) << a.start), 0)::smallint AS used_mask
		      FROM (SELECT DISTINCT gpu_id FROM new_rows) u
		      LEFT JOIN allocations a ON a.gpu_id = u.gpu_id AND a.state <> 'released'
		      GROUP BY u.gpu_id) s
		WHERE g.id = s.id AND (g.layout <> s.layout OR g.used_mask <> s.used_mask);
		RETURN NULL;
	ELSIF TG_OP = 'DELETE' THEN
		SELECT array_agg(DISTINCT gpu_id) INTO ids FROM old_rows;
	ELSE
		SELECT array_agg(DISTINCT x.gpu_id) INTO ids FROM (
			SELECT o.gpu_id FROM old_rows o JOIN new_rows n USING (id)
			WHERE (o.gpu_id, o.profile, o.start, o.size, o.state = 'released')
			      IS DISTINCT FROM (n.gpu_id, n.profile, n.start, n.size, n.state = 'released')
			UNION ALL
			SELECT n.gpu_id FROM old_rows o JOIN new_rows n USING (id)
			WHERE (o.gpu_id, o.profile, o.start, o.size, o.state = 'released')
			      IS DISTINCT FROM (n.gpu_id, n.profile, n.start, n.size, n.state = 'released')
		) x;
	END IF;
	IF ids IS NOT NULL THEN
		PERFORM gpu_layout_refresh(ids);
	END IF;
	RETURN NULL;
END
$$;
