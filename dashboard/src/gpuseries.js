// gpuseries.js - the GPU page's chart series, pure (tests/unit/gpuseries.test.mjs):
// GET /v1/gpus/{gpu}/metrics answers {series: [{device_uuid, points: [{ts, …}]}]},
// one series per device (the whole GPU, or each MIG device); a chart wants
// one x axis (unix seconds, the union of every device's timestamps) and one
// line per device, null where a device has no point at that time.

// Pools' hues (ui.jsx re-exports them; kept here so this module needs no DOM).
export const POOL_HUES = [210, 275, 320, 190, 240, 295, 225, 260];
export const poolHue = (id) => POOL_HUES[Math.abs(Number(id) || 0) % POOL_HUES.length];

const short = (uuid) => (uuid.length > 16 ? `${uuid.slice(0, 12)}…` : uuid);

// What a device is on this GPU: the whole GPU, or the instance of the
// layout whose device it is (with its pool), or unknown (a device the
// layout no longer lists).
function describe(device, gpu, pools) {
	if (gpu && device === gpu.uuid) return { label: 'whole GPU', pool: null };
	const e = (gpu?.layout || []).find((x) => x.device_uuid === device);
	if (!e) return { label: short(device), pool: null };
	const slices = e.size === 1 ? `${e.start}` : `${e.start}–${e.start + e.size - 1}`;
	let label = `${e.profile} (slices ${slices})`;
	const pool = e.pool_id === null || e.pool_id === undefined ? null : e.pool_id;
	if (pool !== null) {
		const p = pools && pools[pool];
		label += ` · ${p ? `${p.project}/${p.name}` : `pool ${pool}`}`;
	}
	return { label, pool };
}

// The series of one metric (key: power_w, sm_active, …) of a metrics answer:
// {xs, series: [{device, label, values, stroke, dash}]}. The whole GPU comes
// first and draws grey; an instance in a pool draws in its pool's hue; one
// outside any pool, or a second line of the same hue, draws dashed.
export function deviceSeries(metrics, key, gpu, pools) {
	const all = metrics?.series || [];
	const xsSet = new Set();
	for (const s of all) for (const p of s.points || []) xsSet.add(Date.parse(p.ts) / 1000);
	const xs = [...xsSet].sort((a, b) => a - b);
	const index = new Map(xs.map((x, i) => [x, i]));
	const described = all.map((s) => ({ s, d: describe(s.device_uuid, gpu, pools) }));
	const rank = (x) => (gpu && x.s.device_uuid === gpu.uuid ? 0 : 1);
	described.sort((a, b) => rank(a) - rank(b));
	const usedHues = new Set();
	let free = 0;
	const series = described.map(({ s, d }) => {
		const values = new Array(xs.length).fill(null);
		for (const p of s.points || []) {
			const v = p[key];
			values[index.get(Date.parse(p.ts) / 1000)] = v === undefined ? null : v;
		}
		let stroke;
		let dash = null;
		if (gpu && s.device_uuid === gpu.uuid) stroke = 'hsl(0 0% 35%)';
		else {
			const hue = d.pool !== null ? poolHue(d.pool) : POOL_HUES[free++ % POOL_HUES.length];
			if (d.pool === null || usedHues.has(hue)) dash = [6, 3];
			usedHues.add(hue);
			stroke = `hsl(${hue} 70% 35%)`;
		}
		return { device: s.device_uuid, label: d.label, values, stroke, dash };
	});
	return { xs, series };
}

// Time axis labels that never overlap: at least TIME_AXIS_SPACE CSS pixels
// per tick (an "HH:MM:SS" label is ~55 px wide; uPlot's own labels, two
// lines at minute ticks, crowded each other at 1 hour), seconds only when
// the data spans 10 minutes or less, the date only when it spans days.
export const TIME_AXIS_SPACE = 80;
const two = (n) => String(n).padStart(2, '0');
export function timeLabel(ts, spanS) {
	const d = new Date(ts * 1000);
	const hm = `${two(d.getHours())}:${two(d.getMinutes())}`;
	if (spanS > 86400) return `${d.getMonth() + 1}/${d.getDate()} ${hm}`;
	return spanS <= 600 ? `${hm}:${two(d.getSeconds())}` : hm;
}
