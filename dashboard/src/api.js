// api.js - the dashboard's only way to the server: the same-origin REST API
// (docs/api.md) with the session token as a bearer token. The token lives in
// sessionStorage (this tab only, gone when it closes), never in a URL.

const TOKEN_KEY = 'gpupool.session';

export class ApiError extends Error {
	constructor(status, problem) {
		super(problem?.detail || problem?.title || `HTTP ${status}`);
		this.status = status;
		this.problem = problem || {};
	}
}

export function token() {
	return sessionStorage.getItem(TOKEN_KEY);
}

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) {
	onUnauthorized = fn;
}

function query(params) {
	const q = new URLSearchParams();
	for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
	const s = q.toString();
	return s ? `?${s}` : '';
}

// A counting semaphore: at most `max` tasks run at once, the rest wait in
// order. Every request of the dashboard goes through one (FETCH_LIMIT), so a
// view that fans out (a GPU's metrics for each bad GPU, a pool's audit per
// request) never has more than six requests in flight, the browser's own
// per-host limit for HTTP/1.1 and far below the server's per-client one.
export function limiter(max) {
	let active = 0;
	const waiting = [];
	const next = () => {
		if (active >= max || waiting.length === 0) return;
		active++;
		const { fn, resolve, reject } = waiting.shift();
		Promise.resolve()
			.then(fn)
			.then(resolve, reject)
			.finally(() => {
				active--;
				next();
			});
	};
	const run = (fn) =>
		new Promise((resolve, reject) => {
			waiting.push({ fn, resolve, reject });
			next();
		});
	run.active = () => active;
	run.waiting = () => waiting.length;
	return run;
}

export const FETCH_LIMIT = 6;
const limit = limiter(FETCH_LIMIT);

// A fresh Idempotency-Key (docs/api.md "Idempotency"): a random UUID.
export function newKey() {
	if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
	const b = crypto.getRandomValues(new Uint8Array(16));
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
	return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Whether an answer says "the same request may succeed if sent again":
// the key's first request still running (409 idempotency_conflict) or the
// server or database briefly away (503), both with Retry-After.
const retryable = (res) => (res.status === 409 || res.status === 503) && res.headers.get('Retry-After') !== null;

// One API call: the parsed JSON answer (null for 204), the file as a Blob
// with blob: true, or an ApiError. The call holds its place in the limiter
// until its body is read, so the limit counts what is really in flight.
export async function request(method, path, { params, body, headers, blob, key } = {}) {
	const h = { Accept: 'application/json, application/problem+json', ...headers };
	const t = token();
	if (t) h.Authorization = `Bearer ${t}`;
	if (body !== undefined) h['Content-Type'] = 'application/json';
	// every POST carries an Idempotency-Key: the caller's (one per user
	// action, kept across its retries) or one for this call; a retry below
	// sends the same key, so the change happens at most once
	// (key: false for a POST that changes nothing, such as a simulation)
	if (method === 'POST' && key !== false) h['Idempotency-Key'] = key || newKey();
	const init = {
		method,
		headers: h,
		body: body === undefined ? undefined : JSON.stringify(body),
		credentials: 'omit',
		cache: 'no-store',
	};
	const once = async () => {
		const res = await fetch(path + query(params), init);
		if (blob && res.ok) return { res, data: await res.blob() };
		if (res.status === 204) return { res, data: null };
		const type = res.headers.get('Content-Type') || '';
		return { res, data: type.includes('json') ? await res.json() : await res.text() };
	};
	let res, data;
	for (let attempt = 0; ; attempt++) {
		({ res, data } = await limit(once));
		if (attempt >= 3 || !retryable(res)) break;
		const after = Number(res.headers.get('Retry-After'));
		await sleep(Math.min(5, Number.isFinite(after) && after > 0 ? after : 1) * 1000);
	}
	if (!res.ok) {
		if (res.status === 401 && t) onUnauthorized();
		throw new ApiError(res.status, typeof data === 'object' ? data : { detail: data });
	}
	return data;
}

export const get = (path, params) => request('GET', path, { params });
export const post = (path, body, opts) => request('POST', path, { body, ...opts });

// One user action (a submit, an approval, a click on Acknowledge) as an
// object that keeps its Idempotency-Key: the key is made when the action
// first runs and kept while it is retried with the same request (a network
// error, a 5xx), so a retry replays the first answer instead of acting
// twice; an answer the server decided (2xx, 4xx) or a different request
// starts a new key. run() while the action is under way does nothing and
// answers undefined: a double click acts once.
export function action() {
	let key = null;
	let sig = null;
	let running = false;
	return {
		get running() {
			return running;
		},
		async post(path, body, opts = {}) {
			if (running) return undefined;
			running = true;
			const s = JSON.stringify([path, body, opts.headers || {}]);
			if (s !== sig || !key) {
				key = newKey();
				sig = s;
			}
			try {
				const r = await post(path, body, { ...opts, key });
				key = null;
				return r;
			} catch (err) {
				// decided by the server: the next try is a new action
				if (err instanceof ApiError && err.status > 0 && err.status < 500 && !(err.status === 409 && err.problem?.code === 'idempotency_conflict'))
					key = null;
				throw err;
			} finally {
				running = false;
			}
		},
	};
}

// Follow an object that changes on the server (an export job, a plan being
// applied) until done(answer): GET path every interval (first, growing by
// half up to max), onState with each answer, onError with each failure;
// a 4xx stops (gone or forbidden), a 5xx or network error tries again.
// Answers a function that stops following.
export function follow(path, done, onState, onError, { first = 1000, max = 5000 } = {}) {
	let stopped = false;
	let timer = null;
	let wait = first;
	const tick = async () => {
		try {
			const x = await get(path);
			if (stopped) return;
			onState(x);
			if (done(x)) return;
		} catch (err) {
			if (stopped) return;
			onError(err);
			if (err.status && err.status < 500) return;
		}
		wait = Math.min(max, Math.round(wait * 1.5));
		timer = setTimeout(tick, wait);
	};
	timer = setTimeout(tick, first);
	return () => {
		stopped = true;
		clearTimeout(timer);
	};
}

// Every page of a list, up to max items (the API pages with opaque cursors).
export async function all(path, params, max = 5000) {
	const items = [];
	let cursor;
	do {
		const page = await get(path, { ...params, limit: 200, cursor });
		items.push(...page.items);
		cursor = page.next_cursor;
	} while (cursor && items.length < max);
	return items;
}

export async function login(username, password) {
	sessionStorage.removeItem(TOKEN_KEY);
	const r = await post('/v1/auth/login', { username, password });
	sessionStorage.setItem(TOKEN_KEY, r.token);
	return r;
}

// Sign-out revokes the session on the server, then forgets it here.
export async function logout() {
	try {
		if (token()) await post('/v1/auth/logout');
	} finally {
		sessionStorage.removeItem(TOKEN_KEY);
	}
}

export const enc = encodeURIComponent;
