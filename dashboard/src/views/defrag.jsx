// defrag.jsx - the capacity view's Defragmentation panel (operators and
// admins): a form that asks for a plan, the plans, and a plan drawn: each
// GPU it touches as its slices before and after the moves, the moved
// instances highlighted with their move's number and where they go or come
// from, and a table of the moves with their states. Apply and Cancel ask
// for a confirmation, carry an Idempotency-Key and are busy until the
// answer; a plan being applied is followed until it ends.
import { useEffect, useState } from 'preact/hooks';
import * as api from '../api.js';
import {
	PLANS,
	barText,
	canApply,
	canCancel,
	defragModel,
	followPlan,
	moveStateLabel,
	placeText,
	planBody,
	planFollowed,
	planSettled,
	planStateLabel,
	touchedGpus,
} from '../defrag.js';
import { Badge, Problem, Table, busyProps, fmtInt, fmtTime, poolHue, useAction, useLoad } from '../ui.jsx';

const W = 30; // one memory slice
const H = 26; // one bar
const LABEL = 52; // room for "before" / "after"
const GAP = 22; // between the bars: the arrows

// One bar of a GPU at y: its instances, the moved ones highlighted.
function Bar({ insts, slices, y }) {
	return (
		<g>
			{Array.from({ length: slices }, (_, s) => (
				<rect x={LABEL + s * W} y={y} width={W - 2} height={H} class="slice free" />
			))}
			{insts.map((x) => (
				<g
					class={`inst${x.moved ? ` moved moved-${x.moved}` : ''}${x.pool_id === null ? ' unmanaged' : ''}`}
					style={{ '--h': poolHue(x.pool_id) }}
					data-move={x.move ?? ''}
				>
					<rect x={LABEL + x.start * W} y={y} width={Math.min(x.size, slices - x.start) * W - 2} height={H} rx={3} class="inst-r" />
					<text x={LABEL + x.start * W + (Math.min(x.size, slices - x.start) * W) / 2 - 1} y={y + H / 2 + 5} text-anchor="middle">
						{x.move ? `#${x.move}` : x.profile === 'full' ? 'full' : x.profile.split('.')[0]}
					</text>
				</g>
			))}
		</g>
	);
}

// A GPU the plan touches: before above, after below, an arrow from each
// instance moving within the GPU to where it lands; the moves to or from
// other GPUs listed under it.
function GpuMoves({ g }) {
	const width = LABEL + g.slices * W + 2;
	const height = 2 * H + GAP + 2;
	const yAfter = H + GAP;
	const centre = (x) => LABEL + x.start * W + (Math.min(x.size, g.slices - x.start) * W) / 2 - 1;
	const within = g.before.filter((x) => x.moved === 'out').map((x) => ({ from: x, to: g.after.find((y) => y.moved === 'in' && y.move === x.move) }));
	const label = `GPU ${g.index} of ${g.node}${g.model ? `, ${g.model}` : ''}. Before: ${barText(g.before)}. After: ${barText(g.after)}.`;
	const lines = [];
	for (const x of g.before) if (x.moved === 'out') lines.push(`#${x.move} ${x.profile} @${x.start} → ${placeText(x.to)}`);
	for (const x of g.after) if (x.moved === 'in') lines.push(`#${x.move} ${x.profile} @${x.start} ← ${placeText(x.from)}`);
	return (
		<figure class="defrag-gpu" data-gpu={g.uuid}>
			<figcaption>
				{g.node} · GPU {g.index}
				{g.model ? ` (${g.model})` : ''}
			</figcaption>
			<svg class="slicebar defrag-bars" role="img" aria-label={label} width={width} height={height} viewBox={`0 0 ${width} ${height}`}>
				<title>{label}</title>
				<text x={0} y={H / 2 + 5} class="bar-label">
					before
				</text>
				<text x={0} y={yAfter + H / 2 + 5} class="bar-label">
					after
				</text>
				<Bar insts={g.before} slices={g.slices} y={1} />
				<Bar insts={g.after} slices={g.slices} y={yAfter} />
				{within
					.filter((w) => w.to)
					.map((w) => (
						<line x1={centre(w.from)} y1={H + 2} x2={centre(w.to)} y2={yAfter - 2} class="move-arrow" />
					))}
			</svg>
			<ul class="defrag-lines">
				{lines.map((l) => (
					<li>{l}</li>
				))}
			</ul>
		</figure>
	);
}

function PlanDrawing({ plan, catalog }) {
	const [gpus, setGpus] = useState({});
	const [error, setError] = useState(null);
	const uuids = touchedGpus(plan);
	// the GPUs as they are now, again whenever a move has changed
	const stamp = (plan.moves || []).map((m) => m.state || '').join(',');
	useEffect(() => {
		let live = true;
		Promise.all(
			uuids.slice(0, 60).map((u) =>
				api.get(`/v1/gpus/${api.enc(u)}`).then(
					(g) => [u, g],
					() => [u, null],
				),
			),
		).then(
			(pairs) => live && setGpus(Object.fromEntries(pairs.filter(([, g]) => g))),
			(err) => live && setError(err),
		);
		return () => {
			live = false;
		};
	}, [plan.id, stamp]);
	const model = defragModel(plan, gpus, (m) => catalog[m]?.profiles);
	return (
		<div class="defrag-drawing" aria-label={`Moves of plan ${plan.id} drawn per GPU`} role="group">
			<Problem error={error} />
			{model.length === 0 && <p>No moves: the plan changes nothing.</p>}
			{model.map((g) => (
				<GpuMoves g={g} />
			))}
		</div>
	);
}

function PlanDetail({ plan, setPlan, catalog, onChanged, onFleetChanged }) {
	const act = useAction();
	const [confirm, setConfirm] = useState(null); // 'apply' | 'cancel'
	const [error, setError] = useState(null);
	// a plan being applied is followed until it ends
	useEffect(() => {
		if (!planFollowed(plan)) return undefined;
		return followPlan(
			plan.id,
			(p) => {
				setError(null);
				setPlan(p);
				if (planSettled(p)) {
					onChanged();
					onFleetChanged();
				}
			},
			setError,
		);
	}, [plan.id, planFollowed(plan)]);
	const run = async (what) => {
		if (act.running) return;
		setError(null);
		try {
			const p = await act.post(`${PLANS}/${plan.id}/${what}`, {});
			if (p) {
				setConfirm(null);
				setPlan(p);
				onChanged();
			}
		} catch (err) {
			setError(err);
		}
	};
	const moves = plan.moves || [];
	const tenants = (plan.tenants || []).join(', ') || 'none';
	return (
		<section class="panel defrag-plan" aria-labelledby="h-defrag-plan">
			<h3 id="h-defrag-plan">
				Plan {plan.id}: <Badge value={plan.state} />
			</h3>
			<p class="defrag-summary">
				{plan.goal === 'items' ? `Make room for ${(plan.items || []).join(', ')}` : 'Empty as many GPUs as possible'}
				{plan.cluster ? ` in cluster ${plan.cluster}` : ''}; {fmtInt(moves.length)} {moves.length === 1 ? 'move' : 'moves'} of idle instances (at most{' '}
				{fmtInt(plan.max_moves)}, idle for {fmtInt(plan.idle_minutes)} min).{' '}
				{plan.goal === 'items' && `Placeable before: ${plan.placeable_before ? 'yes' : 'no'}, after: ${plan.placeable_after ? 'yes' : 'no'}. `}
				Empty GPUs: {fmtInt(plan.free_gpus_before)} → {fmtInt(plan.free_gpus_after)}. Projects touched: {tenants}. {planStateLabel(plan.state)}
				{plan.progress &&
					` — ${fmtInt(plan.progress.done)} done, ${fmtInt(plan.progress.running)} running, ${fmtInt(plan.progress.pending)} waiting, ${fmtInt(
						plan.progress.skipped,
					)} skipped, ${fmtInt(plan.progress.failed)} failed`}
				{plan.error && ` — ${plan.error}`}
			</p>
			<div class="defrag-actions">
				{canApply(plan) && (
					<button type="button" onClick={() => setConfirm('apply')} {...busyProps(act.busy)}>
						Apply plan {plan.id}
					</button>
				)}
				{canCancel(plan) && (
					<button type="button" class="secondary" onClick={() => setConfirm('cancel')} {...busyProps(act.busy)}>
						Cancel plan {plan.id}
					</button>
				)}
			</div>
			{confirm && (
				<div class="confirm" role="group" aria-label={`Confirm: ${confirm} plan ${plan.id}`}>
					<p>
						{confirm === 'apply'
							? `Apply plan ${plan.id}? ${moves.length} instances of ${tenants} move to other slices (their MIG devices change).`
							: `Cancel plan ${plan.id}? The moves not started are skipped.`}
					</p>
					<button type="button" onClick={() => run(confirm)} {...busyProps(act.busy)}>
						{confirm === 'apply' ? 'Yes, apply' : 'Yes, cancel the plan'}
					</button>
					<button type="button" class="secondary" onClick={() => setConfirm(null)} disabled={act.busy}>
						No
					</button>
				</div>
			)}
			<Problem error={error} />
			<PlanDrawing plan={plan} catalog={catalog} />
			<Table
				caption={`Moves of plan ${plan.id}`}
				rowKey={(m) => m.allocation}
				columns={[
					{ key: 'n', label: '#', num: true, render: (m) => moves.indexOf(m) + 1 },
					{ key: 'allocation', label: 'Instance', render: (m) => `${m.profile} (allocation ${m.allocation})` },
					{ key: 'pool', label: 'Pool', render: (m) => `${m.project ?? '—'}/${m.pool ?? '—'}` },
					{ key: 'from', label: 'From', render: (m) => placeText(m.from) },
					{ key: 'to', label: 'To', render: (m) => placeText(m.to) },
					{ key: 'mode', label: 'Mode', render: (m) => (m.make_before_break ? 'make before break' : 'break before make') },
					{
						key: 'state',
						label: 'State',
						render: (m) => (
							<span class={`move-state ms-${plan.state === 'planned' ? 'planned' : m.state || 'planned'}`}>{moveStateLabel(m, plan)}</span>
						),
					},
				]}
				rows={moves}
				empty="No moves."
			/>
		</section>
	);
}

export function Defrag({ catalog, clusters, onFleetChanged = () => {} }) {
	const act = useAction();
	const [goal, setGoal] = useState('items');
	const [plan, setPlan] = useState(null);
	const [error, setError] = useState(null);
	const [list, listErr, reload] = useLoad(() => api.get(PLANS, { limit: 20 }), []);
	const create = async (e) => {
		e.preventDefault();
		if (act.running) return;
		const f = Object.fromEntries(new FormData(e.currentTarget));
		setError(null);
		try {
			const p = await act.post(PLANS, planBody({ ...f, goal }));
			if (p) {
				setPlan(p);
				reload();
			}
		} catch (err) {
			setError(err);
		}
	};
	const open = async (id) => {
		setError(null);
		try {
			setPlan(await api.get(`${PLANS}/${id}`));
		} catch (err) {
			setError(err);
		}
	};
	return (
		<section class="panel defrag" aria-labelledby="h-defrag">
			<h2 id="h-defrag">Defragmentation</h2>
			<form class="inline" onSubmit={create} aria-label="Plan a defragmentation">
				<label>
					Goal
					<select name="goal" value={goal} onChange={(e) => setGoal(e.currentTarget.value)}>
						<option value="items">make room for a request</option>
						<option value="free_gpus">empty whole GPUs</option>
					</select>
				</label>
				{goal === 'items' && (
					<label>
						Request to place <input name="items" placeholder="H100-80GB/7g.80gb=2" required size={30} />
					</label>
				)}
				<label>
					Cluster
					<select name="cluster">
						<option value="">any</option>
						{(clusters || []).map((c) => (
							<option value={c.name}>{c.name}</option>
						))}
					</select>
				</label>
				<label>
					Max moves <input name="max_moves" type="number" min={0} max={100000} size={6} placeholder="1 %" />
				</label>
				<label>
					Idle minutes <input name="idle_minutes" type="number" min={0} max={10080} size={6} placeholder="60" />
				</label>
				<button type="submit" {...busyProps(act.busy)}>
					Plan
				</button>
			</form>
			<Problem error={error} />
			<Problem error={listErr} />
			{list && (
				<Table
					caption="Defragmentation plans"
					rowKey={(p) => p.id}
					columns={[
						{
							key: 'id',
							label: 'Plan',
							render: (p) => (
								<button type="button" class="link" onClick={() => open(p.id)} aria-label={`Show plan ${p.id}`}>
									{p.id}
								</button>
							),
						},
						{ key: 'state', label: 'State', render: (p) => <Badge value={p.state} /> },
						{ key: 'goal', label: 'Goal', render: (p) => (p.goal === 'items' ? (p.items || []).join(', ') : 'empty GPUs') },
						{ key: 'cluster', label: 'Cluster', render: (p) => p.cluster ?? 'any' },
						{ key: 'moves_total', label: 'Moves', num: true, render: (p) => fmtInt(p.moves_total) },
						{ key: 'done', label: 'Done', num: true, render: (p) => fmtInt(p.progress?.done) },
						{ key: 'created_by', label: 'By' },
						{ key: 'created_at', label: 'Created', render: (p) => fmtTime(p.created_at) },
					]}
					rows={list.items || []}
					empty="No plans yet."
				/>
			)}
			{plan && <PlanDetail key={plan.id} plan={plan} setPlan={setPlan} catalog={catalog} onChanged={reload} onFleetChanged={onFleetChanged} />}
		</section>
	);
}
