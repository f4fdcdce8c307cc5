// ui.jsx - the dashboard's shared pieces: formatting, tables, the MIG slice
// drawing, a windowed list for large fleets and the time-series chart.
// Every name from the server is rendered as text (Preact escapes it); no
// markup is ever built from strings.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { POOL_HUES, TIME_AXIS_SPACE, poolHue, timeLabel } from './gpuseries.js';
import * as api from './api.js';

export const fmtInt = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'));
export const fmtNum = (n, d = 1) =>
	n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
export const fmtPct = (x) => (x === null || x === undefined ? '—' : `${(x * 100).toFixed(0)} %`);
export function fmtMoney(micro, currency) {
	if (micro === null || micro === undefined) return '—';
	return `${(micro / 1e6).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })} ${currency || ''}`.trim();
}
export function fmtTime(ts) {
	if (!ts) return '—';
	const d = new Date(ts);
	return Number.isNaN(d.getTime()) ? String(ts) : d.toISOString().replace('T', ' ').slice(0, 16) + 'Z';
}
export function fmtAge(ts) {
	if (!ts) return 'never';
	const s = Math.max(0, (Date.now() - new Date(ts).getTime()) / 1000);
	if (s < 90) return `${Math.round(s)} s ago`;
	if (s < 5400) return `${Math.round(s / 60)} min ago`;
	if (s < 172800) return `${Math.round(s / 3600)} h ago`;
	return `${Math.round(s / 86400)} d ago`;
}
export const itemText = (it) => `${it.model}/${it.profile}×${it.count}`;

// Run an async loader when deps change; [data, error, reload].
export function useLoad(fn, deps) {
	const [state, setState] = useState({ data: undefined, error: null });
	const [tick, setTick] = useState(0);
	const lastDeps = useRef(null);
	useEffect(() => {
		let live = true;
		// new arguments: forget the old answer (it belonged to other data);
		// a reload of the same keeps it on screen until the new one arrives
		const same = lastDeps.current && lastDeps.current.length === deps.length && lastDeps.current.every((d, i) => d === deps[i]);
		lastDeps.current = deps;
		setState((s) => ({ data: same ? s.data : undefined, error: null }));
		fn().then(
			(data) => live && setState({ data, error: null }),
			(error) => live && setState({ data: undefined, error }),
		);
		return () => {
			live = false;
		};
	}, [...deps, tick]);
	return [state.data, state.error, () => setTick((t) => t + 1)];
}

// A control's mutation (api.action: one Idempotency-Key per user action,
// kept across its retries) with its busy state for the control: busy from
// the click until the answer, during which act.running is true at once
// (before Preact has redrawn the disabled button), so a handler that
// returns when it is set acts once on a double click.
export function useAction() {
	const ref = useRef(null);
	if (!ref.current) ref.current = api.action();
	const [busy, setBusy] = useState(false);
	const a = ref.current;
	return {
		busy,
		get running() {
			return a.running;
		},
		async post(path, body, opts) {
			if (a.running) return undefined;
			setBusy(true);
			try {
				return await a.post(path, body, opts);
			} finally {
				setBusy(false);
			}
		},
	};
}

// The attributes of a control while its action runs.
export const busyProps = (busy) => ({ disabled: busy, 'aria-busy': busy ? 'true' : 'false' });

export function Problem({ error }) {
	if (!error) return null;
	const p = error.problem || {};
	return (
		<div class="problem" role="alert">
			<strong>{p.title || 'Error'}</strong> {error.message}
			{Array.isArray(p.short) && p.short.length > 0 && (
				<ul class="short" aria-label="Shortfall per item">
					{p.short.map((s) => (
						<li>
							{s.model}/{s.profile}: {fmtInt(s.missing)} missing
						</li>
					))}
				</ul>
			)}
		</div>
	);
}

export function Loading({ what }) {
	return (
		<p class="loading" role="status">
			Loading {what}…
		</p>
	);
}

export function Badge({ value }) {
	return <span class={`badge b-${String(value).replace(/[^a-z_]/g, '')}`}>{value}</span>;
}

// A table from column specs: { key, label, render?, num? }.
export function Table({ caption, columns, rows, empty = 'Nothing to show.', rowKey }) {
	return (
		<table>
			{caption && <caption>{caption}</caption>}
			<thead>
				<tr>
					{columns.map((c) => (
						<th scope="col" class={c.num ? 'num' : ''}>
							{c.label}
						</th>
					))}
				</tr>
			</thead>
			<tbody>
				{rows.length === 0 && (
					<tr>
						<td colSpan={columns.length} class="empty">
							{empty}
						</td>
					</tr>
				)}
				{rows.map((r, i) => (
					<tr key={rowKey ? rowKey(r) : i}>
						{columns.map((c) => (
							<td class={c.num ? 'num' : ''}>{c.render ? c.render(r) : r[c.key]}</td>
						))}
					</tr>
				))}
			</tbody>
		</table>
	);
}

// Slices of a GPU: which are held, free, or free but unusable (stranded).
// placements: the model's profiles from the catalog; plan: extra
// placements to draw (what-if), [{start,size,profile}].
export function analyseGpu(gpu, profiles) {
	const n = gpu.memory_slices || 1;
	const used = new Array(n).fill(false);
	for (const e of gpu.layout) for (let s = e.start; s < e.start + e.size && s < n; s++) used[s] = true;
	const fits = (start, size) => {
		if (start + size > n) return false;
		for (let s = start; s < start + size; s++) if (used[s]) return false;
		return true;
	};
	const usable = new Array(n).fill(false);
	const free = [];
	if (gpu.mig_enabled && profiles) {
		for (const p of profiles) {
			const starts = p.placements.filter((st) => fits(st, p.memory_slices));
			if (starts.length) free.push({ profile: p.name, starts });
			for (const st of starts) for (let s = st; s < st + p.memory_slices; s++) usable[s] = true;
		}
	} else if (!used.some(Boolean)) {
		free.push({ profile: 'full', starts: [0] });
		usable.fill(true);
	}
	const stranded = [];
	for (let s = 0; s < n; s++) if (!used[s] && !usable[s]) stranded.push(s);
	return { n, used, free, stranded };
}

// Pools' hues: blues, violets and magentas only. Free slices are green
// (hue ~125), stranded ones peach (~35) and a failed instance red (~0): a
// pool's colour must never read as one of those, so every hue here stays
// at least 45 degrees from each (tests/dashboard: the palette check).
// (The hues live in gpuseries.js, which the GPU page's charts share.)
export { POOL_HUES, poolHue };
export const RESERVED_HUES = { free: 125, stranded: 35, failed: 0 };
const HUES = POOL_HUES;

// A GPU's one state, node availability folded in: its health when not ok;
// else "unavailable" when its node cannot take placements (the agent went
// silent, cordoned, drained, down); else ok.
export const gpuState = (g) => (g.health !== 'ok' ? g.health : g.placeable === false ? 'unavailable' : 'ok');

// The key to the slice bars: free, stranded, planned, each instance state,
// and the colour of each pool on screen.
export function SliceLegend({ gpus, pools, planned }) {
	const ids = [];
	for (const g of gpus || [])
		for (const e of g.layout || []) if (e.pool_id !== null && e.pool_id !== undefined && !ids.includes(e.pool_id)) ids.push(e.pool_id);
	const poolName = (id) => (pools && pools[id] ? `${pools[id].project}/${pools[id].name}` : `pool ${id}`);
	return (
		<div class="legend" role="group" aria-label="Key to the slice bars">
			<span class="sw free" /> free <span class="sw stranded" /> stranded
			{planned && (
				<>
					<span class="sw planned" /> planned (what-if)
				</>
			)}
			<span class="sw st-ready" /> ready <span class="sw st-reserved" /> reserved or provisioning (waiting for the agent)
			<span class="sw st-failed" /> failed <span class="sw st-releasing" /> releasing <span class="sw st-unmanaged" /> outside any pool
			{ids.slice(0, 12).map((id) => (
				<span class="legend-pool">
					<span class="sw pool" style={{ '--h': poolHue(id) }} data-pool={id} /> {poolName(id)}
				</span>
			))}
		</div>
	);
}

// The GPU drawn as its memory slices: instances as blocks with their
// profile, free slices light, stranded ones hatched; a text alternative
// says the same for screen readers.
export function SliceBar({ gpu, profiles, pools, plan }) {
	const a = analyseGpu(gpu, profiles);
	const W = 30;
	const H = 26;
	const poolName = (e) => {
		if (e.pool_id === null || e.pool_id === undefined) return e.managed ? 'no pool' : 'unmanaged';
		const p = pools && pools[e.pool_id];
		return p ? `${p.project}/${p.name}` : `pool ${e.pool_id}`;
	};
	const parts = gpu.layout.map(
		(e) => `${e.profile} on ${e.size === 1 ? `slice ${e.start}` : `slices ${e.start}–${e.start + e.size - 1}`} (${poolName(e)}, ${e.state})`,
	);
	if (a.stranded.length) parts.push(`stranded slices ${a.stranded.join(', ')}`);
	if (plan && plan.length) parts.push(`planned: ${plan.map((p) => `${p.profile} at ${p.start}`).join(', ')}`);
	const freeCount = a.used.filter((u) => !u).length;
	const label = `GPU ${gpu.index} of ${gpu.node}, ${gpu.model}${gpu.mig_enabled ? ' (MIG)' : ''}: ${
		parts.length ? parts.join('; ') : 'empty'
	}; ${freeCount} of ${a.n} slices free`;
	return (
		<svg class="slicebar" role="img" aria-label={label} width={a.n * W + 2} height={H + 2} viewBox={`0 0 ${a.n * W + 2} ${H + 2}`}>
			<title>{label}</title>
			{a.used.map((u, s) =>
				u ? null : <rect x={1 + s * W} y={1} width={W - 2} height={H} class={a.stranded.includes(s) ? 'slice stranded' : 'slice free'} />,
			)}
			{gpu.layout.map((e) => (
				<g
					class={`inst st-${e.state}${e.pool_id === null || e.pool_id === undefined ? ' unmanaged' : ''}`}
					style={{ '--h': poolHue(e.pool_id) }}
					data-pool={e.pool_id ?? ''}
				>
					<rect x={1 + e.start * W} y={1} width={Math.min(e.size, a.n - e.start) * W - 2} height={H} rx={3} class="inst-r" />
					<text x={1 + e.start * W + (Math.min(e.size, a.n - e.start) * W) / 2 - 1} y={H / 2 + 5} text-anchor="middle">
						{e.profile === 'full' ? 'full' : e.profile.split('.')[0]}
					</text>
				</g>
			))}
			{(plan || []).map((p) => (
				<rect x={1 + p.start * W} y={1} width={p.size * W - 2} height={H} rx={3} class="planned" />
			))}
		</svg>
	);
}

// A windowed list: only the rows in view (plus a margin) are in the DOM,
// so tens of thousands of rows scroll smoothly. Rows have a fixed height.
export function VirtualList({ items, rowHeight, height, render, label, onEnd, itemKey }) {
	const ref = useRef(null);
	const [top, setTop] = useState(0);
	const first = Math.max(0, Math.floor(top / rowHeight) - 5);
	const last = Math.min(items.length, Math.ceil((top + height) / rowHeight) + 5);
	useEffect(() => {
		if (onEnd && last >= items.length - 1 && items.length > 0) onEnd();
	}, [last, items.length]);
	return (
		<div
			class="vlist"
			ref={ref}
			role="list"
			aria-label={label}
			tabIndex={0}
			style={{ height: `${height}px` }}
			onScroll={(e) => setTop(e.currentTarget.scrollTop)}
		>
			<div style={{ height: `${items.length * rowHeight}px`, position: 'relative' }}>
				{items.slice(first, last).map((it, i) => (
					<div
						key={itemKey ? itemKey(it) : first + i}
						role="listitem"
						aria-setsize={items.length}
						aria-posinset={first + i + 1}
						class="vrow"
						style={{ top: `${(first + i) * rowHeight}px`, height: `${rowHeight}px` }}
					>
						{render(it, first + i)}
					</div>
				))}
			</div>
		</div>
	);
}

// A uPlot time-series chart. series: [{label, values, stroke?, dash?}] over
// xs (unix s), with a legend of the series.
export function Chart({ title, xs, series, unit, height = 180 }) {
	const ref = useRef(null);
	useEffect(() => {
		if (!ref.current) return undefined;
		const width = Math.max(280, ref.current.clientWidth || 480);
		const plot = new uPlot(
			{
				width,
				height,
				series: [
					{},
					...series.map((s, i) => ({
						label: s.label,
						stroke: s.stroke || `hsl(${HUES[i % HUES.length]} 70% 35%)`,
						...(s.dash ? { dash: s.dash } : {}),
						width: 1.5,
						spanGaps: false,
					})),
				],
				axes: [
					{
						// at least TIME_AXIS_SPACE px per label: none overlap at 1 hour
						space: TIME_AXIS_SPACE,
						values: (u, ticks) => {
							const span = xs.length > 1 ? xs[xs.length - 1] - xs[0] : 0;
							return ticks.map((t) => timeLabel(t, span));
						},
					},
					{ label: unit, size: 60 },
				],
				// the time labels as drawn (CSS px from the plot's left, text,
				// width in the axis font) on the element: what the browser test
				// checks for overlap
				hooks: {
					draw: [
						(u) => {
							const ax = u.axes[0];
							const vals = ax._values || [];
							u.ctx.save();
							u.ctx.font = ax.font[0];
							const ticks = (ax._splits || [])
								.map((t, i) => ({
									x: Math.round(u.valToPos(t, 'x')),
									label: vals[i],
									w: vals[i] === null || vals[i] === undefined ? 0 : Math.ceil(u.ctx.measureText(String(vals[i])).width / devicePixelRatio),
								}))
								.filter((t) => t.label !== null && t.label !== undefined);
							u.ctx.restore();
							u.root.dataset.xticks = JSON.stringify(ticks);
						},
					],
				},
				// a dashed line shows dashed in the legend too (uPlot draws every marker solid)
				legend: { show: true, live: false, markers: { dash: (u, i) => (u.series[i].dash ? 'dashed' : 'solid') } },
			},
			[xs, ...series.map((s) => s.values)],
			ref.current,
		);
		return () => plot.destroy();
	}, [xs, series]);
	const summary = series
		.map((s) => {
			const v = s.values.filter((x) => x !== null && x !== undefined);
			return v.length ? `${s.label}: last ${fmtNum(v[v.length - 1])} ${unit}, max ${fmtNum(Math.max(...v))} ${unit}` : `${s.label}: no data`;
		})
		.join('; ');
	return (
		<figure class="chart">
			<figcaption>{title}</figcaption>
			<div ref={ref} role="img" aria-label={`${title}: ${summary || 'no data'}`} />
		</figure>
	);
}
