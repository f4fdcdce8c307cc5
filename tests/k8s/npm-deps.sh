# tests/k8s/npm-deps.sh - sourced by tests/k8s/run-check and
# tests/k8s/run-node: make sure node and the npm packages that
# tools/package-lock.json pins are there (npm ci --prefix tools when they
# are missing). Without node or npm it fails (exit 2): it never skips.
# Needs $root (the source tree).
k8s_have() {
	local p
	for p in kubernetes-models @marcbachmann/cel-js @bufbuild/cel js-yaml; do
		[ -f "$root/tools/node_modules/$p/package.json" ] || return 1
	done
	# installed from this lock, not left by an older one (as scripts/lint-openapi decides)
	[ -f "$root/tools/node_modules/.package-lock.json" ] &&
		! [ "$root/tools/package-lock.json" -nt "$root/tools/node_modules/.package-lock.json" ]
}
k8s_npm_deps() {
	command -v node >/dev/null || { echo "${0##*/}: node is missing" >&2; exit 2; }
	k8s_have && return 0
	if ! command -v npm >/dev/null; then
		# as scripts/lint-openapi does: Debian's npm
		local sudo=""
		[ "$(id -u)" -ne 0 ] && sudo="sudo"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || true
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null || true
	fi
	command -v npm >/dev/null || { echo "${0##*/}: npm is missing (npm ci --prefix tools)" >&2; exit 2; }
	# one installer at a time when several tests start together
	(
		flock 9
		k8s_have || npm ci --prefix "$root/tools" --no-audit --no-fund --loglevel=error >&2
	) 9>"${TMPDIR:-/tmp}/gpupool-tools-npm-ci.lock"
	k8s_have || { echo "${0##*/}: npm ci --prefix tools did not install the packages" >&2; exit 2; }
}
