-- 0002_capacity: the GPU catalog, clusters, nodes, GPUs and allocations
-- (the memory-slice layout of every GPU).
--
-- The catalog rows are written here, by the migration, from the
-- project's data/gpu-catalog.json (the same file gpupoold embeds): the
-- placement trigger below needs them the moment the schema exists, and
-- replicas starting together then never race to upsert them. A catalog
-- change is a new migration; tests/integration/test_capacity.c checks
-- that these tables equal the embedded catalog.

CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE gpu_models (
	id             text PRIMARY KEY,
	memory_mib     integer NOT NULL CHECK (memory_mib > 0),
	mig_capable    boolean NOT NULL,
	memory_slices  integer NOT NULL CHECK (memory_slices BETWEEN 0 AND 8),
	compute_slices integer NOT NULL CHECK (compute_slices BETWEEN 0 AND 8),
	-- slice run of a whole-GPU allocation: memory_slices, 1 without MIG
	full_slices    integer NOT NULL CHECK (full_slices BETWEEN 1 AND 8),
	product_names  text[] NOT NULL,
	pci_device_ids text[] NOT NULL,
	CHECK (mig_capable = (memory_slices > 0))
);

CREATE TABLE mig_profiles (
	model            text NOT NULL REFERENCES gpu_models (id),
	name             text NOT NULL,
	profile_id       integer NOT NULL,
	compute_slices   integer NOT NULL CHECK (compute_slices > 0),
	memory_slices    integer NOT NULL CHECK (memory_slices BETWEEN 1 AND 8),
	max_instances    integer NOT NULL CHECK (max_instances > 0),
	sm_count         integer NOT NULL,
	memory_mib       integer NOT NULL,
	placements       integer[] NOT NULL CHECK (cardinality(placements) > 0),
	media_extensions boolean NOT NULL,
	confirmed        boolean NOT NULL,
	PRIMARY KEY (model, name)
);

CREATE TABLE clusters (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name        text NOT NULL UNIQUE
	            CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
	region      text NOT NULL DEFAULT '' CHECK (length(region) <= 63),
	description text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
	generation  bigint NOT NULL DEFAULT 1,
	created_at  timestamptz NOT NULL DEFAULT now(),
	updated_at  timestamptz NOT NULL DEFAULT now()
);

-- NodeCapacity. The GPU model and count are derived from gpus.
CREATE TABLE nodes (
	id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	cluster_id          bigint NOT NULL REFERENCES clusters (id),
	name                text NOT NULL UNIQUE
	                    CHECK (name ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$'),
	hostname            text NOT NULL CHECK (length(hostname) BETWEEN 1 AND 253),
	status              text NOT NULL DEFAULT 'ready'
	                    CHECK (status IN ('ready', 'cordoned', 'draining', 'down', 'unknown')),
	status_reason       text,
	cpu_millicores      bigint NOT NULL CHECK (cpu_millicores >= 0),
	memory_bytes        bigint NOT NULL CHECK (memory_bytes >= 0),
	labels              jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
	agent_version       text,
	agent_heartbeat_at  timestamptz,
	generation          bigint NOT NULL DEFAULT 1,
	observed_generation bigint NOT NULL DEFAULT 0,
	created_at          timestamptz NOT NULL DEFAULT now(),
	updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX nodes_cluster_idx ON nodes (cluster_id, id);
CREATE INDEX nodes_status_idx ON nodes (status, id);
CREATE INDEX nodes_labels_idx ON nodes USING gin (labels jsonb_path_ops);

-- GpuCapacity. cluster_id and node_status mirror the node (kept by
-- triggers) so that placement reads one table; layout and used_mask
-- mirror the live allocations (kept by triggers on allocations):
-- layout is "profile@start" joined by ',' in start order, '' when empty.
CREATE TABLE gpus (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	node_id       bigint NOT NULL REFERENCES nodes (id),
	cluster_id    bigint NOT NULL REFERENCES clusters (id),
	gpu_index     integer NOT NULL CHECK (gpu_index BETWEEN 0 AND 15),
	uuid          text NOT NULL UNIQUE
	              CHECK (uuid ~ '^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
	model         text NOT NULL REFERENCES gpu_models (id),
	memory_mib    integer NOT NULL CHECK (memory_mib > 0),
	mig_enabled   boolean NOT NULL DEFAULT false,
	health        text NOT NULL DEFAULT 'ok' CHECK (health IN ('ok', 'degraded', 'failed')),
	health_reason text,
	node_status   text NOT NULL,
	layout        text NOT NULL DEFAULT '',
	used_mask     smallint NOT NULL DEFAULT 0 CHECK (used_mask BETWEEN 0 AND 255),
	generation    bigint NOT NULL DEFAULT 1,
	created_at    timestamptz NOT NULL DEFAULT now(),
	updated_at    timestamptz NOT NULL DEFAULT now(),
	UNIQUE (node_id, gpu_index)
);
CREATE INDEX gpus_model_idx ON gpus (model, id);
CREATE INDEX gpus_cluster_idx ON gpus (cluster_id, id);
-- placement candidates: GPUs of one layout class in (node, index) order,
-- fleet-wide and per cluster
CREATE INDEX gpus_placeable_idx ON gpus (model, mig_enabled, layout, node_id, gpu_index, id)
	WHERE health = 'ok' AND node_status = 'ready';
CREATE INDEX gpus_placeable_cluster_idx
	ON gpus (model, cluster_id, mig_enabled, layout, node_id, gpu_index, id)
	WHERE health = 'ok' AND node_status = 'ready';

-- How many GPUs each layout class holds: GPUs alike in cluster, model,
-- MIG mode, health ok or not, node ready or not and layout answer every
-- capacity question alike, so capacity reads these few rows instead of
-- every GPU. Kept by the statement triggers on gpus below; rows that
-- drop to 0 stay (their number is bounded by the classes ever seen).
-- (No CHECK (gpus >= 0): INSERT ... ON CONFLICT checks the proposed row,
-- a negative difference, before it becomes an update.)
CREATE TABLE gpu_classes (
	cluster_id  bigint NOT NULL,
	model       text NOT NULL,
	mig_enabled boolean NOT NULL,
	healthy     boolean NOT NULL,
	node_ready  boolean NOT NULL,
	layout      text NOT NULL,
	gpus        integer NOT NULL,
	PRIMARY KEY (cluster_id, model, mig_enabled, healthy, node_ready, layout)
);

-- One instance on a GPU: a whole GPU ('full', start 0, size full_slices)
-- or a MIG instance (profile, start from the catalog, size its memory
-- slices). pool_id NULL: found on the hardware, not managed by gpupool
-- (it still holds its slices). Invariant 1 (DESIGN.md) is the exclusion
-- constraint; invariant 2 the placement trigger.
CREATE TABLE allocations (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	gpu_id      bigint NOT NULL REFERENCES gpus (id),
	profile     text NOT NULL,
	start       integer NOT NULL CHECK (start >= 0),
	size        integer NOT NULL CHECK (size > 0),
	state       text NOT NULL DEFAULT 'reserved'
	            CHECK (state IN ('reserved', 'provisioning', 'ready', 'failed',
	                             'releasing', 'released')),
	pool_id     bigint,
	device_uuid text,
	created_at  timestamptz NOT NULL DEFAULT now(),
	updated_at  timestamptz NOT NULL DEFAULT now(),
	released_at timestamptz,
	CONSTRAINT allocations_within_gpu CHECK (start + size <= 8),
	CONSTRAINT allocations_no_overlap EXCLUDE USING gist
		(gpu_id WITH =, int4range(start, start + size) WITH &&)
		WHERE (state <> 'released')
);
CREATE INDEX allocations_gpu_live_idx ON allocations (gpu_id, start) WHERE state <> 'released';
CREATE INDEX allocations_pool_idx ON allocations (pool_id) WHERE pool_id IS NOT NULL;

-- Invariant 2: a placement the hardware accepts.
CREATE FUNCTION allocations_check_placement() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	m gpu_models%ROWTYPE;
	p mig_profiles%ROWTYPE;
BEGIN
	SELECT gm.* INTO m FROM gpus g JOIN gpu_models gm ON gm.id = g.model
	WHERE g.id = NEW.gpu_id;
	IF NOT FOUND THEN
		RETURN NEW;     -- the foreign key reports it
	END IF;
	IF NEW.profile = 'full' THEN
		IF NEW.start <> 0 OR NEW.size <> m.full_slices THEN
			RAISE EXCEPTION 'a whole-gpu allocation on % holds slices [0, %)',
				m.id, m.full_slices
				USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
		END IF;
		RETURN NEW;
	END IF;
	SELECT * INTO p FROM mig_profiles WHERE model = m.id AND name = NEW.profile;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'model % offers no MIG profile %', m.id, NEW.profile
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	IF NOT (NEW.start = ANY (p.placements)) OR NEW.size <> p.memory_slices THEN
		RAISE EXCEPTION '% on % takes % slices from a start in %, not % from %',
			p.name, m.id, p.memory_slices, p.placements, NEW.size, NEW.start
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	RETURN NEW;
END
$$;

CREATE TRIGGER allocations_check_placement BEFORE INSERT OR UPDATE OF gpu_id, profile, start, size
	ON allocations FOR EACH ROW EXECUTE FUNCTION allocations_check_placement();

-- Recompute gpus.layout and used_mask of the given GPUs. The rows are
-- locked first, so that (READ COMMITTED) the recomputation, a new
-- statement with a new snapshot, sees every concurrent writer of these
-- GPUs that committed before us.
CREATE FUNCTION gpu_layout_refresh(ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF ids IS NULL OR cardinality(ids) = 0 THEN
		RETURN;
	END IF;
	PERFORM 1 FROM gpus WHERE id = ANY (ids) ORDER BY id FOR NO KEY UPDATE;
	UPDATE gpus g SET layout = s.layout, used_mask = s.used_mask
	FROM (SELECT u.id,
	             coalesce(string_agg(a.profile || '@' || a.start, ',' ORDER BY a.start), '')
	                 AS layout,
	             coalesce(bit_or(((1 << a.size) - 1) << a.start), 0)::smallint AS used_mask
	      FROM unnest(ids) AS u (id)
	      LEFT JOIN allocations a ON a.gpu_id = u.id AND a.state <> 'released'
	      GROUP BY u.id) s
	WHERE g.id = s.id AND (g.layout <> s.layout OR g.used_mask <> s.used_mask);
END
$$;

CREATE FUNCTION allocations_layout_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	ids bigint[];
BEGIN
	IF TG_OP = 'INSERT' THEN
		SELECT array_agg(DISTINCT gpu_id) INTO ids FROM new_rows;
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
	PERFORM gpu_layout_refresh(ids);
	RETURN NULL;
END
$$;

CREATE TRIGGER allocations_layout_insert AFTER INSERT ON allocations
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION allocations_layout_sync();
CREATE TRIGGER allocations_layout_update AFTER UPDATE ON allocations
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION allocations_layout_sync();
CREATE TRIGGER allocations_layout_delete AFTER DELETE ON allocations
	REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION allocations_layout_sync();

-- gpu_classes follows gpus: the difference of each statement, summed
-- per class, added in key order (concurrent writers lock the rows in one
-- order). Increments are applied to the newest row version, so
-- concurrent READ COMMITTED writers never lose one.
CREATE FUNCTION gpu_classes_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO gpu_classes AS c (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout,
		       count(*)
		FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (cluster_id, model, mig_enabled, healthy, node_ready, layout)
		DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
	ELSIF TG_OP = 'DELETE' THEN
		UPDATE gpu_classes c SET gpus = c.gpus - d.n
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, count(*) AS n
		      FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6) d
		WHERE (c.cluster_id, c.model, c.mig_enabled, c.healthy, c.node_ready, c.layout) =
		      (d.cluster_id, d.model, d.mig_enabled, d.healthy, d.node_ready, d.layout);
	ELSE
		INSERT INTO gpu_classes AS c (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(n)
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, -1 AS n FROM old_rows
		      UNION ALL
		      SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready',
		             layout, 1 FROM new_rows) d
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (cluster_id, model, mig_enabled, healthy, node_ready, layout)
		DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER gpu_classes_insert AFTER INSERT ON gpus
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION gpu_classes_sync();
CREATE TRIGGER gpu_classes_update AFTER UPDATE ON gpus
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION gpu_classes_sync();
CREATE TRIGGER gpu_classes_delete AFTER DELETE ON gpus
	REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION gpu_classes_sync();

-- gpus.cluster_id and node_status follow the node.
CREATE FUNCTION gpus_from_node() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	SELECT n.cluster_id, n.status INTO NEW.cluster_id, NEW.node_status
	FROM nodes n WHERE n.id = NEW.node_id;
	RETURN NEW;
END
$$;

CREATE TRIGGER gpus_from_node BEFORE INSERT OR UPDATE OF node_id ON gpus
	FOR EACH ROW EXECUTE FUNCTION gpus_from_node();

CREATE FUNCTION nodes_status_to_gpus() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE gpus SET node_status = NEW.status, cluster_id = NEW.cluster_id
	WHERE node_id = NEW.id;
	RETURN NULL;
END
$$;

CREATE TRIGGER nodes_status_to_gpus AFTER UPDATE OF status, cluster_id ON nodes
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
	                   OR OLD.cluster_id IS DISTINCT FROM NEW.cluster_id)
	EXECUTE FUNCTION nodes_status_to_gpus();

-- The catalog, from data/gpu-catalog.json.
INSERT INTO gpu_models (id, memory_mib, mig_capable, memory_slices, compute_slices,
	full_slices, product_names, pci_device_ids) VALUES
	('A30-24GB', 24576, true, 4, 4, 4,
	 '{"NVIDIA A30"}', '{"0x20B710DE"}'),
	('A100-40GB', 40960, true, 8, 7, 8,
	 '{"NVIDIA A100-SXM4-40GB","NVIDIA A100-PCIE-40GB"}', '{"0x20B010DE","0x20F110DE"}'),
	('A100-80GB', 81920, true, 8, 7, 8,
	 '{"NVIDIA A100-SXM4-80GB","NVIDIA A100 80GB PCIe"}', '{"0x20B210DE","0x20B510DE"}'),
	('H100-80GB', 81559, true, 8, 7, 8,
	 '{"NVIDIA H100 80GB HBM3","NVIDIA H100 PCIe"}', '{"0x233010DE","0x233110DE"}'),
	('H100-NVL-94GB', 95830, true, 8, 7, 8,
	 '{"NVIDIA H100 NVL"}', '{"0x232110DE"}'),
	('H200-141GB', 143771, true, 8, 7, 8,
	 '{"NVIDIA H200","NVIDIA H200 NVL"}', '{"0x233510DE","0x233B10DE"}'),
	('L40S-48GB', 46068, false, 0, 0, 1,
	 '{"NVIDIA L40S"}', '{"0x26B910DE"}'),
	('L4-24GB', 23034, false, 0, 0, 1,
	 '{"NVIDIA L4"}', '{"0x27B810DE"}'),
	('A10G-24GB', 23028, false, 0, 0, 1,
	 '{"NVIDIA A10G"}', '{"0x223710DE"}'),
	('T4-16GB', 15360, false, 0, 0, 1,
	 '{"Tesla T4"}', '{"0x1EB810DE"}');

INSERT INTO mig_profiles (model, name, profile_id, compute_slices, memory_slices,
	max_instances, sm_count, memory_mib, placements, media_extensions, confirmed) VALUES
	('A30-24GB', '1g.6gb', 14, 1, 1, 4, 14, 5952, '{0,1,2,3}', false, true),
	('A30-24GB', '1g.6gb+me', 21, 1, 1, 1, 14, 5952, '{0,1,2,3}', true, true),
	('A30-24GB', '2g.12gb', 5, 2, 2, 2, 28, 11968, '{0,2}', false, true),
	('A30-24GB', '2g.12gb+me', 6, 2, 2, 1, 28, 11968, '{0,2}', true, true),
	('A30-24GB', '4g.24gb', 0, 4, 4, 1, 56, 24064, '{0}', false, true),
	('A100-40GB', '1g.5gb', 19, 1, 1, 7, 14, 4864, '{0,1,2,3,4,5,6}', false, true),
	('A100-40GB', '1g.5gb+me', 20, 1, 1, 1, 14, 4864, '{0,1,2,3,4,5,6}', true, true),
	('A100-40GB', '1g.10gb', 15, 1, 2, 4, 14, 9984, '{0,2,4,6}', false, true),
	('A100-40GB', '2g.10gb', 14, 2, 2, 3, 28, 9984, '{0,2,4}', false, true),
	('A100-40GB', '3g.20gb', 9, 3, 4, 2, 42, 20096, '{0,4}', false, true),
	('A100-40GB', '4g.20gb', 5, 4, 4, 1, 56, 20096, '{0}', false, true),
	('A100-40GB', '7g.40gb', 0, 7, 8, 1, 98, 40448, '{0}', false, true),
	('A100-80GB', '1g.10gb', 19, 1, 1, 7, 14, 9728, '{0,1,2,3,4,5,6}', false, true),
	('A100-80GB', '1g.10gb+me', 20, 1, 1, 1, 14, 9728, '{0,1,2,3,4,5,6}', true, true),
	('A100-80GB', '1g.20gb', 15, 1, 2, 4, 14, 19968, '{0,2,4,6}', false, false),
	('A100-80GB', '2g.20gb', 14, 2, 2, 3, 28, 19968, '{0,2,4}', false, true),
	('A100-80GB', '3g.40gb', 9, 3, 4, 2, 42, 40192, '{0,4}', false, true),
	('A100-80GB', '4g.40gb', 5, 4, 4, 1, 56, 40192, '{0}', false, true),
	('A100-80GB', '7g.80gb', 0, 7, 8, 1, 98, 80896, '{0}', false, true),
	('H100-80GB', '1g.10gb', 19, 1, 1, 7, 16, 9984, '{0,1,2,3,4,5,6}', false, true),
	('H100-80GB', '1g.10gb+me', 20, 1, 1, 1, 16, 9984, '{0,1,2,3,4,5,6}', true, true),
	('H100-80GB', '1g.20gb', 15, 1, 2, 4, 26, 20096, '{0,2,4,6}', false, true),
	('H100-80GB', '2g.20gb', 14, 2, 2, 3, 32, 20096, '{0,2,4}', false, true),
	('H100-80GB', '3g.40gb', 9, 3, 4, 2, 60, 40448, '{0,4}', false, true),
	('H100-80GB', '4g.40gb', 5, 4, 4, 1, 64, 40448, '{0}', false, true),
	('H100-80GB', '7g.80gb', 0, 7, 8, 1, 132, 81152, '{0}', false, true),
	('H100-NVL-94GB', '1g.12gb', 19, 1, 1, 7, 16, 11008, '{0,1,2,3,4,5,6}', false, true),
	('H100-NVL-94GB', '1g.12gb+me', 20, 1, 1, 1, 16, 11008, '{0,1,2,3,4,5,6}', true, true),
	('H100-NVL-94GB', '1g.24gb', 15, 1, 2, 4, 26, 22144, '{0,2,4,6}', false, true),
	('H100-NVL-94GB', '2g.24gb', 14, 2, 2, 3, 32, 22144, '{0,2,4}', false, true),
	('H100-NVL-94GB', '3g.47gb', 9, 3, 4, 2, 60, 47488, '{0,4}', false, true),
	('H100-NVL-94GB', '4g.47gb', 5, 4, 4, 1, 64, 47488, '{0}', false, true),
	('H100-NVL-94GB', '7g.94gb', 0, 7, 8, 1, 132, 95355, '{0}', false, true),
	('H200-141GB', '1g.18gb', 19, 1, 1, 7, 16, 16384, '{0,1,2,3,4,5,6}', false, true),
	('H200-141GB', '1g.18gb+me', 20, 1, 1, 1, 16, 16384, '{0,1,2,3,4,5,6}', true, true),
	('H200-141GB', '1g.35gb', 15, 1, 2, 4, 26, 33024, '{0,2,4,6}', false, false),
	('H200-141GB', '2g.35gb', 14, 2, 2, 3, 32, 33280, '{0,2,4}', false, false),
	('H200-141GB', '3g.71gb', 9, 3, 4, 2, 60, 71424, '{0,4}', false, false),
	('H200-141GB', '4g.71gb', 5, 4, 4, 1, 64, 71424, '{0}', false, false),
	('H200-141GB', '7g.141gb', 0, 7, 8, 1, 132, 143360, '{0}', false, false);
