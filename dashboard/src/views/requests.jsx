// Requests: the approval queue for operators (whether and where each request
// fits before approving, approve with a note, reject with a reason, the
// shortfall per item when an approval is refused), and for project users
// their requests and a form to submit one.
import { useState } from 'preact/hooks';
import * as api from '../api.js';
import { Badge, Loading, Problem, Table, busyProps, fmtAge, itemText, useAction, useLoad } from '../ui.jsx';

function parseItems(text) {
	return String(text)
		.split(/[\s,]+/)
		.filter(Boolean)
		.map((s) => {
			const m = /^([^/=]+)\/([^/=]+)=([0-9]+)$/.exec(s);
			if (!m) throw new api.ApiError(0, { title: 'Invalid item', detail: `"${s}" is not MODEL/PROFILE=COUNT` });
			return { model: m[1], profile: m[2], count: Number(m[3]) };
		});
}

function Decide({ r, onDone }) {
	const [fit, setFit] = useState(null);
	const [error, setError] = useState(null);
	const act = useAction();
	const check = async () => {
		setError(null);
		try {
			setFit(await api.post('/v1/capacity/simulate', { items: r.items }, { key: false }));
		} catch (err) {
			setError(err);
		}
	};
	const decide = async (what, e) => {
		e.preventDefault();
		if (act.running) return;
		const text = new FormData(e.currentTarget).get('text');
		setError(null);
		try {
			const body = what === 'approve' ? (text ? { note: String(text) } : {}) : { reason: String(text) };
			// If-Match: decide the request as it was shown, not as someone changed it since
			await act.post(`/v1/pool-requests/${r.id}/${what}`, body, { headers: { 'If-Match': `"${r.generation}"` } });
			onDone();
		} catch (err) {
			setError(err);
		}
	};
	const canCheck = r.action === 'create' || r.action === 'expand';
	return (
		<div class="decide">
			{canCheck && (
				<button type="button" class="secondary" onClick={check}>
					Check fit
				</button>
			)}
			{fit && (
				<span class={fit.fits ? 'ok' : 'bad'} role="status">
					{fit.fits
						? `fits: ${[...new Set(fit.placements.map((p) => `${p.node}#${p.gpu_index}`))].join(', ')}`
						: `does not fit: ${fit.short.map((s) => `${s.model}/${s.profile} ${s.missing} missing`).join(', ')}`}
				</span>
			)}
			<form class="inline" onSubmit={(e) => decide('approve', e)} aria-label={`Approve request ${r.id}`}>
				<label>
					Note <input name="text" size={14} />
				</label>
				<button type="submit" {...busyProps(act.busy)}>
					Approve
				</button>
			</form>
			<form class="inline" onSubmit={(e) => decide('reject', e)} aria-label={`Reject request ${r.id}`}>
				<label>
					Reason <input name="text" size={14} required />
				</label>
				<button type="submit" class="danger" {...busyProps(act.busy)}>
					Reject
				</button>
			</form>
			<Problem error={error} />
		</div>
	);
}

function CancelButton({ r, onDone }) {
	const [error, setError] = useState(null);
	const act = useAction();
	const cancel = async () => {
		if (act.running) return;
		try {
			await act.post(`/v1/pool-requests/${r.id}/cancel`, undefined, { headers: { 'If-Match': `"${r.generation}"` } });
			onDone();
		} catch (err) {
			setError(err);
		}
	};
	return (
		<>
			<button type="button" class="secondary" onClick={cancel} aria-label={`Cancel request ${r.id}`} {...busyProps(act.busy)}>
				Cancel
			</button>
			<Problem error={error} />
		</>
	);
}

function Submit({ me, onDone }) {
	const [error, setError] = useState(null);
	const [ok, setOk] = useState(null);
	const act = useAction();
	const projects = me.projects.filter((p) => p.role !== 'viewer');
	const submit = async (e) => {
		e.preventDefault();
		// a second click while the first is under way does nothing: one request
		if (act.running) return;
		const f = new FormData(e.currentTarget);
		setError(null);
		setOk(null);
		try {
			const body = {
				action: String(f.get('action')),
				pool: String(f.get('pool')),
				justification: String(f.get('justification') || ''),
			};
			if (body.action !== 'release') body.items = parseItems(f.get('items'));
			const r = await act.post(`/v1/projects/${api.enc(String(f.get('project')))}/pool-requests`, body);
			setOk(`Request ${r.id} submitted: ${r.state}`);
			onDone();
		} catch (err) {
			setError(err);
		}
	};
	if (projects.length === 0) return <p>You are not a member of a project that may submit requests.</p>;
	return (
		<form onSubmit={submit} class="stack" aria-labelledby="h-submit">
			<h2 id="h-submit">Submit a request</h2>
			<label>
				Project
				<select name="project">
					{projects.map((p) => (
						<option value={p.name}>{p.name}</option>
					))}
				</select>
			</label>
			<label>
				Action
				<select name="action">
					<option value="create">create a pool</option>
					<option value="expand">expand a pool</option>
					<option value="shrink">shrink a pool</option>
					<option value="release">release a pool</option>
				</select>
			</label>
			<label>
				Pool <input name="pool" required pattern="[a-z0-9]([a-z0-9\-]*[a-z0-9])?" />
			</label>
			<label>
				Items <input name="items" placeholder="H100-80GB/3g.40gb=2" size={40} />
			</label>
			<label>
				Justification <input name="justification" size={40} />
			</label>
			<button type="submit" {...busyProps(act.busy)}>
				Submit
			</button>
			{ok && (
				<p role="status" class="ok">
					{ok}
				</p>
			)}
			<Problem error={error} />
		</form>
	);
}

export function Requests({ me }) {
	const staff = me.role === 'admin' || me.role === 'operator';
	const [state, setState] = useState('pending');
	const [reqs, error, reload] = useLoad(() => api.all('/v1/pool-requests', { state }, 1000), [state]);
	const columns = [
		{ key: 'id', label: 'Id', num: true },
		{ key: 'project', label: 'Project' },
		{ key: 'pool', label: 'Pool', render: (r) => <a href={`#/pool/${r.pool_id}`}>{r.pool}</a> },
		{ key: 'action', label: 'Action' },
		{ key: 'items', label: 'Items', render: (r) => r.items.map(itemText).join(', ') || '—' },
		{ key: 'state', label: 'State', render: (r) => <Badge value={r.state} /> },
		{ key: 'requested_by', label: 'By', render: (r) => r.requested_by || 'system' },
		{ key: 'requested_at', label: 'Asked', render: (r) => fmtAge(r.requested_at) },
		{ key: 'justification', label: 'Justification', render: (r) => r.justification || '' },
		{ key: 'note', label: 'Note', render: (r) => r.note || '' },
	];
	if (staff && state === 'pending') columns.push({ key: 'decide', label: 'Decision', render: (r) => <Decide r={r} onDone={reload} /> });
	if (!staff && state === 'pending')
		columns.push({
			key: 'cancel',
			label: 'Cancel',
			render: (r) => <CancelButton r={r} onDone={reload} />,
		});
	return (
		<section aria-labelledby="h-requests">
			<h1 id="h-requests">{staff ? 'Approval queue' : 'My requests'}</h1>
			<label>
				State{' '}
				<select value={state} onChange={(e) => setState(e.currentTarget.value)}>
					{['pending', 'approved', 'fulfilled', 'failed', 'rejected', 'cancelled', 'expired'].map((s) => (
						<option value={s}>{s}</option>
					))}
				</select>
			</label>
			<Problem error={error} />
			{reqs === undefined && !error ? (
				<Loading what="requests" />
			) : (
				<Table caption={`Requests (${state})`} rowKey={(r) => r.id} columns={columns} rows={reqs || []} />
			)}
			{!staff && <Submit me={me} onDone={reload} />}
		</section>
	);
}
