#!/usr/bin/env bash
# test_readme_run.sh SRC BUILD - the README as a newcomer follows it: a fresh
# `scripts/run` (its own development database, the first admin created and
# its password kept in var/admin-password), then the README's walkthrough
# verbatim against that server (test_readme_walk in its external mode:
# every command, every "# =>" it shows, and the database after: the pool
# active with its allocations ready, billed). SIGTERM then stops it.
# Skips (77) when not root or without PostgreSQL (scripts/dev-db needs them
# as scripts/run does; root: PostgreSQL runs as postgres).
set -euo pipefail
SRC=$1
BUILD=$2
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || { echo "skip: no PostgreSQL"; exit 77; }
WALK=$BUILD/tests/integration/test_readme_walk
[ -x "$WALK" ] || { echo "FAIL: no $WALK" >&2; exit 1; }

WORK=$(mktemp -d /tmp/gp-readme.XXXXXX)
chmod 755 "$WORK"
CLONE=$WORK/gpupool
mkdir -p "$CLONE"
cp -a "$SRC/scripts" "$CLONE/scripts"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export GPUPOOL_LISTEN=127.0.0.1:$PORT GPUPOOL_RUN_PREBUILT=$BUILD
unset GPUPOOL_TOKEN GPUPOOL_ADMIN_PASSWORD GPUPOOL_SERVER
RUN=""
fail() {
	echo "FAIL: $*" >&2
	[ -f "$WORK/run.log" ] && tail -40 "$WORK/run.log" >&2
	exit 1
}
cleanup() {
	if [ -n "$RUN" ]; then
		pkill -KILL -P "$RUN" 2>/dev/null || true
		kill -KILL "$RUN" 2>/dev/null || true
	fi
	"$CLONE/scripts/dev-db" stop >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

"$CLONE/scripts/run" >"$WORK/run.log" 2>&1 &
RUN=$!
for _ in $(seq 1 600); do
	grep -q "Log in: " "$WORK/run.log" && break
	kill -0 "$RUN" 2>/dev/null || fail "scripts/run exited while starting"
	sleep 0.1
done
grep -q "Log in: " "$WORK/run.log" || fail "scripts/run did not come up in 60 s"
[ -s "$CLONE/var/admin-password" ] || fail "no var/admin-password"

GP_WALK_SERVER=http://$GPUPOOL_LISTEN GP_WALK_PASSWORD_FILE=$CLONE/var/admin-password \
	GP_WALK_DATABASE_URL=$("$CLONE/scripts/dev-db" url) "$WALK" ||
	fail "the README walkthrough failed against scripts/run"

kill -TERM "$RUN"
rc=0
wait "$RUN" || rc=$?
RUN=""
[ "$rc" -eq 0 ] || fail "scripts/run exited $rc on SIGTERM"
echo ok
