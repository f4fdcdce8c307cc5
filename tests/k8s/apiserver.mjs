// tests/k8s/apiserver.mjs - a stand-in Kubernetes API server for the tests
// of gpupool-k8s (no real API server can be installed on these machines).
// It keeps objects by resource, namespace and name, and answers as the real
// one does where gpupool-k8s depends on it:
//   - server-side apply (PATCH, Content-Type application/apply-patch+yaml,
//     fieldManager required): metadata.managedFields per manager; a field
//     another manager owns with another value is a 409 Conflict Status
//     (causes FieldManagerConflict) unless force=true, which takes it over;
//     fields a manager stops applying are removed unless another owns them;
//   - PUT (update) with resourceVersion conflicts (409), POST (create,
//     409 AlreadyExists), GET of an object (404 NotFound Status) or a
//     collection (across namespaces, labelSelector k=v, k!=v, k, !k),
//     DELETE (404 when absent);
//   - each applied or created object is validated with the kubernetes-models
//     validators (the official 1.34 OpenAPI schemas, as tests/k8s/check.mjs);
//     an invalid one is a 422 Invalid Status;
//   - authentication: a bearer token (--token or --token-file, read again
//     per request) and/or a client certificate signed by --client-ca
//     (TLS with --cert/--key); anything else is 401.
// What it is not: no admission (CEL policies are not evaluated here,
// check.mjs does that), no watch, no defaulting, no JSON, merge or
// strategic-merge patches (501; a body of no patch type is 415 as on the
// real server), lists (arrays) are atomic for field ownership.
//
// Test hooks under /_standin/ (no authentication): GET requests (every
// request recorded: method, path, query, content type, authenticated as),
// POST fail {"count":N,"status":S} (the next N API requests answer S),
// POST objects [..] (stored as they are, e.g. ResourceSlices), GET objects.
//
//   node tests/k8s/apiserver.mjs --port-file F [--hooks-port-file F2] [--tls --cert C --key K]
//        [--client-ca CA] [--token T | --token-file F] [--no-devicetaintrules]
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import crypto from 'node:crypto';
import { pathToFileURL } from 'node:url';

const tools = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../tools/node_modules');
const load = (p) => import(pathToFileURL(path.join(tools, p)).href);
const yaml = (await load('js-yaml/index.js')).default;

const args = process.argv.slice(2);
const opt = (n) => { const i = args.indexOf(n); return i >= 0 ? args[i + 1] : undefined; };
const flag = (n) => args.includes(n);

// group/version, plural → kind, namespaced, the kubernetes-models module
const RESOURCES = [
	['v1', 'namespaces', 'Namespace', false, 'v1/Namespace'],
	['v1', 'resourcequotas', 'ResourceQuota', true, 'v1/ResourceQuota'],
	['v1', 'pods', 'Pod', true, 'v1/Pod'],
	['resource.k8s.io/v1', 'deviceclasses', 'DeviceClass', false, 'resource.k8s.io/v1/DeviceClass'],
	['resource.k8s.io/v1', 'resourceslices', 'ResourceSlice', false, 'resource.k8s.io/v1/ResourceSlice'],
	['resource.k8s.io/v1', 'resourceclaims', 'ResourceClaim', true, 'resource.k8s.io/v1/ResourceClaim'],
	['admissionregistration.k8s.io/v1', 'validatingadmissionpolicies', 'ValidatingAdmissionPolicy', false,
		'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy'],
	['admissionregistration.k8s.io/v1', 'validatingadmissionpolicybindings', 'ValidatingAdmissionPolicyBinding', false,
		'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding'],
	// resource.k8s.io/v1alpha3 in 1.34 (feature gate DRADeviceTaints); kubernetes-models 5.1.0 has no model of it
	['resource.k8s.io/v1alpha3', 'devicetaintrules', 'DeviceTaintRule', false, null],
].filter((r) => !(flag('--no-devicetaintrules') && r[1] === 'devicetaintrules'));
const models = new Map();
for (const r of RESOURCES) {
	if (r[4] === null) continue;
	const mod = await load(`kubernetes-models/${r[4]}.js`);
	models.set(`${r[0]}/${r[2]}`, mod[r[2]]);
}

const store = new Map(); // "gv|plural|ns|name" → {obj, applied: Map(manager → applied config)}
let rv = 1000;
const requests = [];
let failing = { count: 0, status: 500 };

const status = (code, reason, message, details) => ({
	kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason,
	...(details ? { details } : {}), code,
});
const groupOf = (gv) => (gv.includes('/') ? gv.split('/')[0] : '');
const resName = (r) => (groupOf(r[0]) ? `${r[1]}.${groupOf(r[0])}` : r[1]);

// /api/v1/[namespaces/NS/]PLURAL[/NAME] or /apis/G/V/[namespaces/NS/]PLURAL[/NAME]
function route(p) {
	let s = p.split('/').filter((x) => x !== '');
	let gv;
	if (s[0] === 'api' && s[1] === 'v1') { gv = 'v1'; s = s.slice(2); }
	else if (s[0] === 'apis' && s.length >= 3) { gv = `${s[1]}/${s[2]}`; s = s.slice(3); }
	else return null;
	let ns = null;
	if (s[0] === 'namespaces' && s.length >= 3) { ns = s[1]; s = s.slice(2); }
	if (s.length < 1 || s.length > 2) return null;
	const r = RESOURCES.find((x) => x[0] === gv && x[1] === s[0]);
	if (!r) return null;
	if (ns !== null && !r[3]) return null;
	return { r, ns, name: s[1] ?? null };
}

// Leaf paths of an object (arrays atomic), without identity fields: a path
// is the JSON of its keys (label keys hold dots and slashes).
const IDENTITY = ['apiVersion', 'kind', 'metadata.name', 'metadata.namespace', 'metadata.managedFields',
	'metadata.resourceVersion', 'metadata.uid', 'metadata.creationTimestamp', 'metadata.generation', 'status'];
function leaves(o, at = [], out = new Map()) {
	for (const [k, v] of Object.entries(o)) {
		const p = [...at, k];
		if (at.length <= 1 && IDENTITY.includes(p.join('.'))) continue;
		if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0) leaves(v, p, out);
		else out.set(JSON.stringify(p), JSON.stringify(v));
	}
	return out;
}
const dotted = (p) => '.' + JSON.parse(p).join('.');
function setPath(o, p, v) {
	const ks = JSON.parse(p);
	let c = o;
	for (const k of ks.slice(0, -1)) { if (typeof c[k] !== 'object' || c[k] === null) c[k] = {}; c = c[k]; }
	c[ks[ks.length - 1]] = JSON.parse(v);
}
// managedFields' fieldsV1: {"f:spec": {"f:selectors": {}}}
function fieldsV1(paths) {
	const root = {};
	for (const p of paths) {
		let c = root;
		for (const k of JSON.parse(p)) c = c[`f:${k}`] ??= {};
	}
	return root;
}
// Fields of managers: "manager" → Map(path → value)
function rebuild(entry, base) {
	const o = { apiVersion: base.apiVersion, kind: base.kind, metadata: { name: base.metadata.name } };
	if (base.metadata.namespace) o.metadata.namespace = base.metadata.namespace;
	for (const [, fields] of entry.owners) for (const [p, v] of fields) setPath(o, p, v);
	if (base.status !== undefined) o.status = base.status;
	return o;
}
function finish(entry, keepMeta) {
	entry.obj.metadata.uid = keepMeta?.uid ?? crypto.randomUUID();
	entry.obj.metadata.creationTimestamp = keepMeta?.creationTimestamp ?? new Date().toISOString().replace(/\.\d+Z$/, 'Z');
	entry.obj.metadata.resourceVersion = String(++rv);
	entry.obj.metadata.generation = (keepMeta?.generation ?? 0) + 1;
	entry.obj.metadata.managedFields = [...entry.owners].filter(([, f]) => f.size > 0).map(([m, f]) => ({
		manager: m, operation: entry.ops.get(m) ?? 'Apply', apiVersion: entry.obj.apiVersion,
		time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), fieldsType: 'FieldsV1',
		fieldsV1: fieldsV1(f.keys()),
	}));
}
function invalid(r, obj) {
	const M = models.get(`${r[0]}/${r[2]}`);
	if (!M) return null;
	try { new M(obj).validate(); return null; } catch (e) {
		return status(422, 'Invalid', `${r[2]} "${obj.metadata?.name}" is invalid: ${e.message}`,
			{ name: obj.metadata?.name, group: groupOf(r[0]), kind: r[2], causes: [{ reason: 'FieldValueInvalid', message: e.message }] });
	}
}
function selectorMatch(sel, labels) {
	if (!sel) return true;
	labels = labels ?? {};
	return sel.split(',').every((t) => {
		let m;
		if ((m = /^([^!=]+)!=(.*)$/.exec(t))) return labels[m[1]] !== m[2];
		if ((m = /^([^!=]+)==?(.*)$/.exec(t))) return labels[m[1]] === m[2];
		if (t.startsWith('!')) return !(t.slice(1) in labels);
		return t in labels;
	});
}

function authenticate(req) {
	// the token file may hold several lines: each is valid (a rotation's old and new token)
	const wanted = opt('--token-file') ? fs.readFileSync(opt('--token-file'), 'utf8').split('\n').map((x) => x.trim()).filter((x) => x)
		: opt('--token') ? [opt('--token')] : [];
	const a = req.headers.authorization;
	if (wanted.some((w) => a === `Bearer ${w}`)) return 'token';
	if (req.socket.authorized) {
		const cert = req.socket.getPeerCertificate();
		if (cert && cert.subject) return `cert:${cert.subject.CN}`;
	}
	if (wanted.length === 0 && !opt('--client-ca')) return 'anonymous';
	return null;
}

// API discovery of a group version: GET /api/v1, /apis/G/V (an APIResourceList)
function discovery(p) {
	const m = /^\/(?:api\/(v1)|apis\/([^/]+\/[^/]+))\/?$/.exec(p);
	if (!m) return null;
	const gv = m[1] ?? m[2];
	const rs = RESOURCES.filter((r) => r[0] === gv);
	if (rs.length === 0) return [404, status(404, 'NotFound', 'the server could not find the requested resource')];
	return [200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: gv, resources: rs.map((r) => ({
		name: r[1], singularName: '', namespaced: r[3], kind: r[2],
		verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'] })) }];
}

function api(req, body, url) {
	if (req.method === 'GET') {
		const d = discovery(url.pathname);
		if (d) return d;
	}
	const rt = route(url.pathname);
	if (!rt) return [404, status(404, 'NotFound', 'the server could not find the requested resource')];
	const { r, ns, name } = rt;
	const key = (n, nsp) => `${r[0]}|${r[1]}|${nsp ?? ''}|${n}`;
	const notFound = () => [404, status(404, 'NotFound', `${resName(r)} "${name}" not found`,
		{ name, group: groupOf(r[0]), kind: r[1] })];
	if (req.method === 'GET' && name === null) {
		const sel = url.searchParams.get('labelSelector');
		const items = [...store.entries()].filter(([k]) => k.startsWith(`${r[0]}|${r[1]}|${ns ?? (r[3] ? '' : '')}`) &&
			(ns === null || k.split('|')[2] === ns))
			.map(([, e]) => e.obj).filter((o) => selectorMatch(sel, o.metadata.labels));
		return [200, { kind: `${r[2]}List`, apiVersion: r[0], metadata: { resourceVersion: String(rv) }, items }];
	}
	if (name === null) {
		if (req.method !== 'POST') return [405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource')];
	}
	if (req.method === 'GET') {
		const e = store.get(key(name, ns));
		return e ? [200, e.obj] : notFound();
	}
	if (req.method === 'DELETE') {
		const e = store.get(key(name, ns));
		if (!e) return notFound();
		store.delete(key(name, ns));
		rv++;
		return [200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, group: groupOf(r[0]), kind: r[1], uid: e.obj.metadata.uid } }];
	}
	if (req.method === 'PATCH') {
		const ct = (req.headers['content-type'] ?? '').split(';')[0].trim();
		if (!['application/apply-patch+yaml', 'application/json-patch+json', 'application/merge-patch+json',
			'application/strategic-merge-patch+json'].includes(ct))
			return [415, status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`)];
		// the stand-in implements server-side apply only
		if (ct !== 'application/apply-patch+yaml')
			return [501, status(501, 'NotImplemented', `the stand-in does not implement ${ct}`)];
	}
	let obj;
	try { obj = yaml.load(body.toString('utf8')); } catch (e) {
		return [400, status(400, 'BadRequest', `error decoding YAML: ${e.message}`)];
	}
	if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return [400, status(400, 'BadRequest', 'the body is not an object')];
	if (obj.apiVersion !== r[0] || obj.kind !== r[2])
		return [400, status(400, 'BadRequest', `the API version in the data (${obj.apiVersion}) or kind (${obj.kind}) does not match the expected ${r[0]} ${r[2]}`)];
	const objName = obj.metadata?.name, objNs = obj.metadata?.namespace;
	if (req.method === 'POST') {
		if (!objName) return [422, status(422, 'Invalid', `${r[2]} "" is invalid: metadata.name: Required value: name or generateName is required`)];
		if (store.has(key(objName, ns))) return [409, status(409, 'AlreadyExists', `${resName(r)} "${objName}" already exists`, { name: objName, group: groupOf(r[0]), kind: r[1] })];
		const bad = invalid(r, obj);
		if (bad) return [422, bad];
		const manager = url.searchParams.get('fieldManager') ?? 'unknown';
		const entry = { owners: new Map([[manager, leaves(obj)]]), ops: new Map([[manager, 'Update']]) };
		entry.obj = rebuild(entry, obj);
		finish(entry);
		store.set(key(objName, ns), entry);
		return [201, entry.obj];
	}
	if (objName !== name) return [400, status(400, 'BadRequest', `the name of the object (${objName}) does not match the name on the URL (${name})`)];
	if (r[3] && objNs !== undefined && objNs !== ns) return [400, status(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request')];
	if (r[3]) obj.metadata.namespace = ns;
	if (req.method === 'PUT') {
		const e = store.get(key(name, ns));
		if (!e) return notFound();
		if (obj.metadata.resourceVersion !== undefined && obj.metadata.resourceVersion !== e.obj.metadata.resourceVersion)
			return [409, status(409, 'Conflict', `Operation cannot be fulfilled on ${resName(r)} "${name}": the object has been modified; please apply your changes to the latest version and try again`, { name, group: groupOf(r[0]), kind: r[1] })];
		const bad = invalid(r, obj);
		if (bad) return [422, bad];
		const manager = url.searchParams.get('fieldManager') ?? 'unknown';
		const before = leaves(e.obj), now = leaves(obj);
		for (const [, f] of e.owners) for (const p of [...f.keys()]) if (!now.has(p) || now.get(p) !== before.get(p)) f.delete(p);
		const mine = e.owners.get(manager) ?? new Map();
		for (const [p, v] of now) if (before.get(p) !== v || ![...e.owners.values()].some((f) => f.has(p))) mine.set(p, v);
		e.owners.set(manager, mine);
		e.ops.set(manager, 'Update');
		const meta = e.obj.metadata;
		e.obj = rebuild(e, obj);
		finish(e, meta);
		return [200, e.obj];
	}
	if (req.method === 'PATCH') {
		const manager = url.searchParams.get('fieldManager');
		if (!manager) return [422, status(422, 'Invalid', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch')];
		const force = url.searchParams.get('force') === 'true';
		const bad = invalid(r, obj);
		if (bad) return [422, bad];
		const applied = leaves(obj);
		let e = store.get(key(name, ns));
		const created = !e;
		if (!e) e = { owners: new Map(), ops: new Map() };
		const current = e.obj ? leaves(e.obj) : new Map();
		const conflicts = [];
		for (const [m, f] of e.owners) {
			if (m === manager) continue;
			for (const [p] of f) if (applied.has(p) && applied.get(p) !== current.get(p)) conflicts.push([m, p]);
		}
		if (conflicts.length > 0 && !force) {
			const causes = conflicts.map(([m, p]) => ({ type: 'FieldManagerConflict', message: `conflict with "${m}"`, field: dotted(p) }));
			return [409, status(409, 'Conflict', `Apply failed with ${conflicts.length} conflict${conflicts.length > 1 ? 's' : ''}: ${causes.map((c) => `${c.message}: ${c.field}`).join(', ')}`,
				{ name, group: groupOf(r[0]), kind: r[1], causes })];
		}
		for (const [m, p] of conflicts) e.owners.get(m).delete(p);
		// fields the manager no longer applies are its to remove (unless another owns them)
		e.owners.set(manager, applied);
		e.ops.set(manager, 'Apply');
		const meta = e.obj?.metadata;
		e.obj = rebuild(e, e.obj ?? obj);
		finish(e, meta);
		store.set(key(name, ns), e);
		return [created ? 201 : 200, e.obj];
	}
	return [405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource')];
}

function hooks(req, body, url) {
	if (url.pathname === '/_standin/requests') return [200, requests];
	if (url.pathname === '/_standin/objects' && req.method === 'GET') return [200, [...store.values()].map((e) => e.obj)];
	if (url.pathname === '/_standin/objects' && req.method === 'POST') {
		for (const o of JSON.parse(body.toString('utf8'))) {
			const r = RESOURCES.find((x) => x[0] === o.apiVersion && x[2] === o.kind);
			if (!r) return [400, { error: `no resource for ${o.apiVersion} ${o.kind}` }];
			// fixtures are held to the real schemas too
			const bad = invalid(r, o);
			if (bad) return [400, bad];
			const e = { owners: new Map([['test', leaves(o)]]), ops: new Map([['test', 'Update']]) };
			e.obj = rebuild(e, o);
			finish(e);
			store.set(`${r[0]}|${r[1]}|${o.metadata.namespace ?? ''}|${o.metadata.name}`, e);
		}
		return [200, {}];
	}
	if (url.pathname === '/_standin/fail' && req.method === 'POST') {
		failing = JSON.parse(body.toString('utf8'));
		return [200, failing];
	}
	return [404, { error: 'no such hook' }];
}

function handle(req, res) {
	const chunks = [];
	req.on('data', (c) => chunks.push(c));
	req.on('end', () => {
		const body = Buffer.concat(chunks);
		const url = new URL(req.url, 'http://x');
		let code, out;
		if (url.pathname.startsWith('/_standin/')) {
			[code, out] = hooks(req, body, url);
		} else {
			const who = authenticate(req);
			const rec = { t: Date.now(), method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams),
				contentType: req.headers['content-type'] ?? null, auth: who, body: body.length ? body.toString('utf8') : null };
			requests.push(rec);
			if (who === null) [code, out] = [401, status(401, 'Unauthorized', 'Unauthorized')];
			else if (failing.count > 0) {
				failing.count--;
				[code, out] = [failing.status, status(failing.status, failing.status === 429 ? 'TooManyRequests' : 'InternalError',
					'an error on the server ("stand-in fault") has prevented the request from succeeding')];
			} else [code, out] = api(req, body, url);
			requests[requests.length - 1].status = code;
		}
		const s = JSON.stringify(out);
		res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
		res.end(s);
	});
}

const server = flag('--tls')
	? https.createServer({
		cert: fs.readFileSync(opt('--cert')), key: fs.readFileSync(opt('--key')),
		...(opt('--client-ca') ? { ca: fs.readFileSync(opt('--client-ca')), requestCert: true, rejectUnauthorized: false } : {}),
	}, handle)
	: http.createServer(handle);
server.listen(Number(opt('--port') ?? 0), '127.0.0.1', () => {
	const port = server.address().port;
	if (opt('--port-file')) fs.writeFileSync(opt('--port-file') + '.tmp', String(port)), fs.renameSync(opt('--port-file') + '.tmp', opt('--port-file'));
	console.log(`stand-in API server on ${flag('--tls') ? 'https' : 'http'}://127.0.0.1:${port}`);
});
// The test hooks also on a plain HTTP port of their own (a test reads them without the CA).
if (opt('--hooks-port-file')) {
	const hooksServer = http.createServer((req, res) => {
		const chunks = [];
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			const url = new URL(req.url, 'http://x');
			const [code, out] = url.pathname.startsWith('/_standin/') ? hooks(req, Buffer.concat(chunks), url) : [404, { error: 'hooks only' }];
			const s = JSON.stringify(out);
			res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
			res.end(s);
		});
	});
	hooksServer.listen(0, '127.0.0.1', () => {
		const f = opt('--hooks-port-file');
		fs.writeFileSync(f + '.tmp', String(hooksServer.address().port));
		fs.renameSync(f + '.tmp', f);
	});
}
process.on('SIGTERM', () => process.exit(0));
