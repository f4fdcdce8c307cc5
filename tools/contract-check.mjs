// tools/contract-check.mjs - validate every response the integration suite
// received (recorded by tests/integration/fixture.c into the file named by
// GPUPOOL_CONTRACT_LOG) against api/openapi.yaml: the path and method must
// be in the contract, the status must be one it documents, and a JSON body
// must match the documented schema (JSON Schema 2020-12, as OpenAPI 3.1).
//
//   node tools/contract-check.mjs api/openapi.yaml contract.jsonl
//
// Prints the number of responses validated and each drift (at most 50);
// exits 1 when there is any.
import fs from 'node:fs';
import readline from 'node:readline';
import yaml from 'js-yaml';
import Ajv2020 from 'ajv/dist/2020.js';

const [specPath, logPath] = process.argv.slice(2);
const spec = yaml.load(fs.readFileSync(specPath, 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
ajv.addSchema(spec, 'openapi');

// path templates as regular expressions, most specific (fewest parameters) first
const routes = Object.keys(spec.paths).map((t) => ({
  template: t,
  params: (t.match(/\{/g) || []).length,
  re: new RegExp('^' + t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\\{[^}]+\\\}|\{[^}]+\}/g, '[^/]+') + '$'),
})).sort((a, b) => a.params - b.params);

const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const deref = (o) => {
  while (o && o.$ref) {
    o = o.$ref.replace(/^#\//, '').split('/').reduce((n, k) => n[k.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
  }
  return o;
};
const compiled = new Map();
const validator = (pointer) => {
  if (!compiled.has(pointer)) compiled.set(pointer, ajv.getSchema('openapi#' + pointer));
  return compiled.get(pointer);
};

let total = 0, validated = 0;
const drifts = new Map();
const drift = (key, detail) => { if (!drifts.has(key)) drifts.set(key, { detail, n: 0 }); drifts.get(key).n++; };

const rl = readline.createInterface({ input: fs.createReadStream(logPath) });
for await (const line of rl) {
  if (!line.trim()) continue;
  let r;
  try { r = JSON.parse(line); } catch { continue; }
  total++;
  const method = r.method.toLowerCase() === 'head' ? 'get' : r.method.toLowerCase();
  const route = routes.find((x) => x.re.test(r.path));
  if (!route) {
    // unmatched paths: only 404/405 are answers the contract allows for them
    if (r.status !== 404 && r.status !== 405) drift(`${r.method} ${r.path} ${r.status}`, 'path not in the contract');
    else validated++;
    continue;
  }
  const op = spec.paths[route.template][method];
  if (!op) {
    // 405 with Allow, and OPTIONS' 204, are the answers every path gives to other methods
    if (r.status !== 405 && r.status !== 204) drift(`${r.method} ${route.template} ${r.status}`, 'method not in the contract');
    else validated++;
    continue;
  }
  const responses = op.responses || {};
  // If-None-Match: any GET may answer 304 without a body (docs/api.md)
  if (r.status === 304 && method === 'get') { validated++; continue; }
  const key = responses[String(r.status)] ? String(r.status) : (responses[`${String(r.status)[0]}XX`] ? `${String(r.status)[0]}XX` : (responses.default ? 'default' : null));
  if (!key) {
    drift(`${r.method} ${route.template} ${r.status}`, 'status not documented');
    continue;
  }
  const resp = deref(responses[key]);
  if (!r.body || !r.content_type || !/^application\/(problem\+)?json(;|$)/.test(r.content_type) || method === 'head') { validated++; continue; }
  const mediaType = Object.keys(resp.content || {}).find((m) => r.content_type.startsWith(m.split(';')[0]));
  if (!mediaType) {
    drift(`${r.method} ${route.template} ${r.status}`, `content type ${r.content_type} not documented`);
    continue;
  }
  let body;
  try { body = JSON.parse(r.body); } catch { drift(`${r.method} ${route.template} ${r.status}`, 'body is not JSON'); continue; }
  // the pointer of the schema, through the response's own $ref when it has one
  const rref = responses[key].$ref;
  const base = rref ? rref.replace(/^#/, '') : `/paths/${esc(route.template)}/${method}/responses/${esc(key)}`;
  const v = validator(`${base}/content/${esc(mediaType)}/schema`);
  if (!v) { drift(`${r.method} ${route.template} ${r.status}`, 'no schema'); continue; }
  if (!v(body)) {
    const e = v.errors[0];
    drift(`${r.method} ${route.template} ${r.status}`, `${e.instancePath || '(body)'} ${e.message} ${JSON.stringify(e.params)}`);
    continue;
  }
  validated++;
}

console.log(`contract check: ${total} responses, ${validated} valid, ${[...drifts.values()].reduce((a, d) => a + d.n, 0)} drifting (${drifts.size} kinds)`);
let shown = 0;
for (const [k, d] of drifts) {
  if (shown++ >= 50) break;
  console.log(`  ${k}: ${d.detail} (${d.n}x)`);
}
process.exit(drifts.size > 0 ? 1 : 0);
