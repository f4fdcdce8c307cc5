// Health: nodes whose agent is silent (stale), failed and degraded GPUs
// with their XIDs and ECC counts, and the open alerts (drift, isolation,
// idle, GPU faults) with acknowledge.
import { useState } from 'preact/hooks';
import * as api from '../api.js';
import { Badge, Loading, Problem, Table, busyProps, fmtAge, fmtInt, fmtTime, useAction, useLoad } from '../ui.jsx';

async function loadHealth() {
	const [unknown, down, failed, degraded, alerts] = await Promise.all([
		api.all('/v1/nodes', { status: 'unknown' }, 1000),
		api.all('/v1/nodes', { status: 'down' }, 1000),
		api.all('/v1/gpus', { health: 'failed' }, 1000),
		api.all('/v1/gpus', { health: 'degraded' }, 1000),
		api.all('/v1/alerts', { state: 'open' }, 1000),
	]);
	// the last hour of each bad GPU's samples: its last XID and ECC counts
	const bad = [...failed, ...degraded].slice(0, 50);
	const metrics = await Promise.all(
		bad.map((g) =>
			api.get(`/v1/gpus/${api.enc(g.uuid)}/metrics`).then(
				(m) => m,
				() => null,
			),
		),
	);
	const last = {};
	bad.forEach((g, i) => {
		const pts = (metrics[i]?.series || []).flatMap((s) => s.points);
		const xid = pts.map((p) => p.last_xid).filter((x) => x !== null && x !== undefined);
		// the metrics carry an XID in the sample it happened in; the health
		// reason names the one that failed the GPU ("Xid 79 (…): …")
		const m = /\bXid (\d+)\b/i.exec(g.health_reason || '');
		last[g.uuid] = {
			xid: xid.length ? xid[xid.length - 1] : m ? Number(m[1]) : null,
			ecc: pts.reduce((a, p) => Math.max(a, p.ecc_uncorrected || 0), 0),
		};
	});
	const stale = [...unknown, ...down].filter((n, i, arr) => arr.findIndex((m) => m.name === n.name) === i);
	return { stale, bad, last, alerts };
}

// Acknowledge one alert: busy (disabled) until the answer, one
// Idempotency-Key per click however often it is retried.
function AckButton({ a, onDone, onError }) {
	const act = useAction();
	const ack = async () => {
		if (act.running) return;
		try {
			await act.post(`/v1/alerts/${a.id}/ack`, {});
			onError(null);
			onDone();
		} catch (err) {
			onError(err);
		}
	};
	return (
		<button type="button" class="secondary" onClick={ack} aria-label={`Acknowledge alert ${a.id}: ${a.type}`} {...busyProps(act.busy)}>
			Acknowledge
		</button>
	);
}

export function Health() {
	const [h, error, reload] = useLoad(loadHealth, []);
	const [ackError, setAckError] = useState(null);
	if (error) return <Problem error={error} />;
	if (!h) return <Loading what="health" />;
	return (
		<section aria-labelledby="h-health">
			<h1 id="h-health">Health</h1>
			<Table
				caption="Stale nodes: unknown (no heartbeat within the server's agent grace, GPUPOOL_AGENT_GRACE, 50 s by default) or down"
				rowKey={(n) => n.name}
				columns={[
					{ key: 'name', label: 'Node' },
					{ key: 'cluster', label: 'Cluster' },
					{ key: 'status', label: 'Status', render: (n) => <Badge value={n.status} /> },
					{ key: 'hb', label: 'Last heartbeat', render: (n) => fmtAge(n.agent?.heartbeat_at) },
					{ key: 'status_reason', label: 'Reason', render: (n) => n.status_reason || '' },
					{ key: 'gpu_count', label: 'GPUs', num: true, render: (n) => fmtInt(n.gpu_count) },
				]}
				rows={h.stale}
				empty="Every node's agent is reporting."
			/>
			<Table
				caption="Failed and degraded GPUs"
				rowKey={(g) => g.uuid}
				columns={[
					{ key: 'gpu', label: 'GPU', render: (g) => <a href={`#/gpu/${api.enc(g.uuid)}`}>{`${g.node} · GPU ${g.index}`}</a> },
					{ key: 'model', label: 'Model' },
					{ key: 'health', label: 'Health', render: (g) => <Badge value={g.health} /> },
					{ key: 'health_reason', label: 'Reason', render: (g) => g.health_reason || '' },
					{ key: 'xid', label: 'Last XID', num: true, render: (g) => h.last[g.uuid]?.xid ?? '—' },
					{ key: 'ecc', label: 'Uncorrectable ECC', num: true, render: (g) => fmtInt(h.last[g.uuid]?.ecc) },
					{ key: 'layout', label: 'Instances', num: true, render: (g) => g.layout.length },
				]}
				rows={h.bad}
				empty="No failed or degraded GPU."
			/>
			<Problem error={ackError} />
			<Table
				caption="Open alerts"
				rowKey={(a) => a.id}
				columns={[
					{ key: 'severity', label: 'Severity', render: (a) => <Badge value={a.severity} /> },
					{ key: 'type', label: 'Type' },
					{ key: 'message', label: 'Message' },
					{ key: 'where', label: 'Where', render: (a) => [a.project, a.pool, a.node, a.gpu].filter(Boolean).join(' · ') },
					{ key: 'raised_at', label: 'Raised', render: (a) => `${fmtTime(a.raised_at)} (${a.occurrences}×)` },
					{
						key: 'ack',
						label: 'Acknowledged',
						render: (a) =>
							a.acknowledged_at ? (
								`${a.acknowledged_by || ''} ${fmtAge(a.acknowledged_at)}`
							) : (
								<AckButton a={a} onDone={reload} onError={setAckError} />
							),
					},
				]}
				rows={h.alerts}
				empty="No open alert."
			/>
		</section>
	);
}
