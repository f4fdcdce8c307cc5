// Usage and cost: per project and per pool, allocated versus measured
// GPU-hours, the idle cost (the same split the FOCUS export uses), the
// top hoarders, usage by month, and the billing export jobs with download.
import { useEffect, useState } from 'preact/hooks';
import * as api from '../api.js';
import { exportDone, exportText, followExport } from '../exports.js';
import { Badge, Loading, Problem, Table, busyProps, fmtInt, fmtMoney, fmtNum, fmtPct, fmtTime, useAction, useLoad } from '../ui.jsx';

function monthRange(ym) {
	const [y, m] = ym.split('-').map(Number);
	const from = new Date(Date.UTC(y, m - 1, 1));
	const to = new Date(Date.UTC(y, m, 1));
	const now = new Date();
	return { from: from.toISOString().slice(0, 19) + 'Z', to: (to > now ? now : to).toISOString().slice(0, 19) + 'Z' };
}

function lastMonths(n) {
	const out = [];
	const d = new Date();
	for (let i = 0; i < n; i++) {
		const x = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - i, 1));
		out.push(x.toISOString().slice(0, 7));
	}
	return out;
}

// The report answers one row per key and currency, and a row without a
// currency for hours no rate has billed yet: one row per project (or pool)
// and currency, the unbilled hours folded into the billed row when the key
// has one currency only.
export function mergeUsage(rows, keyOf) {
	const groups = new Map();
	for (const r of rows || []) {
		const k = keyOf(r);
		if (!groups.has(k)) groups.set(k, []);
		groups.get(k).push(r);
	}
	const out = [];
	for (const list of groups.values()) {
		const currencies = [...new Set(list.map((r) => r.currency).filter(Boolean))];
		const byCur = new Map();
		for (const r of list) {
			const cur = r.currency || (currencies.length === 1 ? currencies[0] : null);
			const m = byCur.get(cur);
			if (!m) {
				byCur.set(cur, { ...r, currency: cur });
				continue;
			}
			const w = (m.allocated_gpu_hours || 0) + (r.allocated_gpu_hours || 0);
			m.average_activity =
				w > 0
					? ((m.average_activity || 0) * (m.allocated_gpu_hours || 0) + (r.average_activity || 0) * (r.allocated_gpu_hours || 0)) / w
					: m.average_activity;
			for (const f of ['allocated_gpu_hours', 'measured_gpu_hours', 'idle_gpu_hours', 'billed_micro', 'idle_cost_micro'])
				m[f] = (m[f] || 0) + (r[f] || 0);
		}
		out.push(...byCur.values());
	}
	return out;
}

// hours: a few seconds billed are not "0.0"
const fmtHours = (v) => (v > 0 && v < 0.05 ? '< 0.1' : fmtNum(v));

const utilColumns = (first) => [
	first,
	{ key: 'allocated_gpu_hours', label: 'Allocated GPU-h', num: true, render: (r) => fmtHours(r.allocated_gpu_hours) },
	{ key: 'measured_gpu_hours', label: 'Busy GPU-h', num: true, render: (r) => fmtHours(r.measured_gpu_hours) },
	{ key: 'idle_gpu_hours', label: 'Idle GPU-h', num: true, render: (r) => fmtHours(r.idle_gpu_hours) },
	{ key: 'average_activity', label: 'Avg activity', num: true, render: (r) => fmtPct(r.average_activity) },
	{ key: 'billed_micro', label: 'Billed', num: true, render: (r) => fmtMoney(r.billed_micro, r.currency) },
	{ key: 'idle_cost_micro', label: 'Idle cost', num: true, render: (r) => fmtMoney(r.idle_cost_micro, r.currency) },
];

function Exports({ me }) {
	const [list, error, reload] = useLoad(() => api.get('/v1/billing/exports', { limit: 50 }), []);
	const [msg, setMsg] = useState(null);
	const [err, setErr] = useState(null);
	// the job just created: followed until done or failed, then the list
	// reloads and offers its download
	const [job, setJob] = useState(null);
	const act = useAction();
	const canCreate = me.role === 'admin' || me.role === 'billing';
	useEffect(() => {
		if (!job || exportDone(job)) return undefined;
		return followExport(
			job.id,
			(x) => {
				setErr(null);
				setMsg(exportText(x));
				if (exportDone(x)) {
					setJob(x);
					reload();
				}
			},
			setErr,
		);
	}, [job?.id, job && exportDone(job)]);
	const create = async (e) => {
		e.preventDefault();
		if (act.running) return;
		const f = new FormData(e.currentTarget);
		setErr(null);
		try {
			const x = await act.post('/v1/billing/exports', { format: String(f.get('format')), period: String(f.get('period')) });
			setMsg(exportText(x));
			setJob(x);
			reload();
		} catch (ex) {
			setErr(ex);
		}
	};
	const download = async (x) => {
		setErr(null);
		try {
			const blob = await api.request('GET', `/v1/billing/exports/${x.id}/download`, { blob: true });
			const url = URL.createObjectURL(blob);
			const a = document.createElement('a');
			a.href = url;
			a.download = `gpupool-${x.period || x.id}.${x.format === 'jsonl' ? 'jsonl' : 'csv'}`;
			document.body.appendChild(a);
			a.click();
			a.remove();
			setTimeout(() => URL.revokeObjectURL(url), 10000);
		} catch (ex) {
			setErr(ex);
		}
	};
	return (
		<section aria-labelledby="h-exports">
			<h2 id="h-exports">Billing exports</h2>
			{canCreate && (
				<form class="inline" onSubmit={create} aria-label="New export">
					<label>
						Period
						<select name="period">
							{lastMonths(12).map((m) => (
								<option value={m}>{m}</option>
							))}
						</select>
					</label>
					<label>
						Format
						<select name="format">
							<option value="focus">FOCUS 1.4</option>
							<option value="csv">CSV</option>
							<option value="jsonl">JSON Lines</option>
						</select>
					</label>
					<button type="submit" {...busyProps(act.busy)}>
						Export
					</button>
					{msg && (
						<span role="status" aria-busy={job && !exportDone(job) ? 'true' : 'false'}>
							{msg}
						</span>
					)}
				</form>
			)}
			<Problem error={error || err} />
			{list && (
				<Table
					caption="Export jobs, newest first"
					rowKey={(x) => x.id}
					columns={[
						{ key: 'id', label: 'Id', num: true },
						{ key: 'period', label: 'Period', render: (x) => x.period || `${fmtTime(x.from)} – ${fmtTime(x.to)}` },
						{ key: 'format', label: 'Format' },
						{ key: 'state', label: 'State', render: (x) => <Badge value={x.state} /> },
						{ key: 'rows', label: 'Rows', num: true, render: (x) => fmtInt(x.rows) },
						{ key: 'bytes', label: 'Bytes', num: true, render: (x) => fmtInt(x.bytes) },
						{ key: 'sha256', label: 'SHA-256', render: (x) => (x.sha256 ? <code title={x.sha256}>{x.sha256.slice(0, 12)}…</code> : '—') },
						{
							key: 'dl',
							label: 'File',
							render: (x) =>
								x.state === 'done' ? (
									<button type="button" class="secondary" onClick={() => download(x)} aria-label={`Download export ${x.id}`}>
										Download
									</button>
								) : (
									x.error || ''
								),
						},
					]}
					rows={list.items}
					empty="No exports yet."
				/>
			)}
		</section>
	);
}

export function Usage({ me }) {
	const [month, setMonth] = useState(lastMonths(1)[0]);
	const range = monthRange(month);
	const [byProject, e1] = useLoad(() => api.get('/v1/reports/utilization', { ...range, group_by: 'project' }), [month]);
	const [byPool, e2] = useLoad(() => api.get('/v1/reports/utilization', { ...range, group_by: 'pool' }), [month]);
	const [monthly, e3] = useLoad(() => api.get('/v1/billing/usage', { group_by: 'month', limit: 200 }), []);
	const projectRows = mergeUsage(byProject?.rows, (r) => r.project);
	const poolRows = mergeUsage(byPool?.rows, (r) => `${r.project}/${r.pool}/${r.pool_id}`);
	const hoarders = poolRows
		.filter((r) => r.idle_gpu_hours > 0)
		.sort((a, b) => b.idle_gpu_hours - a.idle_gpu_hours)
		.slice(0, 5);
	const staff = me.role !== 'none';
	return (
		<section aria-labelledby="h-usage">
			<h1 id="h-usage">Usage and cost</h1>
			<label>
				Month{' '}
				<select value={month} onChange={(e) => setMonth(e.currentTarget.value)}>
					{lastMonths(12).map((m) => (
						<option value={m}>{m}</option>
					))}
				</select>
			</label>
			<Problem error={e1 || e2 || e3} />
			{!byProject && !e1 && <Loading what="utilization" />}
			{byProject && (
				<Table
					caption={`Per project, ${month}${byProject.totals ? ` · total billed ${fmtMoney(byProject.totals.billed_micro, byProject.totals.currency)}, idle ${fmtMoney(byProject.totals.idle_cost_micro, byProject.totals.currency)}` : ''}`}
					rowKey={(r) => `${r.project}/${r.currency}`}
					columns={utilColumns({ key: 'project', label: 'Project' })}
					rows={projectRows}
					empty="No usage in this month."
				/>
			)}
			<h2>Top hoarders</h2>
			<Table
				caption="Pools with the most allocated but idle GPU-hours"
				columns={utilColumns({
					key: 'pool',
					label: 'Pool',
					render: (r) => (r.pool_id ? <a href={`#/pool/${r.pool_id}`}>{`${r.project}/${r.pool}`}</a> : `${r.project}/${r.pool}`),
				})}
				rows={hoarders}
				empty="No idle allocations."
			/>
			{byPool && (
				<Table
					caption={`Per pool, ${month}`}
					columns={utilColumns({ key: 'pool', label: 'Pool', render: (r) => `${r.project}/${r.pool}` })}
					rows={poolRows}
					empty="No usage in this month."
				/>
			)}
			<h2>Usage by month</h2>
			{monthly && (
				<Table
					caption="Billed amounts per month and kind"
					columns={[
						{ key: 'period', label: 'Month' },
						{ key: 'kind', label: 'Kind' },
						{ key: 'instance_seconds', label: 'Instance-hours', num: true, render: (r) => fmtNum(r.instance_seconds / 3600) },
						{ key: 'amount_micro', label: 'Amount', num: true, render: (r) => fmtMoney(r.amount_micro, r.currency) },
					]}
					rows={monthly.rows}
					empty="Nothing billed yet."
				/>
			)}
			{staff && <Exports me={me} />}
		</section>
	);
}
