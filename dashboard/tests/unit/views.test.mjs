// views.test.mjs - the views' logic that needs no browser: which views each
// role sees and where a link leads (src/nav.js), paging through a list
// (api.all), and what an error shows (ApiError, the 401 hand-off).
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

const api = await import('../../src/api.js');
const { VIEWS, parseHash, route } = await import('../../src/nav.js');

test('role gating: each global role sees its views, in order', () => {
	const ids = (role) => route(role, { view: '', arg: '' }).views.map((v) => v.id);
	assert.deepEqual(ids('admin'), ['overview', 'capacity', 'requests', 'pools', 'health', 'usage']);
	assert.deepEqual(ids('operator'), ['overview', 'capacity', 'requests', 'pools', 'health', 'usage']);
	assert.deepEqual(ids('billing'), ['overview', 'capacity', 'usage']);
	assert.deepEqual(ids('none'), ['requests', 'pools', 'usage']);
	assert.equal(VIEWS.length, 6);
});

test('a view the role may not see, or an unknown one, shows its first view; GPU and pool pages are open', () => {
	assert.equal(route('none', { view: 'health', arg: '' }).view, 'requests');
	assert.equal(route('billing', { view: 'requests', arg: '' }).view, 'overview');
	assert.equal(route('admin', { view: 'nonsense', arg: '' }).view, 'overview');
	assert.equal(route('none', { view: 'usage', arg: '' }).view, 'usage');
	assert.deepEqual(route('none', { view: 'pool', arg: '12' }), { views: route('none', { view: '' }).views, view: 'pool', arg: '12' });
	assert.equal(route('billing', { view: 'gpu', arg: 'GPU-1' }).view, 'gpu');
});

test('links: the view and its argument, decoded; a malformed escape kept as typed', () => {
	assert.deepEqual(parseHash('#/gpu/GPU-a%2Fb'), { view: 'gpu', arg: 'GPU-a/b' });
	assert.deepEqual(parseHash('#/pool/7'), { view: 'pool', arg: '7' });
	assert.deepEqual(parseHash(''), { view: '', arg: '' });
	assert.deepEqual(parseHash('#/gpu/%E0%A4%A'), { view: 'gpu', arg: '%E0%A4%A' });
});

test('paging: api.all follows the cursors, 200 a page, and stops at max', async () => {
	const pages = { '': { items: [1, 2], next_cursor: 'c1' }, c1: { items: [3, 4], next_cursor: 'c2' }, c2: { items: [5], next_cursor: null } };
	answer = (url) => json(200, pages[new URL(url, 'http://x').searchParams.get('cursor') || '']);
	calls.length = 0;
	assert.deepEqual(await api.all('/v1/pools', { state: 'ready' }), [1, 2, 3, 4, 5]);
	assert.equal(calls.length, 3);
	const q = new URL(calls[1].url, 'http://x').searchParams;
	assert.equal(q.get('limit'), '200');
	assert.equal(q.get('state'), 'ready');
	assert.equal(q.get('cursor'), 'c1');
	calls.length = 0;
	assert.deepEqual(await api.all('/v1/pools', {}, 3), [1, 2, 3, 4]);
	assert.equal(calls.length, 2, 'no page is asked for once max items are in');
});

test('errors: the problem detail is the message, with status and problem kept; a 401 with a token signs out', async () => {
	answer = () => json(404, { type: 'about:blank', title: 'Not Found', status: 404, code: 'not_found', detail: 'no pool 9' });
	const err = await api.get('/v1/pools/9').catch((e) => e);
	assert.ok(err instanceof api.ApiError);
	assert.equal(err.message, 'no pool 9');
	assert.equal(err.status, 404);
	assert.equal(err.problem.code, 'not_found');
	assert.equal(new api.ApiError(500, null).message, 'HTTP 500');
	assert.equal(new api.ApiError(409, { title: 'Conflict' }).message, 'Conflict');
	let signedOut = 0;
	api.setUnauthorizedHandler(() => signedOut++);
	answer = () => json(401, { title: 'Unauthorized', code: 'unauthorized' });
	await assert.rejects(api.get('/v1/me'));
	assert.equal(signedOut, 0, 'no token: nothing to sign out of');
	sessionStorage.setItem('gpupool.session', 'gps_x');
	await assert.rejects(api.get('/v1/me'));
	assert.equal(signedOut, 1);
	assert.equal(calls.at(-1).init.headers.Authorization, 'Bearer gps_x');
	sessionStorage.removeItem('gpupool.session');
});
