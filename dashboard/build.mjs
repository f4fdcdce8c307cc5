// build.mjs - bundles the dashboard (esbuild) into dist/: index.html and
// content-hashed assets, gzip copies when smaller, and manifest.txt, which
// scripts/embed_ui.cmake turns into the C table gpupoold serves under /ui/.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(join(dist, 'assets'), { recursive: true });

const result = await esbuild.build({
	entryPoints: [join(here, 'src/main.jsx')],
	bundle: true,
	minify: true,
	format: 'esm',
	target: ['es2020'],
	jsx: 'automatic',
	jsxImportSource: 'preact',
	outdir: join(dist, 'assets'),
	entryNames: 'app-[hash]',
	assetNames: '[name]-[hash]',
	metafile: true,
	legalComments: 'none',
	logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((p) => join(process.cwd(), p));
const js = outputs.find((p) => p.endsWith('.js'));
const css = outputs.find((p) => p.endsWith('.css'));
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>gpupool</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/${basename(css)}">
<script type="module" src="assets/${basename(js)}"></script>
</head>
<body>
<div id="app"><noscript>The gpupool dashboard needs JavaScript.</noscript></div>
</body>
</html>
`;
writeFileSync(join(dist, 'index.html'), html);
// the bundled libraries' licences travel with them
const licences = ['preact', 'uplot']
	.map(
		(p) =>
			`== ${p} ${JSON.parse(readFileSync(join(here, 'node_modules', p, 'package.json'))).version}\n\n${readFileSync(join(here, 'node_modules', p, 'LICENSE'))}`,
	)
	.join('\n');
writeFileSync(join(dist, 'LICENSES.txt'), licences);

const types = {
	'.js': 'text/javascript; charset=utf-8',
	'.css': 'text/css; charset=utf-8',
	'.html': 'text/html; charset=utf-8',
	'.txt': 'text/plain; charset=utf-8',
};
const files = [join(dist, 'index.html'), join(dist, 'LICENSES.txt'), ...outputs];
const lines = [];
let raw = 0;
let gz = 0;
for (const f of files) {
	const rel = f.slice(dist.length + 1);
	const data = readFileSync(f);
	const ext = rel.slice(rel.lastIndexOf('.'));
	const z = gzipSync(data, { level: 9 });
	let gzName = '-';
	if (z.length < data.length * 0.9) {
		gzName = `${rel}.gz`;
		writeFileSync(join(dist, gzName), z);
	}
	const etag = createHash('sha256').update(data).digest('hex').slice(0, 20);
	const immutable = rel.startsWith('assets/') ? 1 : 0;
	lines.push([rel, types[ext] || 'application/octet-stream', etag, immutable, rel, gzName].join('|'));
	raw += data.length;
	gz += gzName === '-' ? data.length : z.length;
	console.log(`  ${rel.padEnd(40)} ${String(data.length).padStart(8)} B  ${String(gzName === '-' ? data.length : z.length).padStart(7)} B gzip`);
}
writeFileSync(join(dist, 'manifest.txt'), lines.join('\n') + '\n');
console.log(`dashboard: ${files.length} files, ${(raw / 1024).toFixed(1)} KB, ${(gz / 1024).toFixed(1)} KB gzip`);
