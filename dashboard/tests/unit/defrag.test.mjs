// defrag.test.mjs - the Defragmentation panel's logic (src/defrag.js) in
// Node: who sees it, the request body from the form, the drawing model of a
// plan (each GPU touched, its instances before and after, the moved ones
// numbered; counts equal to the plan's moves whatever its progress), the
// state labels, and a plan followed until it ends.
import assert from 'node:assert/strict';
import { test } from 'node:test';

const store = new Map();
globalThis.sessionStorage = {
	getItem: (k) => (store.has(k) ? store.get(k) : null),
	setItem: (k, v) => store.set(k, String(v)),
	removeItem: (k) => store.delete(k),
};
let answer;
const calls = [];
globalThis.fetch = async (url, init) => {
	calls.push({ url, init });
	return answer(url);
};
const json = (status, body) =>
	new Response(JSON.stringify(body), { status, headers: { 'Content-Type': status >= 400 ? 'application/problem+json' : 'application/json' } });

const d = await import('../../src/defrag.js');

const A = 'GPU-a';
const B = 'GPU-b';
const place = (uuid, node, idx, start) => ({ node, gpu_uuid: uuid, gpu_index: idx, start });
// a plan of two moves: 1g.10gb of ml/web from GPU 1 of n1 to GPU 0 (slice 6),
// and 2g.20gb of ml/train within GPU 0 (slice 0 -> slice 4)
const plan = (states = [{}, {}]) => ({
	id: 7,
	state: 'planned',
	moves: [
		{
			allocation: 11,
			project: 'ml',
			pool: 'web',
			profile: '1g.10gb',
			from: place(B, 'n1', 1, 2),
			to: place(A, 'n1', 0, 6),
			make_before_break: true,
			...states[0],
		},
		{
			allocation: 12,
			project: 'ml',
			pool: 'train',
			profile: '2g.20gb',
			from: place(A, 'n1', 0, 0),
			to: place(A, 'n1', 0, 4),
			make_before_break: false,
			...states[1],
		},
	],
});
const profiles = [
	{ name: '1g.10gb', memory_slices: 1 },
	{ name: '2g.20gb', memory_slices: 2 },
	{ name: '3g.40gb', memory_slices: 4 },
];
const entry = (allocation_id, profile, start, size, pool_id = 3) => ({ allocation_id, profile, start, size, pool_id, state: 'ready' });
// the GPUs as the plan found them: A holds 12 at 0 and a 1g at 2 (not moved); B holds 11 at 2
const gpusBefore = {
	[A]: { uuid: A, model: 'H100-80GB', memory_slices: 8, layout: [entry(12, '2g.20gb', 0, 2, 4), entry(13, '1g.10gb', 2, 1)] },
	[B]: { uuid: B, model: 'H100-80GB', memory_slices: 8, layout: [entry(11, '1g.10gb', 2, 1, 5)] },
};
const brief = (insts) => insts.map((x) => `${x.profile}@${x.start}${x.moved ? `:${x.moved}#${x.move}` : ''}`).join(' ');

test('only operators and admins get the panel', () => {
	assert.equal(d.canDefrag({ role: 'admin' }), true);
	assert.equal(d.canDefrag({ role: 'operator' }), true);
	assert.equal(d.canDefrag({ role: 'billing' }), false);
	assert.equal(d.canDefrag({ role: 'none' }), false);
	assert.equal(d.canDefrag(null), false);
});

test('the plan form becomes the request body', () => {
	assert.deepEqual(d.planBody({ goal: 'items', items: ' H100-80GB/7g.80gb=2,  H100-80GB/1g.10gb=1 ', cluster: 'eu1', max_moves: '10', idle_minutes: '0' }), {
		goal: 'items',
		items: ['H100-80GB/7g.80gb=2', 'H100-80GB/1g.10gb=1'],
		cluster: 'eu1',
		max_moves: 10,
		idle_minutes: 0,
	});
	// free GPUs: no items; empty fields left out (the server's defaults)
	assert.deepEqual(d.planBody({ goal: 'free_gpus', items: 'ignored', cluster: '', max_moves: '', idle_minutes: ' ' }), { goal: 'free_gpus' });
});

test('drawing model: each GPU touched once, before and after, the moved instances numbered', () => {
	const m = d.defragModel(plan(), gpusBefore, () => profiles);
	assert.deepEqual(
		m.map((g) => g.uuid),
		[B, A],
	);
	const [b, a] = m;
	assert.equal(b.node, 'n1');
	assert.equal(b.index, 1);
	assert.equal(a.index, 0);
	assert.equal(a.slices, 8);
	assert.equal(brief(b.before), '1g.10gb@2:out#1');
	assert.equal(brief(b.after), '');
	assert.equal(brief(a.before), '2g.20gb@0:out#2 1g.10gb@2');
	assert.equal(brief(a.after), '1g.10gb@2 2g.20gb@4:in#2 1g.10gb@6:in#1');
	// sizes from the catalog, pools from the instance's entry
	assert.equal(a.after.find((x) => x.move === 2).size, 2);
	assert.equal(a.after.find((x) => x.move === 2).pool_id, 4);
	assert.deepEqual(a.after.find((x) => x.move === 1).from, place(B, 'n1', 1, 2));
	// one arrival per move: what the browser test counts
	const arrivals = m.flatMap((g) => g.after.filter((x) => x.moved === 'in'));
	assert.equal(arrivals.length, plan().moves.length);
	assert.equal(m.flatMap((g) => g.before.filter((x) => x.moved === 'out')).length, 2);
});

test('drawing model: the same once moves are done (the layout shows the new instances)', () => {
	// move 1 done (new allocation 21 on A at 6, 11 gone), move 2 creating (22 reserved at 4, 12 still at 0)
	const gpusNow = {
		[A]: {
			uuid: A,
			model: 'H100-80GB',
			memory_slices: 8,
			layout: [entry(12, '2g.20gb', 0, 2, 4), entry(13, '1g.10gb', 2, 1), entry(22, '2g.20gb', 4, 2, 4), entry(21, '1g.10gb', 6, 1, 5)],
		},
		[B]: { uuid: B, model: 'H100-80GB', memory_slices: 8, layout: [] },
	};
	const p = plan([
		{ state: 'done', new_allocation: 21 },
		{ state: 'creating', new_allocation: 22 },
	]);
	const [b, a] = d.defragModel(p, gpusNow, () => profiles);
	assert.equal(brief(b.before), '1g.10gb@2:out#1');
	assert.equal(brief(a.before), '2g.20gb@0:out#2 1g.10gb@2');
	assert.equal(brief(a.after), '1g.10gb@2 2g.20gb@4:in#2 1g.10gb@6:in#1');
	// a new instance the plan does not name yet (its number comes later) is not drawn twice
	const early = plan([{ state: 'reserving' }, {}]);
	const [, a2] = d.defragModel(early, gpusNow, () => profiles);
	assert.equal(brief(a2.after), '1g.10gb@2 2g.20gb@4:in#2 1g.10gb@6:in#1');
});

test('drawing model: a skipped move leaves its instance where it was', () => {
	const p = plan([{ state: 'skipped', reason: 'source_busy' }, { state: 'done' }]);
	const [b, a] = d.defragModel(p, gpusBefore, () => profiles);
	assert.equal(brief(b.after), '1g.10gb@2:stayed#1');
	assert.equal(brief(a.after), '1g.10gb@2 2g.20gb@4:in#2');
	assert.equal(d.barText(b.after), '1g.10gb on slice 2, stays (move 1 skipped)');
	assert.equal(d.barText(a.after), '1g.10gb on slice 2; 2g.20gb on slices 4–5, arrives by move 2');
	assert.equal(d.barText([]), 'empty');
});

test('drawing model: GPUs not read are drawn with the moves alone; no moves, nothing drawn', () => {
	const m = d.defragModel(plan(), {}, () => null);
	assert.equal(m.length, 2);
	assert.equal(m[1].slices, 8);
	assert.equal(brief(m[1].after), '2g.20gb@4:in#2 1g.10gb@6:in#1');
	assert.deepEqual(d.defragModel({ id: 1, moves: [] }), []);
	assert.deepEqual(d.touchedGpus(plan()), [B, A]);
});

test('state labels and what a plan offers', () => {
	assert.equal(d.moveStateLabel({}), 'planned');
	assert.equal(d.moveStateLabel({ state: 'pending' }), 'waiting');
	assert.equal(d.moveStateLabel({ state: 'pending' }, { state: 'applying' }), 'waiting');
	// a plan not applied: its pending moves are planned
	assert.equal(d.moveStateLabel({ state: 'pending' }, { state: 'planned' }), 'planned');
	assert.equal(d.moveStateLabel({ state: 'creating' }), 'creating the new instance');
	assert.equal(d.moveStateLabel({ state: 'skipped', reason: 'source_busy' }), 'skipped (source busy)');
	assert.equal(d.moveStateLabel({ state: 'failed', reason: 'agent_failed' }), 'failed (agent failed)');
	assert.equal(d.planStateLabel('planned'), 'planned, not applied');
	assert.equal(d.planStateLabel('applied'), 'applied');
	assert.deepEqual(
		['planned', 'applying', 'applied', 'failed', 'expired', 'cancelled'].map((s) => [
			d.canApply({ state: s }),
			d.canCancel({ state: s }),
			d.planDone({ state: s }),
		]),
		[
			[true, true, false],
			[false, true, false],
			[false, false, true],
			[false, false, true],
			[false, false, true],
			[false, false, true],
		],
	);
	// a cancelled plan with a move still running is followed until that move ends
	assert.equal(d.planFollowed({ state: 'planned' }), false);
	assert.equal(d.planFollowed({ state: 'applying', progress: { running: 0 } }), true);
	assert.equal(d.planFollowed({ state: 'cancelled', progress: { running: 1 } }), true);
	assert.equal(d.planFollowed({ state: 'cancelled', progress: { running: 0 } }), false);
	assert.equal(d.planFollowed({ state: 'applied' }), false);
	assert.equal(d.planSettled({ state: 'failed', progress: { running: 0 } }), true);
	assert.equal(d.placeText(place(A, 'n1', 0, 6)), 'n1 · GPU 0 @6');
	assert.equal(d.moveText(plan().moves[0], 0), 'Move 1: 1g.10gb of ml/web from n1 · GPU 1 @2 to n1 · GPU 0 @6 (make before break)');
});

test('a plan being applied is followed until it ends, then no more', async () => {
	const states = ['applying', 'applying', 'applied', 'applied'];
	let n = 0;
	calls.length = 0;
	answer = () => json(200, { id: 7, state: states[n++] });
	const seen = [];
	await new Promise((resolve) => {
		d.followPlan(
			7,
			(p) => {
				seen.push(p.state);
				if (d.planDone(p)) resolve();
			},
			(e) => assert.fail(e),
			{ first: 5, max: 10 },
		);
	});
	await new Promise((r) => setTimeout(r, 50));
	assert.deepEqual(seen, ['applying', 'applying', 'applied']);
	assert.equal(calls.length, 3);
	assert.ok(calls.every((c) => c.url === '/v1/capacity/defrag-plans/7' && c.init.method === 'GET'));
	// a 404 stops following; stop() before the first answer asks nothing
	calls.length = 0;
	answer = () => json(404, { code: 'not_found', detail: 'no such plan' });
	const errors = [];
	d.followPlan(
		8,
		() => assert.fail('no state'),
		(e) => errors.push(e.status),
		{ first: 5 },
	);
	await new Promise((r) => setTimeout(r, 60));
	assert.deepEqual(errors, [404]);
	assert.equal(calls.length, 1);
	const stop = d.followPlan(
		9,
		() => assert.fail('stopped'),
		() => assert.fail('stopped'),
		{ first: 20 },
	);
	stop();
	await new Promise((r) => setTimeout(r, 50));
	assert.equal(calls.length, 1);
});
