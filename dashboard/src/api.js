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
	for (const [k, v] of Object.entries(params || {}))
		if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
	const s = q.toString();
	return s ? `?${s}` : '';
}

export async function request(method, path, { params, body, headers, raw } = {}) {
	const h = { Accept: 'application/json, application/problem+json', ...headers };
	const t = token();
	if (t) h.Authorization = `Bearer ${t}`;
	if (body !== undefined) h['Content-Type'] = 'application/json';
	const res = await fetch(path + query(params), {
		method,
		headers: h,
		body: body === undefined ? undefined : JSON.stringify(body),
		credentials: 'omit',
		cache: 'no-store',
	});
	if (raw && res.ok) return res;
	if (res.status === 204) return null;
	const type = res.headers.get('Content-Type') || '';
	const data = type.includes('json') ? await res.json() : await res.text();
	if (!res.ok) {
		if (res.status === 401 && t) onUnauthorized();
		throw new ApiError(res.status, typeof data === 'object' ? data : { detail: data });
	}
	return data;
}

export const get = (path, params) => request('GET', path, { params });
export const post = (path, body, opts) => request('POST', path, { body, ...opts });

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
