-- fleet.sql - the synthetic fleet of scripts/bench-capacity, built with
-- set-based SQL through the real schema (every trigger and constraint
-- runs: placement check, exclusion constraint, layout mirror, classes).
--
--   bench_capacity_layouts |
--     psql -v nodes=10000 -v clusters=8 -v seed=0.42 -v layout_pool=0 -f fleet.sql
--
-- stdin: every valid MIG layout per model (model, layout, profile, start,
-- size), as bench_capacity_layouts prints them; each GPU takes one at
-- random, so every allocation is a catalog placement on a layout the
-- placement engine accepts. layout_pool > 0 first draws that many layouts
-- per model at random and has the GPUs choose among those only (a fleet
-- run with a few standard MIG configurations); 0 uses them all (about
-- 2,300 per 8-slice model: nearly every GPU of a cluster differs).
--
-- Nodes: H100-80GB 80 %, A100-80GB 8 %, H200-141GB 6 %, L40S-48GB 4 %,
-- A30-24GB 2 %, 8 GPUs each, spread over the clusters; 97 % ready, 2 %
-- cordoned, 1 % down. GPUs of MIG models: 10 % empty (half with MIG on),
-- 10 % whole (MIG off), 80 % a random layout; L40S half empty, half
-- whole. Health: 98.5 % ok, 1 % degraded, 0.5 % failed. The same seed
-- builds the same fleet.
\set ON_ERROR_STOP 1
SELECT setseed(:seed);

CREATE TEMP TABLE bench_layout_items (
	model   text NOT NULL,
	layout  integer NOT NULL,
	profile text NOT NULL,
	start   integer NOT NULL,
	size    integer NOT NULL
);
\copy bench_layout_items FROM pstdin
-- the layouts of each model in a random order; the GPUs draw from the
-- first layout_pool (all when 0)
CREATE TEMP TABLE bench_layout_pick AS
	SELECT model, layout, row_number() OVER (PARTITION BY model ORDER BY r) AS k
	FROM (SELECT model, layout, random() AS r
	      FROM (SELECT DISTINCT model, layout FROM bench_layout_items ORDER BY 1, 2) d) x;
CREATE TEMP TABLE bench_layout_counts AS
	SELECT model, CASE WHEN :layout_pool > 0 THEN least(:layout_pool, max(k)) ELSE max(k) END AS n
	FROM bench_layout_pick GROUP BY model;

INSERT INTO clusters (name, region, description)
SELECT format('bench-%s', i), format('region-%s', i % 3), 'synthetic fleet'
FROM generate_series(1, :clusters) AS i;

CREATE TEMP TABLE bench_nodes AS
SELECT i,
       CASE WHEN r < 0.80 THEN 'H100-80GB' WHEN r < 0.88 THEN 'A100-80GB'
            WHEN r < 0.94 THEN 'H200-141GB' WHEN r < 0.98 THEN 'L40S-48GB'
            ELSE 'A30-24GB' END AS model,
       CASE WHEN s < 0.97 THEN 'ready' WHEN s < 0.99 THEN 'cordoned' ELSE 'down' END AS status
FROM (SELECT i, random() AS r, random() AS s FROM generate_series(1, :nodes) AS i) x;

INSERT INTO nodes (cluster_id, name, hostname, status, cpu_millicores, memory_bytes, labels)
SELECT c.id, format('node-%s', lpad(b.i::text, 5, '0')), format('gpu-%s.bench.example', b.i),
       b.status, 224000, 2199023255552,
       jsonb_build_object('zone', 'z' || (b.i % 4), 'gpu', b.model)
FROM bench_nodes b
JOIN clusters c ON c.name = format('bench-%s', 1 + b.i % :clusters)
ORDER BY b.i;

-- layout: 0 empty, -1 whole GPU, n > 0 that layout of the model
CREATE TEMP TABLE bench_plan AS
SELECT node_id, idx, x.model, memory_mib, mig_capable,
       CASE WHEN mig_capable THEN
                CASE WHEN r < 0.10 THEN 0 WHEN r < 0.20 THEN -1 ELSE lp.layout END
            ELSE CASE WHEN r < 0.5 THEN 0 ELSE -1 END END AS layout,
       CASE WHEN h < 0.985 THEN 'ok' WHEN h < 0.995 THEN 'degraded' ELSE 'failed' END AS health,
       q < 0.5 AS mig_when_empty
FROM (SELECT n.id AS node_id, g AS idx, b.model, m.memory_mib, m.mig_capable, lc.n,
             random() AS r, random() AS r2, random() AS h, random() AS q
      FROM bench_nodes b
      JOIN nodes n ON n.name = format('node-%s', lpad(b.i::text, 5, '0'))
      JOIN gpu_models m ON m.id = b.model
      LEFT JOIN bench_layout_counts lc ON lc.model = b.model
      CROSS JOIN generate_series(0, 7) AS g
      ORDER BY b.i, g) x
LEFT JOIN bench_layout_pick lp
	ON lp.model = x.model AND lp.k = 1 + least(floor(x.r2 * x.n)::integer, x.n - 1);

INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, mig_enabled, health,
                  health_reason)
SELECT node_id, idx,
       'GPU-' || substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-' || substr(h, 13, 4) || '-' ||
       substr(h, 17, 4) || '-' || substr(h, 21, 12),
       model, memory_mib,
       mig_capable AND (layout > 0 OR (layout = 0 AND mig_when_empty)),
       health, CASE WHEN health <> 'ok' THEN 'synthetic fleet' END
FROM (SELECT p.*, md5(p.node_id || '/' || p.idx) AS h FROM bench_plan p) x
ORDER BY node_id, idx;

INSERT INTO allocations (gpu_id, profile, start, size, state)
SELECT g.id, li.profile, li.start, li.size, 'ready'
FROM bench_plan p
JOIN gpus g ON g.node_id = p.node_id AND g.gpu_index = p.idx
JOIN bench_layout_items li ON li.model = p.model AND li.layout = p.layout
UNION ALL
SELECT g.id, 'full', 0, m.full_slices, 'ready'
FROM bench_plan p
JOIN gpus g ON g.node_id = p.node_id AND g.gpu_index = p.idx
JOIN gpu_models m ON m.id = p.model
WHERE p.layout = -1;

ANALYZE;
