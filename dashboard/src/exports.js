// exports.js - following a billing export job (docs/billing.md "Exports")
// from its creation to done or failed; plain JavaScript, so the unit tests
// (tests/unit/) run it in Node.
import * as api from './api.js';

export const exportDone = (x) => x.state === 'done' || x.state === 'failed';
export const exportText = (x) => `Export ${x.id} ${x.state}${x.state === 'failed' && x.error ? `: ${x.error}` : ''}`;

// Follow an export job until it is done or failed: its state every
// interval (1 s, growing to 5 s for a long one), onState with each answer.
// Answers a function that stops following.
export function followExport(id, onState, onError, { first = 1000, max = 5000 } = {}) {
	let stopped = false;
	let timer = null;
	let wait = first;
	const tick = async () => {
		try {
			const x = await api.get(`/v1/billing/exports/${id}`);
			if (stopped) return;
			onState(x);
			if (exportDone(x)) return;
		} catch (err) {
			if (stopped) return;
			onError(err);
			if (err.status && err.status < 500) return; // gone or forbidden: stop
		}
		wait = Math.min(max, Math.round(wait * 1.5));
		timer = setTimeout(tick, wait);
	};
	timer = setTimeout(tick, first);
	return () => {
		stopped = true;
		clearTimeout(timer);
	};
}
