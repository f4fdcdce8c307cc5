// dashboard.test.mjs - the dashboard walked in Chromium against a real
// gpupoold, PostgreSQL and simulated agents, as each role. Run by
// tests/integration/test_dashboard.c, which sets the scene and checks the
// database afterwards; the GP_* variables describe the scene.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { check, fail, go, launch, session, signIn, signOut, until, URL_, inert, accessible, shot } from './lib.mjs';

const env = (k) => process.env[k] || fail(`${k} is not set`);
const PW = env('GP_PASSWORD');
const HOSTILE = env('GP_HOSTILE');
const TRAIN = env('GP_TRAIN_REQUEST');
const HUGE = env('GP_HUGE_REQUEST');
const HIDDEN_POOL = env('GP_HIDDEN_POOL');

const steps = [];
const pages = [];
async function step(name, fn) {
	const t0 = Date.now();
	try {
		await fn();
	} catch (e) {
		console.error(`not ok - ${name}: ${e.message}`);
		for (const p of pages) if (p.problems.length) console.error(`# page problems: ${p.problems.join('; ')}`);
		throw e;
	}
	steps.push(name);
	console.log(`ok - ${name} (${Date.now() - t0} ms)`);
}

const rowOf = (page, id) => page.locator('tbody tr').filter({ has: page.locator('td:first-child', { hasText: new RegExp(`^${id}$`) }) });

const browser = await launch();
try {
	// ---------------- operator ----------------
	const { page } = await session(browser);
	pages.push(page);

	await step('first load: the sign-in page', async () => {
		await page.goto('about:blank'); // the renderer is up: time the page, not Chromium
		const t0 = Date.now();
		await page.goto(`${URL_}/ui/`);
		await page.locator('input[name=username]').waitFor();
		const ms = Date.now() - t0;
		const nav = await page.evaluate(() => performance.getEntriesByType('navigation')[0].toJSON());
		console.log(`# first load: ${ms} ms to the sign-in form (DOMContentLoaded ${Math.round(nav.domContentLoadedEventEnd)} ms)`);
		await check(page, 'signin');
	});

	await step('operator signs in; overview counts GPUs and pending approvals', async () => {
		await signIn(page, 'dash-op', PW);
		await go(page, '#/overview');
		const row = page.locator('tbody tr', { hasText: 'H100-80GB' }).first();
		await row.waitFor();
		const cells = await row.locator('td').allTextContents();
		if (cells[1] !== '4') fail(`overview: ${cells[1]} H100-80GB GPUs, want 4`);
		const pending = await page.locator('.card', { hasText: 'pending approvals' }).locator('.big').textContent();
		if (pending !== '2') fail(`overview: ${pending} pending approvals, want 2`);
		await page.locator('.chart canvas').first().waitFor();
		await check(page, 'overview');
	});

	await step('capacity: GPUs drawn as slices, filters, and what-if', async () => {
		await go(page, '#/capacity');
		await until('4 GPU rows', async () => (await page.locator('.vlist .gpurow').count()) === 4);
		await page.getByText(HOSTILE).first().waitFor(); // the cluster's description, as text
		const labels = await page.locator('.vlist svg.slicebar').evaluateAll((s) => s.map((x) => x.getAttribute('aria-label')));
		if (!labels.some((l) => l.includes('secret/hidden'))) fail(`no GPU shows the pool secret/hidden: ${labels.join(' | ')}`);
		await page.getByLabel('Health').selectOption('degraded');
		await page.getByRole('button', { name: 'Apply' }).click();
		await until('the degraded GPU alone', async () => (await page.locator('.vlist .gpurow').count()) === 1);
		await page.getByLabel('Health').selectOption('');
		await page.getByRole('button', { name: 'Apply' }).click();
		await until('4 GPU rows again', async () => (await page.locator('.vlist .gpurow').count()) === 4);
		await page.getByLabel('Items').fill('H100-80GB/3g.40gb=2');
		await page.getByRole('button', { name: 'Simulate' }).click();
		await page.locator('.whatif-result', { hasText: 'Fits' }).waitFor();
		const planned = await page.locator('.whatif-result .planned').count();
		if (planned !== 2) fail(`what-if drew ${planned} planned instances, want 2`);
		await check(page, 'capacity');
	});

	await step('approval queue: check fit, approve with a note, shortfall of a refused one', async () => {
		await go(page, '#/requests');
		const train = rowOf(page, TRAIN);
		await train.waitFor();
		await train.getByRole('button', { name: 'Check fit' }).click();
		await train.getByText(/^fits: /).waitFor();
		const huge = rowOf(page, HUGE);
		await huge.getByText(HOSTILE).waitFor(); // the justification, as text
		await huge.getByRole('button', { name: 'Check fit' }).click();
		await huge.getByText(/does not fit/).waitFor();
		await shot(page, 'requests-check');
		const form = page.getByRole('form', { name: `Approve request ${TRAIN}` });
		await form.getByLabel('Note').fill('approved from the dashboard');
		await form.getByRole('button', { name: 'Approve' }).click();
		await until('the approved request to leave the queue', async () => (await rowOf(page, TRAIN).count()) === 0);
		await page
			.getByRole('form', { name: `Approve request ${HUGE}` })
			.getByRole('button', { name: 'Approve' })
			.click();
		const short = rowOf(page, HUGE).locator('.problem .short li');
		await short.first().waitFor();
		const text = await short.allTextContents();
		if (!text.some((t) => /H100-80GB\/full: \d+ missing/.test(t))) fail(`shortfall shown: ${text.join(', ')}`);
		await check(page, 'requests');
	});

	await step('capacity shows the approved pool on its GPUs', async () => {
		await go(page, '#/capacity');
		await until('ml/train on the slice drawings', async () => {
			const labels = await page.locator('.vlist svg.slicebar').evaluateAll((s) => s.map((x) => x.getAttribute('aria-label')));
			return labels.filter((l) => l.includes('ml/train')).length >= 1;
		});
		await inert(page, 'capacity after approval');
	});

	await step('palette: pools in the key, their colours never read as free, stranded or failed', async () => {
		await page.locator('.legend-pool', { hasText: 'ml/train' }).waitFor();
		await page.locator('.legend-pool', { hasText: 'secret/hidden' }).waitFor();
		const hues = await page.evaluate(() => {
			const hue = (c) => {
				const [r, g, b] = c
					.match(/[\d.]+/g)
					.slice(0, 3)
					.map((v) => Number(v) / 255);
				const mx = Math.max(r, g, b);
				const d = mx - Math.min(r, g, b);
				if (d === 0) return null;
				let h = mx === r ? ((g - b) / d) % 6 : mx === g ? (b - r) / d + 2 : (r - g) / d + 4;
				h *= 60;
				return h < 0 ? h + 360 : h;
			};
			const bg = (sel) => hue(getComputedStyle(document.querySelector(sel)).backgroundColor);
			return {
				free: bg('.legend .sw.free'),
				stranded: bg('.legend .sw.stranded'),
				failed: bg('.legend .sw.st-failed'),
				instances: [...document.querySelectorAll('.vlist svg.slicebar g.inst:not(.unmanaged):not(.st-failed) rect.inst-r')].map((e) =>
					hue(getComputedStyle(e).fill),
				),
				keys: [...document.querySelectorAll('.legend .sw.pool')].map((e) => hue(getComputedStyle(e).backgroundColor)),
			};
		});
		const apart = (a, b) => Math.min(Math.abs(a - b), 360 - Math.abs(a - b));
		if (!hues.instances.length || hues.keys.length < 2) fail(`no pool colours measured: ${JSON.stringify(hues)}`);
		for (const h of [...hues.instances, ...hues.keys])
			for (const k of ['free', 'stranded', 'failed'])
				if (h === null || apart(h, hues[k]) < 40) fail(`a pool hue ${h} is within 40° of ${k} (${hues[k]}): ${JSON.stringify(hues)}`);
		if (new Set(hues.keys.map(Math.round)).size !== hues.keys.length) fail(`two pools share a colour: ${hues.keys}`);
		await check(page, 'capacity-legend');
	});

	let trainPool;
	await step('pool page: allocations ready, requests', async () => {
		await go(page, '#/pools');
		await page.getByLabel('Project').selectOption('ml');
		await page.getByText(HOSTILE).first().waitFor(); // the project's display name, as text
		await page.getByRole('link', { name: 'train' }).click();
		await page.locator('#h-pool').waitFor();
		trainPool = await page.evaluate(() => location.hash.split('/')[2]);
		const asked = [];
		const onRequest = (r) => r.url().includes('/v1/pool-requests?') && asked.push(r.url());
		page.on('request', onRequest);
		await until('2 ready allocations', async () => {
			await page.reload();
			await page.locator('#h-pool').waitFor();
			return (await page.locator('table').first().locator('tbody tr', { hasText: 'ready' }).count()) === 2;
		});
		// its requests come filtered by the server (?project=ml&pool=train), not from all the project's
		await until(
			"the pool's create request",
			async () => (await page.locator('table', { hasText: 'Requests for this pool' }).locator('tbody tr', { hasText: 'create' }).count()) === 1,
		);
		page.off('request', onRequest);
		if (!asked.some((u) => /[?&]pool=train(&|$)/.test(u) && /[?&]project=ml(&|$)/.test(u)))
			fail(`the pool page did not ask for its pool's requests: ${asked.join(' | ')}`);
		await check(page, 'pool');
	});

	await step('health: an injected XID 79 fails a GPU; its alert is acknowledged', async () => {
		writeFileSync(env('GP_FAULT_FILE'), JSON.stringify({ gpus: [{ index: 1, xids: [79] }] }));
		await go(page, '#/health');
		await until('dash-a GPU 1 among the failed GPUs', async () => {
			await page.reload();
			await page.locator('#h-health').waitFor();
			return (await page.locator('tbody tr', { hasText: 'dash-a · GPU 1' }).count()) === 1;
		});
		const row = page.locator('tbody tr', { hasText: 'dash-a · GPU 1' });
		await until('XID 79 in its row', async () => {
			const cells = await row.locator('td').allTextContents();
			if (cells[4] === '79') return true;
			await page.reload();
			await page.locator('#h-health').waitFor();
			return false;
		});
		await page.locator('tbody tr', { hasText: 'dash-b · GPU 1' }).getByText(HOSTILE).waitFor(); // the degraded GPU's reason
		const ack = page.getByRole('button', { name: /^Acknowledge alert \d+: gpu_failed$/ });
		await ack.first().click();
		await until('the alert acknowledged', async () => (await page.locator('tbody tr', { hasText: 'gpu_failed' }).getByText('dash-op').count()) >= 1);
		await check(page, 'health');
	});

	await step('GPU page: power, activity, memory and temperature charts', async () => {
		await page.getByRole('link', { name: 'dash-a · GPU 1' }).click();
		await page.locator('#h-gpu').waitFor();
		await until('4 charts', async () => (await page.locator('.chart canvas').count()) === 4);
		await check(page, 'gpu');
	});

	await step('GPU page: its instances with their pools', async () => {
		await go(page, '#/capacity');
		const row = page
			.locator('.vlist .gpurow')
			.filter({ has: page.locator('svg.slicebar[aria-label*="ml/train"]') })
			.first();
		await row.waitFor();
		const want = (await row.locator('svg.slicebar').getAttribute('aria-label')).split('ml/train').length - 1;
		await row.locator('.c-node a').click();
		await page.locator('#h-gpu').waitFor();
		const table = page.locator('table', { has: page.locator('caption', { hasText: 'Instances on this GPU' }) });
		await until('the instance table with ml/train', async () => (await table.locator('tbody tr', { hasText: 'ml/train' }).count()) === want);
		const first = table.locator('tbody tr', { hasText: 'ml/train' }).first();
		const cells = await first.locator('td').allTextContents();
		if (cells[0] !== '3g.40gb' || !/^\d–\d$/.test(cells[1]) || cells[2] !== 'ready') fail(`instance row: ${cells.join(' | ')}`);
		if ((await first.getByRole('link', { name: 'ml/train' }).getAttribute('href')) !== `#/pool/${trainPool}`) fail('the instance does not link its pool');
		await check(page, 'gpu-instances');
	});

	await step('GPU page of a MIG GPU: one chart line per device, in the legend with its pool', async () => {
		// secret's 1g.10gb instances, two or more on this GPU; the scene put their samples in
		await go(page, `#/gpu/${env('GP_MIG_GPU')}`);
		await page.locator('#h-gpu').waitFor();
		await until('4 charts', async () => (await page.locator('.chart canvas').count()) === 4);
		const n = Number(env('GP_MIG_DEVICES'));
		const legends = () =>
			page
				.locator('.chart')
				.evaluateAll((cs) => cs.map((c) => [...c.querySelectorAll('.u-legend .u-series')].map((r) => r.querySelector('.u-label')?.textContent ?? '')));
		// (no row for time: the legend is not live) the whole GPU first, then each instance with its pool (the pools' names come after the first draw)
		const good = (ls) =>
			ls.length === n + 1 &&
			ls[0] === 'whole GPU' &&
			ls.slice(1).every((l) => /^1g\.10gb \(slices \d\) · secret\/(hidden|later)$/.test(l)) &&
			new Set(ls).size === ls.length;
		let seen;
		await until(`every chart with its ${n + 1} devices, labelled`, async () => {
			seen = await legends();
			return seen.length === 4 && seen.every(good);
		}).catch((e) => fail(`${e.message}: ${JSON.stringify(seen)}`));
		const labels = await legends();
		if (labels.length !== 4) fail(`charts: ${labels.length}`);
		// each line its own look in the legend: a colour of its own, or its pool's colour dashed
		const marks = await page
			.locator('.chart')
			.first()
			.evaluate((c) => [...c.querySelectorAll('.u-legend .u-series')].map((r) => r.querySelector('.u-marker')?.style.border || ''));
		if (marks.length !== n + 1 || marks.some((m) => !m) || new Set(marks).size !== marks.length) fail(`legend markers: ${JSON.stringify(marks)}`);
		await check(page, 'gpu-mig');
	});

	await step('GPU page at 1 hour: time labels hours and minutes, none overlapping', async () => {
		// the scene's samples of this GPU span 55 minutes: the 1-hour range is full
		await go(page, `#/gpu/${env('GP_MIG_GPU')}`);
		await page.locator('#h-gpu').waitFor();
		await page.getByRole('button', { name: '1 hour' }).click();
		let ticks;
		await until('the time axis drawn', async () => {
			ticks = await page.locator('.chart .uplot').evaluateAll((cs) => cs.map((c) => JSON.parse(c.dataset.xticks || '[]')));
			return ticks.length === 4 && ticks.every((t) => t.length >= 3);
		}).catch((e) => fail(`${e.message}: ${JSON.stringify(ticks)}`));
		for (const axis of ticks) {
			// HH:MM only (the span is over 10 minutes, under a day)
			if (!axis.every((t) => /^\d\d:\d\d$/.test(t.label))) fail(`time labels: ${JSON.stringify(axis)}`);
			// centred labels: each pair apart by at least half of both widths plus a gap
			for (let i = 1; i < axis.length; i++) {
				const a = axis[i - 1];
				const b = axis[i];
				if (b.x - a.x < (a.w + b.w) / 2 + 8) fail(`time labels overlap: ${JSON.stringify(axis)}`);
			}
		}
	});

	await step('agents stopped: capacity and overview count their GPUs unavailable, then back', async () => {
		const pids = env('GP_AGENT_PIDS').split(' ').map(Number);
		for (const p of pids) process.kill(p, 'SIGSTOP');
		try {
			await go(page, '#/capacity');
			await until(
				'no GPU ok, the healthy ones unavailable',
				async () => {
					await page.reload();
					await page.locator('#h-capacity').waitFor();
					if ((await page.locator('.vlist .gpurow').count()) !== 4) return false;
					const states = await page
						.locator('.vlist .gpurow .c-health')
						.evaluateAll((cs) => cs.map((c) => [...c.querySelectorAll('.badge')].map((b) => b.textContent)));
					if (states.some((b) => b.length !== 1)) fail(`a GPU shows ${JSON.stringify(states)}: one state each`);
					return states.every((b) => b[0] !== 'ok') && states.some((b) => b[0] === 'unavailable');
				},
				60000,
			);
			const free = await page
				.locator('.vlist .gpurow', { has: page.locator('.badge', { hasText: /^unavailable$/ }) })
				.first()
				.locator('.c-free')
				.textContent();
			if (!free.startsWith('no placement: node unavailable')) fail(`an unavailable GPU offers: ${free}`);
			await check(page, 'capacity-unavailable');
			await go(page, '#/overview');
			const row = page.locator('tbody tr', { hasText: 'H100-80GB' }).first();
			await row.waitFor();
			const cells = await row.locator('td').allTextContents();
			// Model, Total, Allocated, Free, Stranded, Failed or degraded, Node unavailable
			if (cells[3] !== '0.0') fail(`overview: free ${cells[3]} with every node unavailable`);
			if (Number(cells[5]) + Number(cells[6]) !== 4) fail(`overview: failed ${cells[5]} + unavailable ${cells[6]}, want 4`);
		} finally {
			for (const p of pids) process.kill(p, 'SIGCONT');
		}
		await until(
			'the nodes back: nothing unavailable',
			async () => {
				await page.reload();
				const row = page.locator('tbody tr', { hasText: 'H100-80GB' }).first();
				await row.waitFor();
				return (await row.locator('td').nth(6).textContent()) === '0';
			},
			60000,
		);
	});

	await step('keyboard: skip link, then the navigation', async () => {
		await go(page, '#/overview');
		await page.reload(); // focus starts at the top of the document
		await page.locator('#h-overview').waitFor();
		await page.keyboard.press('Tab');
		const first = await page.evaluate(() => document.activeElement.textContent);
		if (first.trim() !== 'Skip to content') fail(`first Tab stop: ${first}`);
		await page.keyboard.press('Enter');
		if ((await page.evaluate(() => document.activeElement.id)) !== 'main') fail('the skip link does not move focus to the content');
		await page.keyboard.press('Shift+Tab');
		await page.keyboard.press('Shift+Tab');
		const nav = await page.evaluate(() => document.activeElement.closest('nav') !== null || document.activeElement.tagName);
		if (nav === false) fail('navigation is not reachable by keyboard');
	});

	await step('operator signs out: the session is revoked', async () => signOut(page));

	// ---------------- project user ----------------
	const alice = (await session(browser)).page;
	pages.push(alice);
	await step('project user: own requests only, submits one, cannot see another project', async () => {
		await signIn(alice, 'dash-alice', PW);
		const nav = await alice.getByRole('navigation', { name: 'Main' }).textContent();
		if (/Capacity|Health/.test(nav)) fail(`a project user sees: ${nav}`);
		await rowOf(alice, HUGE).getByText(HOSTILE).waitFor();
		const form = alice.getByRole('form', { name: 'Submit a request' });
		await form.getByLabel('Pool', { exact: true }).fill('web');
		await form.getByLabel('Items', { exact: true }).fill('H100-80GB/1g.10gb=1');
		await form.getByRole('button', { name: 'Submit' }).click();
		const first = alice.getByText(/^Request \d+ submitted: pending$/);
		await first.waitFor();
		const firstText = await first.textContent();
		// a double click on Submit submits once (the button is busy until the
		// answer; test_dashboard.c counts the requests in SQL)
		await form.getByLabel('Pool', { exact: true }).fill('web2');
		const posts = alice.posts;
		await form.getByRole('button', { name: 'Submit' }).dblclick();
		await until('the second request submitted', async () => {
			const t = await alice
				.getByRole('status')
				.filter({ hasText: /^Request \d+ submitted/ })
				.textContent();
			return t !== firstText && /^Request \d+ submitted: pending$/.test(t);
		});
		if (alice.posts !== posts + 1) fail(`a double click on Submit sent ${alice.posts - posts} requests, want 1`);
		await check(alice, 'user-requests');
		await go(alice, '#/pools');
		await alice.getByLabel('Project').waitFor();
		const opts = await alice.getByLabel('Project').locator('option').allTextContents();
		if (opts.join(',') !== 'ml') fail(`project user may pick: ${opts.join(',')}`);
		await alice.getByRole('link', { name: 'huge' }).waitFor();
		await check(alice, 'user-pools');
		await go(alice, `#/pool/${HIDDEN_POOL}`);
		await alice.getByRole('alert').waitFor();
		const text = await alice.getByRole('alert').textContent();
		if (!/not found/i.test(text)) fail(`another project's pool: ${text}`);
		await go(alice, '#/usage');
		await alice.locator('#h-usage').waitFor();
		if ((await alice.locator('#h-exports').count()) !== 0) fail('a project user sees billing exports');
		await check(alice, 'user-usage');
		await signOut(alice);
	});

	// ---------------- billing ----------------
	const bill = (await session(browser)).page;
	pages.push(bill);
	await step('billing: export the month as CSV and download it; SHA-256 matches', async () => {
		await signIn(bill, 'dash-bill', PW);
		const nav = await bill.getByRole('navigation', { name: 'Main' }).textContent();
		if (/Requests|Health/.test(nav)) fail(`billing sees: ${nav}`);
		await go(bill, '#/usage');
		await bill.locator('#h-exports').waitFor();
		// one row per project and currency: hours billed later fold into the billed row
		const perProject = bill.locator('table', { has: bill.locator('caption', { hasText: /^Per project/ }) });
		await perProject.locator('tbody tr', { hasText: 'secret' }).first().waitFor();
		const projects = await perProject.locator('tbody tr td:first-child').allTextContents();
		if (new Set(projects).size !== projects.length) fail(`a project listed twice: ${projects.join(', ')}`);
		const secret = await perProject.locator('tbody tr', { hasText: 'secret' }).locator('td').allTextContents();
		if (!/EUR|€/.test(secret[5]) || secret[1] === '0.0') fail(`secret's usage: ${secret.join(' | ')}`);
		const form = bill.getByRole('form', { name: 'New export' });
		await form.getByLabel('Format').selectOption('csv');
		await form.getByRole('button', { name: 'Export' }).click();
		await bill.getByText(/^Export \d+ /).waitFor();
		// the view follows the job to the end and then offers its download,
		// with no reload of the page
		await bill.getByText(/^Export \d+ done$/).waitFor({ timeout: 60000 });
		await bill.getByRole('button', { name: /^Download export \d+$/ }).waitFor();
		if ((await bill.getByRole('button', { name: /^Download export \d+$/ }).count()) !== 1) fail('more than one export to download');
		const sha = await bill
			.locator('tbody tr', { has: bill.getByRole('button', { name: /^Download export/ }) })
			.locator('code')
			.getAttribute('title');
		const [dl] = await Promise.all([bill.waitForEvent('download'), bill.getByRole('button', { name: /^Download export \d+$/ }).click()]);
		const path = await dl.path();
		const data = readFileSync(path);
		const got = createHash('sha256').update(data).digest('hex');
		if (got !== sha) fail(`downloaded file: sha256 ${got}, the API says ${sha}`);
		if (!/^[a-z_]+,/.test(data.toString('utf8', 0, 40))) fail(`the CSV has no header: ${data.toString('utf8', 0, 60)}`);
		console.log(`# export: ${data.length} bytes, sha256 ${got.slice(0, 16)}…`);
		await check(bill, 'usage');
		await signOut(bill);
	});

	// ---------------- admin ----------------
	const adm = (await session(browser)).page;
	pages.push(adm);
	await step('admin: the pool page has its audit trail', async () => {
		await signIn(adm, env('GP_ADMIN'), env('GP_ADMIN_PASSWORD'));
		await go(adm, `#/pool/${trainPool}`);
		await adm.getByText('Audit records of this pool').waitFor();
		await until('a pool audit record', async () => (await adm.locator('tbody tr', { hasText: 'pool.' }).count()) >= 1);
		// the approval that made the pool is part of its trail
		await until('the approval in the trail', async () => (await adm.locator('tbody tr', { hasText: 'pool_request.approve' }).count()) === 1);
		// the window title is this view's, not the previous one's
		await until('the title of the pool page', async () => (await adm.title()) === 'Pool ml/train · gpupool');
		await accessible(adm, 'admin pool');
		await inert(adm, 'admin pool');
		await signOut(adm);
	});
	console.log(`# most API requests in flight at once: ${pages.map((p) => p.maxInflight ?? 0).join(', ')} (limit 6)`);
	console.log(`# ${steps.length} steps passed`);
} finally {
	await browser.close();
}
