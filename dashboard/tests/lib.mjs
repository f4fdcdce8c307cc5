// lib.mjs - what the browser tests share: Chromium (Debian's, through
// playwright-core), sign-in, the accessibility check (axe-core) and the
// hostile-name check.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export const URL_ = process.env.GP_URL || 'http://127.0.0.1:8080';
export const SHOTS = process.env.GP_SHOTS || '';

export function fail(msg) {
	throw new Error(msg);
}

export async function launch() {
	const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
	return chromium.launch({
		executablePath,
		// Chromium refuses its sandbox as root (the CI machines run as root)
		args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [],
	});
}

// A fresh browser context (its own sessionStorage) with the checks wired in:
// any dialog (alert() from injected script) or uncaught page error fails.
export async function session(browser) {
	const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
	const page = await ctx.newPage();
	page.problems = [];
	page.on('dialog', (d) => {
		page.problems.push(`dialog opened: ${d.message()}`);
		d.dismiss().catch(() => {});
	});
	page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
	// every change the dashboard asks of the API carries an Idempotency-Key
	// (a simulation changes nothing and needs none); page.posts: how many
	page.posts = 0;
	// API requests in flight at once: the dashboard's limiter keeps them at 6
	page.inflight = 0;
	page.maxInflight = 0;
	const api = (r) => r.url().includes('/v1/');
	page.on('request', (r) => {
		if (api(r)) page.maxInflight = Math.max(page.maxInflight, ++page.inflight);
	});
	const done = (r) => {
		if (api(r)) page.inflight--;
	};
	page.on('requestfinished', done);
	page.on('requestfailed', done);
	page.on('request', (r) => {
		if (r.method() === 'GET' || r.method() === 'HEAD' || !r.url().includes('/v1/')) return;
		if (r.method() === 'POST' && r.url().endsWith('/v1/capacity/simulate')) return;
		page.posts++;
		const key = r.headers()['idempotency-key'];
		if (!key || !/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(key))
			page.problems.push(`${r.method()} ${new URL(r.url()).pathname} without a UUID Idempotency-Key (${key})`);
	});
	page.on('console', (m) => {
		// refused loads (404 of another project's pool) are expected; CSP reports are not
		if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) page.problems.push(`console: ${m.text()}`);
	});
	return { ctx, page };
}

export async function signIn(page, user, password) {
	await page.goto(`${URL_}/ui/`);
	await page.fill('input[name=username]', user);
	await page.fill('input[name=password]', password);
	await page.click('button[type=submit]');
	await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

export async function signOut(page) {
	const token = await page.evaluate(() => sessionStorage.getItem('gpupool.session'));
	await page.getByRole('button', { name: 'Sign out' }).click();
	await page.locator('input[name=username]').waitFor();
	const left = await page.evaluate(() => sessionStorage.getItem('gpupool.session'));
	if (left) fail('sign-out left the token in sessionStorage');
	const r = await fetch(`${URL_}/v1/me`, { headers: { Authorization: `Bearer ${token}` } });
	if (r.status !== 401) fail(`the token still works after sign-out (GET /v1/me: ${r.status})`);
}

export async function go(page, hash) {
	await page.evaluate((h) => {
		location.hash = h;
	}, hash);
}

// No serious or critical axe-core violation (WCAG 2.1 A and AA rules).
export async function accessible(page, view) {
	await page.evaluate(axeSource);
	const res = await page.evaluate(() =>
		window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }, resultTypes: ['violations'] }),
	);
	const bad = res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
	if (bad.length)
		fail(
			`axe: ${view}: ${bad
				.map(
					(v) =>
						`${v.id} (${v.impact}): ${v.help} at ${v.nodes
							.map((n) => n.target.join(' '))
							.slice(0, 3)
							.join(', ')}`,
				)
				.join('; ')}`,
		);
	return res.violations.length;
}

// The hostile names were shown as text and nothing of them ran.
export async function inert(page, view) {
	const r = await page.evaluate(() => ({
		xss: window.__xss,
		img: document.querySelectorAll('img[src="x"]').length,
		inline: [...document.querySelectorAll('script')].filter((s) => !s.src).length,
	}));
	if (r.xss !== undefined || r.img || r.inline) fail(`${view}: hostile markup became live: ${JSON.stringify(r)}`);
	if (page.problems.length) fail(`${view}: ${page.problems.join('; ')}`);
	if (page.maxInflight > 6) fail(`${view}: ${page.maxInflight} API requests were in flight at once, want at most 6`);
}

export async function shot(page, name) {
	if (SHOTS) await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
}

// Check a view: axe, inertness, screenshot.
export async function check(page, view) {
	await accessible(page, view);
	await inert(page, view);
	await shot(page, view);
}

// Poll fn (async, truthy when done) up to ms.
export async function until(what, fn, ms = 30000) {
	const end = Date.now() + ms;
	for (;;) {
		const v = await fn();
		if (v) return v;
		if (Date.now() > end) fail(`timed out waiting for ${what}`);
		await new Promise((r) => setTimeout(r, 500));
	}
}
