// tests/k8s/check-manifests.mjs - the example manifests under deploy/
// (gpupool-k8s' Deployment and RBAC, the agent's DaemonSet) against the
// Kubernetes 1.34 OpenAPI schemas (kubernetes-models' validators, as
// tests/k8s/check.mjs checks the served Lists). Exits 1 on any finding.
//
//   node tests/k8s/check-manifests.mjs FILE.yaml...
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const tools = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../tools/node_modules');
const load = (p) => import(pathToFileURL(path.join(tools, p)).href);
const yaml = (await load('js-yaml/index.js')).default;
const known = new Set(['v1/Namespace', 'v1/ServiceAccount', 'v1/Secret', 'rbac.authorization.k8s.io/v1/ClusterRole',
	'rbac.authorization.k8s.io/v1/ClusterRoleBinding', 'apps/v1/Deployment', 'apps/v1/DaemonSet']);
let bad = 0, n = 0;
for (const f of process.argv.slice(2)) {
	for (const d of yaml.loadAll(fs.readFileSync(f, 'utf8'))) {
		if (d === null) continue;
		const k = `${d.apiVersion}/${d.kind}`;
		if (!known.has(k)) { bad++; console.error(`${f}: ${k}: no schema here`); continue; }
		const M = (await load(`kubernetes-models/${k}.js`))[d.kind];
		try { new M(d).validate(); n++; } catch (e) { bad++; console.error(`${f}: ${k} ${d.metadata?.name}: ${e.message}`); }
	}
}
console.log(`check-manifests: ${n} objects valid, ${bad} findings`);
process.exit(bad > 0 || n === 0 ? 1 : 0);
