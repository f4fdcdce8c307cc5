// tests/k8s/check.mjs - check gpupool's Kubernetes Lists against the real
// formats: every object against the Kubernetes OpenAPI schemas (the
// kubernetes-models package's validators), every DeviceClass CEL selector
// and the admission policy's expressions evaluated with two independent CEL
// implementations (@marcbachmann/cel-js and Buf's @bufbuild/cel, which must
// agree) against ResourceSlices shaped like NVIDIA's DRA driver's
// (cmd/gpu-kubelet-plugin/deviceinfo.go).
//
//   node tests/k8s/check.mjs CASES.jsonl
//
// One case per line, written by tests/integration/test_kubernetes.c:
//   {"label": "...", "project": null | "<name>" (a project's List),
//    "list": <the List as served>, "yaml": "<the YAML form>" | null,
//    "devices": [{"uuid","type":"gpu"|"mig","parent","profile","start","size",
//                 "index","node","project": "<name>"|null,"pool_id": <id>|null}]}
// devices are every device the cluster's nodes have now; project and
// pool_id say whose it is (null: nobody's, a failed GPU's, or being released).
// Exits 1 after printing every finding; prints a summary otherwise.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const tools = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../tools/node_modules');
const load = (p) => import(pathToFileURL(path.join(tools, p)).href);
const { parse: celParse } = await load('@marcbachmann/cel-js/lib/index.js');
const buf = await load('@bufbuild/cel/dist/esm/index.js');
const bufEnv = buf.celEnv();
const yaml = (await load('js-yaml/index.js')).default;
// The OpenAPI schemas do not forbid unknown fields (the API server drops or,
// with fieldValidation=Strict, refuses them): strictFields walks each object
// along the package's type declarations (one interface per schema) instead.
const modelFiles = {
	'v1/Namespace': 'kubernetes-models/v1/Namespace',
	'v1/ResourceQuota': 'kubernetes-models/v1/ResourceQuota',
	'resource.k8s.io/v1/DeviceClass': 'kubernetes-models/resource.k8s.io/v1/DeviceClass',
	'resource.k8s.io/v1/ResourceSlice': 'kubernetes-models/resource.k8s.io/v1/ResourceSlice',
	'resource.k8s.io/v1/ResourceClaim': 'kubernetes-models/resource.k8s.io/v1/ResourceClaim',
	'resource.k8s.io/v1/ResourceClaimTemplate': 'kubernetes-models/resource.k8s.io/v1/ResourceClaimTemplate',
	'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy': 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy',
	'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding': 'kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding',
};
const declCache = new Map();
// The first interface of a .d.ts: its fields and their types ({leaf}, {array}, {map}, {ref: file}).
function decl(file) {
	if (declCache.has(file)) return declCache.get(file);
	let text;
	try { text = fs.readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, ''); } catch { declCache.set(file, null); return null; }
	const imports = new Map();
	for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
		let f = m[2].startsWith('.') ? path.join(path.dirname(file), m[2]) : path.join(tools, m[2]);
		imports.set(m[1], f.replace(/\.js$/, '') + '.d.ts');
	}
	const body = /export interface \w+(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}/.exec(text);
	if (body === null) { declCache.set(file, null); return null; }
	const fields = new Map();
	const parts = body[1].split(/\n(?=    "[^"]+"\??: )/);
	const type = (t) => {
		t = t.replace(/\s+/g, ' ').trim().replace(/;$/, '').trim();
		let m;
		if ((m = /^Array<(.*)>$/.exec(t))) return { array: type(m[1]) };
		if ((m = /^\{ \[key: string\]: (.*?);? \}$/.exec(t))) return { map: type(m[1]) };
		if (imports.has(t)) return { ref: imports.get(t) };
		return { leaf: t };
	};
	for (const p of parts) {
		const m = /^\s*"([^"]+)"\??: ([\s\S]*)$/.exec(p);
		if (m) fields.set(m[1], type(m[2]));
	}
	declCache.set(file, fields);
	return fields;
}
function strictFields(c, v, t, at) {
	if (v === null || v === undefined || t.leaf !== undefined) return;
	if (t.array) { if (Array.isArray(v)) v.forEach((x, i) => strictFields(c, x, t.array, `${at}[${i}]`)); return; }
	if (t.map) { for (const [k, x] of Object.entries(v)) strictFields(c, x, t.map, `${at}.${k}`); return; }
	const fields = decl(t.ref);
	if (fields === null || typeof v !== 'object') return; // an alias of a scalar (Quantity, Time)
	for (const [k, x] of Object.entries(v)) {
		if (!fields.has(k)) fail(c, `${at}: unknown field "${k}"`);
		else strictFields(c, x, fields.get(k), `${at}.${k}`);
	}
}

const models = {
	'v1/Namespace': (await load('kubernetes-models/v1/Namespace.js')).Namespace,
	'v1/ResourceQuota': (await load('kubernetes-models/v1/ResourceQuota.js')).ResourceQuota,
	'resource.k8s.io/v1/DeviceClass': (await load('kubernetes-models/resource.k8s.io/v1/DeviceClass.js')).DeviceClass,
	'resource.k8s.io/v1/ResourceSlice': (await load('kubernetes-models/resource.k8s.io/v1/ResourceSlice.js')).ResourceSlice,
	'resource.k8s.io/v1/ResourceClaim': (await load('kubernetes-models/resource.k8s.io/v1/ResourceClaim.js')).ResourceClaim,
	'resource.k8s.io/v1/ResourceClaimTemplate': (await load('kubernetes-models/resource.k8s.io/v1/ResourceClaimTemplate.js')).ResourceClaimTemplate,
	'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy': (await load('kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy.js')).ValidatingAdmissionPolicy,
	'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding': (await load('kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding.js')).ValidatingAdmissionPolicyBinding,
};

const DRIVER = 'gpu.nvidia.com';
const CEL_MAX = 10240; // resource.k8s.io/v1 CELSelectorExpressionMaxLength
const DRIVER_CLASSES = ['gpu.nvidia.com', 'mig.nvidia.com', 'vfio.gpu.nvidia.com'];
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
// a qualified name (label and annotation keys, quota resource names): [prefix/]name
const qualified = (k) => {
	const i = k.lastIndexOf('/');
	const prefix = i < 0 ? null : k.slice(0, i), name = i < 0 ? k : k.slice(i + 1);
	return (prefix === null || (prefix.length <= 253 && SUBDOMAIN.test(prefix))) &&
		name.length >= 1 && name.length <= 63 && /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(name);
};

let findings = [];
let stats = { cases: 0, objects: 0, selectorEvals: 0, policyEvals: 0, bufEvals: 0 };
const fail = (c, msg) => findings.push(`${c.label}: ${msg}`);

const compiled = new Map();
function cel(expr) {
	let f = compiled.get(expr);
	if (f === undefined) {
		f = celParse(expr);
		compiled.set(expr, f);
	}
	return f;
}

// Buf's CEL: maps are Map, the bindings a plain object of them.
const bufCompiled = new Map();
function bufCel(expr) {
	let f = bufCompiled.get(expr);
	if (f === undefined) {
		f = buf.plan(bufEnv, buf.parse(expr));
		bufCompiled.set(expr, f);
	}
	return f;
}
const toBuf = (v) => Array.isArray(v) ? v.map(toBuf) : v !== null && typeof v === 'object' ? new Map(Object.entries(v).map(([k, x]) => [k, toBuf(x)])) : v;
const bufBindings = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, toBuf(v)]));
// The result of expr under Buf's CEL as a plain value ({error} when it failed).
function bufRun(expr, bindings) {
	stats.bufEvals++;
	let r;
	try { r = bufCel(expr)(bindings); } catch (e) { return { error: e.message }; }
	return buf.isCelError(r) ? { error: String(r.message) } : r;
}

// resource.k8s.io/v1alpha3 DeviceTaintRule as Kubernetes 1.34 defines it
// (k8s.io/api/resource/v1alpha3: DeviceTaintRuleSpec{deviceSelector,
// taint}, DeviceTaintSelector{deviceClassName, driver, pool, device,
// selectors}, DeviceTaint{key, value, effect, timeAdded}); kubernetes-models
// 5.1.0 carries no model of it, so its shape is checked here field by field.
const TAINT_EFFECTS = ['NoSchedule', 'NoExecute'];
function validateTaintRule(c, o) {
	const n = `DeviceTaintRule ${o.metadata?.name}`;
	const only = (v, keys, at) => {
		if (v === null || typeof v !== 'object' || Array.isArray(v)) return fail(c, `${n}: ${at} is not an object`);
		for (const k of Object.keys(v)) if (!keys.includes(k)) fail(c, `${n}: ${at}: unknown field "${k}"`);
	};
	only(o, ['apiVersion', 'kind', 'metadata', 'spec'], 'the object');
	only(o.metadata, ['name', 'labels', 'annotations'], 'metadata');
	only(o.spec, ['deviceSelector', 'taint'], 'spec');
	const ds = o.spec?.deviceSelector, t = o.spec?.taint;
	if (ds === undefined) return fail(c, `${n}: no deviceSelector (it would select no device)`);
	only(ds, ['deviceClassName', 'driver', 'pool', 'device', 'selectors'], 'spec.deviceSelector');
	for (const k of ['deviceClassName', 'driver', 'pool', 'device'])
		if (ds[k] !== undefined && (typeof ds[k] !== 'string' || !SUBDOMAIN.test(ds[k]))) fail(c, `${n}: deviceSelector.${k} ${ds[k]}`);
	for (const [i, sel] of (ds.selectors ?? []).entries()) {
		only(sel, ['cel'], `spec.deviceSelector.selectors[${i}]`);
		only(sel.cel, ['expression'], `spec.deviceSelector.selectors[${i}].cel`);
		if (typeof sel.cel?.expression !== 'string' || Buffer.byteLength(sel.cel.expression) > CEL_MAX)
			fail(c, `${n}: selectors[${i}] is not an expression of at most ${CEL_MAX} bytes`);
	}
	only(t, ['key', 'value', 'effect', 'timeAdded'], 'spec.taint');
	if (typeof t?.key !== 'string' || !qualified(t.key)) fail(c, `${n}: taint key ${t?.key} is not a qualified name`);
	if (t?.value !== undefined && (!LABEL_VALUE.test(t.value) || t.value.length > 63)) fail(c, `${n}: taint value ${t.value}`);
	if (!TAINT_EFFECTS.includes(t?.effect)) fail(c, `${n}: taint effect ${t?.effect}`);
	if (t?.effect !== 'NoExecute') fail(c, `${n}: a failed GPU's taint must be NoExecute`);
	stats.objects++;
}

function validate(c, obj, what) {
	if (obj.apiVersion === 'resource.k8s.io/v1alpha3' && obj.kind === 'DeviceTaintRule') return validateTaintRule(c, obj);
	const M = models[`${obj.apiVersion}/${obj.kind}`];
	if (M === undefined) return fail(c, `${what}: no schema for ${obj.apiVersion} ${obj.kind}`);
	strictFields(c, obj, { ref: path.join(tools, modelFiles[`${obj.apiVersion}/${obj.kind}`] + '.d.ts') },
		`${what} ${obj.kind} ${obj.metadata?.name}`);
	try {
		new M(obj).validate();
		stats.objects++;
	} catch (e) {
		fail(c, `${what} ${obj.kind} ${obj.metadata?.name}: ${e.message}`);
	}
}

// NVIDIA's kubelet plugin: one device per whole GPU (gpu-<minor>) or MIG
// device (gpu-<minor>-mig-<gi>-<start>-<size>); a vfio twin of every whole GPU
// carries the same UUID; another driver's device carries one too.
function slices(devices) {
	const byNode = new Map();
	for (const d of devices) {
		if (!byNode.has(d.node)) byNode.set(d.node, []);
		const common = {
			productName: { string: 'NVIDIA H100 80GB HBM3' }, brand: { string: 'Nvidia' },
			architecture: { string: 'Hopper' }, cudaComputeCapability: { version: '9.0.0' },
			driverVersion: { version: '550.54.15' }, cudaDriverVersion: { version: '12.4.0' },
			pcieBusID: { string: `0000:${(0x10 + d.index).toString(16)}:00.0` },
		};
		if (d.type === 'mig') {
			const cap = { multiprocessors: { value: String(16 * d.size) }, memory: { value: `${10 * d.size}Gi` } };
			for (let i = d.start; i < d.start + d.size; i++) cap[`memorySlice${i}`] = { value: '1' };
			byNode.get(d.node).push({ name: `gpu-${d.index}-mig-${d.size}-${d.start}-${d.size}`,
				attributes: { type: { string: 'mig' }, uuid: { string: d.uuid }, parentUUID: { string: d.parent },
					profile: { string: d.profile }, ...common }, capacity: cap, truth: d });
		} else {
			byNode.get(d.node).push({ name: `gpu-${d.index}`, attributes: { type: { string: 'gpu' },
				uuid: { string: d.uuid }, ...common }, capacity: { memory: { value: '80Gi' } }, truth: d });
			byNode.get(d.node).push({ name: `gpu-vfio-${d.index}`, attributes: { type: { string: 'vfio' },
				uuid: { string: d.uuid }, productName: common.productName, pcieBusID: common.pcieBusID,
				numa: { int: 0 } }, capacity: { addressableMemory: { value: '80Gi' } }, truth: { ...d, pool_id: null, project: null } });
		}
	}
	return [...byNode].map(([node, devs]) => ({
		apiVersion: 'resource.k8s.io/v1', kind: 'ResourceSlice',
		metadata: { name: `${node}-${DRIVER}-x7k2p` },
		spec: { driver: DRIVER, nodeName: node, pool: { name: node, generation: 1, resourceSliceCount: 1 },
			devices: devs.map(({ truth, ...d }) => d) },
		truth: devs.map((d) => d.truth),
	}));
}

// The CEL "device" variable the scheduler gives a selector: attributes and
// capacity by domain (an unqualified name is the driver's).
function celDevice(driver, dev) {
	const attributes = {}, capacity = {};
	for (const [k, v] of Object.entries(dev.attributes ?? {})) {
		const [dom, name] = k.includes('/') ? k.split('/') : [driver, k];
		(attributes[dom] ??= {})[name] = v.string ?? v.version ?? (v.int !== undefined ? BigInt(v.int) : v.bool);
	}
	for (const [k, v] of Object.entries(dev.capacity ?? {})) {
		const [dom, name] = k.includes('/') ? k.split('/') : [driver, k];
		(capacity[dom] ??= {})[name] = v.value;
	}
	return { driver, attributes, capacity, allowMultipleAllocations: false };
}

function checkCase(c) {
	stats.cases++;
	const list = c.list;
	if (list?.apiVersion !== 'v1' || list?.kind !== 'List' || !Array.isArray(list.items))
		return fail(c, 'not a Kubernetes List');
	if (c.yaml != null) {
		let y;
		try { y = yaml.load(c.yaml); } catch (e) { return fail(c, `YAML does not parse: ${e.message}`); }
		if (JSON.stringify(y) !== JSON.stringify(list)) fail(c, 'the YAML form is not the JSON List');
	}
	const byKind = {};
	for (const o of list.items) {
		validate(c, o, 'item');
		(byKind[o.kind] ??= []).push(o);
		const n = o.metadata?.name ?? '';
		if (o.metadata?.labels?.['app.kubernetes.io/managed-by'] !== 'gpupool') fail(c, `${o.kind} ${n}: not labelled managed-by gpupool`);
		for (const [k, v] of Object.entries(o.metadata?.labels ?? {})) {
			if (!qualified(k)) fail(c, `${o.kind} ${n}: label key ${k} is not a qualified name`);
			if (!LABEL_VALUE.test(v) || v.length > 63) fail(c, `${o.kind} ${n}: label ${k}=${v} is not a label value`);
		}
		for (const k of Object.keys(o.metadata?.annotations ?? {}))
			if (!qualified(k)) fail(c, `${o.kind} ${n}: annotation key ${k} is not a qualified name`);
		if (!(o.kind === 'Namespace' ? LABEL.test(n) && n.length <= 63 : SUBDOMAIN.test(n) && n.length <= 253))
			fail(c, `${o.kind} ${n}: not a valid name`);
	}
	const classes = byKind.DeviceClass ?? [];
	const names = new Set();
	for (const o of list.items) {
		const key = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
		if (names.has(key)) fail(c, `${key} listed twice`);
		names.add(key);
	}

	// DeviceClasses against the ResourceSlices
	const rs = slices(c.devices);
	for (const s of rs) validate(c, { apiVersion: s.apiVersion, kind: s.kind, metadata: s.metadata, spec: s.spec }, 'fixture');
	const devs = rs.flatMap((s) => s.spec.devices.map((d, i) => ({ cel: celDevice(s.spec.driver, d), truth: s.truth[i] })));
	// another driver publishing the same UUIDs: never admitted
	for (const d of c.devices)
		devs.push({ cel: celDevice('example.com', { attributes: { type: { string: d.type }, uuid: { string: d.uuid } } }), truth: { ...d, pool_id: null, project: null } });
	for (const d of devs) d.buf = bufBindings({ device: d.cel });
	const admittedBy = new Map(); // device index -> class
	const classProject = new Map();
	for (const dc of classes) {
		const pool = Number(dc.metadata.labels?.['gpupool.io/pool-id']);
		const project = dc.metadata.labels?.['gpupool.io/project'];
		classProject.set(dc.metadata.name, project);
		if (!Number.isInteger(pool) || pool <= 0) fail(c, `DeviceClass ${dc.metadata.name}: no gpupool.io/pool-id label`);
		if (c.project != null && project !== c.project) fail(c, `DeviceClass ${dc.metadata.name} of project ${project} in project ${c.project}'s List`);
		const sels = dc.spec?.selectors ?? [];
		if (sels.length === 0) fail(c, `DeviceClass ${dc.metadata.name}: no selector (it would admit every device)`);
		let count = 0;
		devs.forEach((d, i) => {
			let ok = true;
			for (const s of sels) {
				const e = s.cel.expression;
				if (Buffer.byteLength(e) > CEL_MAX) fail(c, `DeviceClass ${dc.metadata.name}: expression of ${Buffer.byteLength(e)} bytes`);
				stats.selectorEvals++;
				let r;
				try { r = cel(e)({ device: d.cel }); } catch (err) { fail(c, `DeviceClass ${dc.metadata.name}: CEL error ${err.message}`); r = false; }
				const r2 = bufRun(e, d.buf);
				if (r2 !== r) fail(c, `DeviceClass ${dc.metadata.name}: cel-js says ${r}, Buf's CEL ${JSON.stringify(r2)} for ${d.truth.uuid}`);
				ok = ok && r === true;
			}
			if (!ok) return;
			count++;
			if (d.truth.pool_id !== pool) fail(c, `DeviceClass ${dc.metadata.name} (pool ${pool}, project ${project}) admits ${d.cel.driver} ${d.cel.attributes[d.cel.driver]?.type} ${d.truth.uuid} of pool ${d.truth.pool_id} (project ${d.truth.project})`);
			if (d.truth.project !== project) fail(c, `DeviceClass ${dc.metadata.name} of project ${project} admits a device of ${d.truth.project}`);
			if (admittedBy.has(i)) fail(c, `${d.truth.uuid} admitted by ${admittedBy.get(i)} and ${dc.metadata.name}`);
			admittedBy.set(i, dc.metadata.name);
		});
		if (dc.metadata.annotations?.['gpupool.io/devices'] !== String(count))
			fail(c, `DeviceClass ${dc.metadata.name}: annotation says ${dc.metadata.annotations?.['gpupool.io/devices']} devices, admits ${count}`);
		dc.admits = count;
	}
	// every live device of the List's scope is admitted by a class of its pool
	devs.forEach((d, i) => {
		if (d.truth.pool_id == null || d.cel.driver !== DRIVER) return;
		if (c.project != null && d.truth.project !== c.project) return;
		if (!admittedBy.has(i)) fail(c, `${d.truth.uuid} of pool ${d.truth.pool_id} (project ${d.truth.project}) is in no class`);
	});

	// DeviceTaintRules: each selects exactly failed GPUs' devices of the driver, and
	// (when the List was asked with device_taints) every such device is tainted
	const taintRules = byKind.DeviceTaintRule ?? [];
	if (taintRules.length > 0 && !c.taints) fail(c, 'DeviceTaintRules in a List not asked for them');
	const tainted = new Set();
	for (const r of taintRules) {
		const ds = r.spec?.deviceSelector ?? {};
		devs.forEach((d, i) => {
			if (ds.driver !== undefined && d.cel.driver !== ds.driver) return;
			let ok = true;
			for (const s of ds.selectors ?? []) {
				const e = s.cel.expression;
				stats.selectorEvals++;
				let x;
				try { x = cel(e)({ device: d.cel }); } catch (err) { fail(c, `DeviceTaintRule ${r.metadata.name}: CEL error ${err.message}`); x = false; }
				const x2 = bufRun(e, d.buf);
				if (x2 !== x) fail(c, `DeviceTaintRule ${r.metadata.name}: cel-js says ${x}, Buf's CEL ${JSON.stringify(x2)} for ${d.truth.uuid}`);
				ok = ok && x === true;
			}
			if (!ok) return;
			if (!d.truth.failed) fail(c, `DeviceTaintRule ${r.metadata.name} taints ${d.cel.driver} ${d.truth.uuid}, whose GPU has not failed`);
			if (r.metadata.annotations?.['gpupool.io/gpu'] !== d.truth.parent) fail(c, `DeviceTaintRule ${r.metadata.name} taints ${d.truth.uuid} of GPU ${d.truth.parent}`);
			tainted.add(i);
		});
	}
	if (c.taints)
		devs.forEach((d, i) => {
			if (d.truth.failed && d.cel.driver === DRIVER && !tainted.has(i)) fail(c, `${d.truth.uuid} of a failed GPU is not tainted`);
		});
	stats.taintRules = (stats.taintRules ?? 0) + taintRules.length;

	// Namespaces and quotas
	const nsProject = new Map();
	for (const ns of byKind.Namespace ?? []) nsProject.set(ns.metadata.name, ns.metadata.labels?.['gpupool.io/project']);
	for (const [ns, p] of nsProject) if (!p) fail(c, `Namespace ${ns} without gpupool.io/project`);
	const quotas = byKind.ResourceQuota ?? [];
	for (const [ns, p] of nsProject) {
		const q = quotas.filter((x) => x.metadata.namespace === ns);
		if (q.length !== 1) { fail(c, `namespace ${ns}: ${q.length} ResourceQuotas`); continue; }
		const want = {};
		for (const dc of classes) if (classProject.get(dc.metadata.name) === p) want[`${dc.metadata.name}.deviceclass.resource.k8s.io/devices`] = String(dc.admits);
		for (const g of ['gpu.nvidia.com', 'mig.nvidia.com']) want[`${g}.deviceclass.resource.k8s.io/devices`] = '0';
		const got = q[0].spec?.hard ?? {};
		for (const k of Object.keys(got)) if (!qualified(k)) fail(c, `ResourceQuota in ${ns}: ${k} is not a valid resource name`);
		if (JSON.stringify(Object.entries(got).sort()) !== JSON.stringify(Object.entries(want).sort()))
			fail(c, `ResourceQuota in ${ns}: ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
	}
	for (const q of quotas) if (!nsProject.has(q.metadata.namespace)) fail(c, `ResourceQuota in unlisted namespace ${q.metadata.namespace}`);

	// the admission policy
	const vaps = byKind.ValidatingAdmissionPolicy ?? [], bindings = byKind.ValidatingAdmissionPolicyBinding ?? [];
	if (vaps.length !== 1 || bindings.length !== 1) return fail(c, `${vaps.length} policies and ${bindings.length} bindings`);
	const vap = vaps[0], b = bindings[0];
	if (b.spec?.policyName !== vap.metadata.name || JSON.stringify(b.spec?.validationActions) !== '["Deny"]')
		fail(c, 'the binding does not deny with the policy');
	const rules = vap.spec?.matchConstraints?.resourceRules ?? [];
	const covers = (res, op) => rules.some((r) => r.apiGroups.includes('resource.k8s.io') && r.resources.includes(res) && r.operations.includes(op));
	for (const res of ['resourceclaims', 'resourceclaimtemplates']) for (const op of ['CREATE', 'UPDATE'])
		if (!covers(res, op)) fail(c, `the policy does not cover ${op} ${res}`);
	if (vap.spec?.failurePolicy !== 'Fail') fail(c, 'the policy fails open');
	const namespaces = [...nsProject.entries()].map(([n, p]) => ({ name: n, project: p }));
	namespaces.push({ name: 'default', project: null }, { name: 'other-team', project: null });
	const tryClasses = [...classes.map((d) => d.metadata.name), ...DRIVER_CLASSES, 'example.com', 'fast-nvme.example.com'];
	const allowed = (ns, cl) => ns.project ? classProject.get(cl) === ns.project : !classProject.has(cl) && !DRIVER_CLASSES.includes(cl);
	for (const ns of namespaces) {
		const nsObj = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns.name, ...(ns.project ? { labels: { 'gpupool.io/project': ns.project } } : {}) } };
		// a fallback class the namespace may name, for the template's first choice
		const first = tryClasses.find((cl) => allowed(ns, cl)) ?? tryClasses[0];
		for (const cl of tryClasses) {
			const claim = { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: 'c', namespace: ns.name },
				spec: { devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: cl } }] } } };
			const tmpl = { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaimTemplate', metadata: { name: 't', namespace: ns.name },
				spec: { spec: { devices: { requests: [{ name: 'gpu', firstAvailable: [{ name: 'a', deviceClassName: first }, { name: 'b', deviceClassName: cl }] }] } } } };
			for (const [obj, want] of [[claim, allowed(ns, cl)], [tmpl, allowed(ns, first) && allowed(ns, cl)]]) {
				if (stats.cases <= 2) validate(c, obj, 'fixture');
				const got = admit(c, vap, obj, nsObj);
				const got2 = admitBuf(c, vap, obj, nsObj);
				if (got2 !== got) fail(c, `policy: cel-js says ${got}, Buf's CEL ${got2} for a ${obj.kind} naming ${cl} in ${ns.name}`);
				if (got !== want)
					fail(c, `policy ${got ? 'admits' : 'refuses'} a ${obj.kind} naming ${obj === tmpl ? first + ' or ' : ''}${cl} in namespace ${ns.name} (project ${ns.project})`);
			}
		}
	}
}

// The policy's verdict as the API server reaches it: variables in order, then
// every validation must be true.
function admit(c, vap, object, namespaceObject) {
	const ctx = { object, oldObject: null, namespaceObject, request: {}, variables: {} };
	try {
		for (const v of vap.spec.variables ?? []) {
			stats.policyEvals++;
			ctx.variables[v.name] = cel(v.expression)(ctx);
		}
		for (const v of vap.spec.validations) {
			stats.policyEvals++;
			if (cel(v.expression)(ctx) !== true) return false;
		}
	} catch (e) {
		fail(c, `policy CEL error: ${e.message}`);
		return false;
	}
	return true;
}

// The same under Buf's CEL.
function admitBuf(c, vap, object, namespaceObject) {
	const vars = new Map();
	const b = bufBindings({ object, oldObject: null, namespaceObject, request: {} });
	b.variables = vars;
	for (const v of vap.spec.variables ?? []) {
		const r = bufRun(v.expression, b);
		if (r?.error !== undefined) { fail(c, `policy variable ${v.name} under Buf's CEL: ${r.error}`); return false; }
		vars.set(v.name, r);
	}
	for (const v of vap.spec.validations) {
		const r = bufRun(v.expression, b);
		if (r?.error !== undefined) { fail(c, `policy under Buf's CEL: ${r.error}`); return false; }
		if (r !== true) return false;
	}
	return true;
}

const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.trim() !== '');
for (const l of lines) checkCase(JSON.parse(l));
if (lines.length === 0) findings.push('no cases');
if (findings.length > 0) {
	for (const f of findings.slice(0, 50)) console.error(f);
	console.error(`${findings.length} findings in ${stats.cases} cases`);
	process.exit(1);
}
console.log(`ok: ${stats.cases} cases, ${stats.objects} objects valid, ${stats.selectorEvals} selector and ${stats.policyEvals} policy evaluations (cel-js), ${stats.bufEvals} by Buf's CEL in agreement, ${stats.taintRules ?? 0} DeviceTaintRules`);
