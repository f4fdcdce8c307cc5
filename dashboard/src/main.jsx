// main.jsx - the dashboard's shell: sign-in, the role-aware navigation and
// a hash router (#/view/arg), so no server route is needed beyond /ui/.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './app.css';
import * as api from './api.js';
import { Problem } from './ui.jsx';
import { Overview } from './views/overview.jsx';
import { Capacity, clearPools } from './views/capacity.jsx';
import { Requests } from './views/requests.jsx';
import { Pools, PoolPage } from './views/pools.jsx';
import { Health } from './views/health.jsx';
import { Usage } from './views/usage.jsx';
import { GpuPage } from './views/gpu.jsx';
import { parseHash, route as pick } from './nav.js';

function Login({ onIn }) {
	const [error, setError] = useState(null);
	const [busy, setBusy] = useState(false);
	const submit = async (e) => {
		e.preventDefault();
		const f = new FormData(e.currentTarget);
		setBusy(true);
		setError(null);
		try {
			await api.login(String(f.get('username')), String(f.get('password')));
			onIn();
		} catch (err) {
			setError(err);
		} finally {
			setBusy(false);
		}
	};
	return (
		<main id="main" class="login">
			<h1>gpupool</h1>
			<form onSubmit={submit} aria-label="Sign in">
				<label>
					User name <input name="username" autoComplete="username" required autoFocus />
				</label>
				<label>
					Password <input name="password" type="password" autoComplete="current-password" required />
				</label>
				<button type="submit" disabled={busy}>
					Sign in
				</button>
				<Problem error={error} />
			</form>
		</main>
	);
}

function App() {
	const [me, setMe] = useState(undefined);
	const [route, setRoute] = useState(parseHash());
	const loadMe = () => (api.token() ? api.get('/v1/me').then(setMe, () => setMe(null)) : setMe(null));
	useEffect(() => {
		api.setUnauthorizedHandler(() => {
			sessionStorage.clear();
			setMe(null);
		});
		loadMe();
		const onHash = () => setRoute(parseHash());
		window.addEventListener('hashchange', onHash);
		return () => window.removeEventListener('hashchange', onHash);
	}, []);
	// the title follows the view's heading, also when it renders after its data
	useEffect(() => {
		const set = () => {
			const h = document.querySelector('main h1');
			if (h && document.title !== `${h.textContent} · gpupool`) document.title = `${h.textContent} · gpupool`;
		};
		set();
		const main = document.querySelector('main');
		if (!main) return undefined;
		const mo = new MutationObserver(set);
		mo.observe(main, { childList: true, subtree: true, characterData: true });
		return () => mo.disconnect();
	});
	if (me === undefined) return <p role="status">Loading…</p>;
	if (me === null) return <Login onIn={loadMe} />;

	const { views, view, arg } = pick(me.role, route);
	const signOut = async () => {
		try {
			await api.logout();
		} catch {
			// the token is forgotten here either way; it expires on the server
		} finally {
			clearPools();
			setMe(null);
			location.hash = '';
		}
	};
	const props = { me, arg };
	return (
		<>
			<a
				class="skip"
				href="#main"
				onClick={(e) => {
					e.preventDefault();
					document.getElementById('main').focus();
				}}
			>
				Skip to content
			</a>
			<header>
				<span class="brand">gpupool</span>
				<nav aria-label="Main">
					<ul>
						{views.map((v) => (
							<li>
								<a href={`#/${v.id}`} aria-current={view === v.id ? 'page' : undefined}>
									{v.label}
								</a>
							</li>
						))}
					</ul>
				</nav>
				<span class="who">
					{me.username} <span class="role">({me.role === 'none' ? 'project user' : me.role})</span>
				</span>
				<button type="button" class="secondary" onClick={signOut}>
					Sign out
				</button>
			</header>
			<main id="main" tabIndex={-1}>
				{view === 'overview' && <Overview {...props} />}
				{view === 'capacity' && <Capacity {...props} />}
				{view === 'requests' && <Requests {...props} />}
				{view === 'pools' && <Pools {...props} />}
				{view === 'pool' && <PoolPage {...props} />}
				{view === 'health' && <Health {...props} />}
				{view === 'usage' && <Usage {...props} />}
				{view === 'gpu' && <GpuPage {...props} />}
			</main>
		</>
	);
}

render(<App />, document.getElementById('app'));
