#!/usr/bin/env bash
# test_run_fleet.sh SRC BUILD - scripts/run --agents 3 from a copy of the
# repository (the binaries of BUILD, GPUPOOL_RUN_PREBUILT), as a newcomer
# runs it twice:
#   - the first start prints the admin password last, framed, and keeps it
#     in var/admin-password (0600); the console carries no agent access-log
#     lines; the three nodes become ready;
#   - SIGTERM stops gpupoold and every agent within 2 s;
#   - a second start, with no credentials in the environment, brings the
#     same three nodes back (their stored node tokens) and they stay ready;
#   - a fleet that cannot start makes scripts/run exit non-zero with a clear
#     line, leaving no gpupoold behind.
# Skips (77) when not root or without PostgreSQL (scripts/dev-db needs them
# as scripts/run does; root: PostgreSQL runs as postgres).
set -euo pipefail
SRC=$1
BUILD=$2
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || { echo "skip: no PostgreSQL"; exit 77; }
[ -x "$BUILD/client/agent/gpupool-agent" ] || { echo "skip: no agent in $BUILD"; exit 77; }

WORK=$(mktemp -d /tmp/gp-run.XXXXXX)
chmod 755 "$WORK"
CLONE=$WORK/gpupool
mkdir -p "$CLONE"
cp -a "$SRC/scripts" "$CLONE/scripts"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
export GPUPOOL_LISTEN=127.0.0.1:$PORT GPUPOOL_RUN_PREBUILT=$BUILD
export GPUPOOL_FLEET_BASE_PORT=$((21000 + RANDOM % 20000))
unset GPUPOOL_TOKEN GPUPOOL_ADMIN_PASSWORD
SERVER=http://$GPUPOOL_LISTEN
RUN=""
fail() {
	echo "FAIL: $*" >&2
	[ -f "$WORK/run.log" ] && tail -40 "$WORK/run.log" >&2
	exit 1
}
descendants() { # every process below pid $1
	local c
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
		echo "$c"
		descendants "$c"
	done
}
cleanup() {
	if [ -n "$RUN" ]; then
		for p in $(descendants "$RUN") "$RUN"; do kill -KILL "$p" 2>/dev/null || true; done
	fi
	"$CLONE/scripts/dev-db" stop >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

start_run() { # start_run LOG [first]: scripts/run --agents 3, until it is up
	"$CLONE/scripts/run" --agents 3 >"$1" 2>&1 &
	RUN=$!
	for _ in $(seq 1 300); do
		if grep -q "^==> ready: " "$1" && { [ -z "${2:-}" ] || grep -q "Log in: " "$1"; }; then
			sleep 0.2
			return 0
		fi
		kill -0 "$RUN" 2>/dev/null || fail "scripts/run exited while starting"
		sleep 0.1
	done
	fail "scripts/run did not come up in 30 s"
}
stop_run() { # SIGTERM; everything it started is gone within 2 s
	local kids t0
	kids=$(descendants "$RUN")
	[ -n "$kids" ] || fail "scripts/run has no children"
	echo "$kids" | xargs -r ps -o comm= -p | grep -q gpupoold || fail "no gpupoold under scripts/run"
	[ "$(echo "$kids" | xargs -r ps -o comm= -p | grep -c gpupool-agent)" = 3 ] || fail "not 3 agents under scripts/run"
	t0=$(date +%s%N)
	kill -TERM "$RUN"
	while :; do
		left=""
		for p in $kids "$RUN"; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
		[ -z "$left" ] && break
		[ $(( ($(date +%s%N) - t0) / 1000000 )) -le 2000 ] ||
			fail "still running 2 s after SIGTERM:$(ps -o pid=,comm= -p ${left// /,} | tr '\n' ' ')"
		sleep 0.05
	done
	wait "$RUN" || true
	RUN=""
}
token() { # log in as admin with the saved password
	printf '{"username":"admin","password":"%s"}' "$(cat "$CLONE/var/admin-password")" |
		curl -fsS -H 'Content-Type: application/json' --data-binary @- "$SERVER/v1/auth/login" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
nodes() { # "name status id" of cluster dev's nodes
	curl -fsS -H "Authorization: Bearer $1" "$SERVER/v1/nodes?cluster=dev" |
		python3 -c 'import json,sys; [print(n["name"], n["status"], n.get("agent_heartbeat_at") or "-") for n in json.load(sys.stdin)["items"]]' | sort
}
ids() { "$CLONE/scripts/dev-db" psql -qAt -c "SELECT string_agg(id || ':' || name, ',' ORDER BY id) FROM nodes WHERE name LIKE 'dev-node-%'"; }
wait_ready() { # wait_ready TOKEN SINCE: the 3 nodes ready with a heartbeat after SINCE
	for _ in $(seq 1 300); do
		n=$("$CLONE/scripts/dev-db" psql -qAt -c "SELECT count(*) FROM nodes WHERE name LIKE 'dev-node-%' AND status = 'ready' AND agent_heartbeat_at >= '$2'")
		[ "$n" = 3 ] && return 0
		sleep 0.1
	done
	fail "the 3 dev nodes are not ready with a heartbeat since $2: $(nodes "$1" | tr '\n' ';')"
}

# 1. first start
start_run "$WORK/run.log" first
grep -q "password: " "$WORK/run.log" || fail "no password printed"
pw=$(sed -n 's/^ *password: //p' "$WORK/run.log")
[ "$(cat "$CLONE/var/admin-password")" = "$pw" ] || fail "var/admin-password differs from the printed password"
[ "$(stat -c %a "$CLONE/var/admin-password")" = 600 ] || fail "var/admin-password is not 0600"
# printed last: after the frame's closing line, nothing but blank lines so far
[ "$(grep -n "" "$WORK/run.log" | grep -v ':$' | tail -n 4 | head -n 1 | cut -d: -f2-)" = "      password: $pw" ] ||
	fail "the password is not the last thing printed"
T=$(token)
since=$("$CLONE/scripts/dev-db" psql -qAt -c "SELECT now() - interval '1 second'")
wait_ready "$T" "$since"
before=$(ids)
[ -n "$before" ] || fail "no dev nodes"
sleep 1 # a few heartbeats and polls: none of them on the console
grep -q '"/v1/agent/' "$WORK/run.log" && fail "agent access-log lines on the console"
grep -q '"msg": *"request"' "$WORK/run.log" || true
stop_run

# 2. a warm restart: no credentials anywhere in the environment
start_run "$WORK/run2.log"
grep -q "password: " "$WORK/run2.log" && fail "the password was printed again"
grep -q "GPUPOOL_TOKEN or GPUPOOL_ADMIN_PASSWORD" "$WORK/run2.log" && fail "the fleet asked for credentials"
since=$("$CLONE/scripts/dev-db" psql -qAt -c "SELECT now()")
wait_ready "$T" "$since"
[ "$(ids)" = "$before" ] || fail "the nodes changed across the restart: $before -> $(ids)"
stop_run

# 3. a fleet that cannot start: scripts/run says so and exits non-zero
rc=0
GPUPOOL_AGENT=/nonexistent/gpupool-agent "$CLONE/scripts/run" --agents 2 >"$WORK/run3.log" 2>&1 &
RUN=$!
kids=""
for _ in $(seq 1 20); do kids="$kids $(descendants "$RUN")"; sleep 0.05; done
wait "$RUN" || rc=$?
RUN=""
[ "$rc" -ne 0 ] || fail "scripts/run exited 0 though its fleet failed"
grep -q "could not start the 2 simulated nodes" "$WORK/run3.log" || fail "no clear line: $(cat "$WORK/run3.log")"
sleep 0.2
for p in $kids; do
	[ "$(ps -o comm= -p "$p" 2>/dev/null)" = gpupoold ] && fail "gpupoold $p left behind"
done
curl -fsS "$SERVER/readyz" >/dev/null 2>&1 && fail "a server still answers on $SERVER"
echo ok
