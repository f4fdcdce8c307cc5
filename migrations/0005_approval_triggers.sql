-- 0005_approval_triggers: the capacity schema's allocation triggers,
-- which every approval fires, cheaper and with the same checks and the
-- same results (docs/pools.md, "Measured").

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
