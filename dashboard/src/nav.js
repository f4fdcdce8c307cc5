// nav.js - which views a role sees and where a link leads: plain
// JavaScript, so the unit tests (tests/unit/) run it in Node.

// Which views each global role sees (the server enforces the same; see docs/dashboard.md).
export const VIEWS = [
	{ id: 'overview', label: 'Overview', roles: ['admin', 'operator', 'billing'] },
	{ id: 'capacity', label: 'Capacity', roles: ['admin', 'operator', 'billing'] },
	{ id: 'requests', label: 'Requests', roles: ['admin', 'operator', 'none'] },
	{ id: 'pools', label: 'Pools', roles: ['admin', 'operator', 'none'] },
	{ id: 'health', label: 'Health', roles: ['admin', 'operator'] },
	{ id: 'usage', label: 'Usage and cost', roles: ['admin', 'operator', 'billing', 'none'] },
];

export function parseHash(hash = location.hash) {
	const [view, ...rest] = (hash.replace(/^#\/?/, '') || '').split('/');
	const decode = (x) => {
		try {
			return decodeURIComponent(x);
		} catch {
			return x; // a malformed link: shown as the server's 404, not a blank page
		}
	};
	return { view, arg: rest.map(decode).join('/') };
}

// The views of a role and the view a route shows: a view the role may not
// see (or an unknown one) shows the role's first view instead; the GPU and
// pool pages are open to every role (the server answers 404 for what the
// user may not see).
export function route(role, r) {
	const views = VIEWS.filter((v) => v.roles.includes(role));
	const known = ['gpu', 'pool'].includes(r.view) || views.some((v) => v.id === r.view);
	return { views, view: known ? r.view : views[0].id, arg: r.arg };
}
