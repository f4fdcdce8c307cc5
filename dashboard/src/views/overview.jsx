// Overview: GPUs by model, pending approvals, open alerts, and allocated
// versus measured GPU-hours per day over the last two weeks.
import * as api from '../api.js';
import { Chart, Loading, Problem, Table, fmtInt, fmtNum, useLoad } from '../ui.jsx';

function daily(days) {
	const out = [];
	const today = new Date();
	today.setUTCHours(0, 0, 0, 0);
	for (let i = days - 1; i >= 0; i--) {
		const from = new Date(today.getTime() - i * 86400000);
		out.push({ from, to: new Date(from.getTime() + 86400000) });
	}
	return out;
}

export function Overview({ me }) {
	const staff = me.role === 'admin' || me.role === 'operator';
	const [cap, capErr] = useLoad(() => api.get('/v1/capacity'), []);
	const [counts] = useLoad(async () => {
		if (!staff) return null;
		const [reqs, alerts] = await Promise.all([
			api.get('/v1/pool-requests', { state: 'pending', limit: 200 }),
			api.get('/v1/alerts', { state: 'open', limit: 200 }),
		]);
		return {
			pending: reqs.items.length + (reqs.next_cursor ? '+' : ''),
			alerts: alerts.items.length + (alerts.next_cursor ? '+' : ''),
			critical: alerts.items.filter((a) => a.severity === 'critical').length,
		};
	}, [me.role]);
	const [trend, trendErr] = useLoad(async () => {
		const days = daily(14);
		const reports = await Promise.all(
			days.map((d) => api.get('/v1/reports/utilization', { from: d.from.toISOString().slice(0, 19) + 'Z', to: d.to.toISOString().slice(0, 19) + 'Z' })),
		);
		const sum = (r, k) => r.rows.reduce((a, x) => a + (x[k] || 0), 0);
		return {
			xs: days.map((d) => d.from.getTime() / 1000),
			series: [
				{ label: 'allocated GPU-hours', values: reports.map((r) => sum(r, 'allocated_gpu_hours')) },
				{ label: 'measured busy GPU-hours', values: reports.map((r) => sum(r, 'measured_gpu_hours')) },
			],
		};
	}, []);

	const rows = (cap?.models || []).map((m) => {
		const per = m.gpus.total ? m.memory_slices.total / m.gpus.total : 1;
		return {
			model: m.model,
			total: m.gpus.total,
			allocated: m.memory_slices.used / per,
			// free where a placement can land: not on a failed GPU, not on a node
			// that is unavailable (its agent silent, cordoned, drained, down)
			free: (m.memory_slices.available ?? m.memory_slices.free) / per,
			stranded: m.compute_slices.stranded,
			failed: m.gpus.total - m.gpus.healthy,
			unavailable: m.gpus.healthy - m.gpus.placeable,
		};
	});
	return (
		<section aria-labelledby="h-overview">
			<h1 id="h-overview">Overview</h1>
			{staff && counts && (
				<div class="cards">
					<a class="card" href="#/requests">
						<span class="big">{counts.pending}</span> pending approvals
					</a>
					<a class="card" href="#/health">
						<span class="big">{counts.alerts}</span> open alerts ({counts.critical} critical)
					</a>
				</div>
			)}
			<h2>GPUs by model</h2>
			<Problem error={capErr} />
			{cap === undefined && !capErr ? (
				<Loading what="capacity" />
			) : (
				<Table
					caption="Whole GPUs per model; allocated and free in GPU equivalents of memory slices (free: on healthy GPUs of available nodes only); stranded compute slices cannot be used by any profile; unavailable: healthy GPUs on a node that is not ready (its agent silent, cordoned, drained or down)"
					rowKey={(r) => r.model}
					columns={[
						{ key: 'model', label: 'Model' },
						{ key: 'total', label: 'Total', num: true, render: (r) => fmtInt(r.total) },
						{ key: 'allocated', label: 'Allocated', num: true, render: (r) => fmtNum(r.allocated) },
						{ key: 'free', label: 'Free', num: true, render: (r) => fmtNum(r.free) },
						{ key: 'stranded', label: 'Stranded slices', num: true, render: (r) => fmtInt(r.stranded) },
						{ key: 'failed', label: 'Failed or degraded', num: true, render: (r) => fmtInt(r.failed) },
						{ key: 'unavailable', label: 'Node unavailable', num: true, render: (r) => fmtInt(r.unavailable) },
					]}
					rows={rows}
					empty="No GPUs registered."
				/>
			)}
			<h2>Allocated versus used, last 14 days</h2>
			<Problem error={trendErr} />
			{trend ? <Chart title="GPU-hours per day" xs={trend.xs} series={trend.series} unit="GPU-h" /> : !trendErr && <Loading what="utilization" />}
		</section>
	);
}
