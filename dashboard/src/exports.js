// exports.js - following a billing export job (docs/billing.md "Exports")
// from its creation to done or failed; plain JavaScript, so the unit tests
// (tests/unit/) run it in Node.
import * as api from './api.js';

export const exportDone = (x) => x.state === 'done' || x.state === 'failed';
export const exportText = (x) => `Export ${x.id} ${x.state}${x.state === 'failed' && x.error ? `: ${x.error}` : ''}`;

// Follow an export job until it is done or failed: its state every
// interval (1 s, growing to 5 s for a long one), onState with each answer.
// Answers a function that stops following.
export const followExport = (id, onState, onError, opts) => api.follow(`/v1/billing/exports/${id}`, exportDone, onState, onError, opts);
