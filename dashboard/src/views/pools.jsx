// Pools: a project's pools, and one pool's page with its allocations and
// their provisioning state, its requests with their history, and (for
// admins) its audit trail.
import { useState } from 'preact/hooks';
import * as api from '../api.js';
import { Badge, Loading, Problem, Table, fmtTime, itemText, useLoad } from '../ui.jsx';

export function Pools({ me }) {
	const staff = me.role === 'admin' || me.role === 'operator';
	const [projects, pErr] = useLoad(() => (staff ? api.all('/v1/projects', {}, 2000) : Promise.resolve(me.projects)), [me.role]);
	const [project, setProject] = useState('');
	const chosen = project || (projects && projects[0]?.name) || '';
	const [pools, error] = useLoad(() => (chosen ? api.all(`/v1/projects/${api.enc(chosen)}/pools`) : Promise.resolve([])), [chosen]);
	const [proj] = useLoad(() => (chosen ? api.get(`/v1/projects/${api.enc(chosen)}`) : Promise.resolve(null)), [chosen]);
	return (
		<section aria-labelledby="h-pools">
			<h1 id="h-pools">Pools</h1>
			<Problem error={pErr || error} />
			{projects && projects.length === 0 && <p>No projects.</p>}
			{projects && projects.length > 0 && (
				<label>
					Project{' '}
					<select value={chosen} onChange={(e) => setProject(e.currentTarget.value)}>
						{projects.map((p) => (
							<option value={p.name}>{p.name}</option>
						))}
					</select>
				</label>
			)}
			{pools === undefined && !error ? (
				<Loading what="pools" />
			) : (
				<Table
					caption={`Pools of ${chosen}${proj?.display_name ? ` (${proj.display_name})` : ''}`}
					rowKey={(p) => p.id}
					columns={[
						{ key: 'name', label: 'Pool', render: (p) => <a href={`#/pool/${p.id}`}>{p.name}</a> },
						{ key: 'status', label: 'Status', render: (p) => <Badge value={p.status} /> },
						{ key: 'items', label: 'Items', render: (p) => p.items.map(itemText).join(', ') || '—' },
						{ key: 'alloc', label: 'Allocations', num: true, render: (p) => p.allocations.length },
						{ key: 'created_at', label: 'Since', render: (p) => fmtTime(p.created_at) },
						{ key: 'ends_at', label: 'Ends', render: (p) => fmtTime(p.ends_at) },
					]}
					rows={pools || []}
					empty="This project has no pools."
				/>
			)}
		</section>
	);
}

export function PoolPage({ me, arg }) {
	const id = Number(arg);
	const [pool, error] = useLoad(() => api.get(`/v1/pools/${id}`), [id]);
	// the server filters by the pool's name; a released pool's name can be
	// taken again, so the id picks this pool's among them
	const [reqs] = useLoad(
		async () => (pool ? (await api.all('/v1/pool-requests', { project: pool.project, pool: pool.name }, 2000)).filter((r) => r.pool_id === id) : []),
		[pool],
	);
	// the pool's own records and those of its requests (the approval that made it, ...)
	const [audit, auditErr] = useLoad(async () => {
		if (me.role !== 'admin' || !reqs) return null;
		const lists = await Promise.all([
			api.get('/v1/audit', { object_type: 'pool', object_id: String(id), limit: 100 }),
			...reqs.slice(0, 20).map((r) => api.get('/v1/audit', { object_type: 'pool_request', object_id: String(r.id), limit: 20 })),
		]);
		return { items: lists.flatMap((l) => l.items).sort((a, b) => b.id - a.id) };
	}, [id, me.role, reqs]);
	if (error) return <Problem error={error} />;
	if (!pool) return <Loading what="the pool" />;
	return (
		<section aria-labelledby="h-pool">
			<h1 id="h-pool">
				Pool {pool.project}/{pool.name}
			</h1>
			<dl class="facts">
				<dt>Status</dt>
				<dd>
					<Badge value={pool.status} />
				</dd>
				<dt>Items</dt>
				<dd>{pool.items.map(itemText).join(', ') || '—'}</dd>
				<dt>Created</dt>
				<dd>{fmtTime(pool.created_at)}</dd>
				<dt>Ends</dt>
				<dd>{fmtTime(pool.ends_at)}</dd>
			</dl>
			<Table
				caption="Allocations and their provisioning state"
				columns={[
					{ key: 'node', label: 'Node' },
					{ key: 'gpu', label: 'GPU', render: (a) => <a href={`#/gpu/${api.enc(a.gpu_uuid)}`}>{`#${a.gpu_index}`}</a> },
					{ key: 'model', label: 'Model' },
					{ key: 'profile', label: 'Profile' },
					{ key: 'start', label: 'Slices', render: (a) => `${a.start}–${a.start + a.size - 1}` },
					{ key: 'state', label: 'State', render: (a) => <Badge value={a.state} /> },
					{ key: 'resource_name', label: 'Kubernetes resource' },
					{ key: 'device_uuid', label: 'Device', render: (a) => a.device_uuid || '—' },
				]}
				rows={pool.allocations}
				empty="No live allocations."
			/>
			<h2>Requests and events</h2>
			<Table
				caption="Requests for this pool, newest first"
				rowKey={(r) => r.id}
				columns={[
					{ key: 'id', label: 'Id', num: true },
					{ key: 'action', label: 'Action' },
					{ key: 'items', label: 'Items', render: (r) => r.items.map(itemText).join(', ') || '—' },
					{ key: 'state', label: 'State', render: (r) => <Badge value={r.state} /> },
					{ key: 'requested_by', label: 'By', render: (r) => r.requested_by || 'system' },
					{ key: 'decided_by', label: 'Decided by', render: (r) => r.decided_by || '—' },
					{ key: 'decided_at', label: 'When', render: (r) => fmtTime(r.decided_at || r.requested_at) },
					{ key: 'note', label: 'Note', render: (r) => r.note || '' },
				]}
				rows={(reqs || []).slice().sort((a, b) => b.id - a.id)}
			/>
			{me.role === 'admin' && (
				<>
					<h2>Audit trail</h2>
					<Problem error={auditErr} />
					{audit && (
						<Table
							caption="Audit records of this pool and its requests, newest first"
							rowKey={(a) => a.id}
							columns={[
								{ key: 'at', label: 'At', render: (a) => fmtTime(a.at) },
								{ key: 'actor', label: 'Actor', render: (a) => a.actor || 'system' },
								{ key: 'action', label: 'Action' },
								{ key: 'after', label: 'Change', render: (a) => (a.after ? JSON.stringify(a.after) : '') },
							]}
							rows={audit.items}
						/>
					)}
				</>
			)}
		</section>
	);
}
