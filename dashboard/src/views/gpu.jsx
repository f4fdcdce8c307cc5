// One GPU: its slice layout and its power, activity, memory and
// temperature over time (GET /v1/gpus/{gpu}/metrics), one line per device
// (the whole GPU and each MIG instance, labelled with its pool; src/gpuseries.js).
import { useMemo, useState } from 'preact/hooks';
import * as api from '../api.js';
import { deviceSeries } from '../gpuseries.js';
import { Badge, Chart, Loading, Problem, SliceBar, SliceLegend, Table, analyseGpu, fmtTime, gpuState, poolHue, useLoad } from '../ui.jsx';
import { freeText, useCatalog, usePools } from './capacity.jsx';

const RANGES = [
	{ label: '1 hour', s: 3600, step: 'raw' },
	{ label: '6 hours', s: 6 * 3600, step: '60' },
	{ label: '24 hours', s: 86400, step: '300' },
	{ label: '7 days', s: 7 * 86400, step: '3600' },
];

const iso = (d) => d.toISOString().slice(0, 19) + 'Z';

export function GpuPage({ arg }) {
	const [, catalog] = useCatalog();
	const [range, setRange] = useState(0);
	const [gpu, error] = useLoad(() => api.get(`/v1/gpus/${api.enc(arg)}`), [arg]);
	const shown = useMemo(() => (gpu ? [gpu] : []), [gpu]);
	const pools = usePools(shown);
	const [m, mErr] = useLoad(() => {
		const to = new Date();
		const r = RANGES[range];
		return api.get(`/v1/gpus/${api.enc(arg)}/metrics`, { from: iso(new Date(to.getTime() - r.s * 1000)), to: iso(to), step: r.step });
	}, [arg, range]);
	const data = useMemo(
		() => (m ? Object.fromEntries(['power_w', 'sm_active', 'memory_used_mib', 'temperature_c'].map((k) => [k, deviceSeries(m, k, gpu, pools)])) : null),
		[m, gpu, pools],
	);
	if (error) return <Problem error={error} />;
	if (!gpu) return <Loading what="the GPU" />;
	const a = analyseGpu(gpu, catalog[gpu.model]?.profiles);
	const charts = m && [
		['Power', 'power_w', 'W'],
		['SM activity', 'sm_active', 'ratio'],
		['Memory used', 'memory_used_mib', 'MiB'],
		['Temperature', 'temperature_c', '°C'],
	];
	return (
		<section aria-labelledby="h-gpu">
			<h1 id="h-gpu">
				{gpu.node} · GPU {gpu.index}
			</h1>
			<dl class="facts">
				<dt>UUID</dt>
				<dd>{gpu.uuid}</dd>
				<dt>Model</dt>
				<dd>
					{gpu.model} {gpu.mig_enabled ? '(MIG enabled)' : '(whole GPU)'}
				</dd>
				<dt>State</dt>
				<dd>
					<Badge value={gpuState(gpu)} /> {gpu.health_reason || ''}
					{gpuState(gpu) === 'unavailable' && 'its node takes no placements (agent silent, cordoned, drained or down)'}
				</dd>
				<dt>Updated</dt>
				<dd>{fmtTime(gpu.updated_at)}</dd>
				<dt>Free placements</dt>
				<dd>{gpuState(gpu) === 'ok' ? freeText(a) : `none while the GPU is ${gpuState(gpu)}`}</dd>
			</dl>
			<SliceBar gpu={gpu} profiles={catalog[gpu.model]?.profiles} pools={pools} />
			<SliceLegend gpus={shown} pools={pools} />
			<Table
				caption="Instances on this GPU"
				rowKey={(e) => `${e.profile}@${e.start}`}
				columns={[
					{ key: 'profile', label: 'Profile' },
					{ key: 'slices', label: 'Memory slices', render: (e) => (e.size === 1 ? `${e.start}` : `${e.start}–${e.start + e.size - 1}`) },
					{ key: 'state', label: 'State', render: (e) => <Badge value={e.state} /> },
					{
						key: 'pool',
						label: 'Pool',
						render: (e) =>
							e.pool_id === null || e.pool_id === undefined ? (
								'outside any pool'
							) : (
								<span>
									<span class="sw pool" style={{ '--h': poolHue(e.pool_id) }} aria-hidden="true" />{' '}
									<a href={`#/pool/${e.pool_id}`}>
										{pools[e.pool_id] ? `${pools[e.pool_id].project}/${pools[e.pool_id].name}` : `pool ${e.pool_id}`}
									</a>
								</span>
							),
					},
					{ key: 'device', label: 'Device', render: (e) => e.device_uuid || (gpu.mig_enabled ? '—' : 'the whole GPU') },
				]}
				rows={gpu.layout}
				empty="No instances: the GPU is empty."
			/>
			<div class="inline" role="group" aria-label="Time range">
				{RANGES.map((r, i) => (
					<button type="button" class={i === range ? '' : 'secondary'} aria-pressed={i === range} onClick={() => setRange(i)}>
						{r.label}
					</button>
				))}
			</div>
			<Problem error={mErr} />
			{!m && !mErr && <Loading what="metrics" />}
			{m && m.series.length === 0 && <p>No samples in this range.</p>}
			{m && m.series.length > 0 && (
				<div class="charts">
					{charts.map(([title, key, unit]) => {
						const d = data[key];
						return <Chart title={title} xs={d.xs} series={d.series} unit={unit} />;
					})}
				</div>
			)}
		</section>
	);
}
