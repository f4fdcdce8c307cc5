// gpuseries.test.mjs - the GPU page's chart series (src/gpuseries.js): one
// line per device on one time axis, labelled and coloured by pool, null
// where a device has no point; the time labels of the axis.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { POOL_HUES, deviceSeries, poolHue, timeLabel } from '../../src/gpuseries.js';

const GPU = 'GPU-aaaaaaaa-0000-0000-0000-000000000001';
const MIG1 = 'MIG-bbbbbbbb-0000-0000-0000-000000000001';
const MIG2 = 'MIG-bbbbbbbb-0000-0000-0000-000000000002';
const t = (s) => `2026-01-01T00:00:${String(s).padStart(2, '0')}Z`;
const x = (s) => Date.parse(t(s)) / 1000;
const gpu = {
	uuid: GPU,
	layout: [
		{ profile: '3g.40gb', start: 0, size: 4, pool_id: 7, device_uuid: MIG1 },
		{ profile: '1g.10gb', start: 4, size: 1, pool_id: null, device_uuid: MIG2 },
	],
};
const pools = { 7: { project: 'ml', name: 'train' } };

test('several devices: one series each, the whole GPU first, on the union of their times', () => {
	const m = {
		series: [
			{ device_uuid: MIG1, points: [{ ts: t(2), power_w: 50 }] },
			{ device_uuid: MIG2, points: [{ ts: t(4), power_w: 20 }] },
			{
				device_uuid: GPU,
				points: [
					{ ts: t(0), power_w: 100 },
					{ ts: t(2), power_w: 110 },
				],
			},
		],
	};
	const d = deviceSeries(m, 'power_w', gpu, pools);
	assert.deepEqual(d.xs, [x(0), x(2), x(4)]);
	assert.deepEqual(
		d.series.map((s) => [s.device, s.label, s.values]),
		[
			[GPU, 'whole GPU', [100, 110, null]],
			[MIG1, '3g.40gb (slices 0–3) · ml/train', [null, 50, null]],
			[MIG2, '1g.10gb (slices 4)', [null, null, 20]],
		],
	);
	// the pool's instance in the pool's hue, solid; the one outside any pool dashed
	assert.equal(d.series[1].stroke, `hsl(${poolHue(7)} 70% 35%)`);
	assert.equal(d.series[1].dash, null);
	assert.ok(POOL_HUES.some((h) => d.series[2].stroke === `hsl(${h} 70% 35%)`));
	assert.deepEqual(d.series[2].dash, [6, 3]);
	assert.equal(d.series[0].stroke, 'hsl(0 0% 35%)');
});

test('missing points: a null or absent value, and a device with no points, stay null', () => {
	const m = {
		series: [
			{
				device_uuid: GPU,
				points: [
					{ ts: t(0), power_w: 1, temperature_c: null },
					{ ts: t(1), temperature_c: 40 },
				],
			},
			{ device_uuid: MIG1, points: [] },
		],
	};
	assert.deepEqual(
		deviceSeries(m, 'temperature_c', gpu, pools).series.map((s) => s.values),
		[
			[null, 40],
			[null, null],
		],
	);
	assert.deepEqual(
		deviceSeries(m, 'power_w', gpu, pools).series.map((s) => s.values),
		[
			[1, null],
			[null, null],
		],
	);
});

test('one device: one series; pools not loaded yet, or a device the layout lost, still labelled', () => {
	const one = { series: [{ device_uuid: MIG1, points: [{ ts: t(3), sm_active: 0.5 }] }] };
	const d = deviceSeries(one, 'sm_active', gpu, {});
	assert.deepEqual(d.xs, [x(3)]);
	assert.equal(d.series.length, 1);
	assert.equal(d.series[0].label, '3g.40gb (slices 0–3) · pool 7');
	const lost = deviceSeries({ series: [{ device_uuid: 'MIG-cccccccc-0000-0000-0000-000000000009', points: [] }] }, 'sm_active', gpu, pools);
	assert.equal(lost.series[0].label, 'MIG-cccccccc…');
	assert.deepEqual(deviceSeries({ series: [] }, 'power_w', gpu, pools), { xs: [], series: [] });
	assert.deepEqual(deviceSeries(null, 'power_w', null, null), { xs: [], series: [] });
});

test('two instances of one pool: the second dashed, so the lines stay apart', () => {
	const g = {
		uuid: GPU,
		layout: [
			{ profile: '1g.10gb', start: 0, size: 1, pool_id: 3, device_uuid: MIG1 },
			{ profile: '1g.10gb', start: 1, size: 1, pool_id: 3, device_uuid: MIG2 },
		],
	};
	const m = {
		series: [
			{ device_uuid: MIG1, points: [{ ts: t(0), power_w: 1 }] },
			{ device_uuid: MIG2, points: [{ ts: t(0), power_w: 2 }] },
		],
	};
	const d = deviceSeries(m, 'power_w', g, {});
	assert.equal(d.series[0].stroke, d.series[1].stroke);
	assert.deepEqual(
		d.series.map((s) => s.dash),
		[null, [6, 3]],
	);
});

test('time labels: seconds within 10 minutes, hours and minutes within a day, the date as well beyond', () => {
	const ts = new Date(2026, 0, 2, 9, 5).getTime() / 1000;
	assert.equal(timeLabel(ts + 7, 3600), '09:05');
	assert.equal(timeLabel(ts + 7, 120), '09:05:07');
	assert.equal(timeLabel(ts, 7 * 86400), '1/2 09:05');
});
