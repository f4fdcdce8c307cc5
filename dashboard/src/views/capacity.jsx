// Capacity: clusters, then the GPUs (filtered and paged by the server),
// each drawn as its MIG memory slices with the instances on them, the free
// placements and the stranded slices; a what-if panel runs simulate and
// draws where the items would land; operators and admins also get the
// Defragmentation panel (views/defrag.jsx).
import { useEffect, useRef, useState } from 'preact/hooks';
import * as api from '../api.js';
import { canDefrag } from '../defrag.js';
import { Defrag } from './defrag.jsx';
import { Badge, Loading, Problem, SliceBar, SliceLegend, Table, VirtualList, analyseGpu, fmtInt, gpuState, useLoad } from '../ui.jsx';

const poolCache = new Map();
// what one user saw is not the next one's: forgotten at sign-out
export const clearPools = () => poolCache.clear();

// project/name of each pool id on the GPUs shown (fetched once per id)
export function usePools(gpus) {
	const [pools, setPools] = useState({});
	useEffect(() => {
		const ids = new Set();
		for (const g of gpus) for (const e of g.layout) if (e.pool_id !== null && !poolCache.has(e.pool_id)) ids.add(e.pool_id);
		const want = [...ids].slice(0, 200);
		Promise.all(
			want.map((id) =>
				api.get(`/v1/pools/${id}`).then(
					(p) => poolCache.set(id, { project: p.project, name: p.name }),
					() => poolCache.set(id, null),
				),
			),
		).then(() => setPools(Object.fromEntries(poolCache)));
		if (want.length === 0) setPools(Object.fromEntries(poolCache));
	}, [gpus]);
	return pools;
}

export function useCatalog() {
	const [models] = useLoad(() => api.all('/v1/catalog/models'), []);
	const byModel = {};
	for (const m of models || []) byModel[m.model] = m;
	return [models, byModel];
}

export function freeText(a) {
	if (a.free.length === 0) return 'no free placement';
	return a.free.map((f) => `${f.profile}@${f.starts.join(',')}`).join('  ');
}

function GpuRow({ g, catalog, pools }) {
	const a = analyseGpu(g, catalog[g.model]?.profiles);
	return (
		<div class="gpurow">
			<span class="c-node">
				<a href={`#/gpu/${api.enc(g.uuid)}`}>
					{g.node} · GPU {g.index}
				</a>
			</span>
			<span class="c-model">{g.model}</span>
			<span class="c-health" title={gpuState(g) === 'unavailable' ? 'its node takes no placements (agent silent, cordoned, drained or down)' : undefined}>
				<Badge value={gpuState(g)} />
			</span>
			<SliceBar gpu={g} profiles={catalog[g.model]?.profiles} pools={pools} />
			<span class="c-free" title="free placements (profile@start slices)">
				{gpuState(g) === 'ok' ? freeText(a) : `no placement: ${gpuState(g) === 'unavailable' ? 'node unavailable' : `GPU ${g.health}`}`}
				{a.stranded.length > 0 && <span class="stranded-note"> · stranded {a.stranded.length}</span>}
			</span>
		</div>
	);
}

function WhatIf({ catalog, clusters }) {
	const [result, setResult] = useState(null);
	const [error, setError] = useState(null);
	const [gpus, setGpus] = useState([]);
	const pools = usePools(gpus);
	const run = async (e) => {
		e.preventDefault();
		const f = new FormData(e.currentTarget);
		const items = String(f.get('items'))
			.split(/[\s,]+/)
			.filter(Boolean);
		setError(null);
		setResult(null);
		try {
			const body = { items };
			if (f.get('cluster')) body.cluster = String(f.get('cluster'));
			const r = await api.post('/v1/capacity/simulate', body, { key: false });
			const uuids = [...new Set(r.placements.map((p) => p.gpu_uuid))].slice(0, 40);
			setGpus(await Promise.all(uuids.map((u) => api.get(`/v1/gpus/${api.enc(u)}`))));
			setResult(r);
		} catch (err) {
			setError(err);
		}
	};
	return (
		<section class="panel" aria-labelledby="h-whatif">
			<h2 id="h-whatif">What if</h2>
			<form onSubmit={run} class="inline">
				<label>
					Items <input name="items" placeholder="H100-80GB/3g.40gb=2 H100-80GB/full=1" required size={40} />
				</label>
				<label>
					Cluster
					<select name="cluster">
						<option value="">any</option>
						{(clusters || []).map((c) => (
							<option value={c.name}>{c.name}</option>
						))}
					</select>
				</label>
				<button type="submit">Simulate</button>
			</form>
			<Problem error={error} />
			{result && (
				<div class="whatif-result">
					<p class={result.fits ? 'ok' : 'bad'} role="status">
						{result.fits ? 'Fits' : 'Does not fit'}: {result.placements.length} placements
						{result.short.map((s) => ` · ${s.model}/${s.profile}: ${s.missing} missing`)}
					</p>
					{gpus.map((g) => (
						<div class="gpurow">
							<span class="c-node">
								{g.node} · GPU {g.index}
							</span>
							<span class="c-model">{g.model}</span>
							<SliceBar
								gpu={g}
								profiles={catalog[g.model]?.profiles}
								pools={pools}
								plan={result.placements.filter((p) => p.gpu_uuid === g.uuid)}
							/>
							<span class="c-free">
								{result.placements
									.filter((p) => p.gpu_uuid === g.uuid)
									.map((p) => `${p.profile}@${p.start}${p.mode_switch ? ' (mode switch)' : ''}`)
									.join('  ')}
							</span>
						</div>
					))}
				</div>
			)}
		</section>
	);
}

export function Capacity({ me }) {
	const [, catalog] = useCatalog();
	const [models] = useLoad(() => api.all('/v1/catalog/models'), []);
	const [clusters, clErr] = useLoad(() => api.all('/v1/clusters'), []);
	const [filter, setFilter] = useState({ cluster: '', model: '', health: '', node: '' });
	const [gpus, setGpus] = useState([]);
	const [cursor, setCursor] = useState(null);
	const [error, setError] = useState(null);
	const [loading, setLoading] = useState(true);
	const [more, setMore] = useState(false);
	const pools = usePools(gpus);

	// each filter is a generation: an answer for an older one is dropped, so
	// a late page never lands in the list of a newer filter
	const gen = useRef(0);
	const fetchPage = async (cur, reset) => {
		const mine = reset ? ++gen.current : gen.current;
		setLoading(true);
		try {
			const page = await api.get('/v1/gpus', { ...filter, limit: 200, cursor: cur || undefined });
			if (mine !== gen.current) return;
			setGpus((old) => (reset ? page.items : [...old, ...page.items]));
			setCursor(page.next_cursor);
			setError(null);
		} catch (err) {
			if (mine !== gen.current) return;
			setError(err);
			if (reset) setGpus([]);
		} finally {
			if (mine === gen.current) {
				setLoading(false);
				setMore(false);
			}
		}
	};
	useEffect(() => {
		fetchPage(null, true);
	}, [filter]);
	const onEnd = () => {
		if (cursor && !loading && !more) {
			setMore(true);
			fetchPage(cursor, false);
		}
	};
	const apply = (e) => {
		e.preventDefault();
		const f = new FormData(e.currentTarget);
		setFilter({ cluster: f.get('cluster'), model: f.get('model'), health: f.get('health'), node: String(f.get('node')).trim() });
	};
	return (
		<section aria-labelledby="h-capacity">
			<h1 id="h-capacity">Capacity</h1>
			<Problem error={clErr} />
			{clusters && (
				<Table
					caption="Clusters"
					rowKey={(c) => c.name}
					columns={[
						{
							key: 'name',
							label: 'Cluster',
							render: (c) => (
								<button type="button" class="link" onClick={() => setFilter({ ...filter, cluster: c.name, node: '' })}>
									{c.name}
								</button>
							),
						},
						{ key: 'region', label: 'Region' },
						{ key: 'description', label: 'Description' },
						{ key: 'nodes', label: 'Nodes', num: true, render: (c) => fmtInt(c.nodes) },
						{ key: 'gpus', label: 'GPUs', num: true, render: (c) => fmtInt(c.gpus) },
					]}
					rows={clusters}
				/>
			)}
			<form class="inline filters" onSubmit={apply} aria-label="Filter GPUs" key={JSON.stringify(filter)}>
				<label>
					Cluster
					<select name="cluster" defaultValue={filter.cluster}>
						<option value="">all</option>
						{(clusters || []).map((c) => (
							<option value={c.name}>{c.name}</option>
						))}
					</select>
				</label>
				<label>
					Model
					<select name="model" defaultValue={filter.model}>
						<option value="">all</option>
						{(models || []).map((m) => (
							<option value={m.model}>{m.model}</option>
						))}
					</select>
				</label>
				<label>
					Health
					<select name="health" defaultValue={filter.health}>
						<option value="">all</option>
						<option value="ok">ok</option>
						<option value="degraded">degraded</option>
						<option value="failed">failed</option>
					</select>
				</label>
				<label>
					Node <input name="node" defaultValue={filter.node} size={16} />
				</label>
				<button type="submit">Apply</button>
			</form>
			<Problem error={error} />
			<SliceLegend gpus={gpus} pools={pools} planned />
			<p role="status" class="count">
				{loading && gpus.length === 0 ? 'Loading GPUs…' : `${fmtInt(gpus.length)} GPUs shown${cursor ? ' (scroll for more)' : ''}`}
			</p>
			<VirtualList
				key={JSON.stringify(filter)}
				itemKey={(g) => g.uuid}
				label="GPUs"
				items={gpus}
				rowHeight={44}
				height={480}
				onEnd={onEnd}
				render={(g) => <GpuRow g={g} catalog={catalog} pools={pools} />}
			/>
			<WhatIf catalog={catalog} clusters={clusters} />
			{canDefrag(me) && <Defrag catalog={catalog} clusters={clusters} onFleetChanged={() => setFilter((f) => ({ ...f }))} />}
		</section>
	);
}
