// bench.mjs - the dashboard on a large fleet (scripts/bench-dashboard builds
// it: 10,000 nodes x 8 GPUs), in Debian's Chromium. Each figure is measured
// RUNS times and reported as p50 / p99 next to a baseline taken in the same
// run on the same server:
//   first load of /ui/ to the sign-in form    vs  a static file (/ui/LICENSES.txt)
//   capacity view: 200 GPU rows drawn         vs  GET /v1/gpus?limit=200 alone
//   a server-side filter applied and drawn    vs  GET /v1/gpus?model=…&limit=200
//   the next page while scrolling             vs  GET /v1/gpus with its cursor
// and the frames while scrolling 4,000 rows (longest frame, p99 frame).
// Prints a table, then one JSON line (for docs/dashboard.md).
import { go, launch, session, signIn } from '../../../dashboard/tests/lib.mjs';

const URL_ = process.env.GP_URL;
const RUNS = Number(process.env.RUNS || 20);
const user = process.env.GP_USER;
const password = process.env.GP_PASSWORD;

const pct = (xs, p) => {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const rows = [];
function report(name, xs, base) {
	const r = { name, n: xs.length, p50: pct(xs, 50), p99: pct(xs, 99), base50: pct(base, 50), base99: pct(base, 99) };
	rows.push(r);
	console.log(
		`${name.padEnd(34)} ${String(r.n).padStart(3)}  p50 ${r.p50.toFixed(1).padStart(7)} ms  p99 ${r.p99.toFixed(1).padStart(7)} ms` +
			`   baseline p50 ${r.base50.toFixed(1).padStart(6)} p99 ${r.base99.toFixed(1).padStart(6)} ms   ratio p50 ${(r.p50 / r.base50).toFixed(1)}x`,
	);
}

async function timed(fn) {
	const t0 = performance.now();
	await fn();
	return performance.now() - t0;
}

const browser = await launch();
try {
	// first load, a fresh context (empty cache) each time
	const load = [];
	const loadBase = [];
	for (let i = 0; i < RUNS; i++) {
		for (const [out, url, ready] of [
			[load, `${URL_}/ui/`, (p) => p.locator('input[name=username]').waitFor()],
			[loadBase, `${URL_}/ui/LICENSES.txt`, async () => {}],
		]) {
			const ctx = await browser.newContext();
			const page = await ctx.newPage();
			await page.goto('about:blank');
			out.push(await timed(async () => {
				await page.goto(url);
				await ready(page);
			}));
			await ctx.close();
		}
	}
	report('first load (sign-in form)', load, loadBase);

	const { page } = await session(browser);
	await signIn(page, user, password);
	const token = await page.evaluate(() => sessionStorage.getItem('gpupool.session'));
	const api = (path) =>
		timed(async () => {
			const r = await fetch(`${URL_}${path}`, { headers: { Authorization: `Bearer ${token}` } });
			await r.json();
		});
	// polled on every animation frame, so the figures are not rounded up to a poll interval
	const shown = (n) =>
		page.waitForFunction((want) => (document.querySelector('p.count')?.textContent || '').startsWith(want), `${n.toLocaleString('en-US')} GPUs shown`, {
			polling: 'raf',
			timeout: 60000,
		});

	// the capacity view from another view
	const cap = [];
	const capBase = [];
	for (let i = 0; i < RUNS; i++) {
		await go(page, '#/pools');
		await page.locator('#h-pools').waitFor();
		cap.push(await timed(async () => {
			await go(page, '#/capacity');
			await shown(200);
			await page.locator('.vlist .gpurow').first().waitFor();
		}));
		capBase.push(await api('/v1/gpus?limit=200'));
	}
	report('capacity view, 200 GPUs drawn', cap, capBase);

	// server-side filters
	const filt = [];
	const filtBase = [];
	const models = ['A100-80GB', 'H200-141GB', 'H100-80GB'];
	for (let i = 0; i < RUNS; i++) {
		const m = models[i % models.length];
		await page.getByLabel('Model').selectOption(m);
		filt.push(await timed(async () => {
			await page.getByRole('button', { name: 'Apply' }).click();
			await page.waitForFunction((want) => document.querySelector('.vlist .gpurow .c-model')?.textContent === want, m, { polling: 'raf', timeout: 60000 });
			await shown(200);
		}));
		filtBase.push(await api(`/v1/gpus?model=${m}&limit=200`));
	}
	report('filter by model, drawn', filt, filtBase);
	if (process.env.GP_SHOTS) await page.screenshot({ path: `${process.env.GP_SHOTS}/capacity-fleet.png` });

	// scrolling: each page of 200 more rows, fetched as the end comes into view
	await page.getByLabel('Model').selectOption('');
	await page.getByRole('button', { name: 'Apply' }).click();
	await shown(200);
	const pageT = [];
	const pageBase = [];
	let cursor = null;
	for (let i = 1; i <= Math.max(10, RUNS); i++) {
		pageT.push(await timed(async () => {
			await page.locator('.vlist').evaluate((el) => {
				el.scrollTop = el.scrollHeight;
			});
			await shown(200 * (i + 1));
		}));
		const t0 = performance.now();
		const r = await fetch(`${URL_}/v1/gpus?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { headers: { Authorization: `Bearer ${token}` } });
		cursor = (await r.json()).next_cursor;
		pageBase.push(performance.now() - t0);
	}
	report('next 200 rows while scrolling', pageT, pageBase);
	const total = Number(((await page.locator('p.count').textContent()) || '').split(' ')[0].replace(/,/g, ''));
	const dom = await page.locator('.vlist .vrow').count();

	// frames while scrolling through what is loaded, 120 px per frame
	const frames = await page.locator('.vlist').evaluate(
		(el) =>
			new Promise((resolve) => {
				el.scrollTop = 0;
				const out = [];
				let last = performance.now();
				const tick = (now) => {
					out.push(now - last);
					last = now;
					el.scrollTop += 120;
					if (el.scrollTop + el.clientHeight >= el.scrollHeight - 1 || out.length > 2000) resolve(out.slice(1));
					else requestAnimationFrame(tick);
				};
				requestAnimationFrame(tick);
			}),
	);
	console.log(
		`scrolling ${total.toLocaleString('en-US')} loaded rows: ${frames.length} frames, p50 ${pct(frames, 50).toFixed(1)} ms, p99 ${pct(frames, 99).toFixed(1)} ms, longest ${Math.max(...frames).toFixed(1)} ms; rows in the DOM: ${dom}`,
	);
	console.log(JSON.stringify({ rows, scroll: { loaded: total, frames: frames.length, p50: pct(frames, 50), p99: pct(frames, 99), max: Math.max(...frames), dom } }));
} finally {
	await browser.close();
}
