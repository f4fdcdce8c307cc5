// defrag.test.mjs - the capacity view's Defragmentation panel in Chromium
// against a real gpupoold: run by tests/integration/test_dashboard.c after
// the main walk, on a fragmented cluster it builds (GP_DEFRAG_CLUSTER, where
// GP_DEFRAG_ITEM is refused). The operator asks for a plan from the form and
// sees every move drawn (one arriving and one leaving instance per move, a
// table row per move); then he applies it through the confirmation and sees
// it followed to "applied", every move done; a second plan (empty GPUs) he
// cancels through its confirmation. A
// billing user sees the capacity view without the panel; a project user
// sees no capacity view at all.
import { check, fail, go, launch, session, signIn, signOut, until, URL_ } from './lib.mjs';

const env = (k) => process.env[k] || fail(`${k} is not set`);
const PW = env('GP_PASSWORD');
const ITEM = env('GP_DEFRAG_ITEM');
const CLUSTER = env('GP_DEFRAG_CLUSTER');

async function step(name, fn) {
	const t0 = Date.now();
	try {
		await fn();
	} catch (e) {
		console.error(`not ok - ${name}: ${e.message}`);
		throw e;
	}
	console.log(`ok - ${name} (${Date.now() - t0} ms)`);
}

// The plan as the API has it, read with the page's own session.
async function apiPlan(page, id) {
	const token = await page.evaluate(() => sessionStorage.getItem('gpupool.session'));
	const r = await fetch(`${URL_}/v1/capacity/defrag-plans/${id}`, { headers: { Authorization: `Bearer ${token}` } });
	if (r.status !== 200) fail(`GET plan ${id}: ${r.status}`);
	return r.json();
}

const browser = await launch();
try {
	const { page } = await session(browser);
	let id;
	await step('operator: a plan from the form, its moves drawn per GPU', async () => {
		await signIn(page, 'dash-op', PW);
		await go(page, '#/capacity');
		const panel = page.locator('section.defrag');
		await panel.locator('#h-defrag').waitFor();
		const form = page.getByRole('form', { name: 'Plan a defragmentation' });
		await form.getByLabel('Request to place').fill(ITEM);
		await form.getByLabel('Cluster').selectOption(CLUSTER);
		await form.getByLabel('Max moves').fill('10');
		await form.getByLabel('Idle minutes').fill('0');
		const posts = page.posts;
		await form.getByRole('button', { name: 'Plan' }).click();
		const heading = page.locator('#h-defrag-plan');
		await heading.waitFor();
		id = (await heading.textContent()).match(/^Plan (\d+)/)?.[1];
		if (!id) fail(`plan heading: ${await heading.textContent()}`);
		if (page.posts !== posts + 1) fail(`the form sent ${page.posts - posts} POSTs, want 1`);
		const plan = await apiPlan(page, id);
		const n = plan.moves.length;
		if (n < 1) fail('the plan has no moves');
		if (plan.placeable_after !== true || plan.placeable_before !== false) fail(`placeable ${plan.placeable_before} -> ${plan.placeable_after}`);
		const gpus = new Set(plan.moves.flatMap((m) => [m.from.gpu_uuid, m.to.gpu_uuid]));
		await until('every GPU the plan touches drawn', async () => (await page.locator('.defrag-gpu').count()) === gpus.size);
		// one arriving and one leaving instance per move, each with its number
		const drawn = async (cls) => page.locator(`.defrag-gpu svg g.moved-${cls}`).evaluateAll((gs) => gs.map((g) => Number(g.dataset.move)).sort());
		const want = plan.moves.map((_, i) => i + 1);
		await until('the moves drawn with the GPUs as they are', async () => (await page.locator('.defrag-gpu svg g.inst:not(.moved)').count()) > 0);
		for (const cls of ['in', 'out']) {
			const got = await drawn(cls);
			if (JSON.stringify(got) !== JSON.stringify(want)) fail(`moved-${cls} drawn for moves ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
		}
		// where each lands: its GPU's drawing, at its start
		for (const [i, m] of plan.moves.entries()) {
			const fig = page.locator(`.defrag-gpu[data-gpu="${m.to.gpu_uuid}"]`);
			if ((await fig.locator(`g.moved-in[data-move="${i + 1}"]`).count()) !== 1) fail(`move ${i + 1} not drawn on ${m.to.gpu_uuid}`);
			const label = await fig.locator('svg').getAttribute('aria-label');
			if (!label.includes(`arrives by move ${i + 1}`)) fail(`the drawing's label lacks move ${i + 1}: ${label}`);
			await fig.getByText(`#${i + 1} ${m.profile} @${m.to.start} ← ${m.from.node} · GPU ${m.from.gpu_index} @${m.from.start}`).waitFor();
		}
		const table = page.locator('table', { has: page.locator('caption', { hasText: `Moves of plan ${id}` }) });
		if ((await table.locator('tbody tr').count()) !== n) fail(`the moves table has ${await table.locator('tbody tr').count()} rows, want ${n}`);
		const cells = await table.locator('tbody tr').first().locator('td').allTextContents();
		if (cells[6] !== 'planned' || cells[3] !== `${plan.moves[0].from.node} · GPU ${plan.moves[0].from.gpu_index} @${plan.moves[0].from.start}`)
			fail(`first move row: ${cells.join(' | ')}`);
		await page.getByRole('button', { name: `Apply plan ${id}` }).waitFor();
		await check(page, 'capacity-defrag');
	});

	await step('operator: apply the plan, confirmed; followed until applied', async () => {
		await page.getByRole('button', { name: `Apply plan ${id}` }).click();
		const confirm = page.getByRole('group', { name: `Confirm: apply plan ${id}` });
		await confirm.waitFor();
		const posts = page.posts;
		await confirm.getByRole('button', { name: 'Yes, apply' }).click();
		await until('the plan applied', async () => (await page.locator('#h-defrag-plan .badge').textContent()) === 'applied', 90000);
		if (page.posts !== posts + 1) fail(`apply sent ${page.posts - posts} POSTs, want 1`);
		const plan = await apiPlan(page, id);
		const table = page.locator('table', { has: page.locator('caption', { hasText: `Moves of plan ${id}` }) });
		const states = await table.locator('tbody tr td:nth-child(7)').allTextContents();
		if (states.length !== plan.moves.length || states.some((s) => s !== 'done')) fail(`move states: ${states.join(', ')}`);
		// drawn the same with the GPUs read after the moves: one arrival per move
		const want = JSON.stringify(plan.moves.map((_, i) => i + 1));
		let got;
		await until('the moves drawn after they were made', async () => {
			got = JSON.stringify(await page.locator('.defrag-gpu svg g.moved-in').evaluateAll((gs) => gs.map((g) => Number(g.dataset.move)).sort()));
			return got === want;
		}).catch((e) => fail(`${e.message}: ${got}, want ${want}`));
		// the list of plans (reloaded when the plan ended) shows it applied
		const row = page.locator('table', { has: page.locator('caption', { hasText: 'Defragmentation plans' }) }).locator('tbody tr', {
			has: page.getByRole('button', { name: `Show plan ${id}`, exact: true }),
		});
		await until('the plan applied in the list', async () => (await row.locator('.badge').textContent()) === 'applied');
		await check(page, 'capacity-defrag-applied');
	});
	await step('operator: a plan to empty GPUs, cancelled through its confirmation', async () => {
		const form = page.getByRole('form', { name: 'Plan a defragmentation' });
		await form.getByLabel('Goal').selectOption('free_gpus');
		await form.getByLabel('Cluster').selectOption(CLUSTER);
		await form.getByLabel('Idle minutes').fill('0');
		await form.getByRole('button', { name: 'Plan' }).click();
		const heading = page.locator('#h-defrag-plan');
		await until('the new plan shown', async () => ((await heading.textContent()).match(/^Plan (\d+)/)?.[1] ?? id) !== id);
		const id2 = (await heading.textContent()).match(/^Plan (\d+)/)[1];
		await page.getByRole('button', { name: `Cancel plan ${id2}` }).click();
		const confirm = page.getByRole('group', { name: `Confirm: cancel plan ${id2}` });
		const posts = page.posts;
		await confirm.getByRole('button', { name: 'Yes, cancel the plan' }).click();
		await until('the plan cancelled', async () => (await page.locator('#h-defrag-plan .badge').textContent()) === 'cancelled');
		if (page.posts !== posts + 1) fail(`cancel sent ${page.posts - posts} POSTs, want 1`);
		if ((await page.getByRole('button', { name: `Apply plan ${id2}` }).count()) !== 0) fail('a cancelled plan offers Apply');
		const plan = await apiPlan(page, id2);
		const table = page.locator('table', { has: page.locator('caption', { hasText: `Moves of plan ${id2}` }) });
		const states = await table.locator('tbody tr td:nth-child(7)').allTextContents();
		if (plan.moves.length > 0 && (states.length !== plan.moves.length || states.some((x) => x !== 'skipped (cancelled)')))
			fail(`move states: ${states.join(', ')}`);
		await check(page, 'capacity-defrag-cancelled');
	});
	await step('operator signs out', async () => signOut(page));

	await step('billing: the capacity view without the Defragmentation panel', async () => {
		const bill = (await session(browser)).page;
		await signIn(bill, 'dash-bill', PW);
		await go(bill, '#/capacity');
		await bill.locator('#h-whatif').waitFor();
		if ((await bill.locator('#h-defrag').count()) !== 0) fail('a billing user sees the Defragmentation panel');
		await signOut(bill);
	});

	await step('project user: no capacity view, no Defragmentation panel', async () => {
		const alice = (await session(browser)).page;
		await signIn(alice, 'dash-alice', PW);
		const nav = await alice.getByRole('navigation', { name: 'Main' }).textContent();
		if (/Capacity/.test(nav)) fail(`a project user sees: ${nav}`);
		await go(alice, '#/capacity');
		await alice.locator('#h-requests').waitFor(); // the role's first view instead
		if ((await alice.locator('#h-defrag').count()) !== 0) fail('a project user sees the Defragmentation panel');
		await signOut(alice);
	});
} finally {
	await browser.close();
}
