-- tests/bench/status/seed.sql - the fleet of scripts/bench-status: :nodes
-- agent-managed nodes of one MIG H100 each, seven one-slice pools on every
-- GPU (bench-day's small pools, packed), each allocation ready with its
-- instance's UUID; and each node's status report listing those instances.
INSERT INTO clusters (name) VALUES ('bs');
INSERT INTO projects (name, display_name) VALUES ('bs', 'bs');
INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes, managed_by_agent,
	agent_heartbeat_at)
SELECT c.id, 'bs-' || i, 'bs-' || i, 0, 0, true, now() + interval '1 day'
FROM clusters c, generate_series(1, :nodes) i;
INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, mig_enabled)
SELECT n.id, 0, 'GPU-' || lpad(to_hex(n.id), 8, '0') || '-0000-4000-8000-000000000000',
	'H100-80GB', 81920, true
FROM nodes n ORDER BY n.id;
INSERT INTO pools (project_id, name, status, items)
SELECT p.id, 'p' || g.id || '-' || s, 'active',
	'[{"model":"H100-80GB","profile":"1g.10gb","count":1}]'
FROM projects p, gpus g, generate_series(0, 6) s ORDER BY g.id, s;
INSERT INTO allocations (gpu_id, profile, start, size, state, pool_id)
SELECT g.id, '1g.10gb', s, 1, 'ready', p.id
FROM gpus g CROSS JOIN generate_series(0, 6) s JOIN pools p ON p.name = 'p' || g.id || '-' || s
ORDER BY g.id, s;
UPDATE allocations SET device_uuid = 'MIG-' || id;
-- the report of each node, as api/agent_status.c hands it to SQL
CREATE TABLE bench_report AS
SELECT n.id AS node_id, jsonb_build_array(jsonb_build_object('uuid', g.uuid, 'state', 'ok',
	'fail_reason', NULL, 'ecc_reason', NULL, 'degrade_reason', NULL, 'details', '{}'::jsonb,
	'unknown_xids', '[]'::jsonb, 'instances', (SELECT jsonb_agg(jsonb_build_object('profile',
	a.profile, 'start', a.start, 'size', a.size, 'uuid', a.device_uuid) ORDER BY a.start)
	FROM allocations a WHERE a.gpu_id = g.id))) AS gpus
FROM nodes n JOIN gpus g ON g.node_id = n.id;
ALTER TABLE bench_report ADD PRIMARY KEY (node_id);
ANALYZE;
