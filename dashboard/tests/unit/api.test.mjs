// api.test.mjs - the dashboard's request layer in Node, with fetch and
// sessionStorage replaced: the limiter, the Idempotency-Key on changes, a
// user action's key kept across retries, the busy guard, and an export
// followed to its end. Run by tests/integration/test_dashboard.c before the
// browser walk (node --test tests/unit/).
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';

const store = new Map();
globalThis.sessionStorage = {
	getItem: (k) => (store.has(k) ? store.get(k) : null),
	setItem: (k, v) => store.set(k, String(v)),
	removeItem: (k) => store.delete(k),
};

// fetch replaced: answer(call) decides each answer; calls are recorded
let calls = [];
let answer = () => json(200, {});
let inflight = 0;
let maxInflight = 0;
function json(status, body, headers = {}) {
	return new Response(body === null ? null : JSON.stringify(body), {
		status,
		headers: { 'Content-Type': status >= 400 ? 'application/problem+json' : 'application/json', ...headers },
	});
}
globalThis.fetch = async (url, init) => {
	const call = { url, method: init.method, headers: init.headers, body: init.body };
	calls.push(call);
	maxInflight = Math.max(maxInflight, ++inflight);
	try {
		await new Promise((r) => setTimeout(r, 2));
		return await answer(call);
	} finally {
		inflight--;
	}
};

const api = await import('../../src/api.js');
const { followExport } = await import('../../src/exports.js');

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

beforeEach(() => {
	calls = [];
	answer = () => json(200, {});
	inflight = 0;
	maxInflight = 0;
});

test('the limiter runs at most max tasks at once, in order, and passes results and errors', async () => {
	const run = api.limiter(3);
	let now = 0;
	let most = 0;
	const started = [];
	const task = (i) => async () => {
		started.push(i);
		most = Math.max(most, ++now);
		await new Promise((r) => setTimeout(r, 1 + (i % 3)));
		now--;
		if (i === 7) throw new Error('seven');
		return i * 2;
	};
	const out = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => run(task(i))));
	assert.equal(most, 3);
	assert.deepEqual(
		started,
		Array.from({ length: 20 }, (_, i) => i),
	);
	assert.equal(out[7].status, 'rejected');
	assert.equal(out[7].reason.message, 'seven');
	assert.equal(out[19].value, 38);
	assert.equal(run.active(), 0);
	assert.equal(run.waiting(), 0);
});

test('200 parallel API calls: never more than FETCH_LIMIT (6) in flight', async () => {
	answer = (c) => json(200, { url: c.url });
	const out = await Promise.all(Array.from({ length: 200 }, (_, i) => api.get(`/v1/gpus/${i}`)));
	assert.equal(out.length, 200);
	assert.equal(out[150].url, '/v1/gpus/150');
	assert.equal(api.FETCH_LIMIT, 6);
	assert.equal(maxInflight, 6);
	assert.equal(calls.length, 200);
});

test('a POST carries a fresh UUID Idempotency-Key; a GET and a simulation none', async () => {
	await api.post('/v1/alerts/1/ack', {});
	await api.post('/v1/alerts/2/ack', {});
	await api.get('/v1/me');
	await api.post('/v1/capacity/simulate', { items: [] }, { key: false });
	const keys = calls.map((c) => c.headers['Idempotency-Key']);
	assert.match(keys[0], UUID);
	assert.match(keys[1], UUID);
	assert.notEqual(keys[0], keys[1]);
	assert.equal(keys[2], undefined);
	assert.equal(keys[3], undefined);
});

test('409 idempotency_conflict with Retry-After: sent again with the same key, the replay answered', async () => {
	let n = 0;
	answer = () =>
		n++ === 0
			? json(409, { code: 'idempotency_conflict', title: 'Conflict' }, { 'Retry-After': '1' })
			: json(201, { id: 7, state: 'pending' }, { 'Idempotent-Replayed': 'true' });
	const r = await api.post('/v1/projects/ml/pool-requests', { pool: 'web' });
	assert.deepEqual(r, { id: 7, state: 'pending' });
	assert.equal(calls.length, 2);
	assert.match(calls[0].headers['Idempotency-Key'], UUID);
	assert.equal(calls[1].headers['Idempotency-Key'], calls[0].headers['Idempotency-Key']);
	assert.equal(calls[1].body, calls[0].body);
});

test('a user action: a second run while the first is under way sends nothing', async () => {
	answer = () => json(201, { id: 1 });
	const act = api.action();
	const [a, b] = await Promise.all([act.post('/v1/projects/ml/pool-requests', { pool: 'web' }), act.post('/v1/projects/ml/pool-requests', { pool: 'web' })]);
	assert.deepEqual(a, { id: 1 });
	assert.equal(b, undefined);
	assert.equal(calls.length, 1);
	assert.equal(act.running, false);
});

test('a user action keeps its key across a retry after a 5xx, and starts a new one after a decided answer or another request', async () => {
	const act = api.action();
	const body = { pool: 'web' };
	answer = () => json(500, { code: 'internal', title: 'Internal' });
	await assert.rejects(act.post('/v1/projects/ml/pool-requests', body), (e) => e.status === 500);
	answer = () => json(201, { id: 2 });
	assert.deepEqual(await act.post('/v1/projects/ml/pool-requests', body), { id: 2 });
	const [k1, k2] = calls.map((c) => c.headers['Idempotency-Key']);
	assert.equal(k2, k1, 'the retry of the same action reuses its key');
	// after a success the next action is a new one
	await act.post('/v1/projects/ml/pool-requests', body);
	assert.notEqual(calls[2].headers['Idempotency-Key'], k1);
	// a 4xx is decided: a new key next time
	answer = () => json(422, { code: 'validation_failed', title: 'Invalid' });
	await assert.rejects(act.post('/v1/projects/ml/pool-requests', body), (e) => e.status === 422 && e.problem.code === 'validation_failed');
	answer = () => json(201, { id: 3 });
	await act.post('/v1/projects/ml/pool-requests', body);
	assert.notEqual(calls[4].headers['Idempotency-Key'], calls[3].headers['Idempotency-Key']);
	// a changed request after a 5xx is another action: a new key
	answer = () => json(503, { code: 'database_unavailable', title: 'Unavailable' });
	await assert.rejects(act.post('/v1/projects/ml/pool-requests', body));
	answer = () => json(201, { id: 4 });
	await act.post('/v1/projects/ml/pool-requests', { pool: 'web2' });
	assert.notEqual(calls[6].headers['Idempotency-Key'], calls[5].headers['Idempotency-Key']);
});

test('an export is followed until done, then no more', async () => {
	const states = ['queued', 'running', 'running', 'done'];
	let i = 0;
	answer = (c) => json(200, { id: 5, state: states[Math.min(i++, states.length - 1)], url: c.url });
	const seen = [];
	await new Promise((resolve, reject) => {
		followExport(
			5,
			(x) => {
				seen.push(x.state);
				if (x.state === 'done') resolve();
			},
			reject,
			{ first: 5, max: 20 },
		);
	});
	await new Promise((r) => setTimeout(r, 60));
	assert.deepEqual(seen, states);
	assert.equal(calls.length, 4);
	assert.ok(calls.every((c) => c.url === '/v1/billing/exports/5' && c.method === 'GET'));
});

test('following an export stops on a 4xx and when told to', async () => {
	answer = () => json(404, { code: 'not_found', title: 'Not found' });
	const errs = [];
	followExport(
		9,
		() => {},
		(e) => errs.push(e.status),
		{ first: 5, max: 5 },
	);
	await new Promise((r) => setTimeout(r, 60));
	assert.deepEqual(errs, [404]);
	calls = [];
	answer = () => json(200, { id: 9, state: 'running' });
	const stop = followExport(
		9,
		() => {},
		() => {},
		{ first: 5, max: 5 },
	);
	await new Promise((r) => setTimeout(r, 30));
	stop();
	const n = calls.length;
	assert.ok(n >= 1);
	await new Promise((r) => setTimeout(r, 40));
	assert.equal(calls.length, n);
});
