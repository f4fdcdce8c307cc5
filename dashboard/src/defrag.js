// defrag.js - the logic of the capacity view's Defragmentation panel
// (docs/capacity.md "Fragmentation and defragmentation plans"): the request
// body from the plan form, the drawing model of a plan (each GPU it touches,
// its instances before and after the moves), the labels of plan and move
// states, and following a plan being applied. Plain JavaScript, so the unit
// tests (tests/unit/) run it in Node.
import * as api from './api.js';

export const PLANS = '/v1/capacity/defrag-plans';

// Who may plan and apply: the API's rule (global admin or operator).
export const canDefrag = (me) => !!me && (me.role === 'admin' || me.role === 'operator');

// The plan states after which nothing changes any more.
export const FINAL_STATES = ['applied', 'failed', 'expired', 'cancelled'];
export const planDone = (p) => FINAL_STATES.includes(p?.state);
// Ended, and no move still under way (a move in flight when the plan was
// cancelled finishes): nothing to follow any more.
export const planSettled = (p) => planDone(p) && !(p.progress?.running > 0);
// A plan the panel follows: being applied, or ended with a move still running.
export const planFollowed = (p) => !!p && p.state !== 'planned' && !planSettled(p);
export const canApply = (p) => p?.state === 'planned';
export const canCancel = (p) => p?.state === 'planned' || p?.state === 'applying';

const PLAN_LABELS = {
	planned: 'planned, not applied',
	applying: 'applying',
	applied: 'applied',
	failed: 'failed',
	expired: 'expired',
	cancelled: 'cancelled',
};
export const planStateLabel = (s) => PLAN_LABELS[s] || String(s ?? 'unknown');

// A move's state in words; a plan not yet applied has its moves "planned"
// (a server that applies plans calls them pending until the plan is applied).
const MOVE_LABELS = {
	pending: 'waiting',
	reserving: 'destroying the old instance first',
	creating: 'creating the new instance',
	destroying: 'destroying the old instance',
	done: 'done',
	skipped: 'skipped',
	failed: 'failed',
};
export const moveStateLabel = (m, plan) =>
	(m.state && plan?.state !== 'planned' ? MOVE_LABELS[m.state] || m.state : 'planned') + (m.reason ? ` (${m.reason.replace(/_/g, ' ')})` : '');

// A move that will not (or did not) take its instance away: it stays where it was.
export const moveStays = (m) => m.state === 'skipped' || m.state === 'failed';

export const placeText = (p) => `${p.node} · GPU ${p.gpu_index} @${p.start}`;
export const moveText = (m, i) =>
	`Move ${i + 1}: ${m.profile} of ${m.project ?? '?'}/${m.pool ?? '?'} from ${placeText(m.from)} to ${placeText(m.to)} (${m.make_before_break ? 'make before break' : 'break before make'})`;

// The body of POST /v1/capacity/defrag-plans from the form's fields
// ({goal, items, cluster, max_moves, idle_minutes}, strings as typed).
export function planBody(f) {
	const body = {};
	if (f.goal === 'free_gpus') body.goal = 'free_gpus';
	else {
		body.goal = 'items';
		body.items = String(f.items || '')
			.split(/[\s,]+/)
			.filter(Boolean);
	}
	if (f.cluster) body.cluster = String(f.cluster);
	for (const k of ['max_moves', 'idle_minutes']) {
		const v = String(f[k] ?? '').trim();
		if (v !== '') body[k] = Number(v);
	}
	return body;
}

// The GPUs a plan touches, in the order its moves first name them.
export function touchedGpus(plan) {
	const seen = [];
	for (const m of plan?.moves || []) for (const p of [m.from, m.to]) if (!seen.includes(p.gpu_uuid)) seen.push(p.gpu_uuid);
	return seen;
}

// Memory slices of profile on a GPU: from the catalog's profiles of its
// model, else from the instance's own entry on the GPU, else 1.
function sizeOf(profile, profiles, entry) {
	const p = (profiles || []).find((x) => x.name === profile);
	if (p) return p.memory_slices;
	return entry?.size || 1;
}

// The drawing model of a plan: for each GPU it touches, its instances
// before and after the moves. gpus: uuid -> the GPU as GET /v1/gpus/{uuid}
// answers now (its layout; missing ones are drawn with the moves only);
// profilesOf(model): the catalog's profiles of a model.
//
// The layout now may already show some moves done, so the instances a plan
// does not move are those of the layout that are neither a move's instance
// nor its new one (by allocation id, or at its target with its profile);
// before = those + each moved instance where it was, after = those + each
// moved instance where it goes (where it was for a skipped or failed move).
// Each moved instance carries its move's number; the model's counts:
// moved = the moves drawn arriving, one per move that goes ahead.
export function defragModel(plan, gpus = {}, profilesOf = () => null) {
	const moves = plan?.moves || [];
	const involved = new Set();
	for (const m of moves) {
		involved.add(m.allocation);
		if (m.new_allocation !== null && m.new_allocation !== undefined) involved.add(m.new_allocation);
	}
	const isTarget = (uuid, e) => moves.some((m) => m.to.gpu_uuid === uuid && m.to.start === e.start && m.profile === e.profile);
	const entryOf = (id) => {
		for (const g of Object.values(gpus)) for (const e of g?.layout || []) if (e.allocation_id === id) return { g, e };
		return null;
	};
	return touchedGpus(plan).map((uuid) => {
		const g = gpus[uuid];
		const place = moves.map((m) => (m.from.gpu_uuid === uuid ? m.from : m.to.gpu_uuid === uuid ? m.to : null)).find(Boolean);
		const profiles = profilesOf(g?.model);
		const kept = (g?.layout || [])
			.filter((e) => !involved.has(e.allocation_id) && !isTarget(uuid, e))
			.map((e) => ({ profile: e.profile, start: e.start, size: e.size, pool_id: e.pool_id ?? null, state: e.state, move: null }));
		const before = [...kept];
		const after = [...kept];
		moves.forEach((m, i) => {
			const src = entryOf(m.allocation);
			const inst = {
				profile: m.profile,
				size: sizeOf(m.profile, profiles, src?.e),
				pool_id: src?.e.pool_id ?? null,
				state: m.state || 'planned',
				move: i + 1,
			};
			if (m.from.gpu_uuid === uuid) {
				before.push({ ...inst, start: m.from.start, moved: 'out', to: m.to });
				if (moveStays(m)) after.push({ ...inst, start: m.from.start, moved: 'stayed' });
			}
			if (m.to.gpu_uuid === uuid && !moveStays(m)) after.push({ ...inst, start: m.to.start, moved: 'in', from: m.from });
		});
		const byStart = (a, b) => a.start - b.start;
		return {
			uuid,
			node: place.node,
			index: place.gpu_index,
			model: g?.model ?? null,
			slices: g?.memory_slices || 8,
			before: before.sort(byStart),
			after: after.sort(byStart),
		};
	});
}

// The words for one bar (the drawing's text alternative).
export function barText(insts) {
	if (insts.length === 0) return 'empty';
	return insts
		.map((x) => {
			const where = x.size === 1 ? `slice ${x.start}` : `slices ${x.start}–${x.start + x.size - 1}`;
			const mv =
				x.moved === 'out'
					? `, move ${x.move} takes it away`
					: x.moved === 'in'
						? `, arrives by move ${x.move}`
						: x.moved === 'stayed'
							? `, stays (move ${x.move} ${x.state})`
							: '';
			return `${x.profile} on ${where}${mv}`;
		})
		.join('; ');
}

// Follow a plan being applied until it ends and no move runs any more: its state every interval
// (1 s, growing to 5 s), onState with each answer. Answers a function that
// stops following.
export const followPlan = (id, onState, onError, opts) => api.follow(`${PLANS}/${id}`, planSettled, onState, onError, opts);
